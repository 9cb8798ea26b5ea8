#include "data/gpt2split.h"
#include "data/uclass.h"
#include <string.h>

enum cls { LETTER, NUMBER, SPACE, OTHER };

/* Letters and numbers of Unicode 15 (utf8proc's tables), which HF's regex
 * engine (Oniguruma, Unicode 14) and PCRE2 10.42 do not know: to them these
 * are neither. Generated from the code points where utf8proc's and PCRE2's
 * \p{L} and \p{N} differ; test_gpt2split checks every code point. */
static const struct { int32_t lo, hi; } newer[] = {
	{ 0x1123F, 0x11240 }, { 0x11F02, 0x11F02 }, { 0x11F04, 0x11F10 }, { 0x11F12, 0x11F33 },
	{ 0x11F50, 0x11F59 }, { 0x1342F, 0x1342F }, { 0x13441, 0x13446 }, { 0x1B132, 0x1B132 },
	{ 0x1B155, 0x1B155 }, { 0x1D2C0, 0x1D2D3 }, { 0x1DF25, 0x1DF2A }, { 0x1E030, 0x1E06D },
	{ 0x1E4D0, 0x1E4EB }, { 0x1E4F0, 0x1E4F9 }, { 0x2B739, 0x2B739 }, { 0x31350, 0x323AF },
};

static int is_newer(int32_t cp)
{
	if (cp < newer[0].lo)
		return 0;
	for (size_t i = 0; i < sizeof newer / sizeof *newer; i++)
		if (cp >= newer[i].lo && cp <= newer[i].hi)
			return 1;
	return 0;
}

/* The classes of ASCII: L letters, N digits, S spaces, O the rest. */
static const char ascii_cls[129] =
	"OOOOOOOOOSSSSSOO" "OOOOOOOOOOOOOOOO" "SOOOOOOOOOOOOOOO" "NNNNNNNNNNOOOOOO"
	"OLLLLLLLLLLLLLLL" "LLLLLLLLLLLOOOOO" "OLLLLLLLLLLLLLLL" "LLLLLLLLLLLOOOOO";

static enum cls other_cls(const char *s, size_t i, size_t *k);

static inline enum cls cls_at(const char *s, size_t i, size_t *k)
{
	unsigned char c = (unsigned char)s[i];
	if (c >= 0x80)
		return other_cls(s, i, k);
	*k = 1;
	char x = ascii_cls[c];
	return x == 'L' ? LETTER : x == 'N' ? NUMBER : x == 'S' ? SPACE : OTHER;
}

/* \s here is Unicode's White_Space, as Oniguruma has it (PCRE2's also takes
 * U+180E, which Unicode 6.3 made a format character). */
static enum cls other_cls(const char *s, size_t i, size_t *k)
{
	int32_t cp = uc_at(s + i, k);
	int cat = is_newer(cp) ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
	if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
		return LETTER;
	if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO)
		return NUMBER;
	return uc_space(cp) ? SPACE : OTHER;
}

/* The end of the run of class c that starts at i. */
static size_t run_of(const char *s, size_t n, size_t i, enum cls c)
{
	size_t k;
	while (i < n && cls_at(s, i, &k) == c)
		i += k;
	return i;
}

/* 's 't 're 've 'm 'll 'd at s[i] (a quote): the match's length, or 0. */
static size_t contraction(const char *s, size_t n, size_t i)
{
	if (i + 1 < n && strchr("stmd", s[i + 1]) && s[i + 1])
		return 2;
	if (i + 2 < n && (!memcmp(s + i + 1, "re", 2) || !memcmp(s + i + 1, "ve", 2) || !memcmp(s + i + 1, "ll", 2)))
		return 3;
	return 0;
}

size_t gpt2_match(const char *s, size_t n, size_t i)
{
	size_t k, k1, c;
	if (s[i] == '\'' && (c = contraction(s, n, i)))
		return i + c;
	enum cls first = cls_at(s, i, &k);
	if (s[i] == ' ' && i + 1 < n) {   /* " ?" before a run of letters, numbers or others */
		enum cls next = cls_at(s, i + 1, &k1);
		if (next != SPACE)
			return run_of(s, n, i + 1, next);
	}
	if (first != SPACE)
		return run_of(s, n, i, first);
	size_t end = run_of(s, n, i, SPACE), last = end;
	if (end == n)   /* \s+(?!\S) takes the spaces up to the end */
		return end;
	do   /* before a non-space, \s+(?!\S) leaves the last space to what follows */
		last--;
	while (((unsigned char)s[last] & 0xC0) == 0x80);
	return last > i ? last : end;   /* one space alone: \s+ */
}
