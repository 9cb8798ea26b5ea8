/* Option parsing: ranges of numbers (ends in or out), empty paths, and the
 * config a run writes leaving out defaults that mean "not set". */
#include "check.h"
#include "expect_die.h"
#include "util/opt.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long count = -1;
static double ratio = 0.5, rate = 1;
static char *path, *label;

static const struct opt opts[] = {
	{'n', "count", OPT_INT, &count, "N", "a count", NULL, .min = 1, .max = 10},
	{0, "ratio", OPT_FLOAT, &ratio, "P", "a share", NULL, .fmin = 0, .fmax = 1, .open = OPEN_MAX},
	{0, "rate", OPT_FLOAT, &rate, "R", "a rate", NULL, .fmin = 0, .fmax = 10, .open = OPEN_MIN},
	{'o', "out", OPT_STR, &path, "FILE", "a file", "@file"},
	{0, "label", OPT_STR, &label, "COL", "a column", NULL},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};
static const struct cmd_spec spec = {"ts-test", "Test options.", "[FILE...]", "file", opts};

/* Parses "prog ARG VALUE". */
static void parse2(const char *arg, const char *value)
{
	char *argv[] = {"ts-test", (char *)arg, (char *)value, NULL};
	char **ops;
	opt_parse(&spec, value ? 3 : 2, argv, &ops);
}

struct args { const char *arg, *value; };

static void parse_child(const void *p)
{
	const struct args *a = p;
	parse2(a->arg, a->value);
}

/* The parse exits 2 with one stderr line holding pattern. */
static void expect_refused(const char *arg, const char *value, const char *pattern)
{
	struct args a = {arg, value};
	char err[1024];
	int rc = run_child(parse_child, &a, err, sizeof err);
	size_t n = strlen(err);
	int one_line = n > 0 && err[n - 1] == '\n' && !memchr(err, '\n', n - 1);
	CHECK(rc == 2 && one_line && strstr(err, pattern), "%s '%s' is refused: exit %d: %.*s", arg,
	      value ? value : "", rc, (int)(n ? n - 1 : 0), err);
}

static void print_help(const void *unused)
{
	(void)unused;
	dup2(2, 1);
	parse2("--help", NULL);
}

/* --help shows each option's value before any was read as its default,
 * but not one out of range (a count of -1: "not set") or a NULL string. */
static void test_help_defaults(void)
{
	char out[4096];
	int rc = run_child(print_help, NULL, out, sizeof out);
	CHECK(rc == 0 && strstr(out, "a share (default 0.5)\n") && strstr(out, "a rate (default 1)\n"),
	      "--help gives the defaults of ratio and rate (exit %d)", rc);
	CHECK(strstr(out, "a count\n") && strstr(out, "a file\n") && strstr(out, "a column\n"),
	      "--help gives no default for a count out of its range or a string not set");
}

static void test_int_range(void)
{
	parse2("--count", "1");
	CHECK(count == 1, "the low end of a range is in it");
	parse2("--count", "10");
	CHECK(count == 10, "the high end of a range is in it");
	expect_refused("--count", "0", "--count: 0 is out of range (1 to 10)");
	expect_refused("--count", "11", "--count: 11 is out of range (1 to 10)");
	expect_refused("--count", "4294967297", "--count: 4294967297 is out of range");
	expect_refused("--count", "99999999999999999999", "--count: 99999999999999999999 is out of range");
	expect_refused("-n", "-3", "--count: -3 is out of range");
	expect_refused("--count", "2.5", "--count takes a whole number");
	expect_refused("--count", " 5", "--count takes a whole number, not ' 5'");   /* as '5 ' is */
}

static void test_float_range(void)
{
	parse2("--ratio", "0");
	CHECK(ratio == 0, "a closed end is in the range");
	expect_refused("--ratio", "1", "--ratio: 1 is out of range (0 to below 1)");
	expect_refused("--rate", "0", "--rate: 0 is out of range (above 0 to 10)");
	expect_refused("--rate", "1e400", "--rate: 1e400 is out of range");
	expect_refused("--rate", "inf", "--rate: inf is out of range");
	expect_refused("--rate", "nan", "--rate takes a number, not 'nan'");
	expect_refused("--rate", "-nan", "--rate takes a number");
	expect_refused("--rate", "\t2", "--rate takes a number");
}

static void test_empty_paths(void)
{
	expect_refused("--out", "", "--out: the path is empty");
	expect_refused("-o", "", "--out: the path is empty");
	expect_refused("--out=", NULL, "--out: the path is empty");
	expect_refused("", NULL, "an argument is an empty path");
	expect_refused("-c", "", "--config: the path is empty");
	expect_refused("--out", "--", "--out needs a value (-- ends the options)");
	expect_refused("-o", "--", "-o needs a value (-- ends the options)");
	expect_refused("-c", "--", "-c needs a value (-- ends the options)");
	parse2("--label", "");
	CHECK(label && !*label, "an empty string that is not a path is taken");
}

static void test_config_file(void)
{
	char cfg[] = "/tmp/ts-opt-XXXXXX";
	int fd = mkstemp(cfg);
	FILE *f = fdopen(fd, "w");
	fputs("# a comment\ncount = 11\n", f);
	fclose(f);
	expect_refused("-c", cfg, ": line 2: --count: 11 is out of range (1 to 10)");
	f = fopen(cfg, "w");
	fputs("count = 2\n\n  rate=0.5\n# count = 9\ncount  = 3\n", f);
	fclose(f);
	expect_refused("-c", cfg, ": line 5: 'count' is set again; line 1 set it first");
	f = fopen(cfg, "w");
	fputs(" = 5\n", f);
	fclose(f);
	expect_refused("-c", cfg, ": line 1: expected 'key = value', got '= 5'");   /* not a key '' */
	unlink(cfg);
	expect_refused("-c", "/", "cannot read config file /: Is a directory");   /* a usage error, as a missing one */
}

/* A value outside its range is a default meaning "not set": a run's config
 * leaves it out, so that reading the config back never refuses it. */
static void test_write_config(void)
{
	char buf[1024] = "";
	count = -1, ratio = 0.25, rate = 2;
	FILE *f = fmemopen(buf, sizeof buf, "w");
	opt_write_config(&spec, f);
	fclose(f);
	CHECK(!strstr(buf, "count ="), "an unset number is left out of a config");
	CHECK(strstr(buf, "ratio = 0.25\n") && strstr(buf, "rate = 2\n"), "set numbers are written");
}

static const struct opt no_range[] = {
	{0, "size", OPT_INT, &count, "N", "a size without a range", NULL},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static void parse_no_range(const void *unused)
{
	(void)unused;
	const struct cmd_spec s = {"ts-test", "Test options.", "", NULL, no_range};
	char *argv[] = {"ts-test", NULL}, **ops;
	opt_parse(&s, 1, argv, &ops);
}

int main(void)
{
	expect_die("a number without a range is a mistake in the table", parse_no_range, NULL,
		   "option table: --size has no range");
	test_help_defaults();   /* first: the others set the values */
	test_int_range();
	test_float_range();
	test_empty_paths();
	test_config_file();
	test_write_config();
	CHECK_DONE();
}
