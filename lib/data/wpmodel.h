/* tokenizer.json's WordPiece model, as HF tokenizers runs it on a word: the
 * longest piece of the vocab first, continuing_subword_prefix on the pieces
 * after the first, and the unknown token for the whole word where a piece is
 * missing or the word is longer than max_input_chars_per_word. (BERT's
 * vocab.txt has its own faster path, wordpiece.c.) */
#ifndef TS_WPMODEL_H
#define TS_WPMODEL_H
#include "data/ids.h"
#include "data/tjson.h"

struct wpmodel;
struct wpmodel_space;

struct wpmodel *wpmodel_new(const struct tjwhere *w, json_t *j);
void wpmodel_free(struct wpmodel *m);
struct wpmodel_space *wpmodel_space_new(void);
void wpmodel_space_free(struct wpmodel_space *s);
/* Appends the ids of word[0..n) (valid UTF-8, n > 0) to out. */
void wpmodel_encode(const struct wpmodel *m, struct wpmodel_space *sp, const char *word, size_t n, struct ids *out);
int32_t wpmodel_id(const struct wpmodel *m, const char *tok, size_t n);
const char *wpmodel_token(const struct wpmodel *m, int32_t id);
/* Whether token id goes on a word (it begins with continuing_subword_prefix). */
int wpmodel_continues(const struct wpmodel *m, int32_t id);
int32_t wpmodel_size(const struct wpmodel *m);
#endif
