#include "data/utf8.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <string.h>

const char *utf8_repair(struct strbuf *copy, const char *text, size_t len, size_t *nbad)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + len;
	size_t bad = 0;
	while (p < end && !bad)
		if (*p < 0x80)
			p++;
		else
			utf8_decode(&p, end, &bad);
	if (!bad)
		return text;
	copy->n = 0;
	p = (const unsigned char *)text;
	while (p < end) {
		if (*p < 0x80) {
			sb_addc(copy, (char)*p++);
			continue;
		}
		const unsigned char *c = p;
		size_t was = *nbad;
		utf8_decode(&p, end, nbad);
		if (*nbad == was)
			sb_add(copy, c, (size_t)(p - c));
		else
			sb_add(copy, "\xef\xbf\xbd", 3);
	}
	return copy->s;
}

json_t *utf8_json(const char *s)
{
	struct strbuf copy = {0};
	size_t nbad = 0;
	const char *t = utf8_repair(&copy, s, strlen(s), &nbad);
	json_t *j = json_stringn(t, t == s ? strlen(s) : copy.n);
	sb_free(&copy);
	return j;
}

size_t utf8_bom(const char *name, const char *s, size_t n)
{
	if (n >= 2 && (!memcmp(s, "\xff\xfe", 2) || !memcmp(s, "\xfe\xff", 2)))
		die("%s: UTF-16 text (it starts with a UTF-16 byte order mark): convert it to UTF-8, as "
		    "iconv -f UTF-16 -t UTF-8 does", name);
	return n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3) ? 3 : 0;
}
