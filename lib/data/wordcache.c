#include "data/wordcache.h"
#include "data/strmap.h"
#include <stdlib.h>

enum { MAX_WORDS = 1 << 16, MAX_IDS = 1 << 22 };

struct wordcache {
	struct strmap *words;      /* word -> its entry */
	struct entry { uint32_t at, n; } *entries;
	size_t n, cap;
	struct ids ids;            /* every entry's ids, one after another */
};

struct wordcache *wordcache_new(void)
{
	struct wordcache *c = xcalloc(1, sizeof *c);
	c->words = strmap_new(1024);
	return c;
}

void wordcache_free(struct wordcache *c)
{
	if (!c)
		return;
	strmap_free(c->words);
	free(c->entries);
	free(c->ids.v);
	free(c);
}

int wordcache_get(const struct wordcache *c, const char *word, size_t n, struct ids *out)
{
	int32_t e = strmap_get(c->words, word, n);
	if (e < 0)
		return 0;
	for (uint32_t i = 0; i < c->entries[e].n; i++)
		ids_push(out, c->ids.v[c->entries[e].at + i]);
	return 1;
}

void wordcache_put(struct wordcache *c, const char *word, size_t n, const struct ids *out, size_t from)
{
	if (c->n >= MAX_WORDS || c->ids.n + (out->n - from) >= MAX_IDS) {
		strmap_clear(c->words);
		c->n = c->ids.n = 0;
	}
	grow(&c->entries, &c->cap, c->n + 1, sizeof *c->entries);
	c->entries[c->n] = (struct entry){(uint32_t)c->ids.n, (uint32_t)(out->n - from)};
	for (size_t i = from; i < out->n; i++)
		ids_push(&c->ids, out->v[i]);
	strmap_put(c->words, word, n, (int32_t)c->n++);
}
