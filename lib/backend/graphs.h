/* What the CUDA backend keeps to replay a training pass as a CUDA graph, on
 * the host and so testable without a GPU.
 *
 * A trace is the work one walk of the pass queued, in order: each kernel
 * (its function, launch shape and the bytes of its arguments: patchable in
 * an executable graph) and each library call (cuBLAS, cuDNN, a memset: a
 * tag and the bytes of everything it reads, which a graph cannot patch).
 * A later walk is matched against it item by item: the same, a kernel
 * whose arguments changed (a dropout seed, a loss weight; its node is
 * patched), or different (the graph cannot stand for this walk).
 *
 * A graph cache holds a few traces and their graphs by a key the caller
 * derives from the pass's shapes: a key seen once runs eagerly, is
 * captured the second time (every buffer has grown to its size by then),
 * and replayed from the third. */
#ifndef TS_GRAPHS_H
#define TS_GRAPHS_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { TRACE_SHAPE = 7 };          /* grid x y z, block x y z, shared bytes */

struct trace_item {
	const void *fn;            /* the kernel, or the call's tag */
	int kernel;                /* 1: a kernel, whose node can be patched */
	unsigned shape[TRACE_SHAPE];
	void *node;                /* the kernel's node in the graph */
	size_t at, bytes;          /* its argument bytes in the arena */
};

struct trace {
	struct trace_item *items;
	size_t n, cap, cursor;     /* cursor: the next item a walk is matched against */
	unsigned char *arena;
	size_t used, arena_cap;
};

enum trace_verdict { TRACE_SAME, TRACE_PATCHED, TRACE_DIFFERENT };

void trace_clear(struct trace *t);
void trace_free(struct trace *t);
/* Appends an item of a capture and its argument bytes. */
void trace_append(struct trace *t, const struct trace_item *it, const void *bytes);
/* Starts matching a walk against t from its first item. */
void trace_rewind(struct trace *t);
/* The walk's next item against t's: TRACE_PATCHED for a kernel of the same
 * function whose shape or bytes changed (t takes them, and *node is the one
 * to patch); TRACE_DIFFERENT for another function or kind, a call whose
 * bytes changed, or an item past t's end. */
enum trace_verdict trace_match(struct trace *t, const struct trace_item *it, const void *bytes,
			       void **node);
/* Whether the walk matched every item of t. */
int trace_complete(const struct trace *t);

enum { GRAPH_SLOTS = 16, GRAPH_FAILURES_MAX = 3, GRAPH_MISSES_MAX = 3 };

enum graph_plan { GRAPH_WALK_EAGER, GRAPH_WALK_CAPTURE, GRAPH_WALK_REPLAY };

struct graph_slot {
	uint64_t key;
	int seen;                  /* a walk under this key came before */
	int captured;              /* graph and exec hold its graph */
	int misses;                /* replays whose walk differed */
	int broken;                /* its walks stay eager */
	unsigned long used;        /* when last planned, for eviction */
	struct trace trace;
	void *graph, *exec;        /* the CUDA backend's */
};

struct graph_cache {
	struct graph_slot slot[GRAPH_SLOTS];
	unsigned long clock;
	int failures;              /* captures that failed; at GRAPH_FAILURES_MAX, off */
	int off;
	char note[200];
	/* frees a captured slot's graph (evicted, or its walk differed) */
	void (*drop)(struct graph_slot *s);
};

void graph_cache_init(struct graph_cache *c, void (*drop)(struct graph_slot *s));
/* What to do with the walk under key, in *slot: eagerly where the key is
 * new (the least recently used slot taken for it), its graphs failed, or
 * the cache is off; capture it the second time; replay it after. */
enum graph_plan graph_plan(struct graph_cache *c, uint64_t key, struct graph_slot **slot);
void graph_captured(struct graph_slot *s);
/* A replay ran: its key's misses start again from 0. */
void graph_replayed(struct graph_slot *s);
/* A replay's walk differed from the slot's trace, or a buffer grew in a
 * capture: its graph is dropped and captured again when the key next comes,
 * after GRAPH_MISSES_MAX misses in a row never again (the key's walks are
 * eager until it is evicted). */
void graph_missed(struct graph_cache *c, struct graph_slot *s);
/* A capture failed, for why: the key's walks stay eager, and at
 * GRAPH_FAILURES_MAX failures the cache is off. Returns the note for the
 * log. */
const char *graph_failed(struct graph_cache *c, struct graph_slot *s, const char *why);
#ifdef __cplusplus
}
#endif
#endif
