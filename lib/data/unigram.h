/* tokenizer.json's Unigram model (SentencePiece's): the pieces of a word
 * chosen by Viterbi, the path of the highest total score, a character no
 * piece covers costing the lowest score less 10 and runs of them fused into
 * one unknown, as HF tokenizers does; byte fallback where the file sets it. */
#ifndef TS_UNIGRAM_H
#define TS_UNIGRAM_H
#include "data/tjson.h"
#include "data/ids.h"

struct unigram;
struct unigram_space;   /* a thread's cache of words and the lattice */

struct unigram *unigram_new(const struct tjwhere *w, json_t *j);
void unigram_free(struct unigram *u);
struct unigram_space *unigram_space_new(void);
void unigram_space_free(struct unigram_space *s);
/* Appends the ids of word[0..n) (valid UTF-8, n > 0) to out. */
void unigram_encode(const struct unigram *u, struct unigram_space *sp, const char *word, size_t n, struct ids *out);
int32_t unigram_id(const struct unigram *u, const char *tok, size_t n);
const char *unigram_token(const struct unigram *u, int32_t id);
int32_t unigram_size(const struct unigram *u);
#endif
