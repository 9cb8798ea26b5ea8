#include "backend/plans.h"
#include "util/err.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EXACT_UP_TO = 64, ALIGN = 16 };

/* A slot: its key, its value, then whether it is used, each part aligned
 * for any type (the slots themselves are malloc'd). */
static size_t aligned(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static size_t slot_size(const struct plans *p)
{
	return aligned(p->key_size) + aligned(p->value_size) + ALIGN;
}

void plans_init(struct plans *p, size_t key_size, size_t value_size, size_t cap)
{
	*p = (struct plans){ key_size, value_size, cap, 0, NULL };
	p->slots = xcalloc(cap, slot_size(p));
}

void plans_free(struct plans *p)
{
	free(p->slots);
	p->slots = NULL;
}

static uint64_t hash_of(const unsigned char *b, size_t n)
{
	uint64_t h = 14695981039346656037ull;   /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

void *plans_get(struct plans *p, const void *key, int *made, const char *what)
{
	size_t value_at = aligned(p->key_size), used_at = value_at + aligned(p->value_size);
	size_t i = hash_of(key, p->key_size) & (p->cap - 1);
	unsigned char *s;
	*made = 0;
	for (;; i = (i + 1) & (p->cap - 1)) {
		s = p->slots + i * slot_size(p);
		if (!s[used_at])
			break;
		if (!memcmp(s, key, p->key_size))
			return s + value_at;
	}
	if (p->n == p->cap / 2)
		die("%s: more than %zu kinds in one process", what, p->cap / 2);
	s[used_at] = 1;
	memcpy(s, key, p->key_size);
	p->n++;
	*made = 1;
	return s + value_at;
}

int size_class(int x)
{
	if (x <= EXACT_UP_TO)
		return x;
	int step = 1;
	while (step * 16 <= x)
		step *= 2;
	return (x + step - 1) / step * step;
}
