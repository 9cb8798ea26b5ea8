#include "format/jsonarena.h"
#include "util/err.h"
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum { BLOCK = 1 << 24, ALIGN = 16 };

/* A block: the next one back, then its bytes. */
struct json_blocks {
	struct json_blocks *prev;
	size_t used, size;
	_Alignas(ALIGN) char bytes[];
};

static _Thread_local struct json_blocks *top;   /* this thread's arena, NULL: none */
static _Thread_local int arena_open;   /* between begin and end */

static int in_arena(const void *p)
{
	for (const struct json_blocks *b = top; b; b = b->prev)
		if ((const char *)p >= b->bytes && (const char *)p < b->bytes + b->size)
			return 1;
	return 0;
}

static void *arena_malloc(size_t n)
{
	if (!arena_open)
		return malloc(n);
	if (n > SIZE_MAX - sizeof(struct json_blocks) - ALIGN)
		return NULL;   /* jansson reports it */
	n = (n + ALIGN - 1) / ALIGN * ALIGN;
	if (!top || top->size - top->used < n) {
		size_t size = n > BLOCK ? n : BLOCK;
		struct json_blocks *b = malloc(sizeof *b + size);
		if (!b)
			return NULL;   /* jansson reports it */
		*b = (struct json_blocks){ top, 0, size };
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

static void set_alloc_funcs(void)
{
	json_set_alloc_funcs(arena_malloc, arena_free);
}

void json_arena_begin(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	json_arena_end();   /* one left open by a die() that returned (the fuzzers') */
	arena_open = 1;
	pthread_once(&once, set_alloc_funcs);   /* once: another thread may be reading */
}

void json_arena_end(void)
{
	arena_open = 0;
	while (top) {
		struct json_blocks *b = top;
		top = b->prev;
		free(b);
	}
}

struct json_blocks *json_arena_detach(void)
{
	struct json_blocks *b = top;
	top = NULL;
	arena_open = 0;
	return b;
}

void json_arena_adopt(struct json_blocks *blocks)
{
	if (!blocks)
		return;
	if (!arena_open)
		die("JSON values adopted outside an arena");   /* a bug: they would be freed value by value */
	struct json_blocks *last = blocks;
	while (last->prev)
		last = last->prev;
	last->prev = top;
	top = blocks;
}
