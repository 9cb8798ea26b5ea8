/* A sweep's parameter specs and the jobs they make: the grid's order,
 * groups, random draws within their ranges, the refusals, and quoting. */
#include "check.h"
#include "expect_die.h"
#include "sweep/sweep.h"
#include "util/strbuf.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Job j's options joined as "k=v k=v". */
static char *joined(const struct sweep_job *j)
{
	static char buf[256];
	buf[0] = 0;
	for (int k = 0; k < j->nopts; k += 2)
		snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", k ? " " : "", j->opts[k], j->opts[k + 1]);
	return buf;
}

static int make(const char *const *texts, int n, long draws, uint64_t seed, struct sweep_job **jobs)
{
	struct sweep_spec *s = xcalloc((size_t)n, sizeof *s);
	for (int i = 0; i < n; i++)
		sweep_parse(texts[i], &s[i]);
	return sweep_jobs(s, n, draws, seed, 1000, jobs);
}

static void test_grid(void)
{
	const char *specs[] = {"lr=1e-4,3e-4", "warmup,dropout=0:0.1,0.06:0,0.1:0.2"};
	struct sweep_job *j;
	int n = make(specs, 2, 0, 0, &j);
	CHECK(n == 6, "a list of 2 by a group of 3: 6 jobs (%d)", n);
	CHECK(!strcmp(joined(&j[0]), "lr=1e-4 warmup=0 dropout=0.1"), "job 1: %s", joined(&j[0]));
	CHECK(!strcmp(joined(&j[1]), "lr=1e-4 warmup=0.06 dropout=0"), "job 2: the last spec varies fastest: %s",
	      joined(&j[1]));
	CHECK(!strcmp(joined(&j[5]), "lr=3e-4 warmup=0.1 dropout=0.2"), "job 6: %s", joined(&j[5]));
	const char *odd[] = {"vocab=a b's $x;\"y\""};
	n = make(odd, 1, 0, 0, &j);
	CHECK(n == 1 && !strcmp(j[0].opts[1], "a b's $x;\"y\""), "a value keeps its spaces, quotes, $ and ;");
}

static void test_random(void)
{
	const char *specs[] = {"lr=1e-5:1e-3:log", "batch=4:16", "optimizer=adamw,sgd"};
	struct sweep_job *a, *b;
	int n = make(specs, 3, 400, 7, &a);
	make(specs, 3, 400, 7, &b);
	int in_range = 1, same = 1, low = 0, sgd = 0, whole = 1;
	for (int i = 0; i < n; i++) {
		double lr = atof(a[i].opts[1]);
		long batch = atol(a[i].opts[3]);
		in_range &= lr >= 1e-5 && lr <= 1e-3 && batch >= 4 && batch <= 16;
		whole &= strspn(a[i].opts[3], "0123456789") == strlen(a[i].opts[3]);
		low += lr < 1e-4;   /* log-uniform: half the draws below the geometric middle */
		sgd += !strcmp(a[i].opts[5], "sgd");
		for (int k = 0; k < a[i].nopts; k++)
			same &= !strcmp(a[i].opts[k], b[i].opts[k]);
	}
	CHECK(n == 400 && in_range && whole, "400 draws within their ranges, whole batches");
	CHECK(low > 160 && low < 240, "log-uniform: %d of 400 rates below 1e-4", low);
	CHECK(sgd > 160 && sgd < 240, "a list is drawn from too: %d of 400 sgd", sgd);
	CHECK(same, "the same seed draws the same jobs");
	const char *near[] = {"ema=0.999:0.99999"};
	n = make(near, 1, 400, 7, &a);
	in_range = 1;
	for (int i = 0; i < n; i++)
		in_range &= atof(a[i].opts[1]) >= 0.999 && atof(a[i].opts[1]) <= 0.99999;
	CHECK(in_range, "draws near an end of 5 digits stay within the range, not rounded to 1");
	const char *low_end[] = {"accum=5:12:log"};   /* seed 2296's draw 357 is the lowest, 5.00000002 */
	n = make(low_end, 1, 357, 2296, &a);
	CHECK(!strcmp(a[356].opts[1], "5"), "a whole log range's lowest draw is its low end, 5 (%s)", a[356].opts[1]);
	const char *wide[] = {"seed=0:1099511627775"};   /* 2^40 whole numbers */
	n = make(wide, 1, 200, 7, &a);
	int coarse = 0;
	for (int i = 0; i < n; i++)
		coarse += atoll(a[i].opts[1]) % 65536 == 0;
	CHECK(coarse < 5, "a range of 2^40 whole numbers draws from all of them, not 24 bits' multiples of 2^16 (%d of 200)",
	      coarse);
	const char *powers[] = {"max-steps=1e3:1e5", "dropout=0.0:1.0"};
	n = make(powers, 2, 100, 7, &a);
	whole = 1;
	int fractions = 0;
	for (int i = 0; i < n; i++) {
		whole &= strspn(a[i].opts[1], "0123456789") == strlen(a[i].opts[1]);
		fractions += atof(a[i].opts[3]) != floor(atof(a[i].opts[3]));
	}
	CHECK(whole && fractions == 100, "ends of 1e3 are whole, draws of them too; ends written 0.0 are not");
}

static void parse_one(const void *text)
{
	struct sweep_spec s;
	sweep_parse(text, &s);
}

static void grid_of(const void *text)
{
	struct sweep_job *j;
	const char *specs[] = {text};
	make(specs, 1, 0, 0, &j);
}

static void test_refused(void)
{
	expect_usage("no '='", parse_one, "lr", "not KEY=VALUES");
	expect_usage("dashes", parse_one, "--lr=1", "'--lr' is not a ts-train option name");
	expect_usage("run dirs", parse_one, "run=a,b", "-p run=a,b: ts-sweep gives each job its own run dir: --run is not swept");
	expect_usage("resumes", parse_one, "lr,resume=1:a", "--resume is not swept");
	expect_usage("an empty value", parse_one, "lr=1,,2", "an empty value");
	expect_usage("a group's value short", parse_one, "lr,warmup=1:2,3", "'3' has 1 value for 2 options");
	expect_usage("a range of words", parse_one, "lr=a:b", "'a' is not a number");
	expect_usage("a range end past a double", parse_one, "lr=1:1e999", "'1e999' is out of a double's range");
	expect_usage("a range end below a normal double", parse_one, "lr=1e-400:1", "'1e-400' is out of a double's range");
	expect_usage("an infinite range end", parse_one, "lr=1:inf", "'inf' is not a number");
	expect_usage("a range backwards", parse_one, "lr=2:1", "low end is not below its high end");
	expect_usage("a log range from 0", parse_one, "lr=0:1:log", "a log range takes positive ends");
	expect_usage("whole ends past 2^53, where doubles skip whole numbers", parse_one, "seed=0:9007199254740993",
		     "takes ends below 2^53");
	expect_usage("whole ends past 2^53 that are one as doubles", parse_one,
		     "seed=9223372036854775806:9223372036854775807", "takes ends below 2^53");
	expect_usage("a range of 4 parts", parse_one, "lr=1:2:3:4", "a range is LO:HI or LO:HI:log");
	expect_usage("a range in a grid", grid_of, "lr=1:2", "give --random N");
}

static void test_quote(void)
{
	char *q = shell_quote("plain-1e-4/x.y:z=1,2");
	CHECK(!strcmp(q, "plain-1e-4/x.y:z=1,2"), "a plain word stays: %s", q);
	free(q);
	q = shell_quote("a b's $x;");
	CHECK(!strcmp(q, "'a b'\\''s $x;'"), "the others in single quotes: %s", q);
	free(q);
	q = shell_quote("");
	CHECK(!strcmp(q, "''"), "the empty word: %s", q);
	free(q);
}

/* The words of line joined by '|'. */
static void expect_words(const char *line, const char *want)
{
	int n;
	char **w = sweep_words(line, &n, "test");
	char got[256] = "";
	for (int i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "|" : "", w[i]);
	CHECK(!strcmp(got, want), "words of [%s]: [%s]", line, got);
}

static void words_of(const void *line)
{
	int n;
	sweep_words(line, &n, "tasks.txt: line 3");
}

static void test_words(void)
{
	expect_words("ts-train  --lr 1e-4\t--data d  ", "ts-train|--lr|1e-4|--data|d");
	expect_words("a 'b c' \"d \\\"e\\\" $f\" g\\ h", "a|b c|d \"e\" $f|g h");
	expect_words("'it'\\''s' \"\\n\"", "it's|\\n");
	expect_words("x''y \"\"", "xy|");
	expect_words("   ", "");
	expect_usage("an unclosed quote", words_of, "a 'b", "tasks.txt: line 3: the quote ' is not closed");
}

int main(void)
{
	ts_prog = "test_sweep";
	test_grid();
	test_random();
	test_refused();
	test_quote();
	test_words();
	CHECK_DONE();
}
