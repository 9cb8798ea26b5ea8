/* tokenizer.json's BPE model: a word's characters merged pair by pair, the
 * pair of lowest rank first and the leftmost of equal ranks, as HF
 * tokenizers does; byte fallback, continuing_subword_prefix,
 * end_of_word_suffix, unknowns fused or not, ignore_merges; dropout is
 * training-time noise and ignored. */
#ifndef TS_BPE_H
#define TS_BPE_H
#include "data/tjson.h"
#include "data/ids.h"

struct bpe;
struct bpe_space;   /* a thread's cache of words and scratch */

/* The model j ("type": "BPE", or a BPE's fields without it); dies naming a
 * vocab id out of range, a repeated id, a merge of an unknown token. */
struct bpe *bpe_new(const struct tjwhere *w, json_t *j);
void bpe_free(struct bpe *b);
struct bpe_space *bpe_space_new(void);
void bpe_space_free(struct bpe_space *s);
/* Appends the ids of word[0..n) (valid UTF-8, n > 0) to out. */
void bpe_encode(const struct bpe *b, struct bpe_space *sp, const char *word, size_t n, struct ids *out);
/* The vocab: the id of a token or -1, the token of an id or NULL, one more
 * than the largest id. */
int32_t bpe_id(const struct bpe *b, const char *tok, size_t n);
const char *bpe_token(const struct bpe *b, int32_t id);
int32_t bpe_size(const struct bpe *b);
#endif
