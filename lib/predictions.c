#include "predictions.h"
#include "afile.h"
#include "err.h"
#include "labelmap.h"
#include "rec.h"
#include "strbuf.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct predictions *predictions_new(const struct shard *s, int L, int labelled)
{
	struct predictions *p = xcalloc(1, sizeof *p);
	p->L = L;
	p->n = shard_count(s);
	p->logits = xcalloc(p->n * (size_t)L, sizeof *p->logits);
	p->labels = xmalloc(p->n * sizeof *p->labels);
	p->ids = xcalloc(p->n, sizeof *p->ids);
	struct tokrec t = {0};
	p->id_is_num = 1;
	for (uint64_t i = 0; i < p->n; i++) {
		shard_get(s, i, &t);
		p->ids[i] = xstrdup(t.id);
		p->id_is_num &= t.id_is_num;
		p->labels[i] = labelled && t.label_kind == LABEL_INT ? t.label : -1;
	}
	tokrec_free(&t);
	return p;
}

void predictions_hook(const struct batch *b, const float *logits, void *ctx)
{
	struct predictions *p = ctx;
	for (int i = 0; i < b->B; i++)
		memcpy(p->logits + b->rows[i] * (size_t)p->L, logits + (size_t)i * p->L, (size_t)p->L * sizeof *logits);
}

void predictions_merge_folds(struct predictions *p)
{
	struct labelmap *groups = labelmap_new();
	size_t L = (size_t)p->L;
	float *sum = xcalloc(p->n * L, sizeof *sum);
	uint64_t *pieces = xcalloc(p->n, sizeof *pieces), ng = 0;
	for (uint64_t i = 0; i < p->n; i++) {
		uint64_t g = (uint64_t)labelmap_id(groups, p->ids[i], strlen(p->ids[i]), "", 0);
		if (g == ng) {
			p->labels[ng] = p->labels[i];
			if (i != ng) {
				free(p->ids[ng]);
				p->ids[ng] = p->ids[i];
				p->ids[i] = NULL;
			}
			ng++;
		}
		for (size_t k = 0; k < L; k++)
			sum[g * L + k] += p->logits[i * L + k];
		pieces[g]++;
	}
	for (uint64_t g = 0; g < ng; g++)
		for (size_t k = 0; k < L; k++)
			p->logits[g * L + k] = sum[g * L + k] / (float)pieces[g];
	for (uint64_t i = ng; i < p->n; i++)
		free(p->ids[i]);
	p->n = ng;
	free(sum);
	free(pieces);
	labelmap_free(groups);
}

struct confusion *predictions_confusion(const struct predictions *p)
{
	struct confusion *c = confusion_new(p->L);
	for (uint64_t i = 0; i < p->n; i++)
		if (p->labels[i] >= 0)
			confusion_add(c, p->labels[i], predicted_class(p->logits + i * (size_t)p->L, p->L));
	return c;
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

static void write_csv(const struct predictions *p, struct afile *f, char *const *names, int nnames)
{
	struct strbuf b = {0};
	sb_addf(&b, "id,label,pred");
	for (int k = 0; k < p->L; k++)
		k < nnames ? sb_addf(&b, ",prob_%s", names[k]) : sb_addf(&b, ",prob_%d", k);
	sb_addc(&b, '\n');
	float *probs = xmalloc((size_t)p->L * sizeof *probs);
	for (uint64_t i = 0; i < p->n; i++) {
		const float *lg = p->logits + i * (size_t)p->L;
		softmax(lg, probs, p->L);
		int pred = predicted_class(lg, p->L);
		sb_addc(&b, '"');
		for (const char *c = p->ids[i]; *c; c++)
			*c == '"' ? sb_add(&b, "\"\"", 2) : sb_addc(&b, *c);
		sb_addc(&b, '"');
		if (p->labels[i] < 0)
			sb_addc(&b, ',');
		else
			p->labels[i] < nnames ? sb_addf(&b, ",%s", names[p->labels[i]]) : sb_addf(&b, ",%d", p->labels[i]);
		pred < nnames ? sb_addf(&b, ",%s", names[pred]) : sb_addf(&b, ",%d", pred);
		for (int k = 0; k < p->L; k++)
			sb_addf(&b, ",%.6g", probs[k]);
		sb_addc(&b, '\n');
		if (b.n > 1 << 16) {
			afile_write(f, b.s, b.n);
			b.n = 0;
		}
	}
	afile_write(f, b.s, b.n);
	free(probs);
	sb_free(&b);
}

static void pack_floats(msgpack_packer *pk, const char *key, const float *v, int n)
{
	mp_pack_str(pk, key);
	msgpack_pack_array(pk, (size_t)n);
	for (int k = 0; k < n; k++)
		msgpack_pack_float(pk, v[k]);
}

static void write_records(const struct predictions *p, const char *path, char *const *names, int nnames)
{
	struct rec_writer *w = rec_create(path);
	msgpack_packer *pk = rec_packer(w);
	float *probs = xmalloc((size_t)p->L * sizeof *probs);
	for (uint64_t i = 0; i < p->n; i++) {
		const float *lg = p->logits + i * (size_t)p->L;
		int pred = predicted_class(lg, p->L);
		softmax(lg, probs, p->L);
		msgpack_pack_map(pk, 4 + (p->labels[i] >= 0) + (pred < nnames));
		mp_pack_str(pk, "id");
		p->id_is_num ? msgpack_pack_int64(pk, strtoll(p->ids[i], NULL, 10)) : mp_pack_str(pk, p->ids[i]);
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
	for (uint64_t i = 0; i < p->n; i++)
		free(p->ids[i]);
	free(p->ids);
	free(p->logits);
	free(p->labels);
	free(p);
}
