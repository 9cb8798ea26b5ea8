/* ts-sweep's -p specs and command lines (lib/sweep/sweep.c): byte 0 picks
 * the grid or 1 to 7 random draws, byte 1 the seed; the rest is up to 8
 * specs, NUL-separated. The jobs of specs that parse must each take every
 * option once, in the specs' order, with one of its values or a draw within
 * its range (a whole number for a range of whole numbers); each value, and
 * each spec, quoted for a shell (shell_quote) must split back (sweep_words)
 * to itself. */
#include "fuzz.h"
#include "sweep/sweep.h"
#include "util/strbuf.h"
#include <math.h>

enum { MAX_SPECS = 8, MAX_JOBS = 1000 };

struct ctx {
	char *text[MAX_SPECS];
	int nspecs;
	long draws;
	uint64_t seed;
	struct sweep_spec specs[MAX_SPECS];
	struct sweep_job *jobs;
	int njobs;
};

static void free_words(char **w, int n)
{
	for (int i = 0; i < n; i++)
		free(w[i]);
	free(w);
}

/* s quoted splits back into s alone. */
static void check_quote(const char *s)
{
	char *q = shell_quote(s);
	int n;
	char **w = sweep_words(q, &n, "quoted");
	if (n != 1 || strcmp(w[0], s))
		abort();
	free_words(w, n);
	free(q);
}

/* A range's draw: a number within it, whole where its ends are. */
static void check_draw(const struct sweep_spec *s, const char *text)
{
	char *end;
	double x = strtod(text, &end);
	if (!*text || *end || !(x >= s->lo && x <= s->hi) || (s->whole && (strchr(text, '.') || x != floor(x))))
		abort();
}

static void check_job(const struct ctx *c, const struct sweep_job *j)
{
	int at = 0;
	for (int i = 0; i < c->nspecs; i++) {
		const struct sweep_spec *s = &c->specs[i];
		for (int k = 0; k < s->nkeys; k++, at += 2) {
			if (at + 1 >= j->nopts || strcmp(j->opts[at], s->keys[k]))
				abort();
			const char *val = j->opts[at + 1];
			if (s->range) {
				check_draw(s, val);
			} else {
				int v = 0;
				while (v < s->nvals && strcmp(s->vals[v][k], val))
					v++;
				if (v == s->nvals)
					abort();
			}
			check_quote(val);
		}
	}
	if (at != j->nopts)
		abort();
}

static void run(void *arg)
{
	struct ctx *c = arg;
	for (int i = 0; i < c->nspecs; i++)
		sweep_parse(c->text[i], &c->specs[i]);
	c->njobs = sweep_jobs(c->specs, c->nspecs, c->draws, c->seed, MAX_JOBS, &c->jobs);
	fuzz_die_is_bug(1);
	long want = c->draws ? c->draws : 1;
	for (int i = 0; i < c->nspecs && !c->draws; i++)
		want *= c->specs[i].nvals;
	if (c->njobs != want)
		abort();
	for (int j = 0; j < c->njobs; j++)
		check_job(c, &c->jobs[j]);
}

static void release(void *arg)
{
	struct ctx *c = arg;
	for (int i = 0; i < c->nspecs; i++) {   /* those not parsed are zeros */
		struct sweep_spec *s = &c->specs[i];
		for (int v = 0; v < s->nvals; v++)
			free_words(s->vals[v], s->nkeys);
		free(s->vals);
		free_words(s->keys, s->nkeys);
	}
	for (int j = 0; j < c->njobs; j++)
		free_words(c->jobs[j].opts, c->jobs[j].nopts);
	free(c->jobs);
}

/* Every spec quoted splits back to itself, and the specs as one line split
 * as a shell would (dying on an unclosed quote). */
static void words(void *arg)
{
	struct ctx *c = arg;
	for (int i = 0; i < c->nspecs; i++)
		check_quote(c->text[i]);
	int n;
	char **w = sweep_words(c->text[0], &n, "line");
	free_words(w, n);
}

static void no_release(void *arg) { (void)arg; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	struct ctx c = {.draws = data[0] & 7, .seed = data[1]};
	const char *p = (const char *)data + 2, *end = (const char *)data + size;
	while (c.nspecs < MAX_SPECS) {
		const char *nul = memchr(p, 0, (size_t)(end - p));
		c.text[c.nspecs++] = strndup(p, nul ? (size_t)(nul - p) : (size_t)(end - p));
		if (!nul)
			break;
		p = nul + 1;
	}
	fuzz_survive(words, no_release, &c);
	fuzz_survive(run, release, &c);
	for (int i = 0; i < c.nspecs; i++)
		free(c.text[i]);
	return 0;
}
