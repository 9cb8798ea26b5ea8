/* tokenizer.json's pre-tokenizers: what cuts normalized text into the
 * words the model sees, as HF tokenizers' ByteLevel, Split, Metaspace,
 * Whitespace, WhitespaceSplit, Digits, Punctuation, BertPreTokenizer and
 * Sequence do. */
#ifndef TS_PRETOK_H
#define TS_PRETOK_H
#include "data/pieces.h"
#include "data/tjson.h"

struct pretok;
struct pretok_space;   /* a thread's buffers */

/* The pre-tokenizer j (NULL or JSON null: none); dies naming what it
 * cannot do. */
struct pretok *pretok_new(const struct tjwhere *w, json_t *j);
void pretok_free(struct pretok *p);
struct pretok_space *pretok_space_new(void);
void pretok_space_free(struct pretok_space *s);
/* The words of s[0..n) (valid UTF-8) into out (emptied first); first: s
 * begins the text. Valid until the next call with the same space. */
void pretok_run(const struct pretok *p, struct pretok_space *sp, const char *s, size_t n, int first,
		struct pieces *out);
/* Whether it keeps a word's space as part of the word without putting one
 * there itself: a ByteLevel without add_prefix_space. */
int pretok_spaced_words(const struct pretok *p);
/* What begins a word's first piece after it: ByteLevel's \u0120 (the
 * space), Metaspace's replacement; NULL where no step marks words. */
const char *pretok_word_mark(const struct pretok *p);
#endif
