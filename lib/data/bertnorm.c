/* BERT normalisation + pre-tokenisation. ASCII takes a table-driven fast path; other
 * code points go through utf8proc, corrected where Hugging Face's tables differ from
 * utf8proc's Unicode 15.0 (uclass.c). */
#include "data/bertnorm.h"
#include "data/uclass.h"
#include "data/utf8.h"
#include "util/err.h"
#include <string.h>
#include <utf8proc.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* What BERT does with each ASCII byte: w = word byte, W = upper-case letter,
 * P = punctuation (its own word), ' ' = whitespace, D = control (dropped; VT and FF
 * are Unicode whitespace but HF's cleaning removes control characters first). */
static const char ascii_kind[129] =
	"DDDDDDDDD  DD DD"   /* 0x00: \t \n \r are spaces */
	"DDDDDDDDDDDDDDDD"   /* 0x10 */
	" PPPPPPPPPPPPPPP"   /* 0x20: space !"#$%&'()*+,-./ */
	"wwwwwwwwwwPPPPPP"   /* 0x30: 0-9 :;<=>? */
	"PWWWWWWWWWWWWWWW"   /* 0x40: @ A-O */
	"WWWWWWWWWWWPPPPP"   /* 0x50: P-Z [\]^_ */
	"Pwwwwwwwwwwwwwww"   /* 0x60: ` a-o */
	"wwwwwwwwwwwPPPPD";  /* 0x70: p-z {|}~ DEL */

void bert_norm_init(struct bert_norm *n, int lower)
{
	memset(n, 0, sizeof *n);
	n->lower = lower;
}

void bert_norm_free(struct bert_norm *n)
{
	free(n->out);
	free(n->cps);
	memset(n, 0, sizeof *n);
}

/* HF clean_text drops U+0000, U+FFFD and control = Cc, Cf, Co except \t \n \r; only
 * called for non-ASCII. */
static int is_dropped(int32_t cp)
{
	return cp == 0xFFFD || uc_control(cp);
}

/* Rust's char::is_whitespace: the White_Space property = Zs, Zl, Zp, \t..\r, U+0085. */
static int is_whitespace(int32_t cp, int c)
{
	return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL ||
	       c == UTF8PROC_CATEGORY_ZP || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85;
}

/* HF's "chinese character" ranges (note 0x2B920 where Google's BERT has 0x2B820). */
static int is_cjk(int32_t cp)
{
	return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
	       (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
	       (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
	       (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* ---- output ---- */

/* Ends the current word, if any. */
static char *separate(const struct bert_norm *n, char *o)
{
	if (o > n->out && o[-1] != ' ')
		*o++ = ' ';
	return o;
}

static void reserve_cps(struct bert_norm *n, size_t need)
{
	if (need > n->cpcap)
		grow(&n->cps, &n->cpcap, need, sizeof *n->cps);
}

/* Appends cp's canonical decomposition (itself when lower is off: cased BERT skips NFD;
 * nothing below U+00C0 has one). */
static size_t push_decomposed(struct bert_norm *n, size_t ncps, int32_t cp)
{
	reserve_cps(n, ncps + 8);
	if (!n->lower || cp < 0xC0 || !uc_nfd_known(cp)) {
		n->cps[ncps] = cp;
		return ncps + 1;
	}
	utf8proc_ssize_t k = utf8proc_decompose_char(cp, n->cps + ncps, 8, UTF8PROC_DECOMPOSE, NULL);
	return ncps + (k > 0 ? (size_t)k : 0);
}

/* NFD's canonical ordering: a stable sort of each run of non-starters by class. */
static void canonical_order(int32_t *cps, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		int32_t cp = cps[i];
		int cc = uc_combining_class(cp);
		size_t j = i;
		for (; cc && j > 0 && uc_combining_class(cps[j - 1]) > cc; j--)
			cps[j] = cps[j - 1];
		cps[j] = cp;
	}
}

/* Collects the code points of the non-ASCII run at p after cleaning, CJK spacing and
 * (uncased) decomposition; ' ' marks a word break. Returns the end of the run. */
static const unsigned char *collect_run(struct bert_norm *n, const unsigned char *p,
                                        const unsigned char *end, size_t *ncps, size_t *nbad)
{
	size_t k = 0;
	while (p < end && *p >= 0x80) {
		int32_t cp = utf8_decode(&p, end, nbad);
		int cat = utf8proc_category(cp);
		if (is_dropped(cp))
			continue;
		if (is_whitespace(cp, cat)) {
			k = push_decomposed(n, k, ' ');
		} else if (is_cjk(cp)) {
			k = push_decomposed(n, k, ' ');
			k = push_decomposed(n, k, cp);
			k = push_decomposed(n, k, ' ');
		} else {
			k = push_decomposed(n, k, cp);
		}
	}
	*ncps = k;
	return p;
}

/* Writes the run's code points as words: strips accents and lowercases when uncased,
 * isolates punctuation. */
static char *emit_run(struct bert_norm *n, char *o, size_t ncps)
{
	if (n->lower)
		canonical_order(n->cps, ncps);
	for (size_t i = 0; i < ncps; i++) {
		int32_t cp = n->cps[i];
		if (cp == ' ') {
			o = separate(n, o);
			continue;
		}
		if (n->lower) {
			if (uc_nonspacing_mark(cp))
				continue;
			cp = uc_lower(cp);   /* never U+0130: NFD split it into I and a dot */
		}
		if (uc_punct(cp)) {
			o = separate(n, o);
			o += utf8proc_encode_char(cp, (utf8proc_uint8_t *)o);
			*o++ = ' ';
		} else {
			o += utf8proc_encode_char(cp, (utf8proc_uint8_t *)o);
		}
	}
	return o;
}

/* Makes room for need more bytes of output. Callers ask for 2 per ASCII byte left
 * (punctuation and its space) and 6 per code point of a non-ASCII run (4 bytes and
 * two separators), which bounds what the rest of the text can write. */
static char *reserve_out(struct bert_norm *n, char *o, size_t need)
{
	size_t used = (size_t)(o - n->out);
	if (used + need > n->cap)
		grow(&n->out, &n->cap, used + need, 1);
	return n->out + used;
}

#ifdef __SSE2__
/* The word bytes among the 16 at p (letters and digits, lowercased when up
 * is 0x20) into o, all 16 stored: bit i of the result set where byte i is one. */
static unsigned copy16(const unsigned char *p, char *o, unsigned up)
{
	__m128i x = _mm_loadu_si128((const __m128i *)p), l = _mm_or_si128(x, _mm_set1_epi8(0x20));
	/* signed compares: bytes from 0x80 are below every bound */
	__m128i letter = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8('a' - 1)),
				       _mm_cmplt_epi8(l, _mm_set1_epi8('z' + 1)));
	__m128i digit = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)),
				      _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
	__m128i upper = _mm_and_si128(letter, _mm_cmplt_epi8(x, _mm_set1_epi8('Z' + 1)));
	_mm_storeu_si128((__m128i *)o, _mm_or_si128(x, _mm_and_si128(upper, _mm_set1_epi8((char)up))));
	return (unsigned)_mm_movemask_epi8(_mm_or_si128(letter, digit));
}
#endif

/* Copies the ASCII word bytes at p (letters and digits), lowercasing when up is 0x20;
 * returns the first other byte. The hot loop of English text: 16 bytes at a time
 * where 16 are left (the output has room for twice the input left). */
static const unsigned char *copy_ascii_word(const unsigned char *p, const unsigned char *end,
                                            char **out, unsigned up)
{
	char *o = *out;
#ifdef __SSE2__
	for (; end - p >= 16; p += 16, o += 16) {
		unsigned word = copy16(p, o, up);
		if (word != 0xffff) {
			unsigned k = (unsigned)__builtin_ctz(~word);
			*out = o + k;
			return p + k;
		}
	}
#endif
	for (; p < end && *p < 0x80; p++) {
		char kind = ascii_kind[*p];
		if (kind == 'w')
			*o++ = (char)*p;
		else if (kind == 'W')
			*o++ = (char)(*p | up);
		else
			break;
	}
	*out = o;
	return p;
}

size_t bert_normalize(struct bert_norm *n, const char *text, size_t len, size_t *outlen)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + len;
	unsigned up = n->lower ? 0x20 : 0;
	size_t nbad = 0, ncps;
	char *o = reserve_out(n, n->out, 2 * len + 1);
	while ((p = copy_ascii_word(p, end, &o, up)) < end) {
		if (*p >= 0x80) {
			p = collect_run(n, p, end, &ncps, &nbad);
			o = reserve_out(n, o, 6 * ncps + 2 * (size_t)(end - p) + 1);
			o = emit_run(n, o, ncps);
			continue;
		}
		switch (ascii_kind[*p]) {
		case ' ':
			o = separate(n, o);
			break;
		case 'P':
			o = separate(n, o);
			*o++ = (char)*p;
			*o++ = ' ';
			break;
		}
		p++;
	}
	o = separate(n, o);
	*outlen = (size_t)(o - n->out);
	return nbad;
}

/* One code point of the text as BertNormalizer's cleaning and CJK spacing
 * leave it, into n->cps (decomposed when accents are stripped); returns the
 * new count. */
static size_t push_cleaned(struct bert_norm *n, const struct bert_settings *b, size_t k, int32_t cp)
{
	int cat = cp < 0x80 ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
	if (b->clean) {
		char kind = cp < 0x80 ? ascii_kind[cp] : 0;
		if (kind == 'D' || (cp >= 0x80 && is_dropped(cp)))
			return k;
		if (kind == ' ' || (cp >= 0x80 && is_whitespace(cp, cat)))
			cp = ' ';
	}
	if (b->chinese && is_cjk(cp)) {
		k = push_decomposed(n, k, ' ');
		k = push_decomposed(n, k, cp);
		return push_decomposed(n, k, ' ');
	}
	return push_decomposed(n, k, cp);
}

void bert_normalize_text(struct bert_norm *n, const struct bert_settings *b, const char *s, size_t len,
			 size_t *outlen)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	size_t k = 0, bad = 0;
	n->lower = b->strip;   /* push_decomposed decomposes for accent stripping */
	while (p < end)
		k = push_cleaned(n, b, k, *p < 0x80 ? *p++ : utf8_decode(&p, end, &bad));
	if (b->strip)
		canonical_order(n->cps, k);
	char *o = reserve_out(n, n->out, 8 * k + 1);
	for (size_t i = 0; i < k; i++) {
		int32_t cp = n->cps[i];
		if (b->strip && uc_nonspacing_mark(cp))
			continue;
		if (b->lower && cp == 0x130) {   /* Rust's one lowercase of two characters */
			memcpy(o, "i\xcc\x87", 3);
			o += 3;
			continue;
		}
		if (b->lower)
			cp = cp < 0x80 ? (cp >= 'A' && cp <= 'Z' ? cp | 0x20 : cp) : uc_lower(cp);
		o += utf8proc_encode_char(cp, (utf8proc_uint8_t *)o);
	}
	*outlen = (size_t)(o - n->out);
}
