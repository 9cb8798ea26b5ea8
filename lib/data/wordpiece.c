/* BertTokenizerFast-equivalent encoding: special tokens, normalisation, WordPiece. */
#include "data/wordpiece.h"
#include "data/bertnorm.h"
#include <stdlib.h>
#include <string.h>

/* HF's WordPiece max_input_chars_per_word: longer words become one [UNK]. */
enum { MAX_WORD_CHARS = 100 };

/* The ids of words of up to 16 bytes and CACHED_IDS ids, as found last, in a
 * direct-mapped table of CACHE_WORDS (640 KiB): the words of a text repeat
 * (9 in 10 of the e-mails' words are found here), and a word found costs one
 * probe, where the vocab's hash takes one for each length tried. len 0: empty. */
enum { CACHE_BITS = 14, CACHE_WORDS = 1 << CACHE_BITS, CACHED_IDS = 4 };
struct cached_word {
	uint64_t head[2];   /* the word's bytes, zero-padded */
	uint8_t len, n;
	int32_t id[CACHED_IDS];
};

struct wp_tokenizer {
	const struct vocab *v;
	struct bert_norm norm;
	int32_t unk;
	size_t max_piece;
	struct cached_word cache[CACHE_WORDS];
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

/* The id of the longest vocabulary piece at word[start..), or -1; sets *end past it.
 * Only the lengths that pieces with its first two bytes have are looked up, on
 * character boundaries, longest first. */
static int32_t longest_piece(const struct wp_tokenizer *t, const char *word, size_t len,
                             size_t start, size_t *end)
{
	size_t avail = len - start;
	for (uint32_t cand = vocab_piece_lengths(t->v, start > 0, word + start, avail); cand;) {
		size_t top = 31 - (size_t)__builtin_clz(cand);
		cand &= ~(1u << top);
		size_t from = top < 31 ? top : avail < t->max_piece ? avail : t->max_piece;
		for (size_t n = from; n >= top; n--) {   /* bit 31: every length from 31 on */
			size_t e = start + n;
			if (e < len && ((unsigned char)word[e] & 0xC0) == 0x80)
				continue;
			int32_t id = vocab_piece_id(t->v, start > 0, word + start, n);
			if (id >= 0) {
				*end = e;
				return id;
			}
		}
	}
	return -1;
}

/* WordPiece of one normalised word: greedy longest match first; [UNK] for the whole
 * word when a piece cannot be matched or the word has over MAX_WORD_CHARS characters. */
static void encode_pieces(const struct wp_tokenizer *t, const char *word, size_t len,
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

/* encode_pieces, through the table of short words. */
static void encode_word(struct wp_tokenizer *t, const char *word, size_t len, struct ids *out)
{
	if (len - 1 >= 16) {   /* none, or over 16 bytes */
		encode_pieces(t, word, len, out);
		return;
	}
	uint64_t h0 = vocab_head_word(word, len), h1 = len > 8 ? vocab_head_word(word + 8, len - 8) : 0;
	struct cached_word *c = &t->cache[((h0 ^ len) * 0x9E3779B97F4A7C15ull ^ h1 * 0xD6E8FEB86659FD93ull) >>
					  (64 - CACHE_BITS)];
	if (c->head[0] == h0 && c->head[1] == h1 && c->len == len) {
		for (int i = 0; i < c->n; i++)
			ids_push(out, c->id[i]);
		return;
	}
	size_t first = out->n;
	encode_pieces(t, word, len, out);
	size_t n = out->n - first;
	if (n <= CACHED_IDS) {
		*c = (struct cached_word){ { h0, h1 }, (uint8_t)len, (uint8_t)n, { 0 } };
		memcpy(c->id, out->v + first, n * sizeof *c->id);
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
