/* BertTokenizerFast-equivalent encoding: special tokens, normalisation, WordPiece. */
#include "data/wordpiece.h"
#include "data/bertnorm.h"
#include <stdlib.h>
#include <string.h>

/* HF's WordPiece max_input_chars_per_word: longer words become one [UNK]. */
enum { MAX_WORD_CHARS = 100 };

struct wp_tokenizer {
	const struct vocab *v;
	struct bert_norm norm;
	int32_t unk;
	size_t max_piece;
};

struct wp_tokenizer *wp_new(const struct vocab *v, int cased)
{
	struct wp_tokenizer *t = xcalloc(1, sizeof *t);
	t->v = v;
	bert_norm_init(&t->norm, !cased);
	t->unk = vocab_special(v, VOCAB_UNK);
	t->max_piece = vocab_max_piece(v);
	return t;
}

void wp_free(struct wp_tokenizer *t)
{
	if (!t)
		return;
	bert_norm_free(&t->norm);
	free(t);
}

static size_t count_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

/* The start of the character before byte end of s (end > 0). */
static size_t char_before(const char *s, size_t end)
{
	do
		end--;
	while (end > 0 && ((unsigned char)s[end] & 0xC0) == 0x80);
	return end;
}

/* The id of the longest vocabulary piece at word[start..), or -1; sets *end past it. */
static int32_t longest_piece(const struct wp_tokenizer *t, const char *word, size_t len,
                             size_t start, size_t *end)
{
	size_t e = len - start > t->max_piece ? start + t->max_piece : len;
	if (e < len && ((unsigned char)word[e] & 0xC0) == 0x80)
		e = char_before(word, e + 1);
	while (e > start) {
		int32_t id = vocab_piece_id(t->v, start > 0, word + start, e - start);
		if (id >= 0) {
			*end = e;
			return id;
		}
		e = char_before(word, e);
	}
	return -1;
}

/* WordPiece of one normalised word: greedy longest match first; [UNK] for the whole
 * word when a piece cannot be matched or the word has over MAX_WORD_CHARS characters. */
static void encode_word(const struct wp_tokenizer *t, const char *word, size_t len,
                        struct ids *out)
{
	if (len > MAX_WORD_CHARS && count_chars(word, len) > MAX_WORD_CHARS) {
		ids_push(out, t->unk);
		return;
	}
	size_t first = out->n;
	for (size_t start = 0, end; start < len; start = end) {
		int32_t id = longest_piece(t, word, len, start, &end);
		if (id < 0) {
			out->n = first;
			ids_push(out, t->unk);
			return;
		}
		ids_push(out, id);
	}
}

/* Normalises a stretch of text free of special tokens and encodes its words. */
static size_t encode_plain(struct wp_tokenizer *t, const char *text, size_t len,
                           struct ids *out)
{
	size_t n;
	size_t nbad = bert_normalize(&t->norm, text, len, &n);
	const char *p = t->norm.out, *end = p + n;
	while (p < end) {
		const char *sp = p;
		while (*sp != ' ')   /* words are short: a plain loop beats memchr */
			sp++;
		encode_word(t, p, (size_t)(sp - p), out);
		p = sp + 1;
	}
	return nbad;
}

/* The special token at s, or -1; sets *len. All start with '[' and none is a prefix of
 * another, so the first match is HF's leftmost-longest one. */
static int32_t special_at(const struct vocab *v, const char *s, size_t avail, size_t *len)
{
	for (int i = 0; i < VOCAB_NSPECIAL; i++) {
		const char *name = vocab_special_name(i);
		size_t k = strlen(name);
		if (k <= avail && !memcmp(s, name, k)) {
			*len = k;
			return vocab_special(v, i);
		}
	}
	return -1;
}

size_t wp_encode(struct wp_tokenizer *t, const char *text, size_t len, struct ids *out)
{
	const char *p = text, *end = text + len, *plain = text;
	size_t nbad = 0;
	while (p < end && (p = memchr(p, '[', (size_t)(end - p)))) {
		size_t k;
		int32_t id = special_at(t->v, p, (size_t)(end - p), &k);
		if (id < 0) {
			p++;
			continue;
		}
		nbad += encode_plain(t, plain, (size_t)(p - plain), out);
		ids_push(out, id);
		p = plain = p + k;
	}
	return nbad + encode_plain(t, plain, (size_t)(end - plain), out);
}
