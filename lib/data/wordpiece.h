/* BERT tokenisation with parity to Hugging Face's BertTokenizerFast: the special-token
 * strings of the raw text, BERT normalisation and pre-tokenisation (bertnorm.h), then
 * WordPiece (greedy longest match first, "##" continuations, words over 100 characters
 * or with an unmatchable piece become [UNK]). */
#ifndef TS_WORDPIECE_H
#define TS_WORDPIECE_H
#include "data/ids.h"
#include "data/vocab.h"

struct wp_tokenizer;   /* one per thread: holds scratch buffers */

/* v: a vocab.txt's (a tokenizer.json goes through hftok.h); cased: BertTokenizerFast's
 * do_lower_case=False (no lowercasing, no accent stripping). */
struct wp_tokenizer *wp_new(const struct vocab *v, int cased);
void wp_free(struct wp_tokenizer *t);

/* Appends the WordPiece ids of text (no [CLS]/[SEP]) to out. The exact strings [PAD]
 * [UNK] [CLS] [SEP] [MASK] in text are those tokens, as in BertTokenizerFast. Invalid
 * UTF-8 sequences are replaced by U+FFFD (which BERT cleaning then drops); returns how
 * many. */
size_t wp_encode(struct wp_tokenizer *t, const char *text, size_t len, struct ids *out);
#endif
