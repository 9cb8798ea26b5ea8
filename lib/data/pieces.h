/* The pieces a text is cut into on its way through a tokenizer.json
 * pipeline: each a stretch of one buffer, marked where it begins the text
 * (Metaspace's prepend_scheme "first" looks at that). */
#ifndef TS_PIECES_H
#define TS_PIECES_H
#include "util/err.h"
#include "util/strbuf.h"
#include <stdint.h>
#include <stdlib.h>

struct span {
	uint32_t off, len;
	uint8_t first;   /* begins the text */
};

struct pieces {
	struct strbuf text;
	struct span *v;
	size_t n, cap;
};

/* Makes the last n bytes of p's text a piece; empty pieces are dropped, as
 * HF drops them. */
static inline void pieces_close(struct pieces *p, size_t n, int first)
{
	if (!n)
		return;
	if (p->text.n > UINT32_MAX)
		die("a text of over 4 GB cannot be tokenized");
	grow(&p->v, &p->cap, p->n + 1, sizeof *p->v);
	p->v[p->n++] = (struct span){(uint32_t)(p->text.n - n), (uint32_t)n, (uint8_t)first};
}

/* Appends s[0..n) as a piece of its own. */
static inline void pieces_add(struct pieces *p, const char *s, size_t n, int first)
{
	sb_add(&p->text, s, n);
	pieces_close(p, n, first);
}

static inline void pieces_clear(struct pieces *p)
{
	p->n = p->text.n = 0;
}

static inline void pieces_free(struct pieces *p)
{
	sb_free(&p->text);
	free(p->v);
}
#endif
