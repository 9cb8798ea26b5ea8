/* Character classes as HF tokenizers' Rust code sees them: char's
 * is_whitespace, is_alphanumeric and is_numeric from utf8proc's tables, and
 * below those the classes HF takes from older Unicode tables (uclass.c). */
#ifndef TS_UCLASS_H
#define TS_UCLASS_H
#include <stdint.h>
#include <utf8proc.h>

/* Unicode's White_Space property (Rust's char::is_whitespace). */
static inline int uc_space(int32_t c)
{
	return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static inline int uc_numeric(int32_t c)
{
	if (c < 0x80)
		return c >= '0' && c <= '9';
	int k = utf8proc_category(c);
	return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

static inline int uc_alnum(int32_t c)
{
	if (c < 0x80)
		return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
	int k = utf8proc_category(c);
	return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || uc_numeric(c);
}

/* The code point of the valid UTF-8 character at s; *n its length. */
static inline int32_t uc_at(const char *s, size_t *n)
{
	const unsigned char *u = (const unsigned char *)s;
	if (u[0] < 0x80)
		return *n = 1, u[0];
	if (u[0] < 0xE0)
		return *n = 2, (u[0] & 0x1F) << 6 | (u[1] & 0x3F);
	if (u[0] < 0xF0)
		return *n = 3, (u[0] & 0x0F) << 12 | (u[1] & 0x3F) << 6 | (u[2] & 0x3F);
	return *n = 4, (u[0] & 0x07) << 18 | (u[1] & 0x3F) << 12 | (u[2] & 0x3F) << 6 | (u[3] & 0x3F);
}

/* HF's punctuation, which BERT's pre-tokenizer and the Punctuation one
 * split on: ASCII's and the P categories of Unicode 9. */
int uc_punct(int32_t c);
/* What BertNormalizer's cleaning drops as control (Cc, Cf, Co); c is not ASCII. */
int uc_control(int32_t c);
/* Mn, the accents BertNormalizer strips. */
int uc_nonspacing_mark(int32_t c);
/* c's canonical combining class in HF's NFD: 0 for a mark it does not know. */
int uc_combining_class(int32_t c);
/* Whether HF's NFD knows c's decomposition (a newer one leaves c whole). */
int uc_nfd_known(int32_t c);
/* Mn, Mc and Me, the marks the StripAccents normalizer drops. */
int uc_combining_mark(int32_t c);
/* Whether HF's NFC, NFD, NFKC and NFKD treat c as utf8proc does. Where not,
 * c is newer than HF's tables, which leave it whole and reorder or compose
 * nothing across it. */
int uc_normal_forms_known(int32_t c);
/* Rust's char::to_lowercase of c, except its one of two characters (U+0130). */
int32_t uc_lower(int32_t c);
#endif
