#include "format/jsonwide.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_in(char c, const char *set) { return c && strchr(set, c); }

/* Whether the integer s[0..n) (an optional '-', digits) fits in 64 bits. */
static int fits_64(const char *s, size_t n)
{
	char buf[24];
	if (n >= sizeof buf)
		return 0;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	strtoll(buf, NULL, 10);
	return errno != ERANGE;
}

/* Past the string that opens at s[i] ('"'), or n where it never closes. */
static size_t past_string(const char *s, size_t n, size_t i)
{
	for (i++; i < n; i++)
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	return n;
}

/* The length of the word Python writes for a float JSON lacks (NaN,
 * Infinity, -Infinity) at s[0..n), or 0 (for a longer word too: NaNa stays
 * as it is, for jansson to name). */
static size_t nonfinite_word(const char *s, size_t n)
{
	static const char *const words[] = { "NaN", "Infinity", "-Infinity" };
	for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
		size_t len = strlen(words[k]);
		if (n >= len && !memcmp(s, words[k], len) && (n == len || !isalnum((unsigned char)s[len])))
			return len;
	}
	return 0;
}

/* Whether the number s[0..n) is within a double's range. */
static int finite_real(const char *s, size_t n)
{
	char *t = xmalloc(n + 1);
	memcpy(t, s, n);
	t[n] = 0;
	int finite = !isinf(strtod(t, NULL));
	free(t);
	return finite;
}

/* What the number or word at s[i..n) is read as, its end in *end: itself,
 * a real (".0" after it) or null. */
enum read_as { ITSELF, REAL, NUL };
static enum read_as token_at(const char *s, size_t n, size_t i, int python, size_t *end)
{
	size_t word = python ? nonfinite_word(s + i, n - i) : 0;
	*end = i + word;
	if (word)
		return NUL;
	size_t j = i + 1;
	while (j < n && is_digit(s[j]))
		j++;
	int integer = j == n || !is_in(s[j], ".eE");
	while (j < n && (is_digit(s[j]) || is_in(s[j], ".eE+-")))
		j++;
	*end = j;
	if (python && !finite_real(s + i, j - i))
		return NUL;
	return integer && !fits_64(s + i, j - i) ? REAL : ITSELF;
}

/* s with each integer beyond 64 bits read as a real, and where python each
 * NaN, Infinity, -Infinity and real beyond a double's range as null, in b.
 * Outside strings a '-' or a digit can only begin a number, an 'N' or an
 * 'I' only those words. */
static void widen(const char *s, size_t n, int python, struct strbuf *b)
{
	size_t from = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] == '"') {
			i = past_string(s, n, i);
			continue;
		}
		if (s[i] != '-' && !is_digit(s[i]) && !(python && (s[i] == 'N' || s[i] == 'I'))) {
			i++;
			continue;
		}
		size_t end;
		enum read_as as = token_at(s, n, i, python, &end);
		if (as != ITSELF) {
			sb_add(b, s + from, (as == NUL ? i : end) - from);
			sb_add(b, as == NUL ? "null" : ".0", as == NUL ? 4 : 2);
			from = end;
		}
		i = end;
	}
	sb_add(b, s + from, n - from);
}

/* The error of a text that opens with a UTF-8 byte order mark, which
 * jansson refuses naming the invisible character (as Python's json does,
 * and so transformers). */
static void say_bom(json_error_t *err)
{
	char code = err->text[JSON_ERROR_TEXT_LENGTH - 1];
	snprintf(err->text, JSON_ERROR_TEXT_LENGTH - 1, "a UTF-8 byte order mark opens it, which JSON does not allow");
	err->text[JSON_ERROR_TEXT_LENGTH - 1] = code;
}

static json_t *load(const char *text, size_t n, size_t flags, int python, json_error_t *err)
{
	json_t *j = json_loadb(text, n, flags, err);
	if (!j && n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
		say_bom(err);
		return NULL;
	}
	enum json_error_code code = j ? json_error_unknown : json_error_code(err);
	if (code != json_error_numeric_overflow && !(python && code == json_error_invalid_syntax))
		return j;
	struct strbuf b = {0};
	widen(text, n, python, &b);
	j = json_loadb(b.s, b.n, flags, err);
	sb_free(&b);
	return j;
}

json_t *json_loadb_wide(const char *text, size_t n, size_t flags, json_error_t *err)
{
	return load(text, n, flags, 0, err);
}

json_t *json_loadb_python(const char *text, size_t n, size_t flags, json_error_t *err)
{
	return load(text, n, flags, 1, err);
}

json_t *json_loadfd_wide(int fd, const char *name, size_t flags, json_error_t *err)
{
	struct strbuf b = {0};
	char buf[1 << 16];
	for (ssize_t got; (got = read(fd, buf, sizeof buf));) {
		if (got < 0 && errno != EINTR)
			die("cannot read %s:", name);
		sb_add(&b, buf, got > 0 ? (size_t)got : 0);
	}
	json_t *j = json_loadb_wide(b.s ? b.s : "", b.n, flags, err);
	sb_free(&b);
	return j;
}
