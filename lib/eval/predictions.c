#include "eval/predictions.h"
#include "data/labelmap.h"
#include "format/rec.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct predictions *predictions_new(const struct shard *s, enum bert_task task, int L, double threshold,
				    int labelled)
{
	struct predictions *p = xcalloc(1, sizeof *p);
	p->task = task;
	p->L = L;
	p->threshold = threshold;
	p->n = shard_count(s);
	p->logits = xcalloc(p->n * (size_t)L, sizeof *p->logits);
	if (task == TASK_TOKCLS) {
		p->tags = xcalloc(p->n ? p->n : 1, sizeof *p->tags);
		p->ntags = xcalloc(p->n ? p->n : 1, sizeof *p->ntags);
	}
	p->labels = xmalloc(p->n * sizeof *p->labels);
	p->ids = xcalloc(p->n, sizeof *p->ids);
	p->folds = xmalloc(p->n * sizeof *p->folds);
	p->id_is_num = xmalloc(p->n ? p->n : 1);
	struct tokrec t = {0};
	for (uint64_t i = 0; i < p->n; i++) {
		shard_get(s, i, &t);
		p->ids[i] = xstrdup(t.id);
		p->folds[i] = t.fold;
		p->id_is_num[i] = (char)t.id_is_num;
		p->labels[i] = labelled && t.label_kind == LABEL_INT ? t.label : -1;
	}
	tokrec_free(&t);
	return p;
}

/* The predicted tags of a batch's records, a logit row per word in order. */
static void keep_tags(struct predictions *p, const struct batch *b, const float *logits)
{
	size_t row = 0;
	for (int i = 0; i < b->B; i++) {
		const int32_t *labels = b->labels + (size_t)i * b->T;
		uint64_t r = b->rows[i];
		p->tags[r] = xmalloc(((size_t)b->T + 1) * sizeof **p->tags);
		for (int t = 0; t < b->T; t++)
			if (labels[t] != TAG_NONE)
				p->tags[r][p->ntags[r]++] = predicted_class(logits + row++ * p->L, p->L);
	}
}

void predictions_hook(const struct batch *b, const float *logits, void *ctx)
{
	struct predictions *p = ctx;
	if (p->task == TASK_TOKCLS) {
		keep_tags(p, b, logits);
		return;
	}
	for (int i = 0; i < b->B; i++)
		memcpy(p->logits + b->rows[i] * (size_t)p->L, logits + (size_t)i * p->L, (size_t)p->L * sizeof *logits);
}

/* The group record i joins: a new one for a record that was not folded, else
 * its id's. A piece of an id seen before is an error. */
static uint64_t fold_group(const struct predictions *p, uint64_t i, struct labelmap *ids,
			   struct labelmap *pieces, uint64_t *group_of_id, uint64_t ng)
{
	if (p->folds[i] < 0)
		return ng;
	struct strbuf key = {0}, id = {0};
	sb_addf(&id, "%c%s", p->id_is_num[i] ? 'n' : 's', p->ids[i]);   /* 7 is not "7" */
	sb_addf(&key, "%d %s", p->folds[i], id.s);
	int twice = labelmap_find(pieces, key.s, key.n) >= 0;
	labelmap_id(pieces, key.s, key.n, "", 0);
	sb_free(&key);
	if (twice)
		die("id '%s': piece %d appears twice (ids must be unique across the inputs)", p->ids[i], p->folds[i]);
	int32_t k = labelmap_find(ids, id.s, id.n);
	uint64_t g = k >= 0 ? group_of_id[k] : (group_of_id[labelmap_id(ids, id.s, id.n, "", 0)] = ng);
	sb_free(&id);
	return g;
}

/* tokcls: a text's pieces are records in a row, fold 0, 1, 2, ... (each
 * word's tag is in one piece only); record i joins group g (ng: a new one),
 * whose last piece so far is folds[g]. */
static void check_piece(const struct predictions *p, uint64_t i, uint64_t g, uint64_t ng)
{
	if (g != ng && g + 1 != ng)
		die("id '%s': piece %d is apart from the others (a text's pieces must be records in a row)", p->ids[i],
		    p->folds[i]);
	int want = g == ng ? 0 : p->folds[g] + 1;
	if (p->folds[i] >= 0 && p->folds[i] != want)
		die("id '%s': piece %d comes where piece %d should (a text's pieces must be in fold order)", p->ids[i],
		    p->folds[i], want);
}

/* tokcls: record i's tags, the words of its text's next piece, joined to
 * those of group g (ng: a new one). */
static void join_tags(struct predictions *p, uint64_t i, uint64_t g, uint64_t ng)
{
	check_piece(p, i, g, ng);
	int32_t *tags = p->tags[i];
	p->tags[i] = NULL;
	if (g == ng) {
		p->tags[g] = tags, p->ntags[g] = p->ntags[i];
		return;
	}
	if (p->ntags[i] > INT_MAX - p->ntags[g])
		die("id '%s': more than %d words", p->ids[i], INT_MAX);
	p->tags[g] = xrealloc(p->tags[g], ((size_t)p->ntags[g] + (size_t)p->ntags[i] + 1) * sizeof **p->tags);
	memcpy(p->tags[g] + p->ntags[g], tags, (size_t)p->ntags[i] * sizeof *tags);
	p->ntags[g] += p->ntags[i];
	p->folds[g] = p->folds[i];
	free(tags);
}

/* Record i's logits added to its group's sum, sum + g * L, and counted. */
static void add_logits(const struct predictions *p, uint64_t i, float *sum, uint64_t *count)
{
	for (int k = 0; k < p->L; k++)
		sum[k] += p->logits[i * (size_t)p->L + k];
	(*count)++;
}

void predictions_merge_folds(struct predictions *p)
{
	struct labelmap *ids = labelmap_new(), *pieces = labelmap_new();
	size_t L = (size_t)p->L;
	float *sum = xcalloc(p->n * L, sizeof *sum);
	uint64_t *count = xcalloc(p->n, sizeof *count), *group_of_id = xmalloc(p->n * sizeof *group_of_id), ng = 0;
	for (uint64_t i = 0; i < p->n; i++) {
		uint64_t g = fold_group(p, i, ids, pieces, group_of_id, ng);
		if (g != ng && p->labels[i] >= 0 && p->labels[g] >= 0 && p->labels[i] != p->labels[g])
			die("id '%s': its pieces are labelled %d and %d (one record has one class)", p->ids[g], p->labels[g],
			    p->labels[i]);
		if (g != ng && p->labels[i] >= 0)   /* pieces without a label take the others' */
			p->labels[g] = p->labels[i];
		if (p->task == TASK_TOKCLS)
			join_tags(p, i, g, ng);
		else
			add_logits(p, i, sum + g * L, count + g);
		if (g == ng) {
			p->labels[ng] = p->labels[i];
			p->folds[ng] = p->folds[i];
			p->id_is_num[ng] = p->id_is_num[i];
			if (i != ng) {
				free(p->ids[ng]);
				p->ids[ng] = p->ids[i];
				p->ids[i] = NULL;
			}
			ng++;
		}
	}
	for (uint64_t g = 0; p->task != TASK_TOKCLS && g < ng; g++)
		for (size_t k = 0; k < L; k++)
			p->logits[g * L + k] = sum[g * L + k] / (float)count[g];
	for (uint64_t i = ng; i < p->n; i++)
		free(p->ids[i]);
	p->n = ng;
	free(sum);
	free(count);
	free(group_of_id);
	labelmap_free(ids);
	labelmap_free(pieces);
}

struct confusion *predictions_confusion(const struct predictions *p)
{
	struct confusion *c = confusion_new(p->L);
	for (uint64_t i = 0; i < p->n; i++)
		if (p->labels[i] >= 0)
			confusion_add(c, p->labels[i], predicted_class(p->logits + i * (size_t)p->L, p->L));
	return c;
}

/* The list record i predicts, and its length in *n: its words' tags
 * (tokcls), or the classes that pass the threshold (multi), filled into cls. */
static const int32_t *predicted_list(const struct predictions *p, uint64_t i, int32_t *cls, int *n)
{
	if (p->task == TASK_TOKCLS) {
		*n = p->ntags[i];
		return p->tags[i];
	}
	*n = 0;
	for (int k = 0; k < p->L; k++)
		if (class_predicted(p->logits[i * (size_t)p->L + k], p->threshold))
			cls[(*n)++] = k;
	return cls;
}

static void softmax(const float *x, float *out, int n)
{
	float max = x[predicted_class(x, n)];
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += out[i] = expf(x[i] - max);
	for (int i = 0; i < n; i++)
		out[i] = (float)(out[i] / sum);
}

/* Class k's name, or its number (written into num) when it has none. */
static const char *class_name(int k, char *const *names, int nnames, char num[static 12])
{
	if (k < nnames)
		return names[k];
	snprintf(num, 12, "%d", k);
	return num;
}

/* s inside a quoted CSV field: its quotes doubled. */
static void csv_chars(struct strbuf *b, const char *s)
{
	for (; *s; s++)
		*s == '"' ? sb_add(b, "\"\"", 2) : sb_addc(b, *s);
}

/* A CSV field of s, after a comma unless first: quoted when always is set or
 * s holds a comma, a quote, CR or LF, which would otherwise end the field. */
static void csv_field(struct strbuf *b, const char *s, int first, int always)
{
	int quote = always || s[strcspn(s, ",\"\r\n")];
	if (!first)
		sb_addc(b, ',');
	if (quote)
		sb_addc(b, '"');
	csv_chars(b, s);
	if (quote)
		sb_addc(b, '"');
}

/* The pred column of reg, multi and tokcls: the value, or the classes or
 * tags by name, separated by spaces, always quoted. */
static void csv_pred(struct strbuf *b, const struct predictions *p, uint64_t i, char *const *names, int nnames,
		     int32_t *cls)
{
	if (p->task == TASK_REG) {
		sb_addf(b, ",%.9g", p->logits[i]);
		return;
	}
	int n;
	char num[12];
	const int32_t *v = predicted_list(p, i, cls, &n);
	sb_add(b, ",\"", 2);
	for (int k = 0; k < n; k++) {
		if (k)
			sb_addc(b, ' ');
		csv_chars(b, class_name(v[k], names, nnames, num));
	}
	sb_addc(b, '"');
}

static void csv_header(struct strbuf *b, const struct predictions *p, char *const *names, int nnames)
{
	sb_addf(b, p->task == TASK_CLS ? "id,label,pred" : "id,pred");
	struct strbuf h = {0};
	char num[12];
	for (int k = 0; (p->task == TASK_CLS || p->task == TASK_MULTI) && k < p->L; k++) {
		h.n = 0;
		sb_addf(&h, "prob_%s", class_name(k, names, nnames, num));
		csv_field(b, h.s, 0, 0);
	}
	sb_free(&h);
	sb_addc(b, '\n');
}

static void write_csv(const struct predictions *p, struct afile *f, char *const *names, int nnames)
{
	struct strbuf b = {0};
	csv_header(&b, p, names, nnames);
	float *probs = xmalloc((size_t)p->L * sizeof *probs);
	int32_t *cls = xmalloc((size_t)p->L * sizeof *cls);
	char num[12];
	for (uint64_t i = 0; i < p->n; i++) {
		const float *lg = p->logits + i * (size_t)p->L;
		csv_field(&b, p->ids[i], 1, 1);
		if (p->task != TASK_CLS) {
			csv_pred(&b, p, i, names, nnames, cls);
			for (int k = 0; p->task == TASK_MULTI && k < p->L; k++)
				sb_addf(&b, ",%.6g", class_probability(lg[k]));
		} else {
			csv_field(&b, p->labels[i] < 0 ? "" : class_name(p->labels[i], names, nnames, num), 0, 0);
			csv_field(&b, class_name(predicted_class(lg, p->L), names, nnames, num), 0, 0);
			softmax(lg, probs, p->L);
			for (int k = 0; k < p->L; k++)
				sb_addf(&b, ",%.6g", probs[k]);
		}
		sb_addc(&b, '\n');
		if (b.n > 1 << 16) {
			afile_write(f, b.s, b.n);
			b.n = 0;
		}
	}
	afile_write(f, b.s, b.n);
	free(probs);
	free(cls);
	sb_free(&b);
}

static void pack_floats(msgpack_packer *pk, const char *key, const float *v, int n)
{
	mp_pack_str(pk, key);
	msgpack_pack_array(pk, (size_t)n);
	for (int k = 0; k < n; k++)
		msgpack_pack_float(pk, v[k]);
}

static void pack_id(msgpack_packer *pk, const struct predictions *p, uint64_t i)
{
	mp_pack_str(pk, "id");
	p->id_is_num[i] ? mp_pack_decimal(pk, p->ids[i]) : mp_pack_str(pk, p->ids[i]);
}

/* pred (and, with names for all, pred_names) of a list of classes. */
static void pack_classes(msgpack_packer *pk, const int32_t *v, int n, char *const *names, int nnames)
{
	mp_pack_str(pk, "pred");
	msgpack_pack_array(pk, (size_t)n);
	for (int k = 0; k < n; k++)
		msgpack_pack_int(pk, v[k]);
	if (!nnames)
		return;
	mp_pack_str(pk, "pred_names");
	msgpack_pack_array(pk, (size_t)n);
	for (int k = 0; k < n; k++)
		mp_pack_str(pk, v[k] < nnames ? names[v[k]] : "");
}

/* The records of reg, multi and tokcls. */
static void pack_other(msgpack_packer *pk, const struct predictions *p, uint64_t i, char *const *names, int nnames,
		       int32_t *cls, float *probs)
{
	const float *lg = p->logits + i * (size_t)p->L;
	if (p->task == TASK_REG) {
		msgpack_pack_map(pk, 2);
		pack_id(pk, p, i);
		mp_pack_str(pk, "pred");
		msgpack_pack_float(pk, lg[0]);
		return;
	}
	msgpack_pack_map(pk, (p->task == TASK_MULTI ? 4 : 2) + (nnames > 0));
	pack_id(pk, p, i);
	int n;
	const int32_t *v = predicted_list(p, i, cls, &n);
	pack_classes(pk, v, n, names, nnames);
	if (p->task == TASK_TOKCLS)
		return;
	for (int k = 0; k < p->L; k++)
		probs[k] = (float)class_probability(lg[k]);
	pack_floats(pk, "logits", lg, p->L);
	pack_floats(pk, "probs", probs, p->L);
}

static void write_records(const struct predictions *p, const char *path, char *const *names, int nnames)
{
	struct rec_writer *w = rec_create(path);
	msgpack_packer *pk = rec_packer(w);
	float *probs = xmalloc((size_t)p->L * sizeof *probs);
	int32_t *cls = xmalloc((size_t)p->L * sizeof *cls);
	for (uint64_t i = 0; i < p->n; i++) {
		if (p->task != TASK_CLS) {
			pack_other(pk, p, i, names, nnames, cls, probs);
			continue;
		}
		const float *lg = p->logits + i * (size_t)p->L;
		int pred = predicted_class(lg, p->L);
		softmax(lg, probs, p->L);
		msgpack_pack_map(pk, 4 + (p->labels[i] >= 0) + (pred < nnames));
		pack_id(pk, p, i);
		if (p->labels[i] >= 0) {
			mp_pack_str(pk, "label");
			msgpack_pack_int32(pk, p->labels[i]);
		}
		mp_pack_str(pk, "pred");
		msgpack_pack_int(pk, pred);
		if (pred < nnames) {
			mp_pack_str(pk, "pred_name");
			mp_pack_str(pk, names[pred]);
		}
		pack_floats(pk, "logits", lg, p->L);
		pack_floats(pk, "probs", probs, p->L);
	}
	free(probs);
	free(cls);
	rec_commit(w);
}

void predictions_write(const struct predictions *p, const char *path, int csv, char *const *names, int nnames)
{
	if (!csv) {
		write_records(p, path, names, nnames);
		return;
	}
	struct afile *f = afile_open(path);
	write_csv(p, f, names, nnames);
	afile_commit(f);
}

void predictions_free(struct predictions *p)
{
	for (uint64_t i = 0; i < p->n; i++) {
		free(p->ids[i]);
		if (p->tags)
			free(p->tags[i]);
	}
	free(p->tags);
	free(p->ntags);
	free(p->ids);
	free(p->folds);
	free(p->id_is_num);
	free(p->logits);
	free(p->labels);
	free(p);
}
