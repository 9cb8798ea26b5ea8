#include "data/precompiled.h"
#include "data/uclass.h"
#include "data/utf8.h"
#include "util/err.h"
#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

struct precompiled {
	uint32_t *units;          /* the double array */
	size_t nunits;
	char *norm;               /* the replacements, each NUL-terminated */
	size_t nnorm;
	const char *ascii[128];   /* each ASCII character's replacement, or NULL */
	size_t ascii_n[128];
	int printable_kept;       /* whether it keeps every printable ASCII character as it is */
};

static const char *shortest(const struct precompiled *p, const char *s, size_t n, size_t *len);

struct precompiled *precompiled_new(const struct tjwhere *w, const char *b64, size_t n)
{
	uint8_t *raw = xmalloc(BASE64_DECODE_LENGTH(n) + 1);
	size_t len = BASE64_DECODE_LENGTH(n) + 1;
	struct base64_decode_ctx ctx;
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &len, raw, n, b64) || !base64_decode_final(&ctx))
		tj_die(w, "Precompiled's precompiled_charsmap is not base64");
	uint32_t trie_bytes = 0;
	if (len >= 4)
		memcpy(&trie_bytes, raw, 4);
	if (len < 4 || trie_bytes % 4 || trie_bytes > len - 4 || trie_bytes < 4)
		tj_die(w, "Precompiled's precompiled_charsmap is cut short or not a charsmap");
	struct precompiled *p = xcalloc(1, sizeof *p);
	p->nunits = trie_bytes / 4;
	p->units = xmalloc(trie_bytes);
	memcpy(p->units, raw + 4, trie_bytes);   /* little-endian, as x86 and ARM are */
	p->nnorm = len - 4 - trie_bytes;
	p->norm = xmalloc(p->nnorm + 1);
	memcpy(p->norm, raw + 4 + trie_bytes, p->nnorm);
	p->norm[p->nnorm] = 0;
	free(raw);
	size_t bad = 0;
	for (const unsigned char *s = (unsigned char *)p->norm, *end = s + p->nnorm; s < end && !bad;)
		if (*s < 0x80)
			s++;
		else
			utf8_decode(&s, end, &bad);
	if (bad)
		tj_die(w, "Precompiled's precompiled_charsmap holds replacements that are not UTF-8");
	for (int c = 1; c < 128; c++) {
		char s = (char)c;
		p->ascii[c] = shortest(p, &s, 1, &p->ascii_n[c]);
	}
	p->printable_kept = 1;
	for (int c = ' '; c < 0x7F; c++)
		p->printable_kept &= !p->ascii[c];
	return p;
}

void precompiled_free(struct precompiled *p)
{
	if (!p)
		return;
	free(p->units);
	free(p->norm);
	free(p);
}

/* Darts' unit fields. */
static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static int has_leaf(uint32_t u) { return (u >> 8) & 1; }

/* The replacement of the shortest prefix of s[0..n) that the charsmap
 * holds, or NULL; *len its length. A walk off the array finds nothing. */
static const char *shortest(const struct precompiled *p, const char *s, size_t n, size_t *len)
{
	size_t pos = offset(p->units[0]);
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		pos ^= c;
		if (pos >= p->nunits || label(p->units[pos]) != c)
			return NULL;
		uint32_t u = p->units[pos];
		pos ^= offset(u);
		if (pos >= p->nunits)
			return NULL;
		if (has_leaf(u)) {
			size_t at = p->units[pos] & ((1u << 31) - 1);
			if (at >= p->nnorm || ((unsigned char)p->norm[at] & 0xC0) == 0x80)   /* no character starts there */
				return NULL;
			*len = strlen(p->norm + at);
			return p->norm + at;
		}
	}
	return NULL;
}

/* The length of the grapheme cluster at s[0..n) (UAX #29's extended). */
static size_t grapheme(const char *s, size_t n)
{
	size_t k, at;
	utf8proc_int32_t state = 0;
	int32_t prev = uc_at(s, &k);
	for (at = k; at < n; at += k) {
		int32_t c = uc_at(s + at, &k);
		if (utf8proc_grapheme_break_stateful(prev, c, &state))
			break;
		prev = c;
	}
	return at;
}

/* Whether the ASCII character at s[at] is a grapheme of its own: the next
 * is ASCII too (or none), and it is no CR before a LF. */
static int lone_ascii(const char *s, size_t n, size_t at)
{
	unsigned char c = (unsigned char)s[at], next = at + 1 < n ? (unsigned char)s[at + 1] : 0;
	return c < 0x80 && next < 0x80 && !(c == '\r' && next == '\n');
}

/* The end of the run from s[at] of ASCII characters that are graphemes of
 * their own and that the charsmap keeps as they are. */
static size_t kept_run(const struct precompiled *p, const char *s, size_t n, size_t at)
{
#ifdef __SSE2__
	/* 16 printable characters at once, where the one after them is ASCII
	 * (a mark after the last would join it) */
	const __m128i below = _mm_set1_epi8(' ' - 1), above = _mm_set1_epi8(0x7F);
	while (p->printable_kept && at + 16 < n && (unsigned char)s[at + 16] < 0x80) {
		__m128i v = _mm_loadu_si128((const __m128i *)(s + at));
		if (_mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmplt_epi8(v, above))) != 0xFFFF)
			break;
		at += 16;
	}
#endif
	while (at < n && lone_ascii(s, n, at) && !p->ascii[(unsigned char)s[at]])
		at++;
	return at;
}

void precompiled_run(const struct precompiled *p, const char *s, size_t n, struct strbuf *out)
{
	for (size_t at = 0; at < n;) {
		size_t kept = kept_run(p, s, n, at);
		if (kept > at) {
			sb_add(out, s + at, kept - at);
			at = kept;
			continue;
		}
		if (lone_ascii(s, n, at)) {
			unsigned char c = (unsigned char)s[at++];
			sb_add(out, p->ascii[c], p->ascii_n[c]);   /* kept_run took those it keeps */
			continue;
		}
		size_t g = grapheme(s + at, n - at), len, k;
		const char *r = g < 6 ? shortest(p, s + at, g, &len) : NULL;
		if (r) {
			sb_add(out, r, len);
			at += g;
			continue;
		}
		for (size_t end = at + g; at < end; at += k) {
			uc_at(s + at, &k);
			r = shortest(p, s + at, k, &len);
			if (r)
				sb_add(out, r, len);
			else
				sb_add(out, s + at, k);
		}
	}
}
