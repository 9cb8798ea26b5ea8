#include "eval/evaluate.h"
#include "eval/corr.h"
#include "eval/metricnames.h"
#include "format/mpjson.h"
#include "util/err.h"
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

static void prepare(struct eval_result *r, const struct batch_source *src, const struct eval_opts *o, uint64_t n)
{
	memset(r, 0, sizeof *r);
	r->task = src->task;
	int L = src->num_labels;
	if (src->task == TASK_CLS || src->task == TASK_TOKCLS)
		r->conf = confusion_new(L);
	if (src->task == TASK_TOKCLS && o->names)   /* numbered tags name no entity */
		r->ent = entities_new(o->names, L);
	if (src->task == TASK_REG) {
		r->pred = xcalloc(n ? n : 1, sizeof *r->pred);
		r->truth = xcalloc(n ? n : 1, sizeof *r->truth);
	}
	if (src->task == TASK_MULTI) {
		r->L = L;
		r->threshold = o->threshold;
		r->tp = xcalloc((size_t)L, sizeof *r->tp);
		r->fp = xcalloc((size_t)L, sizeof *r->fp);
		r->fn = xcalloc((size_t)L, sizeof *r->fn);
	}
}

/* A multi-label record: which classes pass the threshold, against the truth. */
static void count_multi(struct eval_result *r, const float *logits, const float *truth)
{
	int all_right = 1;
	for (int c = 0; c < r->L; c++) {
		int p = class_predicted(logits[c], r->threshold), y = truth[c] > 0.5f;
		r->tp[c] += p && y, r->fp[c] += p && !y, r->fn[c] += !p && y;
		all_right &= p == y;
	}
	r->exact += all_right;
}

/* tokcls: the pieces of a folded text are one sequence of words for the
 * entities, as an entity may run across a cut (where pieces overlap, a tag is
 * in one piece only). The words of folded records wait here, in a row at
 * their text's place, until every piece is scored; a text's pieces are
 * records in a row, as ts-tokenize and ts-shard keep them. */
struct folded {
	uint64_t *at;              /* per record: its first word's place, or NOT_HELD (not folded) */
	uint64_t *first, *len;     /* per folded text: its words' place and count */
	uint64_t ntexts, words;
	double *tags;              /* per word: truth * (k + 1) + pred + 1; 0 where not scored here */
};
static const uint64_t NOT_HELD = UINT64_MAX;

/* Whether record t goes on the text of the record before it, prev. */
static int continues(const struct tokrec *t, const struct tokrec *prev)
{
	return t->fold > 0 && prev->fold == t->fold - 1 && t->id_is_num == prev->id_is_num && !strcmp(t->id, prev->id);
}

static uint64_t words_of(const struct tokrec *t)
{
	uint64_t n = 0;
	for (size_t i = 0; t->label_kind == LABEL_LIST && i < t->nlabels; i++)
		n += t->labels[i] != TAG_NONE;
	return n;
}

/* The places of the words of s's folded texts. */
static void folded_init(struct folded *f, const struct shard *s)
{
	uint64_t n = shard_count(s), m = n ? n : 1;
	memset(f, 0, sizeof *f);
	f->at = xmalloc(m * sizeof *f->at);
	f->first = xmalloc(m * sizeof *f->first);
	f->len = xcalloc(m, sizeof *f->len);
	struct tokrec rec[2] = {{0}};
	for (uint64_t i = 0; i < n; i++) {
		struct tokrec *t = &rec[i % 2], *prev = &rec[(i + 1) % 2];   /* prev: record i - 1 */
		shard_get(s, i, t);
		f->at[i] = t->fold < 0 ? NOT_HELD : f->words;
		if (t->fold < 0)
			continue;
		if (!i || !continues(t, prev))
			f->first[f->ntexts++] = f->words;
		uint64_t w = words_of(t);
		f->words += w;
		f->len[f->ntexts - 1] += w;
	}
	tokrec_free(&rec[0]);
	tokrec_free(&rec[1]);
	f->tags = xcalloc(f->words ? f->words : 1, sizeof *f->tags);
}

/* The entities of the folded texts, once every piece is scored. */
static void folded_add(struct folded *f, struct entities *e)
{
	for (uint64_t x = 0; x < f->ntexts; x++) {
		int n = (int)f->len[x];
		int32_t *truth = xmalloc(((size_t)n + 1) * sizeof *truth), *pred = xmalloc(((size_t)n + 1) * sizeof *pred);
		for (int w = 0; w < n; w++) {
			int64_t v = (int64_t)f->tags[f->first[x] + (uint64_t)w] - 1;
			truth[w] = (int32_t)(v / (e->k + 1)), pred[w] = (int32_t)(v % (e->k + 1));
		}
		entities_add(e, truth, pred, n);
		free(truth);
		free(pred);
	}
}

static void folded_free(struct folded *f)
{
	free(f->at), free(f->first), free(f->len), free(f->tags);
}

/* A tokcls record, row of the shard: the words' tags (one logit row each, in
 * order); its entities now, or with its text's (f). */
static void count_words(struct eval_result *r, struct folded *f, uint64_t row, const int32_t *labels, int T,
			const float *logits, int L)
{
	int32_t *truth = xmalloc(((size_t)T + 1) * sizeof *truth), *pred = xmalloc(((size_t)T + 1) * sizeof *pred);
	int n = 0;
	for (int t = 0; t < T; t++)
		if (labels[t] != TAG_NONE) {
			truth[n] = labels[t];
			pred[n] = predicted_class(logits + (size_t)n * L, L);
			confusion_add(r->conf, truth[n], pred[n]);
			n++;
		}
	if (r->ent && f->at[row] != NOT_HELD)
		for (int w = 0; w < n; w++)
			f->tags[f->at[row] + (uint64_t)w] = (double)truth[w] * (L + 1) + pred[w] + 1;
	else if (r->ent)
		entities_add(r->ent, truth, pred, n);
	free(truth);
	free(pred);
}

/* Scores a batch whose records sit at positions at.. of the split's order. */
static void score(struct eval_result *r, struct folded *f, const struct batch *b, const float *logits, uint64_t at,
		  int L)
{
	size_t row = 0;
	for (int i = 0; i < b->B; i++) {
		switch (r->task) {
		case TASK_CLS:
			confusion_add(r->conf, b->labels[i], predicted_class(logits + (size_t)i * L, L));
			break;
		case TASK_REG:
			r->pred[at + i] = logits[i];
			r->truth[at + i] = b->targets[i];
			break;
		case TASK_MULTI:
			count_multi(r, logits + (size_t)i * L, b->targets + (size_t)i * L);
			break;
		case TASK_TOKCLS: {
			const int32_t *labels = b->labels + (size_t)i * b->T;
			count_words(r, f, b->rows[i], labels, b->T, logits + row * L, L);
			for (int t = 0; t < b->T; t++)
				row += labels[t] != TAG_NONE;
			break;
		}
		case TASK_MLM:
			break;
		}
	}
}

/* What every process counted, summed: the regression predictions sit at
 * their own positions, zero elsewhere, so the sum gathers them. */
static void sum_over(const struct eval_share *share, double *loss, struct eval_result *r, uint64_t n)
{
	int k = r->conf ? r->conf->k : 0, ne = r->ent ? 3 * r->ent->ntypes : 0;
	size_t nreg = r->pred ? 2 * n : 0, nmulti = r->tp ? 3 * (size_t)r->L + 1 : 0;
	size_t total = 3 + (size_t)k * k + (size_t)ne + nreg + nmulti;
	double *v = xcalloc(total, sizeof *v), *p = v + 3;
	v[0] = *loss, v[1] = (double)r->count, v[2] = (double)r->records;
	for (int i = 0; i < k * k; i++)
		*p++ = (double)r->conf->m[i];
	if (ne)
		entities_to_doubles(r->ent, p), p += ne;
	for (size_t i = 0; nreg && i < n; i++)
		p[i] = r->pred[i], p[n + i] = r->truth[i];
	p += nreg;
	for (int c = 0; nmulti && c < r->L; c++)
		p[3 * c] = (double)r->tp[c], p[3 * c + 1] = (double)r->fp[c], p[3 * c + 2] = (double)r->fn[c];
	if (nmulti)
		p[3 * r->L] = (double)r->exact;
	share->sum(share->ctx, v, (int)total);
	p = v + 3;
	*loss = v[0], r->count = (int64_t)v[1], r->records = (int64_t)v[2];
	for (int i = 0; i < k * k; i++)
		r->conf->m[i] = (int64_t)*p++;
	if (ne)
		entities_from_doubles(r->ent, p), p += ne;
	for (size_t i = 0; nreg && i < n; i++)
		r->pred[i] = p[i], r->truth[i] = p[n + i];
	p += nreg;
	for (int c = 0; nmulti && c < r->L; c++)
		r->tp[c] = (int64_t)p[3 * c], r->fp[c] = (int64_t)p[3 * c + 1], r->fn[c] = (int64_t)p[3 * c + 2];
	if (nmulti)
		r->exact = (int64_t)p[3 * r->L];
	free(v);
}

void evaluate(struct bert *m, const struct batch_source *src, const struct eval_opts *o, eval_hook hook, void *ctx,
	      struct eval_result *out)
{
	int part = o->share ? o->share->part : 0, parts = o->share ? o->share->parts : 1;
	uint64_t n = shard_count(src->shard), bs = (uint64_t)o->batch;
	uint64_t *order = xmalloc((n ? n : 1) * sizeof *order);
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	sort_shard = src->shard;
	qsort(order, n, sizeof *order, by_length);
	prepare(out, src, o, n);
	struct folded f = {0};
	if (out->ent)
		folded_init(&f, src->shard);
	int W = bert_logit_width(bert_config_of(m));
	struct batch b = {0};
	double loss = 0;
	int64_t slice = bert_backend(m)->eval_tokens;
	for (uint64_t at = (uint64_t)part * bs; at < n; at += bs * (uint64_t)parts) {
		uint64_t end = n - at < bs ? n : at + bs;
		for (uint64_t s = at, e; s < end; s = e) {   /* the batch in the backend's slices */
			e = slice ? token_group_end(src->shard, order, end, s, slice) : end;
			batch_fill(&b, src, order + s, (int)(e - s), EVAL_EPOCH);
			struct bert_batch v = batch_view(&b);
			int64_t count;
			loss += bert_forward(m, &v, 0, 0, &count);
			out->count += count;
			out->records += (int64_t)(e - s);
			const float *logits = bert_logits(m);
			score(out, &f, &b, logits, s, W);
			if (hook)
				hook(&b, logits, ctx);
		}
	}
	if (parts > 1)
		sum_over(o->share, &loss, out, n);
	if (parts > 1 && f.words)   /* each word was scored by one process, 0 elsewhere */
		o->share->sum(o->share->ctx, f.tags, (int)f.words);
	if (out->ent)
		folded_add(&f, out->ent);
	folded_free(&f);
	out->loss = out->count ? loss / (double)out->count : 0;
	batch_free(&b);
	free(order);
}

int eval_scores_any(const struct batch_source *src)
{
	struct batch b = {0};
	int any = 0;
	for (uint64_t row = 0; row < shard_count(src->shard) && !any; row++) {
		batch_fill(&b, src, &row, 1, EVAL_EPOCH);
		any = b.count > 0;
	}
	batch_free(&b);
	return any;
}

void eval_result_free(struct eval_result *r)
{
	confusion_free(r->conf);
	entities_free(r->ent);
	free(r->pred), free(r->truth), free(r->tp), free(r->fp), free(r->fn);
	memset(r, 0, sizeof *r);
}

static struct prf_table *multi_table(const struct eval_result *r)
{
	int64_t *pred = xmalloc((size_t)r->L * sizeof *pred), *truth = xmalloc((size_t)r->L * sizeof *truth);
	for (int c = 0; c < r->L; c++)
		pred[c] = r->tp[c] + r->fp[c], truth[c] = r->tp[c] + r->fn[c];
	struct prf_table *t = prf_table_compute(r->tp, pred, truth, r->L);
	free(pred);
	free(truth);
	return t;
}

static double ratio(double a, double b)
{
	return b ? a / b : 0;
}

static double word_accuracy(const struct eval_result *r)
{
	int64_t right = 0, all = 0;
	for (int i = 0; i < r->conf->k; i++)
		for (int j = 0; j < r->conf->k; j++) {
			all += r->conf->m[(size_t)i * r->conf->k + j];
			right += i == j ? r->conf->m[(size_t)i * r->conf->k + j] : 0;
		}
	return ratio((double)right, (double)all);
}

double metric_value(const struct eval_result *r, const char *name)
{
	if (!strcmp(name, "loss"))
		return r->loss;
	if (!strcmp(name, "ppl"))
		return exp(r->loss);
	if (r->task == TASK_REG)
		return !strcmp(name, "pearson") ? pearson(r->pred, r->truth, (size_t)r->records)
						: spearman(r->pred, r->truth, (size_t)r->records);
	if (r->task == TASK_MULTI) {
		if (!strcmp(name, "exact-match"))
			return ratio((double)r->exact, (double)r->records);
		struct prf_table *t = multi_table(r);
		double v = !strcmp(name, "micro-f1") ? t->micro.f1 : t->macro.f1;
		prf_table_free(t);
		return v;
	}
	if (r->task == TASK_TOKCLS) {
		if (!strcmp(name, "accuracy"))
			return word_accuracy(r);
		if (!r->ent)
			return NAN;
		char **types;
		struct prf_table *t = entities_table(r->ent, &types);
		double v = t->micro.f1;
		prf_table_free(t);
		free(types);
		return v;
	}
	struct cls_metrics *cm = metrics_compute(r->conf);
	double v = !strcmp(name, "accuracy") ? cm->accuracy : cm->macro.f1;
	metrics_free(cm);
	return v;
}

static void set(json_t *j, const char *key, json_t *v)
{
	if (!v || json_object_set_new(j, key, v))
		die("evaluation: cannot build the json of %s", key);
}

json_t *eval_json(const struct eval_result *r, char *const *names)
{
	json_t *j;
	if (r->task == TASK_CLS) {
		struct cls_metrics *cm = metrics_compute(r->conf);
		j = metrics_json(cm, r->conf, names);
		metrics_free(cm);
	} else if (r->task == TASK_MULTI) {
		struct prf_table *t = multi_table(r);
		j = prf_table_json(t, names);
		prf_table_free(t);
		set(j, "exact_match", json_number(metric_value(r, "exact-match")));
		set(j, "threshold", json_number(r->threshold));
	} else if (r->task == TASK_TOKCLS) {
		j = json_object();
		if (r->ent) {
			char **types;
			struct prf_table *t = entities_table(r->ent, &types);
			set(j, "entities", prf_table_json(t, types));
			prf_table_free(t);
			free(types);
		}
		set(j, "accuracy", json_number(word_accuracy(r)));
	} else {
		j = json_object();
	}
	if (r->task == TASK_REG) {
		set(j, "mse", json_number(r->loss));
		set(j, "rmse", json_number(sqrt(r->loss)));
		set(j, "pearson", json_number(metric_value(r, "pearson")));
		set(j, "spearman", json_number(metric_value(r, "spearman")));
	}
	set(j, "loss", json_number(r->loss));
	if (metric_known("ppl", r->task))
		set(j, "ppl", json_number(exp(r->loss)));
	set(j, "records", json_integer(r->records));
	set(j, "predicted", json_integer(r->count));
	return j;
}

void eval_report(FILE *f, const struct eval_result *r, char *const *names)
{
	switch (r->task) {
	case TASK_CLS: {
		struct cls_metrics *cm = metrics_compute(r->conf);
		metrics_report(f, cm, r->conf, names);
		metrics_free(cm);
		break;
	}
	case TASK_MULTI: {
		struct prf_table *t = multi_table(r);
		prf_table_report(f, t, names);
		fprintf(f, "\nexact match %.4f of %lld records at threshold %g\n", metric_value(r, "exact-match"),
			(long long)r->records, r->threshold);
		prf_table_free(t);
		break;
	}
	case TASK_TOKCLS: {
		if (r->ent) {
			char **types;
			struct prf_table *t = entities_table(r->ent, &types);
			fprintf(f, "entities\n");
			prf_table_report(f, t, types);
			prf_table_free(t);
			free(types);
			fprintf(f, "\n");
		}
		struct cls_metrics *cm = metrics_compute(r->conf);
		fprintf(f, "tags of words\n");
		metrics_report(f, cm, r->conf, names);
		metrics_free(cm);
		break;
	}
	case TASK_REG:
		fprintf(f, "records %lld\nmse %.6g\nrmse %.6g\npearson %.4f\nspearman %.4f\n", (long long)r->records,
			r->loss, sqrt(r->loss), metric_value(r, "pearson"), metric_value(r, "spearman"));
		break;
	case TASK_MLM:
		fprintf(f, "records %lld, predicted tokens %lld, loss %.4f, perplexity %.2f\n", (long long)r->records,
			(long long)r->count, r->loss, exp(r->loss));
		break;
	}
}
