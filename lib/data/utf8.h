/* UTF-8 decoding for the tokenizers, with ill-formed input replaced as
 * Python's errors="replace" does. */
#ifndef TS_UTF8_H
#define TS_UTF8_H
#include <stddef.h>
#include <jansson.h>
#include <stdint.h>

/* Decodes one code point at *p (p < end, *p >= 0x80) and advances *p. An ill-formed
 * sequence becomes U+FFFD, one per maximal subpart (as Python's errors="replace" and
 * the Unicode standard's recommended practice do), counted in *nbad. */
static inline int32_t utf8_decode(const unsigned char **p, const unsigned char *end, size_t *nbad)
{
	const unsigned char *s = *p;
	unsigned c = s[0], need, lo = 0x80, hi = 0xBF;
	int32_t cp;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 2, cp = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 3, cp = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		goto bad;
	s++;
	for (unsigned i = 0; i < need; i++, s++) {
		/* only the second byte has a narrowed range */
		if (s == end || *s < lo || *s > hi)
			goto bad;
		cp = cp << 6 | (*s & 0x3F);
		lo = 0x80, hi = 0xBF;
	}
	*p = s;
	return cp;
bad:
	*p = s == *p ? s + 1 : s;
	++*nbad;
	return 0xFFFD;
}

/* text[0..len) as valid UTF-8: text itself, or copy->s (copy->n bytes)
 * with U+FFFD for each ill-formed sequence, counted in *nbad. */
struct strbuf;
const char *utf8_repair(struct strbuf *copy, const char *text, size_t len, size_t *nbad);

/* s as a JSON string, which must be UTF-8: a path named in another encoding
 * (Latin-1) with U+FFFD for what is not, where json_string would give NULL. */
json_t *utf8_json(const char *s);

/* The length of the UTF-8 byte order mark that starts file name's text
 * s[0..n): 3, or 0 where there is none. One of UTF-16 (or UTF-32) is
 * refused: that text is no UTF-8 to mend, and would become NULs and U+FFFD. */
size_t utf8_bom(const char *name, const char *s, size_t n);

/* The length of the well-formed UTF-8 character at s (1 for a byte that
 * starts none): for stepping through text already made valid. */
static inline size_t utf8_len(unsigned char c)
{
	return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}
#endif
