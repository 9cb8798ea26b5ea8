/* A Hugging Face tokenizer.json, read component by component into the
 * pipeline HF tokenizers builds from it: added tokens, normalizer,
 * pre-tokenizer, model, post-processor. A component the file uses that
 * TopSpin does not have is refused when the file is read, in one line that
 * names it. */
#ifndef TS_HFTOK_H
#define TS_HFTOK_H
#include "data/encode.h"
#include "data/ids.h"
#include "data/special.h"

struct hftok;
struct hftok_space;   /* a thread's buffers and caches */

/* Reads path: a tokenizer.json, or a dir that holds one. Dies with
 * "PATH: why" on anything it cannot read exactly. */
struct hftok *hftok_load(const char *path);
/* The same from the n bytes of a file read already (name for errors). */
struct hftok *hftok_parse(const char *name, const char *bytes, size_t n);
void hftok_free(struct hftok *t);
struct hftok_space *hftok_space_new(void);
void hftok_space_free(struct hftok_space *s);
/* Appends the ids of text (no special tokens around it) to out; returns
 * how many invalid UTF-8 sequences were replaced by U+FFFD. */
size_t hftok_encode(const struct hftok *t, struct hftok_space *s, const char *text, size_t len, struct ids *out);
/* The post-processor's template. */
const struct template *hftok_template(const struct hftok *t);
/* The file's name as given, and the SHA-256 of its bytes. */
const char *hftok_path(const struct hftok *t);
const char *hftok_sha256(const struct hftok *t);
/* Whether a list of words (CoNLL, JSON lines) is tokenized with a space
 * before each word but the first, as the text they came from was: where the
 * pre-tokenizer keeps spaces in its words (ByteLevel without
 * add_prefix_space). */
int hftok_spaced_words(const struct hftok *t);
/* Whether its normalizer lowercases. */
int hftok_lowercases(const struct hftok *t);
/* The model's kind: "BPE", "Unigram" or "WordPiece". */
const char *hftok_kind(const struct hftok *t);
/* One more than the largest id; the token of an id (NULL for none). */
int32_t hftok_size(const struct hftok *t);
const char *hftok_token(const struct hftok *t, int32_t id);
/* Whether token id begins a word: a WordPiece token without the prefix of
 * continuing pieces; else as its pre-tokenizer marks words, with
 * ByteLevel's space (\u0120) or Metaspace's replacement; every token where
 * the pre-tokenizer marks none, and every added token. */
int hftok_starts_word(const struct hftok *t, int32_t id);
/* The id of a special token the models need (the pad, unknown, class,
 * separator and mask tokens, by what the file calls them), or -1. */
int32_t hftok_special(const struct hftok *t, enum vocab_special which);
#endif
