/* Per-record predictions of a classifier or regression model: logits kept
 * by record (tokcls: the predicted tag of each word), folded pieces merged
 * back per id, and written as records or CSV. */
#ifndef TS_PREDICTIONS_H
#define TS_PREDICTIONS_H
#include "eval/metrics.h"
#include "model/batcher.h"

struct predictions {
	enum bert_task task;
	int L;                 /* logits a record (tokcls: a word) */
	double threshold;      /* multi */
	uint64_t n;            /* records (or merged groups) */
	float *logits;         /* n*L; not tokcls */
	int32_t *labels;       /* n; cls: the class, -1 when unknown */
	int32_t **tags;        /* tokcls: n lists of the words' predicted tags */
	int *ntags;
	char **ids;            /* n */
	int *folds;            /* n: the piece index of a folded record, -1 when not folded */
	char *id_is_num;       /* n: the id was a number (7, not "7") */
};

/* labelled: the records' class labels are the model's (each record keeps its
 * own; one without a label gets -1). */
struct predictions *predictions_new(const struct shard *s, enum bert_task task, int L, double threshold,
				    int labelled);
/* An eval_hook: keeps the logits of each row of the batch. */
void predictions_hook(const struct batch *b, const float *logits, void *ctx);
/* Replaces the folded pieces of each id by one record with the mean of
 * their logits (tokcls: their words' tags joined in fold order), in order of
 * first appearance; a record that was not folded stays as it is, even where
 * another shares its id (the number 7 and the string "7" are two ids). A
 * group is labelled when any piece is. Dies when the same piece of an id
 * appears twice, or two pieces have other labels, or (tokcls) a text's
 * pieces are not records in a row, fold 0, 1, 2, .... */
void predictions_merge_folds(struct predictions *p);
struct confusion *predictions_confusion(const struct predictions *p);
/* Writes msgpack records, or CSV: cls {id, label, pred, pred_name, logits,
 * probs}; reg {id, pred}; multi {id, pred (the classes at the threshold),
 * pred_names, logits, probs}; tokcls {id, pred (a tag per word), pred_names}. */
void predictions_write(const struct predictions *p, const char *path, int csv, char *const *names, int nnames);
void predictions_free(struct predictions *p);
#endif
