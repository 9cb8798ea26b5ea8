#include "format/jsonwide.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
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

/* text with ".0" after each integer beyond 64 bits, in b. Outside strings a
 * '-' or a digit can only begin a number. */
static void widen(const char *s, size_t n, struct strbuf *b)
{
	size_t from = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] == '"') {
			i = past_string(s, n, i);
			continue;
		}
		if (s[i] != '-' && !is_digit(s[i])) {
			i++;
			continue;
		}
		size_t j = i + 1;
		while (j < n && is_digit(s[j]))
			j++;
		if ((j == n || !is_in(s[j], ".eE")) && !fits_64(s + i, j - i)) {
			sb_add(b, s + from, j - from);
			sb_add(b, ".0", 2);
			from = j;
		}
		while (j < n && (is_digit(s[j]) || is_in(s[j], ".eE+-")))
			j++;
		i = j;
	}
	sb_add(b, s + from, n - from);
}

json_t *json_loadb_wide(const char *text, size_t n, size_t flags, json_error_t *err)
{
	json_t *j = json_loadb(text, n, flags, err);
	if (j || json_error_code(err) != json_error_numeric_overflow)
		return j;
	struct strbuf b = {0};
	widen(text, n, &b);
	j = json_loadb(b.s, b.n, flags, err);
	sb_free(&b);
	return j;
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
