#include "model/batcher.h"
#include "data/vocab.h"
#include "util/err.h"
#include "util/rng.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GROUP_BATCHES = 64, IGNORE = -100 };

void mlm_config_init(struct mlm_config *c, const struct vocab *v, float prob, int whole_word, int max_ngram)
{
	int V = vocab_size(v);
	uint8_t *special = xcalloc((size_t)V, 1), *continues = xcalloc((size_t)V, 1);
	special[vocab_special(v, VOCAB_CLS)] = special[vocab_special(v, VOCAB_SEP)] = 1;
	special[vocab_special(v, VOCAB_PAD)] = 1;
	for (int32_t i = 0; i < V; i++)
		continues[i] = !vocab_starts_word(v, i);
	*c = (struct mlm_config){prob, whole_word, max_ngram, vocab_special(v, VOCAB_MASK), V, special, continues};
}

static void shuffle(uint64_t *v, uint64_t n, struct rng *r)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = rng_below(r, i), t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

static int by_length(const void *a, const void *b, void *s)
{
	uint32_t la = shard_ntokens(s, *(const uint64_t *)a), lb = shard_ntokens(s, *(const uint64_t *)b);
	if (la != lb)
		return la < lb ? -1 : 1;
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : *(const uint64_t *)a > *(const uint64_t *)b;
}

/* Sorts chunks of GROUP_BATCHES batches by length, then shuffles the full
 * batches; a short last batch stays last. */
static void length_grouped_order(const struct shard *s, uint64_t *order, uint64_t n, uint64_t B, struct rng *r)
{
	uint64_t chunk = B * GROUP_BATCHES;
	for (uint64_t at = 0; at < n; at += chunk)
		qsort_r(order + at, n - at < chunk ? n - at : chunk, sizeof *order, by_length, (void *)s);
	uint64_t full = n / B;
	uint64_t *perm = xmalloc(full * sizeof *perm), *copy = xmalloc(full * B * sizeof *copy);
	for (uint64_t i = 0; i < full; i++)
		perm[i] = i;
	shuffle(perm, full, r);
	for (uint64_t i = 0; i < full; i++)
		memcpy(copy + i * B, order + perm[i] * B, B * sizeof *copy);
	memcpy(order, copy, full * B * sizeof *copy);
	free(perm);
	free(copy);
}

void epoch_order(const struct shard *s, uint64_t seed, long epoch, int B, int group_lengths, uint64_t *order)
{
	uint64_t n = shard_count(s);
	struct rng r;
	rng_seed(&r, rng_derive(seed, (uint64_t)epoch));
	for (uint64_t i = 0; i < n; i++)
		order[i] = i;
	shuffle(order, n, &r);
	if (group_lengths && n > (uint64_t)B)
		length_grouped_order(s, order, n, (uint64_t)B, &r);
}

uint64_t token_group_end(const struct shard *s, const uint64_t *order, uint64_t n, uint64_t at, int64_t max_tokens)
{
	int64_t tokens = 0;
	uint64_t end = at;
	while (end < n && (end == at || tokens + shard_ntokens(s, order[end]) <= max_tokens))
		tokens += shard_ntokens(s, order[end++]);
	return end;
}

/* n-gram length k in [1, max] with probability proportional to 1/k. */
static int ngram_length(struct rng *r, int max)
{
	double total = 0, u;
	for (int k = 1; k <= max; k++)
		total += 1.0 / k;
	u = rng_uniform(r) * total;
	for (int k = 1; k < max; k++)
		if ((u -= 1.0 / k) < 0)
			return k;
	return max;
}

/* Picks word-aligned spans until the budget of predicted tokens is used, in
 * the manner of Hugging Face's whole-word collator; marks labels[i] = 1. */
static void pick_spans(const struct mlm_config *c, struct rng *r, const int32_t *ids, int32_t *pick, int n)
{
	int *start = xmalloc(((size_t)n + 1) * sizeof *start), nw = 0, maskable = 0;
	for (int i = 0; i < n; i++) {
		if (c->special[ids[i]])
			continue;
		maskable++;
		if (!(c->whole_word && c->continues[ids[i]] && nw && i > 0 && !c->special[ids[i - 1]]))
			start[nw++] = i;
	}
	start[nw] = n;
	int budget = (int)lround(maskable * c->prob), used = 0;
	if (budget < 1)
		budget = 1;
	uint64_t *order = xmalloc((size_t)nw * sizeof *order);
	for (int w = 0; w < nw; w++)
		order[w] = (uint64_t)w;
	shuffle(order, (uint64_t)nw, r);
	for (int k = 0; k < nw && used < budget; k++) {
		int w = (int)order[k], len = ngram_length(r, c->max_ngram), last = w + len < nw ? w + len : nw;
		int lo = start[w], hi = start[last], taken = 0, size = 0;
		for (int i = lo; i < hi; i++)
			if (!c->special[ids[i]])
				size++, taken |= pick[i];
		if (taken || used + size > budget)
			continue;
		for (int i = lo; i < hi; i++)
			if (!c->special[ids[i]])
				pick[i] = 1;
		used += size;
	}
	free(order);
	free(start);
}

int64_t mlm_mask(const struct mlm_config *c, uint64_t seed, int32_t *ids, int32_t *labels, int n)
{
	struct rng r;
	rng_seed(&r, seed);
	for (int i = 0; i < n; i++)
		labels[i] = 0;
	if (c->whole_word || c->max_ngram > 1)
		pick_spans(c, &r, ids, labels, n);
	else
		for (int i = 0; i < n; i++)
			labels[i] = !c->special[ids[i]] && rng_uniform(&r) < c->prob;
	int64_t count = 0;
	for (int i = 0; i < n; i++) {
		if (!labels[i]) {
			labels[i] = IGNORE;
			continue;
		}
		labels[i] = ids[i];
		count++;
		float u = rng_uniform(&r);
		if (u < 0.8f)
			ids[i] = c->mask_id;
		else if (u < 0.9f)
			ids[i] = (int32_t)rng_below(&r, (uint64_t)c->vocab);
	}
	return count;
}

static void fill_row(struct batch *b, int row, const struct tokrec *t, enum bert_task task)
{
	int32_t *ids = b->ids + (size_t)row * b->T, *types = b->types + (size_t)row * b->T;
	uint8_t *mask = b->mask + (size_t)row * b->T;
	for (size_t i = 0; i < t->n; i++) {
		ids[i] = t->ids[i];
		types[i] = t->types ? t->types[i] : 0;
		mask[i] = 1;
	}
	for (int i = (int)t->n; i < b->T; i++)
		ids[i] = types[i] = mask[i] = 0;
	if (!bert_task_pooled(task))
		for (int i = 0; i < b->T; i++)
			b->labels[(size_t)row * b->T + i] = IGNORE;
}

static const char *kind_name(enum label_kind k)
{
	return k == LABEL_INT ? "class" : k == LABEL_FLOAT ? "number" : k == LABEL_LIST ? "list" : "missing";
}

/* Dies unless record row has a label of kind want (or, where int_ok, a class). */
/* Dies with "NAME: record N: " and the message: the row's stream and its
 * place there when the shard was made from streams, else the shard's row. */
__attribute__((noreturn, format(printf, 3, 4))) static void die_at(const struct batch_source *src, uint64_t row,
								   const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	const struct row_origin *o = src->origin;
	if (o)
		die("%s: record %llu: %s", o->files[o->file[row]], (unsigned long long)o->rec[row], msg);
	die("%s: record %llu: %s", src->name, (unsigned long long)row + 1, msg);
}

static void need_label(const struct batch_source *src, uint64_t row, const struct tokrec *t, enum label_kind want,
		       int int_ok, const char *head)
{
	if (t->label_kind == want || (int_ok && t->label_kind == LABEL_INT))
		return;
	if (t->label_kind == LABEL_NONE)
		die_at(src, row, "no label (training and evaluation need labelled data)");
	die_at(src, row, "the %s head takes %s, not a %s label", head,
	    want == LABEL_INT ? "one class per record" : want == LABEL_FLOAT ? "a number per record"
	    : src->task == TASK_TOKCLS ? "a tag per token" : "a list of classes per record", kind_name(t->label_kind));
}

static void check_class(const struct batch_source *src, uint64_t row, int32_t y)
{
	if (y < 0 || y >= src->num_labels)
		die_at(src, row, "label %d is beyond the head's %d classes", y,
		    src->num_labels);
}

static int32_t class_label(const struct batch_source *src, uint64_t row, const struct tokrec *t)
{
	if (src->unlabelled)
		return 0;
	need_label(src, row, t, LABEL_INT, 0, "cls");
	check_class(src, row, t->label);
	return t->label;
}

static float reg_target(const struct batch_source *src, uint64_t row, const struct tokrec *t)
{
	if (src->unlabelled)
		return 0;
	need_label(src, row, t, LABEL_FLOAT, 1, "regression");
	double y = t->label_kind == LABEL_INT ? t->label : t->flabel;
	if (!isfinite(y))
		die_at(src, row, "label %g is not a finite number", y);
	if (fabs(y) > 1e30)
		die_at(src, row, "label %g is beyond 1e30 in size", y);
	return (float)y;
}

/* A 0 or 1 per class: whether the record's list (or its one class) has it. */
static void multi_targets(const struct batch_source *src, uint64_t row, const struct tokrec *t, float *y)
{
	memset(y, 0, sizeof *y * (size_t)src->num_labels);
	if (src->unlabelled)
		return;
	need_label(src, row, t, LABEL_LIST, 1, "multi-label");
	if (t->label_kind == LABEL_INT) {
		check_class(src, row, t->label);
		y[t->label] = 1;
		return;
	}
	for (size_t i = 0; i < t->nlabels; i++) {
		check_class(src, row, t->labels[i]);
		y[t->labels[i]] = 1;
	}
}

/* The tags of a record's tokens: -100 where no word starts, a class where
 * one does; returns how many are predicted. */
static int64_t token_tags(const struct batch_source *src, uint64_t row, const struct tokrec *t, int32_t *y)
{
	need_label(src, row, t, LABEL_LIST, 0, "token classification");
	if (t->nlabels != t->n)
		die_at(src, row, "%zu tags for %zu tokens", t->nlabels, t->n);
	int64_t count = 0;
	for (size_t i = 0; i < t->n; i++) {
		int32_t v = t->labels[i];
		if (v == TAG_NONE)
			continue;
		if (v == TAG_UNKNOWN && !src->unlabelled)
			die_at(src, row, "word at token %zu has no tag", i);
		if (v != TAG_UNKNOWN)
			check_class(src, row, v);
		y[i] = v < 0 ? 0 : v;
		count++;
	}
	return count;
}

/* The manifest may not tell the truth about the shard: an id beyond the
 * embeddings (or below them, in a damaged shard) would read outside them, as
 * would a token type beyond the model's. */
static void check_ids(const struct batch_source *src, uint64_t row, const struct tokrec *t)
{
	for (size_t i = 0; i < t->n; i++) {
		if (t->ids[i] < 0)
			die_at(src, row, "token id %d is negative", t->ids[i]);
		if (t->ids[i] >= src->vocab)
			die_at(src, row, "token id %d is beyond the vocab's %d tokens", t->ids[i], src->vocab);
		if (t->types && src->type_vocab > 0 && t->types[i] >= src->type_vocab)
			die_at(src, row, "token type %d is beyond %s %d token types", t->types[i],
			       src->type_owner ? src->type_owner : "the model's", src->type_vocab);
	}
}

void batch_check_tokens(const struct batch_source *src, int64_t max_tokens, const char *limit)
{
	uint64_t n = shard_count(src->shard), first = n;
	uint32_t longest = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t k = shard_ntokens(src->shard, i);
		if (k > max_tokens && first == n)
			first = i;
		longest = k > longest ? k : longest;
	}
	if (first == n)
		return;
	struct tokrec t = {0};
	shard_get(src->shard, first, &t);
	die_at(src, first, "'%s' has %u tokens, more than %s; the longest record has %u tokens", t.id,
	       shard_ntokens(src->shard, first), limit, longest);
}

void batch_check_records(const struct batch_source *src)
{
	if (src->task == TASK_MLM)
		return;
	struct batch b = {0};
	for (uint64_t row = 0; row < shard_count(src->shard); row++)
		batch_fill(&b, src, &row, 1, 0);
	batch_free(&b);
}

void batch_fill(struct batch *b, const struct batch_source *src, const uint64_t *rows, int n, long epoch)
{
	int T = 1;
	for (int i = 0; i < n; i++)
		if ((int)shard_ntokens(src->shard, rows[i]) > T)
			T = (int)shard_ntokens(src->shard, rows[i]);
	b->B = n;
	b->T = T;
	size_t cells = (size_t)n * T;
	grow(&b->ids, &b->cap_ids, cells, sizeof *b->ids);
	grow(&b->types, &b->cap_types, cells, sizeof *b->types);
	grow(&b->labels, &b->cap_labels, cells, sizeof *b->labels);
	grow(&b->mask, &b->cap_mask, cells, sizeof *b->mask);
	grow(&b->rows, &b->cap_rows, (size_t)n, sizeof *b->rows);
	grow(&b->targets, &b->cap_targets, (size_t)n * (src->num_labels > 0 ? src->num_labels : 1), sizeof *b->targets);
	b->count = b->tokens = 0;
	uint64_t epoch_seed = rng_derive(src->seed, (uint64_t)epoch);
	for (int i = 0; i < n; i++) {
		shard_get(src->shard, rows[i], &b->rec);
		check_ids(src, rows[i], &b->rec);
		b->rows[i] = rows[i];
		fill_row(b, i, &b->rec, src->task);
		b->tokens += (int64_t)b->rec.n;
		switch (src->task) {
		case TASK_CLS:
			b->labels[i] = class_label(src, rows[i], &b->rec);
			b->count++;
			break;
		case TASK_REG:
			b->labels[i] = 0;
			b->targets[i] = reg_target(src, rows[i], &b->rec);
			b->count++;
			break;
		case TASK_MULTI:
			b->labels[i] = 0;
			multi_targets(src, rows[i], &b->rec, b->targets + (size_t)i * src->num_labels);
			b->count += src->num_labels;
			break;
		case TASK_TOKCLS:
			b->count += token_tags(src, rows[i], &b->rec, b->labels + (size_t)i * T);
			break;
		case TASK_MLM:
			b->count += mlm_mask(src->mlm, rng_derive(epoch_seed, rows[i]), b->ids + (size_t)i * T,
					     b->labels + (size_t)i * T, (int)b->rec.n);
			break;
		}
	}
}

struct bert_batch batch_view(const struct batch *b)
{
	return (struct bert_batch){b->B, b->T, b->ids, b->types, b->mask, b->labels, b->targets};
}

void batch_free(struct batch *b)
{
	free(b->ids);
	free(b->types);
	free(b->labels);
	free(b->mask);
	free(b->rows);
	free(b->targets);
	tokrec_free(&b->rec);
	memset(b, 0, sizeof *b);
}
