#include "sweep/sweep.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/rng.h"
#include "util/strbuf.h"
#include <errno.h>
#include <float.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s split at sep into a NULL-free array; *n gets the count. Empty parts stay. */
static char **split(const char *s, char sep, int *n)
{
	char **v = NULL;
	size_t cap = 0;
	*n = 0;
	for (const char *p = s;; p++) {
		const char *end = strchr(p, sep);
		size_t len = end ? (size_t)(end - p) : strlen(p);
		grow(&v, &cap, (size_t)*n + 1, sizeof *v);
		v[(*n)++] = strndup(p, len);
		if (!end)
			return v;
		p = end;
	}
}

static int option_name(const char *k)
{
	if (!*k)
		return 0;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (*p == '-' && p != k)))
			return 0;
	return 1;
}

/* A range's end: a finite number, 0 or of a normal double's size. */
static double range_end(const char *text, const char *v, int *whole)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (!*v || *end || (!isfinite(x) && errno != ERANGE))
		die_usage("-p %s: '%s' is not a number (a range is LO:HI or LO:HI:log)", text, v);
	if (errno == ERANGE)
		die_usage("-p %s: '%s' is out of a double's range (0, or %.2g to %.2g in size)", text, v, DBL_MIN,
			  DBL_MAX);
	*whole &= !strchr(v, '.') && x == floor(x);   /* 64 and 1e3 are, 64.0 and 5e-1 not */
	return x;
}

static void parse_range(const char *text, char **parts, int n, struct sweep_spec *s)
{
	if (n > 3 || (n == 3 && strcmp(parts[2], "log")))
		die_usage("-p %s: a range is LO:HI or LO:HI:log", text);
	s->range = 1;
	s->whole = 1;
	s->lo = range_end(text, parts[0], &s->whole);
	s->hi = range_end(text, parts[1], &s->whole);
	s->log = n == 3;
	/* before the ends are compared: as doubles, two ends past 2^53 may be one */
	if (s->whole && (fabs(s->lo) >= 0x1p53 || fabs(s->hi) >= 0x1p53))   /* drawn as doubles */
		die_usage("-p %s: a range of whole numbers takes ends below 2^53 (9007199254740992) in size", text);
	if (!(s->lo < s->hi))
		die_usage("-p %s: the range's low end is not below its high end", text);
	if (s->log && s->lo <= 0)
		die_usage("-p %s: a log range takes positive ends", text);
}

void sweep_parse(const char *text, struct sweep_spec *s)
{
	memset(s, 0, sizeof *s);
	const char *eq = strchr(text, '=');
	if (!eq)
		die_usage("-p %s: not KEY=VALUES (such as lr=1e-4,3e-4)", text);
	char *keys = strndup(text, (size_t)(eq - text));
	s->keys = split(keys, ',', &s->nkeys);
	free(keys);
	for (int k = 0; k < s->nkeys; k++)
		if (!option_name(s->keys[k]))
			die_usage("-p %s: '%s' is not a ts-train option name (lowercase, without dashes)", text,
				  s->keys[k]);
		else if (!strcmp(s->keys[k], "run") || !strcmp(s->keys[k], "resume"))
			die_usage("-p %s: ts-sweep gives each job its own run dir: --%s is not swept", text, s->keys[k]);
	int nv;
	char **vals = split(eq + 1, ',', &nv);
	for (int v = 0; v < nv; v++) {
		int nparts;
		char **parts = split(vals[v], ':', &nparts);
		if (s->nkeys == 1 && nv == 1 && nparts > 1) {
			parse_range(text, parts, nparts, s);
		} else if (nparts != s->nkeys) {
			die_usage("-p %s: '%s' has %d value%s for %d option%s", text, vals[v], nparts,
				  nparts == 1 ? "" : "s", s->nkeys, s->nkeys == 1 ? "" : "s");
		}
		for (int i = 0; i < nparts; i++)
			if (!*parts[i])
				die_usage("-p %s: an empty value", text);
		if (s->range) {
			for (int i = 0; i < nparts; i++)
				free(parts[i]);
			free(parts);
		} else {
			s->vals = xrealloc(s->vals, (size_t)(s->nvals + 1) * sizeof *s->vals);
			s->vals[s->nvals++] = parts;
		}
		free(vals[v]);
	}
	free(vals);
}

/* Draw x in 4 significant digits, or more where those would take it out of
 * the range: 0.99996 of ema=0.999:0.99999 is not 1, which --ema refuses. */
static void draw_text(char *buf, size_t size, double x, const struct sweep_spec *s)
{
	for (int digits = 4; digits <= 17; digits++) {
		snprintf(buf, size, "%.*g", digits, x);
		double y = strtod(buf, NULL);
		if ((y >= s->lo && y <= s->hi) || digits == 17)   /* 17 digits give x back */
			return;
	}
}

/* Uniform in [0, 1) with a double's 53 bits: a float's 24 would put the
 * draws of a range on a grid (a range of 2^40 whole numbers: multiples of
 * 2^16 alone). */
static double draw_unit(struct rng *r)
{
	return (double)(rng_u64(r) >> 11) * 0x1p-53;
}

/* Adds spec s's value v (or a draw from its range) to job j. */
static void take(struct sweep_job *j, const struct sweep_spec *s, int v, struct rng *r)
{
	j->opts = xrealloc(j->opts, (size_t)(j->nopts + 2 * s->nkeys) * sizeof *j->opts);
	for (int k = 0; k < s->nkeys; k++) {
		j->opts[j->nopts++] = xstrdup(s->keys[k]);
		if (!s->range) {
			j->opts[j->nopts++] = xstrdup(s->vals[v][k]);
			continue;
		}
		/* whole numbers: each from lo to hi as likely (on :log, as log-uniform
		 * on [lo, hi + 1) puts it), hi included */
		double hi = s->whole ? s->hi + 1 : s->hi, u = draw_unit(r);
		double x = s->log ? exp(log(s->lo) + u * (log(hi) - log(s->lo))) : s->lo + u * (hi - s->lo);
		char buf[64];
		if (s->whole)   /* exp(log(lo)) may be below lo */
			snprintf(buf, sizeof buf, "%.0f", fmax(fmin(floor(x), s->hi), s->lo));
		else
			draw_text(buf, sizeof buf, fmin(fmax(x, s->lo), s->hi), s);
		j->opts[j->nopts++] = xstrdup(buf);
	}
}

/* Dies when an option is in two specs, or twice in one: one value would
 * silently win. */
static void check_keys(const struct sweep_spec *specs, int nspecs)
{
	for (int i = 0; i < nspecs; i++)
		for (int k = 0; k < specs[i].nkeys; k++)
			for (int j = i; j < nspecs; j++)   /* against each key after it */
				for (int m = j == i ? k + 1 : 0; m < specs[j].nkeys; m++)
					if (!strcmp(specs[i].keys[k], specs[j].keys[m]))
						die_usage("-p: option %s is given twice: name each option in one spec, once",
							  specs[i].keys[k]);
}

int sweep_jobs(const struct sweep_spec *specs, int nspecs, long draws, uint64_t seed, long max_jobs,
	       struct sweep_job **jobs)
{
	check_keys(specs, nspecs);
	long n = draws;
	if (!draws) {
		n = 1;
		for (int i = 0; i < nspecs; i++) {
			if (specs[i].range)
				die_usage("-p %s=%g:%g: a range is drawn from: give --random N", specs[i].keys[0], specs[i].lo,
					  specs[i].hi);
			if (n > max_jobs / specs[i].nvals)
				die_usage("the grid has more than %ld jobs", max_jobs);
			n *= specs[i].nvals;
		}
	}
	*jobs = xcalloc((size_t)n, sizeof **jobs);
	struct rng r;
	rng_seed(&r, seed);
	for (long j = 0; j < n; j++) {
		long rest = j;   /* the grid's digits, the last spec varying fastest */
		int *digit = xcalloc((size_t)nspecs + 1, sizeof *digit);
		for (int i = nspecs - 1; i >= 0 && !draws; i--)
			digit[i] = (int)(rest % specs[i].nvals), rest /= specs[i].nvals;
		for (int i = 0; i < nspecs; i++) {
			int v = draws && !specs[i].range ? (int)rng_below(&r, (uint64_t)specs[i].nvals) : digit[i];
			take(&(*jobs)[j], &specs[i], v, &r);
		}
		free(digit);
	}
	return (int)n;
}

char **sweep_words(const char *line, int *n, const char *where)
{
	char **v = NULL;
	size_t cap = 0;
	*n = 0;
	const char *p = line;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (!*p)
			break;
		struct strbuf w = {0};
		char quote = 0;
		for (; *p && (quote || !strchr(" \t\r\n", *p)); p++) {
			if (quote == '\'' ? *p == '\'' : quote == '"' ? *p == '"' : 0) {
				quote = 0;
			} else if (!quote && (*p == '\'' || *p == '"')) {
				quote = *p;
			} else if (*p == '\\' && quote != '\'' && p[1] && (!quote || strchr("\"\\$`", p[1]))) {
				sb_addc(&w, *++p);
			} else {
				sb_addc(&w, *p);
			}
		}
		if (quote)
			die_usage("%s: the quote %c is not closed", where, quote);
		sb_addc(&w, 0);
		grow(&v, &cap, (size_t)*n + 2, sizeof *v);
		v[(*n)++] = w.s;
		v[*n] = NULL;
	}
	return v;
}

/* The value of argv[*i] when it is the option --name (--name V, --name=V)
 * or, with a letter, -L (-L V, -LV), moving *i past a separate value; else NULL. */
static const char *option_at(char **argv, int *i, const char *name, char letter)
{
	const char *a = argv[*i];
	size_t len = strlen(name);
	const char *inline_val = NULL;
	if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) && (!a[2 + len] || a[2 + len] == '='))
		inline_val = a[2 + len] ? a + 3 + len : NULL;
	else if (letter && a[0] == '-' && a[1] == letter)
		inline_val = a[2] ? a + 2 : NULL;
	else
		return NULL;
	if (inline_val)
		return inline_val;
	return argv[*i + 1] ? argv[++*i] : "";
}

char *sweep_option(char **argv, const char *name, char letter)
{
	const char *given = NULL, *v;
	char *from_config = NULL;
	for (int i = 1; argv[i] && strcmp(argv[i], "--"); i++) {
		if ((v = option_at(argv, &i, name, letter))) {
			given = v;
		} else if ((v = option_at(argv, &i, "config", 'c'))) {
			char *c = opt_config_value(v, name);
			if (c)
				free(from_config), from_config = c;
		}
	}
	if (given)
		return free(from_config), xstrdup(given);
	return from_config;
}

int sweep_gives(char **argv, const char *name, char letter)
{
	char *v = sweep_option(argv, name, letter);
	int given = v != NULL;
	free(v);
	return given;
}

int sweep_threads(int slots)
{
	cpu_set_t mine;   /* as taskset or a container allows */
	int cores = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 1;
	return cores / slots > 1 ? cores / slots : 1;
}
