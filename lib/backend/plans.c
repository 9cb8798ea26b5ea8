#include "backend/plans.h"
#include "util/err.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EXACT_UP_TO = 64 };

void plans_init(struct plans *p, size_t key_size, size_t value_size, size_t cap)
{
	*p = (struct plans){ key_size, value_size, cap, 0, xcalloc(cap, 1 + key_size + value_size) };
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
	size_t slot = 1 + p->key_size + p->value_size;
	size_t i = hash_of(key, p->key_size) & (p->cap - 1);
	*made = 0;
	for (;; i = (i + 1) & (p->cap - 1)) {
		unsigned char *s = p->slots + i * slot;
		if (!s[0])
			break;
		if (!memcmp(s + 1, key, p->key_size))
			return s + 1 + p->key_size;
	}
	if (p->n == p->cap / 2)
		die("%s: more than %zu kinds in one process", what, p->cap / 2);
	unsigned char *s = p->slots + i * slot;
	s[0] = 1;
	memcpy(s + 1, key, p->key_size);
	p->n++;
	*made = 1;
	return s + 1 + p->key_size;
}

int size_bucket(int x)
{
	if (x <= EXACT_UP_TO)
		return x;
	int step = 1;
	while (step * 16 <= x)
		step *= 2;
	return (x + step - 1) / step * step;
}
