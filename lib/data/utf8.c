#include "data/utf8.h"
#include "util/strbuf.h"

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
