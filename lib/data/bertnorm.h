/* BERT text normalisation and pre-tokenisation, exactly as Hugging Face tokenizers'
 * BertNormalizer (clean_text, handle_chinese_chars, strip_accents = lowercase) followed
 * by BertPreTokenizer do it. Special-token strings are not handled here (see wordpiece.h). */
#ifndef TS_BERTNORM_H
#define TS_BERTNORM_H
#include <stddef.h>
#include <stdint.h>

struct bert_norm {
	int lower;          /* uncased BERT: strip accents and lowercase */
	char *out;          /* the words of the last text, each followed by one ' ' */
	size_t cap;
	int32_t *cps;       /* code points of the non-ASCII run being normalised */
	size_t cpcap;
};

void bert_norm_init(struct bert_norm *n, int lower);
void bert_norm_free(struct bert_norm *n);

/* HF's BertNormalizer alone, with each of its settings (clean_text,
 * handle_chinese_chars, strip_accents, lowercase): s[0..len) (valid UTF-8)
 * normalized into n->out, *outlen bytes; n's own lower is not used. */
struct bert_settings {
	int clean, chinese, strip, lower;
};
void bert_normalize_text(struct bert_norm *n, const struct bert_settings *b, const char *s, size_t len,
			 size_t *outlen);

/* Normalises text and splits it into words. The words land in n->out, each followed by
 * one space (*outlen bytes, 0 when there are none). Returns how many invalid UTF-8
 * sequences were replaced by U+FFFD (which cleaning then drops). */
size_t bert_normalize(struct bert_norm *n, const char *text, size_t len, size_t *outlen);
#endif
