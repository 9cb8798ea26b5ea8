#include "data/manifest.h"
#include "data/labelmap.h"
#include "format/jsonwide.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_FORMAT "topspin-data"
#define MANIFEST_FILE "manifest.json"

/* In enum label_kind order. */
static const char *const kind_names[] = {"none", "int", "list", "float"};

static char *join(const char *dir, const char *file)
{
	size_t n = strlen(dir) + strlen(file) + 2;
	char *p = xmalloc(n);
	snprintf(p, n, "%s/%s", dir, file);
	return p;
}

/* Bin k holds lengths in (2^(k-1), 2^k]; bin 0 also holds 0. */
static int hist_bin(uint64_t n)
{
	int k = 0;
	while (k < MANIFEST_HIST_BINS - 1 && ((uint64_t)1 << k) < n)
		k++;
	return k;
}

/* The index slot of label: where its entry is, or the empty slot it would take.
 * A hash index keeps counting linear in the number of labels (a data set
 * may have a hundred thousand). */
static size_t label_slot(const struct manifest_split *sp, int32_t label)
{
	size_t mask = sp->nslots - 1, i = (size_t)(((uint32_t)label * 0x9E3779B97F4A7C15ull) >> 32) & mask;
	while (sp->slot[i] && sp->label_counts[sp->slot[i] - 1].label != label)
		i = (i + 1) & mask;
	return i;
}

/* Keeps the index at most half full. */
static void grow_index(struct manifest_split *sp)
{
	if (2 * (sp->nlabel_counts + 1) <= sp->nslots)
		return;
	free(sp->slot);
	sp->nslots = sp->nslots ? 2 * sp->nslots : 64;
	sp->slot = xcalloc(sp->nslots, sizeof *sp->slot);
	for (size_t k = 0; k < sp->nlabel_counts; k++)
		sp->slot[label_slot(sp, sp->label_counts[k].label)] = k + 1;
}

static void add_label_count(struct manifest_split *sp, int32_t label, uint64_t count)
{
	grow_index(sp);
	size_t i = label_slot(sp, label);
	if (!sp->slot[i]) {
		grow(&sp->label_counts, &sp->cap_label_counts, sp->nlabel_counts + 1, sizeof *sp->label_counts);
		sp->label_counts[sp->nlabel_counts++] = (struct label_count){label, 0};
		sp->slot[i] = sp->nlabel_counts;
	}
	sp->label_counts[sp->slot[i] - 1].count += count;
}

uint64_t manifest_label_count(const struct manifest_split *sp, int32_t label)
{
	if (!sp->nslots)
		return 0;
	size_t i = label_slot(sp, label);
	return sp->slot[i] ? sp->label_counts[sp->slot[i] - 1].count : 0;
}

void manifest_split_add(struct manifest_split *sp, const struct tokrec *t)
{
	sp->count++;
	sp->tokens += t->n;
	if (t->n > sp->max_tokens)
		sp->max_tokens = (uint32_t)t->n;
	sp->length_hist[hist_bin(t->n)]++;
	for (size_t i = 0; i < t->n; i++)
		if (t->ids[i] > sp->max_id)
			sp->max_id = t->ids[i];
	if (t->label_kind == LABEL_INT)
		add_label_count(sp, t->label, 1);
	for (size_t i = 0; t->label_kind == LABEL_LIST && i < t->nlabels; i++)
		if (t->labels[i] != TAG_NONE && t->labels[i] != TAG_UNKNOWN)
			add_label_count(sp, t->labels[i], 1);
}

void manifest_check_ids(const char *dir, const struct manifest_split *sp, int32_t vocab)
{
	if (sp->max_id >= vocab)
		die("%s: the %s split holds token id %lld, beyond the vocab's %d tokens", dir, sp->name,
		    (long long)sp->max_id, vocab);
}

static json_t *jstr(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = json_string(s);
	if (!j)
		die("manifest: '%s' is not valid UTF-8", s);
	return j;
}

static void set(json_t *o, const char *key, json_t *v)
{
	if (json_object_set_new(o, key, v))
		die("manifest: cannot store '%s' (not valid UTF-8?)", key);
}

static int by_label(const void *a, const void *b)
{
	int32_t x = ((const struct label_count *)a)->label, y = ((const struct label_count *)b)->label;
	return (x > y) - (x < y);
}

/* Named labels in name order, then the others by id. */
static json_t *label_counts_json(const struct manifest *m, const struct manifest_split *sp)
{
	json_t *o = json_object();
	for (int i = 0; i < m->nlabels; i++)
		set(o, m->labels[i], json_integer((json_int_t)manifest_label_count(sp, i)));
	struct label_count *unnamed = xmalloc((sp->nlabel_counts + 1) * sizeof *unnamed);
	size_t n = 0;
	for (size_t i = 0; i < sp->nlabel_counts; i++)
		if (sp->label_counts[i].label < 0 || sp->label_counts[i].label >= m->nlabels)
			unnamed[n++] = sp->label_counts[i];
	qsort(unnamed, n, sizeof *unnamed, by_label);
	for (size_t i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof id, "%d", unnamed[i].label);
		set(o, id, json_integer((json_int_t)unnamed[i].count));
	}
	free(unnamed);
	return o;
}

static json_t *split_json(const struct manifest *m, const struct manifest_split *sp)
{
	json_t *o = json_object(), *hist = json_array();
	set(o, "file", jstr(sp->file));
	set(o, "count", json_integer((json_int_t)sp->count));
	set(o, "tokens", json_integer((json_int_t)sp->tokens));
	set(o, "max_tokens", json_integer(sp->max_tokens));
	if (sp->max_id >= 0)   /* unknown in a manifest made before max_id was kept */
		set(o, "max_id", json_integer(sp->max_id));
	if (m->label_kind == LABEL_INT || m->label_kind == LABEL_LIST)
		set(o, "label_counts", label_counts_json(m, sp));
	for (int k = 0; k < MANIFEST_HIST_BINS; k++)
		if (sp->length_hist[k])
			json_array_append_new(hist, json_pack("[II]", (json_int_t)1 << k, (json_int_t)sp->length_hist[k]));
	set(o, "length_hist", hist);
	return o;
}

static json_t *manifest_json(const struct manifest *m)
{
	json_t *root = json_object(), *labels = json_array(), *splits = json_object();
	set(root, "format", json_string(MANIFEST_FORMAT));
	set(root, "version", json_integer(MANIFEST_VERSION));
	set(root, "vocab_sha256", jstr(m->vocab_sha256));
	for (int i = 0; i < m->nlabels; i++)
		json_array_append_new(labels, jstr(m->labels[i]));
	set(root, "labels", labels);
	set(root, "label_kind", json_string(kind_names[m->label_kind]));
	set(root, "max_len", m->max_len ? json_integer(m->max_len) : json_null());
	set(root, "lower", json_boolean(m->lower));
	set(root, "seed", json_integer(m->seed));
	set(root, "dedupe", json_boolean(m->dedupe));
	set(root, "records_in", json_integer((json_int_t)m->records_in));
	set(root, "duplicates_dropped", json_integer((json_int_t)m->duplicates_dropped));
	set(root, "records_left_out", json_integer((json_int_t)m->records_left_out));
	for (int i = 0; i < m->nsplits; i++)
		set(splits, m->splits[i].name, split_json(m, &m->splits[i]));
	set(root, "splits", splits);
	return root;
}

void manifest_write(const char *dir, const struct manifest *m)
{
	json_t *root = manifest_json(m);
	char *text = json_dumps(root, JSON_INDENT(2));
	if (!text)
		die("out of memory");
	char *path = join(dir, MANIFEST_FILE);
	afile_put_text(path, text);
	free(path);
	free(text);
	json_decref(root);
}

/* A field of an object read from path; where names the object ("" at the top). */
static json_t *field(const char *path, const char *where, json_t *o, const char *key, json_type type)
{
	static const char *const what[] = {
		[JSON_OBJECT] = "an object", [JSON_ARRAY] = "a list", [JSON_STRING] = "a string",
		[JSON_INTEGER] = "a whole number", [JSON_TRUE] = "true or false",
	};
	json_t *v = json_object_get(o, key);
	if (!v || !(json_typeof(v) == type || (type == JSON_TRUE && json_is_boolean(v))))
		die("%s: %s'%s' is missing or not %s", path, where, key, what[type]);
	return v;
}

static uint64_t count_field(const char *path, const char *where, json_t *o, const char *key)
{
	json_int_t v = json_integer_value(field(path, where, o, key, JSON_INTEGER));
	if (v < 0)
		die("%s: %s'%s' is negative", path, where, key);
	return (uint64_t)v;
}

static const char *nullable_str(const char *path, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return v && !json_is_null(v) ? json_string_value(field(path, "", o, key, JSON_STRING)) : NULL;
}

static void read_hist(const char *path, const char *where, json_t *a, struct manifest_split *sp)
{
	size_t i;
	json_t *bin;
	json_array_foreach(a, i, bin) {
		json_int_t ub, n;
		if (json_unpack(bin, "[II]", &ub, &n) || ub < 1 || (ub & (ub - 1)) || n < 0 ||
		    ub > (json_int_t)1 << (MANIFEST_HIST_BINS - 1))
			die("%s: %s'length_hist' entry %zu is not [power of two, count]", path, where, i + 1);
		sp->length_hist[__builtin_ctzll((unsigned long long)ub)] = (uint64_t)n;
	}
}

/* Keys are label names where the manifest has them (names finds them), else
 * ids in decimal as label_counts_json writes them: "5", never " 5" or
 * "05", which would be written back as a key that may name another label. */
static int32_t label_id(const char *path, const char *where, const struct labelmap *names, const char *key)
{
	int32_t id = labelmap_find(names, key, strlen(key));
	if (id >= 0)
		return id;
	char *end, canon[24];
	long v = strtol(key, &end, 10);
	snprintf(canon, sizeof canon, "%ld", v);
	if (!*key || *end || v < INT32_MIN || v > INT32_MAX || strcmp(canon, key))
		die("%s: %s'label_counts' has unknown label '%s'", path, where, key);
	return (int32_t)v;
}

static void read_split(const char *path, const struct labelmap *names, const char *name, json_t *o,
		       struct manifest_split *sp)
{
	char where[128];
	snprintf(where, sizeof where, "split '%.64s': ", name);
	if (!json_is_object(o))
		die("%s: %snot an object", path, where);
	sp->name = xstrdup(name);
	sp->file = xstrdup(json_string_value(field(path, where, o, "file", JSON_STRING)));
	if (!*sp->file || strchr(sp->file, '/'))
		die("%s: %s'file' is not a file name in the data dir", path, where);
	sp->count = count_field(path, where, o, "count");
	sp->tokens = count_field(path, where, o, "tokens");
	sp->max_tokens = (uint32_t)count_field(path, where, o, "max_tokens");
	sp->max_id = json_object_get(o, "max_id") ? (int64_t)count_field(path, where, o, "max_id") : -1;
	read_hist(path, where, field(path, where, o, "length_hist", JSON_ARRAY), sp);
	if (!json_object_get(o, "label_counts"))
		return;
	const char *key;
	json_t *v, *counts = field(path, where, o, "label_counts", JSON_OBJECT);
	json_object_foreach(counts, key, v)
		add_label_count(sp, label_id(path, where, names, key), count_field(path, where, counts, key));
}

static enum label_kind read_label_kind(const char *path, json_t *root)
{
	const char *k = json_string_value(field(path, "", root, "label_kind", JSON_STRING));
	for (int i = 0; i < (int)(sizeof kind_names / sizeof *kind_names); i++)
		if (!strcmp(k, kind_names[i]))
			return (enum label_kind)i;
	die("%s: unknown label_kind '%s'", path, k);
}

static void read_labels(const char *path, json_t *root, struct manifest *m)
{
	json_t *a = field(path, "", root, "labels", JSON_ARRAY), *v;
	size_t i;
	if (!json_array_size(a))
		return;   /* labels stay NULL: classes are then named by number */
	m->labels = xcalloc(json_array_size(a), sizeof *m->labels);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			die("%s: label %zu is not a string", path, i + 1);
		m->labels[m->nlabels++] = xstrdup(json_string_value(v));
	}
	int k = labels_repeat(m->labels, m->nlabels);
	if (k >= 0)
		die("%s: label '%s' appears twice", path, m->labels[k]);
}

static void read_top(const char *path, json_t *root, struct manifest *m)
{
	const char *format = json_string_value(field(path, "", root, "format", JSON_STRING));
	if (strcmp(format, MANIFEST_FORMAT))
		die("%s: not a TopSpin data manifest (format '%s')", path, format);
	json_int_t version = json_integer_value(field(path, "", root, "version", JSON_INTEGER));
	if (version > MANIFEST_VERSION)
		die("%s: manifest version %lld is newer than this TopSpin reads (%d)", path, version,
		    MANIFEST_VERSION);
	const char *vocab = nullable_str(path, root, "vocab_sha256");
	m->vocab_sha256 = vocab ? xstrdup(vocab) : NULL;
	read_labels(path, root, m);
	m->label_kind = read_label_kind(path, root);
	json_t *max_len = json_object_get(root, "max_len");
	m->max_len = max_len && !json_is_null(max_len) ? (long)count_field(path, "", root, "max_len") : 0;
	m->lower = json_is_true(field(path, "", root, "lower", JSON_TRUE));
	m->seed = (long)json_integer_value(field(path, "", root, "seed", JSON_INTEGER));
	m->dedupe = json_is_true(field(path, "", root, "dedupe", JSON_TRUE));
	m->records_in = count_field(path, "", root, "records_in");
	m->duplicates_dropped = count_field(path, "", root, "duplicates_dropped");
	m->records_left_out = count_field(path, "", root, "records_left_out");
}

/* The label names by name, for reading label_counts in linear time (read_labels
 * refused a name given twice). */
static struct labelmap *name_index(const char *path, const struct manifest *m)
{
	struct labelmap *names = labelmap_new();
	for (int i = 0; i < m->nlabels; i++)
		labelmap_id(names, m->labels[i], strlen(m->labels[i]), path, 0);
	return names;
}

struct manifest *manifest_read(const char *dir)
{
	char *path = join(dir, MANIFEST_FILE);
	FILE *f = fopen(path, "r");
	struct stat st;
	if (!f && errno != ENOENT && errno != ENOTDIR)
		die("cannot open %s:", path);
	if (!f && stat(dir, &st))
		die("cannot open %s:", dir);
	if (!f)   /* a token stream given for its data dir, say */
		die("%s: not a data dir (no %s; ts-shard makes one from token records)", dir, MANIFEST_FILE);
	json_error_t err;
	json_t *root = json_loadfd_wide(fileno(f), path, 0, &err);
	fclose(f);
	if (!root)
		die("%s: line %d: not valid JSON: %s", path, err.line, err.text);
	if (!json_is_object(root))
		die("%s: not a JSON object", path);
	struct manifest *m = xcalloc(1, sizeof *m);
	read_top(path, root, m);
	struct labelmap *names = name_index(path, m);
	json_t *splits = field(path, "", root, "splits", JSON_OBJECT), *v;
	const char *name;
	m->splits = xcalloc(json_object_size(splits), sizeof *m->splits);
	json_object_foreach(splits, name, v)
		read_split(path, names, name, v, &m->splits[m->nsplits++]);
	labelmap_free(names);
	json_decref(root);
	free(path);
	return m;
}

const struct manifest_split *manifest_split(const struct manifest *m, const char *name)
{
	for (int i = 0; i < m->nsplits; i++)
		if (!strcmp(m->splits[i].name, name))
			return &m->splits[i];
	return NULL;
}

char *manifest_shard_path(const char *dir, const struct manifest_split *sp) { return join(dir, sp->file); }

void manifest_free(struct manifest *m)
{
	for (int i = 0; i < m->nsplits; i++) {
		free(m->splits[i].name);
		free(m->splits[i].file);
		free(m->splits[i].label_counts);
		free(m->splits[i].slot);
	}
	free(m->splits);
	for (int i = 0; i < m->nlabels; i++)
		free(m->labels[i]);
	free(m->labels);
	free(m->vocab_sha256);
	free(m);
}

int manifest_lower(const struct manifest *m) { return m->vocab_sha256 ? m->lower : -1; }
