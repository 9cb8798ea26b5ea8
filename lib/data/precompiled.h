/* tokenizer.json's Precompiled normalizer: SentencePiece's charsmap (a
 * Darts double-array trie of strings and the strings they become), applied
 * as HF tokenizers applies it: a grapheme of under 6 bytes replaced whole by
 * the charsmap's entry for its shortest prefix there, else each character
 * by its own. */
#ifndef TS_PRECOMPILED_H
#define TS_PRECOMPILED_H
#include "data/tjson.h"
#include "util/strbuf.h"

struct precompiled;

/* The charsmap of base64 text b64; dies naming what is wrong with it. */
struct precompiled *precompiled_new(const struct tjwhere *w, const char *b64, size_t n);
void precompiled_free(struct precompiled *p);
/* Appends s[0..n) (valid UTF-8) normalized to out. */
void precompiled_run(const struct precompiled *p, const char *s, size_t n, struct strbuf *out);
#endif
