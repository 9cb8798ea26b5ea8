/* Turning a text's ids into token records: the tokenizer's template around
 * them ([CLS] a [SEP] (b [SEP]) for BERT, <s> a </s></s> b </s> for
 * RoBERTa), truncation to max_len, or folding into overlapping pieces. */
#ifndef TS_ENCODE_H
#define TS_ENCODE_H
#include "data/tokrec.h"
#include "data/ids.h"
#include <msgpack.h>

/* A post-processor's template: the special tokens and where the texts go,
 * each part with its type id. */
enum { TPL_A = -1, TPL_B = -2, TPL_MAX = 16 };
struct template_part {
	int32_t id;     /* a token, or TPL_A, TPL_B for the first and second text */
	uint8_t type;
};
struct template {
	struct template_part single[TPL_MAX], pair[TPL_MAX];
	int nsingle, npair;
};
/* BERT's: [CLS] A [SEP], and [CLS] A [SEP] B [SEP] with B's part of type 1. */
void template_bert(struct template *t, int32_t cls, int32_t sep);
/* How many special tokens the template puts around one text or a pair. */
long template_specials(const struct template *t, int pair);

struct encode_opts {
	long max_len;   /* 0: no limit */
	int fold;
	long stride;    /* overlap between folded pieces */
	const struct template *tpl;
};

/* Checks max_len and stride; returns an error message (static) or NULL. */
const char *encode_check(const struct encode_opts *o, int pair);
/* Packs the record(s) for text a (and b, when b is not NULL) into pk, with
 * t's id and label; returns how many records were written. With tags (a
 * value for each id of a, and no b), each record's label is the list of the
 * tags of its tokens, -100 at the special tokens. */
size_t encode_pack(const struct encode_opts *o, const struct ids *a, const struct ids *b,
		   const int32_t *tags, struct tokrec *t, msgpack_packer *pk);
/* Hugging Face's longest-first truncation of a pair to budget tokens. */
void truncate_longest_first(size_t *na, size_t *nb, size_t budget);
#endif
