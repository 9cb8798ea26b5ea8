#include "data/labelmap.h"
#include "data/strmap.h"
#include "data/textin.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

struct labelmap {
	char **names;
	size_t n, cap;
	int32_t *slot;    /* open addressing: id + 1, 0 empty */
	size_t nslots;
	int fixed;
	int numbered;     /* not fixed: labels given as class numbers came */
	char *source;
};

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

struct labelmap *labelmap_new(void)
{
	struct labelmap *m = xcalloc(1, sizeof *m);
	m->nslots = 64;
	m->slot = xcalloc(m->nslots, sizeof *m->slot);
	return m;
}

static size_t find(const struct labelmap *m, const char *s, size_t n)
{
	size_t i = hash(s, n) & (m->nslots - 1);
	while (m->slot[i]) {
		const char *name = m->names[m->slot[i] - 1];
		if (strlen(name) == n && !memcmp(name, s, n))
			break;
		i = (i + 1) & (m->nslots - 1);
	}
	return i;
}

/* Why s[0..n) can be no label name, or NULL: the names are C strings in
 * memory and JSON strings in a data dir's manifest. */
static const char *bad_name(const char *s, size_t n)
{
	if (memchr(s, 0, n))
		return "holds a NUL byte";
	for (size_t i = 0; i < n;) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
		if (k < 0)
			return "is not valid UTF-8";
		i += (size_t)k;
	}
	return NULL;
}

static int32_t add(struct labelmap *m, const char *s, size_t n)
{
	if (2 * (m->n + 1) > m->nslots) {
		free(m->slot);
		m->nslots *= 2;
		m->slot = xcalloc(m->nslots, sizeof *m->slot);
		for (size_t k = 0; k < m->n; k++)
			m->slot[find(m, m->names[k], strlen(m->names[k]))] = (int32_t)k + 1;
	}
	grow(&m->names, &m->cap, m->n + 1, sizeof *m->names);
	m->names[m->n] = strndup(s, n);
	m->slot[find(m, s, n)] = (int32_t)++m->n;
	return (int32_t)m->n - 1;
}

struct labelmap *labelmap_load(const char *path)
{
	struct labelmap *m = labelmap_new();
	struct textin *t = textin_open(path);
	char *line;
	size_t n;
	while ((line = textin_line(t, &n))) {
		if (n == 0)
			die("%s: line %llu: empty label name", path, (unsigned long long)textin_lineno(t));
		const char *why = bad_name(line, n);
		if (why)
			die("%s: line %llu: the label name %s", path, (unsigned long long)textin_lineno(t), why);
		if (m->slot[find(m, line, n)])
			die("%s: line %llu: label '%s' appears twice", path, (unsigned long long)textin_lineno(t), line);
		add(m, line, n);
	}
	textin_close(t);
	if (m->n == 0)
		die("%s: no label names", path);
	m->fixed = 1;
	m->source = xstrdup(path);
	return m;
}

int32_t labelmap_id(struct labelmap *m, const char *name, size_t n, const char *file, uint64_t line)
{
	size_t i = find(m, name, n);
	if (m->slot[i])
		return m->slot[i] - 1;
	const char *why = bad_name(name, n);
	if (why)
		die("%s: line %llu: the label %s", file, (unsigned long long)line, why);
	if (m->fixed)
		die("%s: line %llu: label '%.*s' is not in %s", file, (unsigned long long)line, (int)n, name, m->source);
	if (m->numbered)
		die("%s: line %llu: label '%.*s' is a name, but labels before it are class numbers: give --labels FILE "
		    "to name the classes", file, (unsigned long long)line, (int)n, name);
	return add(m, name, n);
}

int32_t labelmap_class(struct labelmap *m, long id, const char *file, uint64_t line)
{
	if (!m->fixed && m->n)
		die("%s: line %llu: label %ld is a class number, but labels before it are names (%s, ...): give --labels "
		    "FILE to name the classes", file, (unsigned long long)line, id, m->names[0]);
	m->numbered = 1;
	if (m->fixed && (size_t)id >= m->n)
		die("%s: line %llu: label %ld is beyond the %zu names in %s", file, (unsigned long long)line, id, m->n,
		    m->source);
	return (int32_t)id;
}

int32_t labelmap_find(const struct labelmap *m, const char *name, size_t n)
{
	return m->slot[find(m, name, n)] - 1;
}

void labelmap_names(const struct labelmap *m, char ***names, int *n)
{
	*names = m->names;
	*n = (int)m->n;
}

void labelmap_free(struct labelmap *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->names[i]);
	free(m->names);
	free(m->slot);
	free(m->source);
	free(m);
}

int labels_unnamed(char *const *names, int n)
{
	char want[32];
	for (int i = 0; i < n; i++) {
		snprintf(want, sizeof want, "LABEL_%d", i);
		if (strcmp(names[i], want))
			return 0;
	}
	return 1;
}

/* A map from each of names[0..n) to its first place there: looking up
 * each of many labels costs one probe, not a pass over the others (200,000
 * classes took minutes). */
static struct strmap *index_names(char *const *names, int n)
{
	struct strmap *m = strmap_new((size_t)n);
	for (int i = 0; i < n; i++)
		if (strmap_get(m, names[i], strlen(names[i])) < 0)
			strmap_put(m, names[i], strlen(names[i]), i);
	return m;
}

static int32_t name_in(const struct strmap *m, const char *name) { return strmap_get(m, name, strlen(name)); }

/* "a, b, c" */
static void add_names(struct strbuf *b, char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		sb_addf(b, "%s%s", i ? ", " : "", names[i]);
}

char *labels_disagree(char *const *model, int nmodel, char *const *data, int ndata)
{
	if (!nmodel || !ndata || labels_unnamed(model, nmodel))
		return NULL;
	int same = nmodel == ndata;
	for (int i = 0; same && i < nmodel; i++)
		same = !strcmp(model[i], data[i]);
	if (same)
		return NULL;
	struct strbuf b = {0};
	sb_addf(&b, "its labels (");
	add_names(&b, model, nmodel);
	sb_addf(&b, ") are not the data's (");
	add_names(&b, data, ndata);
	sb_addf(&b, "), in that order");
	return b.s;
}

enum { NAMES_SHOWN = 10 };   /* a list of missing names stops there: there may be thousands */

/* Adds to b "x, y, ... (N in all)": the names of have[0..nhave) that other
 * (an index of names) lacks; returns how many. */
static int add_missing(struct strbuf *b, char *const *have, int nhave, const struct strmap *other)
{
	int missing = 0;
	for (int i = 0; i < nhave; i++)
		if (name_in(other, have[i]) < 0 && missing++ < NAMES_SHOWN)
			sb_addf(b, "%s%s", missing > 1 ? ", " : "", have[i]);
	if (missing > NAMES_SHOWN)
		sb_addf(b, ", ... (%d in all)", missing);
	return missing;
}

char *labels_missing(char *const *model, int nmodel, char *const *data, int ndata)
{
	if (!nmodel || !ndata || labels_unnamed(model, nmodel))
		return NULL;
	struct strmap *mi = index_names(model, nmodel), *di = index_names(data, ndata);
	struct strbuf its = {0}, datas = {0}, b = {0};
	int lacks = add_missing(&datas, data, ndata, mi), extra = add_missing(&its, model, nmodel, di);
	if (lacks)
		sb_addf(&b, "it has no %s", datas.s);
	if (extra)
		sb_addf(&b, "%sthe data has no %s", lacks ? "; " : "", its.s);
	sb_free(&its);
	sb_free(&datas);
	strmap_free(mi);
	strmap_free(di);
	return b.s;
}

char *labels_map(char *const *model, int nmodel, char *const *data, int ndata, int32_t *to)
{
	int named = nmodel && ndata && !labels_unnamed(model, nmodel), missing = 0;
	struct strmap *index = named ? index_names(model, nmodel) : NULL;
	struct strbuf b = {0};
	for (int d = 0; d < ndata; d++) {
		to[d] = named ? name_in(index, data[d]) : d;
		if (to[d] < 0)
			sb_addf(&b, "%s%s", missing++ ? ", " : "it knows no class ", data[d]);
	}
	strmap_free(index);
	if (!missing)
		return NULL;
	sb_addf(&b, " of the data's (its labels: ");
	add_names(&b, model, nmodel);
	sb_addf(&b, ")");
	return b.s;
}

void labels_union(char ***acc, int *nacc, char *const *names, int n, int32_t *to)
{
	if (n <= 0)
		return;
	struct strmap *index = index_names(*acc, *nacc);
	*acc = xrealloc(*acc, ((size_t)*nacc + (size_t)n) * sizeof **acc);   /* room for all to be new */
	for (int i = 0; i < n; i++) {
		to[i] = name_in(index, names[i]);
		if (to[i] >= 0)
			continue;
		(*acc)[*nacc] = xstrdup(names[i]);
		strmap_put(index, names[i], strlen(names[i]), *nacc);
		to[i] = (*nacc)++;
	}
	strmap_free(index);
}

int labels_reordered(char *const *have, int nhave, char *const *want, int nwant, int *from)
{
	if (nhave != nwant)
		return 0;
	struct strmap *index = index_names(have, nhave);
	int all = 1;
	for (int i = 0; all && i < nwant; i++)
		all = (from[i] = name_in(index, want[i])) >= 0;
	strmap_free(index);
	return all;
}
