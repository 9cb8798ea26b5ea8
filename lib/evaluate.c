#include "evaluate.h"
#include "err.h"
#include "mpjson.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EVAL_EPOCH = -1 };

static const struct shard *sort_shard;

static int by_length(const void *a, const void *b)
{
	uint32_t la = shard_ntokens(sort_shard, *(const uint64_t *)a);
	uint32_t lb = shard_ntokens(sort_shard, *(const uint64_t *)b);
	if (la != lb)
		return la < lb ? -1 : 1;
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : 1;
}

/* The loss (summed), counts and confusion matrix of all processes. */
static void sum_over(const struct eval_share *share, double *loss, struct eval_result *r)
{
	int k = r->conf ? r->conf->k : 0, n = 3 + k * k;
	double *v = xmalloc(sizeof *v * (size_t)n);
	v[0] = *loss, v[1] = (double)r->count, v[2] = (double)r->records;
	for (int i = 0; i < k * k; i++)
		v[3 + i] = (double)r->conf->m[i];
	share->sum(share->ctx, v, n);
	*loss = v[0], r->count = (int64_t)v[1], r->records = (int64_t)v[2];
	for (int i = 0; i < k * k; i++)
		r->conf->m[i] = (int64_t)v[3 + i];
	free(v);
}

void evaluate(struct bert *m, const struct batch_source *src, int batch_size, const struct eval_share *share,
	      eval_hook hook, void *ctx, struct eval_result *out)
{
	int part = share ? share->part : 0, parts = share ? share->parts : 1;
	uint64_t n = shard_count(src->shard);
	uint64_t *order = xmalloc((n ? n : 1) * sizeof *order);
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	sort_shard = src->shard;
	qsort(order, n, sizeof *order, by_length);
	memset(out, 0, sizeof *out);
	int L = src->num_labels;
	if (src->task == TASK_CLS)
		out->conf = confusion_new(L);
	struct batch b = {0};
	double loss = 0;
	for (uint64_t at = (uint64_t)part * (uint64_t)batch_size; at < n;
	     at += (uint64_t)batch_size * (uint64_t)parts) {
		int nb = (int)(n - at < (uint64_t)batch_size ? n - at : (uint64_t)batch_size);
		batch_fill(&b, src, order + at, nb, EVAL_EPOCH);
		struct bert_batch v = batch_view(&b);
		int64_t count;
		loss += bert_forward(m, &v, 0, 0, &count);
		out->count += count;
		out->records += nb;
		const float *logits = bert_logits(m);
		if (src->task == TASK_CLS)
			for (int i = 0; i < nb; i++)
				confusion_add(out->conf, b.labels[i], predicted_class(logits + (size_t)i * L, L));
		if (hook)
			hook(&b, logits, ctx);
	}
	if (parts > 1)
		sum_over(share, &loss, out);
	out->loss = out->count ? loss / (double)out->count : 0;
	batch_free(&b);
	free(order);
}

void eval_result_free(struct eval_result *r)
{
	if (r->conf)
		confusion_free(r->conf);
	r->conf = NULL;
}

int metric_known(const char *name, enum bert_task task)
{
	if (!strcmp(name, "loss") || !strcmp(name, "ppl"))
		return 1;
	return task == TASK_CLS && (!strcmp(name, "accuracy") || !strcmp(name, "macro-f1"));
}

int metric_higher_is_better(const char *name)
{
	return !strcmp(name, "accuracy") || !strcmp(name, "macro-f1");
}

double metric_value(const struct eval_result *r, const char *name)
{
	if (!strcmp(name, "loss"))
		return r->loss;
	if (!strcmp(name, "ppl"))
		return exp(r->loss);
	struct cls_metrics *cm = metrics_compute(r->conf);
	double v = !strcmp(name, "accuracy") ? cm->accuracy : cm->macro.f1;
	metrics_free(cm);
	return v;
}

json_t *eval_json(const struct eval_result *r, enum bert_task task, char *const *labels)
{
	json_t *j;
	if (task == TASK_CLS) {
		struct cls_metrics *cm = metrics_compute(r->conf);
		j = metrics_json(cm, r->conf, labels);
		metrics_free(cm);
	} else {
		j = json_object();
	}
	json_object_set_new(j, "loss", json_number(r->loss));
	json_object_set_new(j, "ppl", json_number(exp(r->loss)));
	json_object_set_new(j, "records", json_integer(r->records));
	json_object_set_new(j, "predicted", json_integer(r->count));
	return j;
}
