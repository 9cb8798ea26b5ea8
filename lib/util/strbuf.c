#include "util/strbuf.h"
#include "util/err.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void sb_add(struct strbuf *b, const void *p, size_t n)
{
	grow(&b->s, &b->cap, b->n + n + 1, 1);
	memcpy(b->s + b->n, p, n);
	b->n += n;
	b->s[b->n] = 0;
}

void sb_addc(struct strbuf *b, char c) { sb_add(b, &c, 1); }

void sb_add_uint(struct strbuf *b, uint64_t v)
{
	char d[20], *end = d + sizeof d, *s = end;
	do
		*--s = (char)('0' + v % 10);
	while (v /= 10);
	sb_add(b, s, (size_t)(end - s));
}

void sb_addf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	grow(&b->s, &b->cap, b->n + (size_t)n + 1, 1);
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

void sb_add_json_str(struct strbuf *b, const char *s, size_t n)
{
	sb_addc(b, '"');
	sb_add_json_chars(b, s, n);
	sb_addc(b, '"');
}

void sb_add_json_chars(struct strbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			size_t j = i;
			while (j < n && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
				j++;
			sb_add(b, s + i, j - i);
			i = j;
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			sb_add(b, e, 2);
			i++;
		} else if (c < 0x20) {
			const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
			if (named) {
				sb_add(b, named, 2);
			} else {
				char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
				sb_add(b, e, 6);
			}
			i++;
		} else {
			utf8proc_int32_t cp;
			utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
			if (len < 0) {
				sb_add(b, "\xef\xbf\xbd", 3);
				i++;
			} else {
				sb_add(b, s + i, (size_t)len);
				i += (size_t)len;
			}
		}
	}
}

void sb_add_double(struct strbuf *b, double v, int is_f32)
{
	char s[40];
	/* 6 or 15 digits hold every normal number's shortest text that has so
	 * many; a subnormal's may have fewer */
	int subnormal = is_f32 ? fpclassify((float)v) == FP_SUBNORMAL : fpclassify(v) == FP_SUBNORMAL;
	for (int prec = subnormal ? 1 : is_f32 ? 6 : 15; prec <= 17; prec++) {
		snprintf(s, sizeof s, "%.*g", prec, v);
		if (is_f32 ? (float)strtod(s, NULL) == (float)v : strtod(s, NULL) == v)
			break;
	}
	sb_add(b, s, strlen(s));
}

int sb_add_file(struct strbuf *b, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	sb_add(b, "", 0);   /* text even for an empty file */
	for (size_t got;;) {
		grow(&b->s, &b->cap, b->n + (1 << 16), 1);
		if (!(got = fread(b->s + b->n, 1, b->cap - b->n - 1, f)))
			break;
		b->n += got;
	}
	b->s[b->n] = 0;
	if (ferror(f))
		die("cannot read %s:", path);
	fclose(f);
	return 0;
}

void sb_free(struct strbuf *b)
{
	free(b->s);
	memset(b, 0, sizeof *b);
}

char *shell_quote(const char *s)
{
	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=+,-@%") == strlen(s))
		return xstrdup(s);
	struct strbuf b = {0};
	sb_addc(&b, '\'');
	for (const char *p = s; *p; p++)
		if (*p == '\'')
			sb_add(&b, "'\\''", 4);
		else
			sb_addc(&b, *p);
	sb_addc(&b, '\'');
	sb_addc(&b, 0);
	return b.s;
}
