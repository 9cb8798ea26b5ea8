/* Per-record predictions of a cls model: logits kept by record, folded
 * pieces merged back per id, and written as records or CSV. */
#ifndef TS_PREDICTIONS_H
#define TS_PREDICTIONS_H
#include "batcher.h"
#include "metrics.h"

struct predictions {
	int L;                 /* classes */
	uint64_t n;            /* records (or merged groups) */
	float *logits;         /* n*L */
	int32_t *labels;       /* n; -1 when unknown */
	char **ids;            /* n */
	int id_is_num;
};

struct predictions *predictions_new(const struct shard *s, int L, int labelled);
/* An eval_hook: keeps the logits of each row of the batch. */
void predictions_hook(const struct batch *b, const float *logits, void *ctx);
/* Replaces records that share an id (folded pieces) by one with the mean of
 * their logits, in order of first appearance. */
void predictions_merge_folds(struct predictions *p);
struct confusion *predictions_confusion(const struct predictions *p);
/* Writes msgpack records {id, label, pred, logits, probs}, or CSV. */
void predictions_write(const struct predictions *p, const char *path, int csv, char *const *names, int nnames);
void predictions_free(struct predictions *p);
#endif
