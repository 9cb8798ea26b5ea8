#include "data/tokrec.h"
#include "data/labelmap.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { HEADER_VERSION = 1 };

static const char *const special_keys[VOCAB_NSPECIAL] = {"pad", "unk", "cls", "sep", "mask"};

/* "tokenizer": {"file": "tokenizer.json", "model": ..., "pad": id, ...}. */
static void pack_tokenizer(msgpack_packer *pk, const struct stream_header *h)
{
	int n = 2;
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		n += h->special[i] >= 0;
	mp_pack_str(pk, "tokenizer");
	msgpack_pack_map(pk, (size_t)n);
	mp_pack_str(pk, "file");
	mp_pack_str(pk, h->tokenizer);
	mp_pack_str(pk, "model");
	mp_pack_str(pk, h->model);
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		if (h->special[i] >= 0) {
			mp_pack_str(pk, special_keys[i]);
			msgpack_pack_int32(pk, h->special[i]);
		}
}

void header_pack(msgpack_packer *pk, const struct stream_header *h)
{
	msgpack_pack_map(pk, 5 + (h->vocab_sha256 != NULL) + (h->vocab_file != NULL) + (h->tokenizer != NULL));
	mp_pack_str(pk, "kind");
	mp_pack_str(pk, h->kind);
	mp_pack_str(pk, "version");
	msgpack_pack_int(pk, HEADER_VERSION);
	if (h->vocab_sha256) {
		mp_pack_str(pk, "vocab");
		mp_pack_str(pk, h->vocab_sha256);
	}
	if (h->vocab_file) {
		mp_pack_str(pk, "vocab_file");
		mp_pack_str(pk, h->vocab_file);
	}
	if (h->tokenizer)
		pack_tokenizer(pk, h);
	mp_pack_str(pk, "labels");
	msgpack_pack_array(pk, (size_t)h->nlabels);
	for (int i = 0; i < h->nlabels; i++)
		mp_pack_str(pk, h->labels[i]);
	mp_pack_str(pk, "max_len");
	msgpack_pack_long(pk, h->max_len);
	mp_pack_str(pk, "lower");
	if (h->lower)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

static char *dup_str(const struct rec_reader *r, const msgpack_object *o, const char *key)
{
	if (o->type != MSGPACK_OBJECT_STR)
		rec_die(r, "header field '%s' is not a string", key);
	return strndup(o->via.str.ptr, o->via.str.size);
}

/* An integer field in [lo, hi]; what names it in errors. A value out of range
 * is reported as such, however large, not as something else. */
static int64_t get_int(const struct rec_reader *r, const msgpack_object *o, const char *what, int64_t lo,
		       int64_t hi)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > (uint64_t)hi)
			rec_die(r, "%s %llu is out of range (%lld to %lld)", what, (unsigned long long)o->via.u64,
				(long long)lo, (long long)hi);
		return (int64_t)o->via.u64;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (o->via.i64 < lo)
			rec_die(r, "%s %lld is out of range (%lld to %lld)", what, (long long)o->via.i64, (long long)lo,
				(long long)hi);
		return o->via.i64;
	}
	rec_die(r, "%s is not an integer", what);
}

static void unpack_tokenizer(const struct rec_reader *r, const msgpack_object *v, struct stream_header *h)
{
	const msgpack_object *file = v->type == MSGPACK_OBJECT_MAP ? mp_get(v, "file") : NULL, *model, *id;
	if (!file || !(model = mp_get(v, "model")))
		rec_die(r, "header field 'tokenizer' is not a map of its file and model");
	h->tokenizer = dup_str(r, file, "tokenizer.file");
	if (strcmp(h->tokenizer, "tokenizer.json"))
		rec_die(r, "header field 'tokenizer.file' is '%s', where only tokenizer.json is known", h->tokenizer);
	h->model = dup_str(r, model, "tokenizer.model");
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		h->special[i] = (id = mp_get(v, special_keys[i]))
			? (int32_t)get_int(r, id, "a special token id of header field 'tokenizer'", 0, INT32_MAX) : -1;
}

int header_unpack(const struct rec_reader *r, const msgpack_object *o, struct stream_header *h)
{
	const msgpack_object *kind = mp_get(o, "kind"), *v;
	if (!kind)
		return 0;
	memset(h, 0, sizeof *h);
	h->kind = dup_str(r, kind, "kind");
	if ((v = mp_get(o, "version")) && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (v->via.u64 > HEADER_VERSION)
			rec_die(r, "stream version %llu is newer than this TopSpin understands (%d)",
				(unsigned long long)v->via.u64, HEADER_VERSION);
		h->version = (int)v->via.u64;
	}
	if ((v = mp_get(o, "vocab"))) {
		h->vocab_sha256 = dup_str(r, v, "vocab");
		if (strlen(h->vocab_sha256) != 64 || strspn(h->vocab_sha256, "0123456789abcdef") != 64)
			rec_die(r, "header field 'vocab' is not a sha256 (64 hex digits)");
	}
	if ((v = mp_get(o, "vocab_file")))
		h->vocab_file = dup_str(r, v, "vocab_file");
	if ((v = mp_get(o, "tokenizer")))
		unpack_tokenizer(r, v, h);
	if ((v = mp_get(o, "labels"))) {
		if (v->type != MSGPACK_OBJECT_ARRAY)
			rec_die(r, "header field 'labels' is not a list");
		if (v->via.array.size > INT32_MAX)
			rec_die(r, "header field 'labels' names %u labels, more than %d", v->via.array.size, INT32_MAX);
		h->nlabels = (int)v->via.array.size;
		h->labels = xcalloc((size_t)h->nlabels, sizeof *h->labels);
		for (int i = 0; i < h->nlabels; i++)
			h->labels[i] = dup_str(r, &v->via.array.ptr[i], "labels");
		int k = labels_repeat(h->labels, h->nlabels);
		if (k >= 0)
			rec_die(r, "header label '%s' appears twice", h->labels[k]);
	}
	if ((v = mp_get(o, "max_len")))
		h->max_len = (long)get_int(r, v, "header field 'max_len'", 0, INT32_MAX);
	if ((v = mp_get(o, "lower")) && v->type != MSGPACK_OBJECT_BOOLEAN)
		rec_die(r, "header field 'lower' is not true or false");
	if (v)
		h->lower = v->via.boolean;
	return 1;
}

int labels_repeat(char *const *names, int n)
{
	struct labelmap *seen = labelmap_new();   /* hashed: a header may name 100k labels */
	int k = -1;
	for (int i = 0; i < n && k < 0; i++)
		if (labelmap_id(seen, names[i], strlen(names[i]), "", 0) != i)
			k = i;
	labelmap_free(seen);
	return k;
}

void header_free(struct stream_header *h)
{
	free(h->kind);
	free(h->vocab_sha256);
	free(h->vocab_file);
	free(h->tokenizer);
	free(h->model);
	for (int i = 0; i < h->nlabels; i++)
		free(h->labels[i]);
	free(h->labels);
	memset(h, 0, sizeof *h);
}

void header_merge(struct stream_header *acc, char **from, const struct rec_reader *r, struct stream_header *h)
{
	const char *name = rec_name(r);
	if (strcmp(h->kind, "tokens"))
		rec_die(r, "a '%s' stream, not token records", h->kind);
	if (*from && h->vocab_sha256 && acc->vocab_sha256 && strcmp(h->vocab_sha256, acc->vocab_sha256))
		die("%s: vocab sha256 %.12s\u2026 differs from %s's %.12s\u2026", name, h->vocab_sha256, *from,
		    acc->vocab_sha256);
	if (*from && h->lower != acc->lower)
		die("%s: lowercasing %s, but %s's is %s", name, h->lower ? "on" : "off", *from,
		    acc->lower ? "on" : "off");
	if (!*from) {
		*from = xstrdup(name);
		acc->lower = h->lower;
	}
	if (!acc->vocab_sha256 && h->vocab_sha256) {
		acc->vocab_sha256 = h->vocab_sha256;
		h->vocab_sha256 = NULL;
		free(acc->tokenizer);
		free(acc->model);
		acc->tokenizer = h->tokenizer;
		acc->model = h->model;
		memcpy(acc->special, h->special, sizeof acc->special);
		h->tokenizer = h->model = NULL;
	}
	if (!acc->vocab_file && h->vocab_file) {
		acc->vocab_file = h->vocab_file;
		h->vocab_file = NULL;
	}
	if (h->max_len > acc->max_len)
		acc->max_len = h->max_len;
}

static void pack_int_array(msgpack_packer *pk, const int32_t *v, size_t n)
{
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_int32(pk, v[i]);
}

void tokrec_pack(msgpack_packer *pk, const struct tokrec *t)
{
	size_t n = 2 + (t->types != NULL) + (t->label_kind != LABEL_NONE) + (t->fold >= 0);
	msgpack_pack_map(pk, n);
	mp_pack_str(pk, "id");
	if (t->id_is_num)
		mp_pack_decimal(pk, t->id);
	else
		mp_pack_str(pk, t->id);
	mp_pack_str(pk, "ids");
	pack_int_array(pk, t->ids, t->n);
	if (t->types) {
		mp_pack_str(pk, "types");
		msgpack_pack_array(pk, t->n);
		for (size_t i = 0; i < t->n; i++)
			msgpack_pack_uint8(pk, t->types[i]);
	}
	if (t->label_kind != LABEL_NONE) {
		mp_pack_str(pk, "label");
		if (t->label_kind == LABEL_INT)
			msgpack_pack_int32(pk, t->label);
		else if (t->label_kind == LABEL_FLOAT)
			msgpack_pack_double(pk, t->flabel);
		else
			pack_int_array(pk, t->labels, t->nlabels);
	}
	if (t->fold >= 0) {
		mp_pack_str(pk, "fold");
		msgpack_pack_int(pk, t->fold);
	}
}

void tokrec_set_id(struct tokrec *t, const char *id, size_t len, int is_num)
{
	grow(&t->id, &t->cap_id, len + 1, 1);
	memcpy(t->id, id, len);
	t->id[len] = 0;
	t->id_is_num = is_num;
}

/* A list of integers in [lo, INT32_MAX] under key; what names one in errors. */
static size_t unpack_ints(const struct rec_reader *r, const msgpack_object *o, int32_t **v, size_t *cap,
			  const char *key, const char *what, int32_t lo)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		rec_die(r, "'%s' is not a list", key);
	size_t n = o->via.array.size;
	grow(v, cap, n, sizeof **v);
	for (size_t i = 0; i < n; i++)
		(*v)[i] = (int32_t)get_int(r, &o->via.array.ptr[i], what, lo, INT32_MAX);
	return n;
}

static void unpack_id(const struct rec_reader *r, const msgpack_object *o, struct tokrec *t)
{
	char num[32];
	if (!o) {
		int n = snprintf(num, sizeof num, "%llu", (unsigned long long)t->unpacked);
		tokrec_set_id(t, num, (size_t)n, 1);
	} else if (o->type == MSGPACK_OBJECT_STR) {
		/* ids are C strings from here on: a NUL would cut them short */
		if (memchr(o->via.str.ptr, 0, o->via.str.size))
			rec_die(r, "'id' holds a NUL byte");
		tokrec_set_id(t, o->via.str.ptr, o->via.str.size, 0);
	} else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER || o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		int n = o->type == MSGPACK_OBJECT_POSITIVE_INTEGER
			? snprintf(num, sizeof num, "%llu", (unsigned long long)o->via.u64)
			: snprintf(num, sizeof num, "%lld", (long long)o->via.i64);
		tokrec_set_id(t, num, (size_t)n, 1);
	} else {
		rec_die(r, "'id' is neither a string nor an integer");
	}
}

static void unpack_label(const struct rec_reader *r, const msgpack_object *o, struct tokrec *t)
{
	t->label_kind = LABEL_NONE;
	if (!o || o->type == MSGPACK_OBJECT_NIL)
		return;
	if (o->type == MSGPACK_OBJECT_ARRAY) {
		t->label_kind = LABEL_LIST;
		t->nlabels = unpack_ints(r, o, &t->labels, &t->cap_labels, "label", "label", TAG_NONE);
		for (size_t i = 0; i < t->nlabels; i++)
			if (t->labels[i] < 0 && t->labels[i] != TAG_NONE && t->labels[i] != TAG_UNKNOWN)
				rec_die(r, "label %d is neither a class, %d (a word without a tag) nor %d (a token "
					   "that starts no word)", t->labels[i], TAG_UNKNOWN, TAG_NONE);
	} else if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64) {
		t->label_kind = LABEL_FLOAT;
		t->flabel = o->via.f64;
	} else {
		t->label_kind = LABEL_INT;
		t->label = (int32_t)get_int(r, o, "label", 0, INT32_MAX);
	}
}

void tokrec_unpack(const struct rec_reader *r, const msgpack_object *o, struct tokrec *t)
{
	const msgpack_object *ids = mp_get(o, "ids"), *types = mp_get(o, "types"), *fold = mp_get(o, "fold");
	if (!ids)
		rec_die(r, "no 'ids' field (is this a token stream?)");
	unpack_id(r, mp_get(o, "id"), t);
	t->unpacked++;
	t->n = unpack_ints(r, ids, &t->ids, &t->cap_ids, "ids", "token id", 0);
	if (t->n == 0)
		rec_die(r, "'ids' is empty");
	t->types = NULL;
	if (types && types->type != MSGPACK_OBJECT_NIL) {
		if (types->type != MSGPACK_OBJECT_ARRAY || types->via.array.size != t->n)
			rec_die(r, "'types' is not a list as long as 'ids'");
		grow(&t->types_buf, &t->cap_types, t->n, 1);
		t->types = t->types_buf;
		for (size_t i = 0; i < t->n; i++)
			t->types[i] = (uint8_t)get_int(r, &types->via.array.ptr[i], "type id", 0, 255);
	}
	unpack_label(r, mp_get(o, "label"), t);
	t->fold = fold ? (int)get_int(r, fold, "fold", 0, INT32_MAX) : -1;
}

void tokrec_free(struct tokrec *t)
{
	free(t->id);
	free(t->ids);
	free(t->types_buf);
	free(t->labels);
	memset(t, 0, sizeof *t);
}

int32_t *tokrec_classes(struct tokrec *t, size_t *n)
{
	*n = t->label_kind == LABEL_LIST ? t->nlabels : t->label_kind == LABEL_INT;
	return t->label_kind == LABEL_LIST ? t->labels : &t->label;
}

void tokrec_relabel(struct tokrec *t, const int32_t *to, int n)
{
	size_t k;
	int32_t *v = tokrec_classes(t, &k);
	for (size_t i = 0; i < k; i++)
		if (v[i] >= 0 && v[i] < n)
			v[i] = to[v[i]];
}

void label_union_stream(struct label_union *u)
{
	u->nto = 0;
}

void label_union_header(struct label_union *u, const struct stream_header *h)
{
	u->to = xrealloc(u->to, ((size_t)h->nlabels + 1) * sizeof *u->to);
	labels_union(&u->names, &u->n, h->labels, h->nlabels, u->to);
	u->nto = h->nlabels;
}

int label_union_record(const struct label_union *u, const struct rec_reader *r, struct tokrec *t)
{
	if (!u->nto)
		return 0;
	size_t n;
	const int32_t *v = tokrec_classes(t, &n);
	for (size_t i = 0; i < n; i++)   /* tokrec_unpack refuses negative labels but for the tags */
		if (v[i] >= u->nto)
			rec_die(r, "label %d is out of range (%d label names)", v[i], u->nto);
	tokrec_relabel(t, u->to, u->nto);
	return 1;
}

void label_union_free(struct label_union *u)
{
	for (int i = 0; i < u->n; i++)
		free(u->names[i]);
	free(u->names);
	free(u->to);
	memset(u, 0, sizeof *u);
}
