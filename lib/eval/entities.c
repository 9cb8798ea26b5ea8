#include "eval/entities.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

/* The type of a tag name: what follows its first character, after one '-'
 * if there is one there; "_" when empty, as seqeval names it. */
static const char *type_text(const char *name, size_t *len)
{
	const char *t = *name ? name + 1 : name;
	const char *dash = strchr(t, '-');
	if (dash)
		t = dash + 1;
	*len = strlen(t);
	if (!*len) {
		*len = 1;
		return "_";
	}
	return t;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The index of type text t in e->types, or -1. */
static int find_type(const struct entities *e, const char *t, size_t len)
{
	for (int j = 0; j < e->ntypes; j++)
		if (strlen(e->types[j]) == len && !memcmp(e->types[j], t, len))
			return j;
	return -1;
}

struct entities *entities_new(char *const *names, int k)
{
	struct entities *e = xcalloc(1, sizeof *e);
	e->k = k;
	e->type_of = xmalloc(((size_t)k + 1) * sizeof *e->type_of);
	e->prefix = xmalloc((size_t)k + 1);
	e->types = xcalloc((size_t)k + 2, sizeof *e->types);
	/* every class's type, O's "_" too: seqeval compares them all */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i <= k; i++) {
			char num[16];
			const char *name = i == k ? "O" : names ? names[i] : (snprintf(num, sizeof num, "%d", i), num);
			size_t len;
			const char *t = type_text(name, &len);
			if (!pass && find_type(e, t, len) < 0) {
				char *copy = xmalloc(len + 1);
				memcpy(copy, t, len);
				copy[len] = 0;
				e->types[e->ntypes++] = copy;
			}
			if (pass) {
				e->prefix[i] = name[0];
				e->type_of[i] = find_type(e, t, len);
			}
		}
		if (!pass)
			qsort(e->types, (size_t)e->ntypes, sizeof *e->types, by_name);
	}
	e->truth = xcalloc((size_t)e->ntypes, sizeof *e->truth);
	e->pred = xcalloc((size_t)e->ntypes, sizeof *e->pred);
	e->correct = xcalloc((size_t)e->ntypes, sizeof *e->correct);
	return e;
}

struct chunk {
	int type, begin, end;
};

/* seqeval's rule for a chunk ending before a tag of prefix p, type t that
 * follows one of prefix q, type u; and for a chunk starting at it. */
static int chunk_ends(char q, int u, char p, int t)
{
	if (q == 'E' || q == 'S')
		return 1;
	if ((q == 'B' || q == 'I') && (p == 'B' || p == 'S' || p == 'O'))
		return 1;
	return q != 'O' && q != '.' && u != t;
}

static int chunk_starts(char q, int u, char p, int t)
{
	if (p == 'B' || p == 'S')
		return 1;
	if ((q == 'E' || q == 'S' || q == 'O') && (p == 'E' || p == 'I'))
		return 1;
	return p != 'O' && p != '.' && u != t;
}

/* The chunks of n tags, in order, as seqeval finds them in the tags and an
 * O after them; returns how many. */
static int chunks_of(const struct entities *e, const int32_t *tags, int n, struct chunk *out)
{
	char q = 'O';
	int u = -1, begin = 0, count = 0;   /* -1: the empty type before the first tag */
	for (int i = 0; i <= n; i++) {
		int c = i < n ? tags[i] : e->k;   /* class k is the O after them */
		char p = e->prefix[c];
		int t = e->type_of[c];
		if (chunk_ends(q, u, p, t))
			out[count++] = (struct chunk){u, begin, i - 1};
		if (chunk_starts(q, u, p, t))
			begin = i;
		q = p, u = t;
	}
	return count;
}

void entities_add(struct entities *e, const int32_t *truth, const int32_t *pred, int n)
{
	struct chunk *a = xmalloc(((size_t)n + 1) * sizeof *a), *b = xmalloc(((size_t)n + 1) * sizeof *b);
	int na = chunks_of(e, truth, n, a), nb = chunks_of(e, pred, n, b);
	for (int i = 0; i < na; i++)
		e->truth[a[i].type]++;
	for (int j = 0; j < nb; j++)
		e->pred[b[j].type]++;
	for (int i = 0, j = 0; i < na && j < nb;) {
		if (a[i].begin == b[j].begin && a[i].end == b[j].end && a[i].type == b[j].type)
			e->correct[a[i].type]++;
		if (a[i].begin < b[j].begin || (a[i].begin == b[j].begin && a[i].end <= b[j].end))
			i++;
		else
			j++;
	}
	free(a);
	free(b);
}

void entities_to_doubles(const struct entities *e, double *v)
{
	for (int i = 0; i < e->ntypes; i++) {
		v[3 * i] = (double)e->truth[i];
		v[3 * i + 1] = (double)e->pred[i];
		v[3 * i + 2] = (double)e->correct[i];
	}
}

void entities_from_doubles(struct entities *e, const double *v)
{
	for (int i = 0; i < e->ntypes; i++) {
		e->truth[i] = (int64_t)v[3 * i];
		e->pred[i] = (int64_t)v[3 * i + 1];
		e->correct[i] = (int64_t)v[3 * i + 2];
	}
}

struct prf_table *entities_table(const struct entities *e, char ***type_names)
{
	int n = 0, k = e->ntypes;
	int64_t *tp = xcalloc((size_t)k + 1, sizeof *tp), *pred = xcalloc((size_t)k + 1, sizeof *pred),
		*truth = xcalloc((size_t)k + 1, sizeof *truth);
	*type_names = xcalloc((size_t)k + 1, sizeof **type_names);
	for (int i = 0; i < k; i++) {
		if (!e->truth[i] && !e->pred[i])
			continue;
		tp[n] = e->correct[i], pred[n] = e->pred[i], truth[n] = e->truth[i];
		(*type_names)[n++] = e->types[i];
	}
	struct prf_table *t = prf_table_compute(tp, pred, truth, n);
	free(tp), free(pred), free(truth);
	return t;
}

void entities_free(struct entities *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->ntypes; i++)
		free(e->types[i]);
	free(e->types);
	free(e->type_of);
	free(e->prefix);
	free(e->truth);
	free(e->pred);
	free(e->correct);
	free(e);
}
