/* Training batches from a shard: the epoch's order (a seeded shuffle,
 * optionally length-grouped: --bucket), padding to the longest record of a batch, and
 * for MLM dynamic masking drawn anew for every epoch. Everything is a function
 * of (seed, epoch, position), so a resumed run sees the same batches. */
#ifndef TS_BATCHER_H
#define TS_BATCHER_H
#include "data/shard.h"
#include "data/streamshard.h"
#include "model/bert.h"
#include <stdint.h>

struct mlm_config {
	float prob;               /* share of tokens to predict (0.15) */
	int whole_word;           /* mask all pieces of a word together */
	int max_ngram;            /* mask spans of up to this many words (1: single words) */
	int32_t mask_id, vocab;   /* [MASK] and the vocab size for random replacements */
	const uint8_t *special;   /* per id: never masked ([CLS], [SEP], [PAD]) */
	const uint8_t *continues; /* per id: a "##" piece that continues a word */
};

struct vocab;
/* Masking for a vocab: [CLS], [SEP] and [PAD] are never masked, and "##"
 * pieces continue words. The tables it allocates live as long as the process. */
void mlm_config_init(struct mlm_config *c, const struct vocab *v, float prob, int whole_word, int max_ngram);

struct batch {
	int B, T;
	int32_t *ids, *types, *labels;
	uint8_t *mask;
	float *targets;           /* reg: B values; multi: B*L of 0 or 1 */
	uint64_t *rows;           /* record index in the shard of each row */
	int64_t count;            /* predicted items, as bert_forward counts them */
	int64_t tokens;           /* real (unpadded) tokens */
	size_t cap_ids, cap_types, cap_labels, cap_mask, cap_rows, cap_targets;
	struct tokrec rec;
};

/* Where batches come from and how they are labelled. */
struct batch_source {
	const struct shard *shard;
	const char *name;          /* for errors */
	enum bert_task task;
	int num_labels;            /* cls, multi, tokcls: classes of the head */
	const struct mlm_config *mlm;
	uint64_t seed;
	int unlabelled;            /* records without labels: predictions only */
	int32_t vocab;             /* token ids must be below this: the model's embeddings */
	int32_t type_vocab;        /* token types must be below this, where the model has them (> 0) */
	const struct row_origin *origin;   /* NULL: the shard's rows are the records errors name */
	const char *type_owner;    /* whose token types type_vocab gives, for errors: "the model's" when NULL */
};

/* The record order of an epoch: batch b holds order[b*B, (b+1)*B). With
 * group_lengths (--bucket), records of similar length are batched together
 * (in a random order of batches). */
void epoch_order(const struct shard *s, uint64_t seed, long epoch, int B, int group_lengths, uint64_t *order);

/* --batch-tokens: the order cut into groups of whole records, each taking
 * records while their real tokens add up to at most max_tokens. Returns the
 * end of the group that starts at order[at] (of n), after at least one
 * record; the cuts depend on nothing but the order and max_tokens. */
uint64_t token_group_end(const struct shard *s, const uint64_t *order, uint64_t n, uint64_t at, int64_t max_tokens);
/* Batches every record of src alone, as training does, so that a record
 * whose labels, token ids or types cannot train dies before the first step,
 * not when a batch reaches it hours in; not for mlm, whose records have no
 * labels (and whose corpora may be large). */
void batch_check_records(const struct batch_source *src);
/* Dies naming the source's first record of more than max_tokens tokens,
 * with the longest record's length; limit says what sets max_tokens. */
void batch_check_tokens(const struct batch_source *src, int64_t max_tokens, const char *limit);

/* Fills b with the n records rows[0..n) of the source. The labels are the
 * records' own, checked against the head: a class (cls), a number (reg), a
 * list of classes (multi), a tag or -100 per token (tokcls, where -1 marks
 * a word whose tag is unknown); for mlm the masking is drawn from (seed,
 * epoch, record index). Dies naming the shard and record on a label the
 * head cannot take or a token id beyond the vocab. */
void batch_fill(struct batch *b, const struct batch_source *src, const uint64_t *rows, int n, long epoch);
/* The view the model takes. */
struct bert_batch batch_view(const struct batch *b);
void batch_free(struct batch *b);

/* Masks one record of n tokens in place: ids get [MASK], a random token or
 * stay, labels get the original id at predicted positions and -100 elsewhere.
 * Returns the number of predicted positions. */
int64_t mlm_mask(const struct mlm_config *c, uint64_t seed, int32_t *ids, int32_t *labels, int n);
#endif
