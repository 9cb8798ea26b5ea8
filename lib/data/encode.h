/* Turning WordPiece ids into token records: [CLS] a [SEP] (b [SEP]), type
 * ids for pairs, truncation to max_len, or folding into overlapping pieces. */
#ifndef TS_ENCODE_H
#define TS_ENCODE_H
#include "data/tokrec.h"
#include "data/wordpiece.h"
#include <msgpack.h>

struct encode_opts {
	long max_len;   /* 0: no limit */
	int fold;
	long stride;    /* overlap between folded pieces */
	int32_t cls, sep;
};

/* Checks max_len and stride; returns an error message or NULL. */
const char *encode_check(const struct encode_opts *o, int pair);
/* Packs the record(s) for text a (and b, when b is not NULL) into pk, with
 * t's id and label; returns how many records were written. With tags (a
 * value for each id of a, and no b), each record's label is the list of the
 * tags of its tokens, -100 at [CLS] and [SEP]. */
size_t encode_pack(const struct encode_opts *o, const struct ids *a, const struct ids *b,
		   const int32_t *tags, struct tokrec *t, msgpack_packer *pk);
/* Hugging Face's longest-first truncation of a pair to budget tokens. */
void truncate_longest_first(size_t *na, size_t *nb, size_t budget);
#endif
