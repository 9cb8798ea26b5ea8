#include "data/added.h"
#include "data/trie.h"
#include "data/uclass.h"
#include "util/err.h"
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A text is searched 16 bytes at a time for the first bytes of the
 * contents where they are this few (BERT's, RoBERTa's: one, '[' or '<';
 * ModernBERT's: four). */
enum { FIRSTS = 4 };

struct token {
	int32_t id;
	int lstrip, rstrip, single_word;
};

struct added {
	struct trie *trie;                /* content -> an index into tokens */
	struct token *tokens;
	size_t ntokens, token_cap;
	/* once frozen, a bit for each two bytes a content may begin with: its
	 * first two, or its one and any byte; a text's last byte is taken with
	 * a 0 after it */
	uint64_t pairs[256 * 256 / 64];
	/* how many bytes begin a content, and which, where they are at most
	 * FIRSTS */
	int nfirst;
	unsigned char first[FIRSTS];
};

struct added *added_new(void)
{
	struct added *a = xcalloc(1, sizeof *a);
	a->trie = trie_new();
	return a;
}

void added_free(struct added *a)
{
	if (!a)
		return;
	trie_free(a->trie);
	free(a->tokens);
	free(a);
}

int added_empty(const struct added *a)
{
	return a->ntokens == 0;
}

void added_add(struct added *a, const char *content, size_t n, int32_t id, int lstrip, int rstrip, int single_word)
{
	grow(&a->tokens, &a->token_cap, a->ntokens + 1, sizeof *a->tokens);
	a->tokens[a->ntokens] = (struct token){id, lstrip, rstrip, single_word};
	trie_add(a->trie, content, n, (int32_t)a->ntokens++);   /* a content added again: its last token */
}

void added_freeze(struct added *a)
{
	trie_freeze(a->trie);
	for (unsigned b = 0; b < 256; b++) {
		int32_t at = trie_step(a->trie, 0, (unsigned char)b);
		int whole = at >= 0 && trie_value(a->trie, at) >= 0;   /* a content of this one byte */
		for (unsigned c = 0; at >= 0 && c < 256; c++) {
			unsigned k = b << 8 | c;
			if (whole || trie_step(a->trie, at, (unsigned char)c) >= 0)
				a->pairs[k / 64] |= (uint64_t)1 << (k % 64);
		}
		if (at >= 0 && a->nfirst++ < FIRSTS)
			a->first[a->nfirst - 1] = (unsigned char)b;
	}
}

/* Whether a content may begin at s[p] (of n), by its first two bytes. */
static int may_begin(const struct added *a, const char *s, size_t n, size_t p)
{
	unsigned k = (unsigned)(unsigned char)s[p] << 8 | (p + 1 < n ? (unsigned char)s[p + 1] : 0);
	return a->pairs[k / 64] >> (k % 64) & 1;
}

/* The first place from p on where a content may begin, or n. */
static size_t next_candidate(const struct added *a, const char *s, size_t n, size_t p)
{
#ifdef __SSE2__
	if (a->nfirst <= FIRSTS) {
		__m128i first[FIRSTS];
		for (int k = 0; k < a->nfirst; k++)
			first[k] = _mm_set1_epi8((char)a->first[k]);
		for (; p + 16 <= n; p += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(s + p)), hit = _mm_cmpeq_epi8(v, first[0]);
			for (int k = 1; k < a->nfirst; k++)
				hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, first[k]));
			for (unsigned m = (unsigned)_mm_movemask_epi8(hit); m; m &= m - 1)
				if (may_begin(a, s, n, p + (size_t)__builtin_ctz(m)))
					return p + (size_t)__builtin_ctz(m);
		}
	}
#endif
	while (p < n && !may_begin(a, s, n, p))
		p++;
	return p;
}

/* The longest token at s[p..n): its index, *end past it; -1 for none. */
static int32_t longest_at(const struct added *a, const char *s, size_t n, size_t p, size_t *end)
{
	int32_t best = -1;
	for (int32_t at = 0; p < n && (at = trie_step(a->trie, at, (unsigned char)s[p])) >= 0;) {
		p++;
		if (trie_value(a->trie, at) >= 0)
			best = trie_value(a->trie, at), *end = p;
	}
	return best;
}

/* Whether the character ending at s[..e) or starting at s[b..) is a word
 * character (alphanumeric or '_'). */
static int word_before(const char *s, size_t e)
{
	if (!e)
		return 0;
	size_t c = e - 1, k;
	while (c > 0 && ((unsigned char)s[c] & 0xC0) == 0x80)
		c--;
	int32_t ch = uc_at(s + c, &k);
	return ch == '_' || uc_alnum(ch);
}

static int word_after(const char *s, size_t n, size_t b)
{
	size_t k;
	if (b >= n)
		return 0;
	int32_t ch = uc_at(s + b, &k);
	return ch == '_' || uc_alnum(ch);
}

/* The start of the spaces that end s[floor..e). */
static size_t spaces_before(const char *s, size_t floor, size_t e)
{
	while (e > floor) {
		size_t c = e - 1, k;
		while (c > floor && ((unsigned char)s[c] & 0xC0) == 0x80)
			c--;
		if (!uc_space(uc_at(s + c, &k)))
			break;
		e = c;
	}
	return e;
}

static size_t spaces_after(const char *s, size_t n, size_t b)
{
	size_t k;
	while (b < n && uc_space(uc_at(s + b, &k)))
		b += k;
	return b;
}

size_t added_find(const struct added *a, const char *s, size_t n, struct added_match **m, size_t *cap)
{
	size_t found = 0, floor = 0;   /* floor: the end of the last match taken */
	for (size_t p = 0; p < n;) {
		p = next_candidate(a, s, n, p);
		size_t end = p;
		int32_t t = p < n ? longest_at(a, s, n, p, &end) : -1;
		if (t < 0) {
			p++;
			continue;
		}
		const struct token *tk = &a->tokens[t];
		size_t start = p;
		p = end;
		if (tk->single_word && (word_before(s, start) || word_after(s, n, end)))
			continue;
		if (tk->lstrip)
			start = spaces_before(s, floor, start);
		if (tk->rstrip)
			end = spaces_after(s, n, end);
		grow(m, cap, found + 1, sizeof **m);
		(*m)[found++] = (struct added_match){start, end, tk->id};
		p = floor = end;
	}
	return found;
}
