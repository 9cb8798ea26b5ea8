#include "backend/graphs.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void trace_clear(struct trace *t)
{
	t->n = t->cursor = t->used = 0;
}

void trace_free(struct trace *t)
{
	free(t->items);
	free(t->arena);
	*t = (struct trace){ 0 };
}

void trace_append(struct trace *t, const struct trace_item *it, const void *bytes)
{
	grow(&t->items, &t->cap, t->n + 1, sizeof *t->items);
	grow(&t->arena, &t->arena_cap, t->used + it->bytes, 1);
	struct trace_item *d = &t->items[t->n++];
	*d = *it;
	d->at = t->used;
	if (it->bytes)
		memcpy(t->arena + t->used, bytes, it->bytes);
	t->used += it->bytes;
}

void trace_rewind(struct trace *t)
{
	t->cursor = 0;
}

enum trace_verdict trace_match(struct trace *t, const struct trace_item *it, const void *bytes,
			       void **node)
{
	if (t->cursor >= t->n)
		return TRACE_DIFFERENT;
	struct trace_item *s = &t->items[t->cursor];
	if (s->fn != it->fn || s->kernel != it->kernel || s->bytes != it->bytes)
		return TRACE_DIFFERENT;
	unsigned char *old = t->arena + s->at;
	int same = !memcmp(s->shape, it->shape, sizeof s->shape) &&
		   (!it->bytes || !memcmp(old, bytes, it->bytes));
	if (!same && !s->kernel)
		return TRACE_DIFFERENT;
	t->cursor++;
	if (same)
		return TRACE_SAME;
	memcpy(s->shape, it->shape, sizeof s->shape);
	memcpy(old, bytes, it->bytes);
	*node = s->node;
	return TRACE_PATCHED;
}

int trace_complete(const struct trace *t)
{
	return t->cursor == t->n;
}

void graph_cache_init(struct graph_cache *c, void (*drop)(struct graph_slot *s))
{
	memset(c, 0, sizeof *c);
	c->drop = drop;
}

static void drop_graph(struct graph_cache *c, struct graph_slot *s)
{
	if (s->captured)
		c->drop(s);
	s->captured = 0;
	s->graph = s->exec = NULL;
}

enum graph_plan graph_plan(struct graph_cache *c, uint64_t key, struct graph_slot **slot)
{
	struct graph_slot *s = NULL, *oldest = &c->slot[0];
	for (int i = 0; i < GRAPH_SLOTS; i++) {
		if (c->slot[i].seen && c->slot[i].key == key)
			s = &c->slot[i];
		if (c->slot[i].used < oldest->used)
			oldest = &c->slot[i];
	}
	if (!s) {     /* a new key: the least recently used slot is its */
		s = oldest;
		drop_graph(c, s);
		trace_clear(&s->trace);
		s->key = key;
		s->seen = s->misses = s->broken = 0;
	}
	s->used = ++c->clock;
	*slot = s;
	if (!s->seen || c->off || s->broken) {
		s->seen = 1;
		return GRAPH_WALK_EAGER;
	}
	return s->captured ? GRAPH_WALK_REPLAY : GRAPH_WALK_CAPTURE;
}

void graph_captured(struct graph_slot *s)
{
	s->captured = 1;
}

void graph_replayed(struct graph_slot *s)
{
	s->misses = 0;
}

void graph_missed(struct graph_cache *c, struct graph_slot *s)
{
	drop_graph(c, s);
	s->broken = ++s->misses >= GRAPH_MISSES_MAX;
}

const char *graph_failed(struct graph_cache *c, struct graph_slot *s, const char *why)
{
	drop_graph(c, s);
	s->broken = 1;
	c->off = ++c->failures >= GRAPH_FAILURES_MAX;
	snprintf(c->note, sizeof c->note, "CUDA graphs: a capture failed (%s); that shape runs "
		 "eagerly%s", why, c->off ? ", and so does every other from now on" : "");
	return c->note;
}
