#include "data/strmap.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct slot {
	uint64_t hash;
	uint32_t off, len;   /* the key in the arena */
	int32_t v;           /* -1: empty */
};

struct strmap {
	struct slot *slots;
	size_t mask, n;
	struct strbuf keys;
};

static void alloc_slots(struct strmap *m, size_t nslots)
{
	m->slots = xmalloc(nslots * sizeof *m->slots);
	for (size_t i = 0; i < nslots; i++)
		m->slots[i].v = -1;
	m->mask = nslots - 1;
}

struct strmap *strmap_new(size_t expect)
{
	struct strmap *m = xcalloc(1, sizeof *m);
	size_t nslots = 16;
	while (nslots < 2 * expect)
		nslots *= 2;
	alloc_slots(m, nslots);
	return m;
}

void strmap_free(struct strmap *m)
{
	if (!m)
		return;
	free(m->slots);
	sb_free(&m->keys);
	free(m);
}

static struct slot *find(const struct strmap *m, const char *key, size_t n, uint64_t h)
{
	for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
		struct slot *s = &m->slots[i];
		if (s->v < 0 || (s->hash == h && s->len == n && (!n || !memcmp(m->keys.s + s->off, key, n))))
			return s;
	}
}

static void rehash(struct strmap *m)
{
	struct slot *old = m->slots;
	size_t nold = m->mask + 1;
	alloc_slots(m, 2 * nold);
	for (size_t i = 0; i < nold; i++)
		if (old[i].v >= 0) {
			size_t j = old[i].hash & m->mask;
			while (m->slots[j].v >= 0)
				j = (j + 1) & m->mask;
			m->slots[j] = old[i];
		}
	free(old);
}

int32_t strmap_put(struct strmap *m, const char *key, size_t n, int32_t v)
{
	if (n > UINT32_MAX || m->keys.n + n > UINT32_MAX)
		die("a token of %zu bytes is more than a tokenizer holds", n);
	if (2 * (m->n + 1) > m->mask + 1)
		rehash(m);
	uint64_t h = XXH3_64bits(key, n);
	struct slot *s = find(m, key, n, h);
	int32_t was = s->v;
	if (was < 0) {
		*s = (struct slot){h, (uint32_t)m->keys.n, (uint32_t)n, v};
		sb_add(&m->keys, key, n);
		m->n++;
	}
	s->v = v;
	return was;
}

int32_t strmap_get(const struct strmap *m, const char *key, size_t n)
{
	return find(m, key, n, XXH3_64bits(key, n))->v;
}


void strmap_clear(struct strmap *m)
{
	for (size_t i = 0; i <= m->mask; i++)
		m->slots[i].v = -1;
	m->n = m->keys.n = 0;
}
