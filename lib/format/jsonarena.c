#include "format/jsonarena.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

enum { BLOCK = 1 << 24, ALIGN = 16 };

/* A block: the next one back, then its bytes. */
struct block {
	struct block *prev;
	size_t used, size;
	_Alignas(ALIGN) char bytes[];
};

static _Thread_local struct block *top;   /* this thread's arena, NULL: none */
static _Thread_local int arena_open;   /* between begin and end */

static int in_arena(const void *p)
{
	for (const struct block *b = top; b; b = b->prev)
		if ((const char *)p >= b->bytes && (const char *)p < b->bytes + b->size)
			return 1;
	return 0;
}

static void *arena_malloc(size_t n)
{
	if (!arena_open)
		return malloc(n);
	if (n > SIZE_MAX - sizeof(struct block) - ALIGN)
		return NULL;   /* jansson reports it */
	n = (n + ALIGN - 1) / ALIGN * ALIGN;
	if (!top || top->size - top->used < n) {
		size_t size = n > BLOCK ? n : BLOCK;
		struct block *b = malloc(sizeof *b + size);
		if (!b)
			return NULL;   /* jansson reports it */
		*b = (struct block){ top, 0, size };
		top = b;
	}
	void *p = top->bytes + top->used;
	top->used += n;
	return p;
}

static void arena_free(void *p)
{
	if (!arena_open || !in_arena(p))
		free(p);
}

void json_arena_begin(void)
{
	json_arena_end();   /* one left open by a die() that returned (the fuzzers') */
	arena_open = 1;
	json_set_alloc_funcs(arena_malloc, arena_free);
}

void json_arena_end(void)
{
	arena_open = 0;
	while (top) {
		struct block *b = top;
		top = b->prev;
		free(b);
	}
}
