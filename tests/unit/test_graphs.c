/* The CUDA backend's graph bookkeeping on the CPU: a walk matched against a
 * trace (the same, a kernel patched, different), and the cache's plan for a
 * key (eager, capture, replay), its eviction, misses and failures. */
#include "backend/graphs.h"
#include "check.h"
#include <string.h>

static int kernel_a, kernel_b, call_tag;   /* addresses standing for functions */

static struct trace_item item(const void *fn, int kernel, unsigned grid, size_t bytes)
{
	return (struct trace_item){ fn, kernel, { grid, 1, 1, 256, 1, 1, 0 }, NULL, 0, bytes };
}

/* a capture of three items: kernel a (args {1, 2}), a call, kernel b */
static void capture(struct trace *t, void **nodes)
{
	int a[2] = { 1, 2 }, c[3] = { 7, 8, 9 }, b = 5;
	struct trace_item i = item(&kernel_a, 1, 10, sizeof a);
	i.node = nodes[0];
	trace_append(t, &i, a);
	i = item(&call_tag, 0, 0, sizeof c);
	trace_append(t, &i, c);
	i = item(&kernel_b, 1, 4, sizeof b);
	i.node = nodes[2];
	trace_append(t, &i, &b);
}

static void test_trace(void)
{
	struct trace t = { 0 };
	int n0, n2;
	void *nodes[3] = { &n0, NULL, &n2 }, *node = NULL;
	capture(&t, nodes);
	CHECK(t.n == 3 && t.used == 2 * sizeof(int) + 3 * sizeof(int) + sizeof(int),
	      "a capture of three items keeps their bytes (%zu items, %zu bytes)", t.n, t.used);

	int a[2] = { 1, 2 }, c[3] = { 7, 8, 9 }, b = 5;
	struct trace_item ia = item(&kernel_a, 1, 10, sizeof a), ic = item(&call_tag, 0, 0, sizeof c),
			  ib = item(&kernel_b, 1, 4, sizeof b);
	trace_rewind(&t);
	int same = trace_match(&t, &ia, a, &node) == TRACE_SAME &&
		   trace_match(&t, &ic, c, &node) == TRACE_SAME &&
		   trace_match(&t, &ib, &b, &node) == TRACE_SAME;
	CHECK(same && trace_complete(&t), "the same walk again: every item the same, and complete");

	trace_rewind(&t);
	a[1] = 3;   /* a seed changed */
	enum trace_verdict v = trace_match(&t, &ia, a, &node);
	CHECK(v == TRACE_PATCHED && node == &n0, "a kernel's argument changed: patched, its node given");
	CHECK(!trace_complete(&t), "a walk two items short is not complete");
	trace_rewind(&t);
	CHECK(trace_match(&t, &ia, a, &node) == TRACE_SAME,
	      "the patched arguments are the trace's: the next walk with them is the same");
	ib.shape[0] = 8;
	trace_match(&t, &ic, c, &node);
	node = NULL;
	CHECK(trace_match(&t, &ib, &b, &node) == TRACE_PATCHED && node == &n2,
	      "a kernel's grid changed: patched");

	trace_rewind(&t);
	trace_match(&t, &ia, a, &node);
	c[2] = 10;   /* a library call's pointer or size changed */
	CHECK(trace_match(&t, &ic, c, &node) == TRACE_DIFFERENT,
	      "a library call's bytes changed: different (a graph cannot patch it)");

	trace_rewind(&t);
	CHECK(trace_match(&t, &ib, &b, &node) == TRACE_DIFFERENT,
	      "another kernel where the trace has kernel a: different");
	struct trace_item longer = item(&kernel_a, 1, 10, sizeof a + 1);
	trace_rewind(&t);
	CHECK(trace_match(&t, &longer, a, &node) == TRACE_DIFFERENT,
	      "kernel a with arguments of another size: different");
	struct trace_item as_call = item(&kernel_a, 0, 10, sizeof a);
	trace_rewind(&t);
	CHECK(trace_match(&t, &as_call, a, &node) == TRACE_DIFFERENT,
	      "a call where the trace has a kernel: different");

	trace_rewind(&t);
	c[2] = 9;
	trace_match(&t, &ia, a, &node);
	trace_match(&t, &ic, c, &node);
	trace_match(&t, &ib, &b, &node);
	CHECK(trace_match(&t, &ib, &b, &node) == TRACE_DIFFERENT, "an item past the trace's end: different");
	trace_clear(&t);
	CHECK(t.n == 0 && t.used == 0, "cleared");
	trace_free(&t);
}

static int dropped;
static void drop(struct graph_slot *s)
{
	(void)s;
	dropped++;
}

/* the plan for key, and the slot planned; a capture marked as made */
static enum graph_plan plan(struct graph_cache *c, uint64_t key, struct graph_slot **s)
{
	enum graph_plan p = graph_plan(c, key, s);
	if (p == GRAPH_WALK_CAPTURE)
		graph_captured(*s);
	return p;
}

static void test_cache(void)
{
	struct graph_cache c;
	struct graph_slot *s, *first;
	graph_cache_init(&c, drop);
	CHECK(plan(&c, 42, &first) == GRAPH_WALK_EAGER, "a key's first walk: eager");
	CHECK(plan(&c, 42, &s) == GRAPH_WALK_CAPTURE && s == first, "its second: captured, in its slot");
	CHECK(plan(&c, 42, &s) == GRAPH_WALK_REPLAY && plan(&c, 42, &s) == GRAPH_WALK_REPLAY,
	      "its third and on: replayed");

	/* the other slots' keys: 42 is the least recently used when one more comes */
	for (uint64_t k = 1; k < GRAPH_SLOTS; k++)
		plan(&c, k, &s);
	CHECK(dropped == 0 && plan(&c, 42, &s) == GRAPH_WALK_REPLAY,
	      "%d other keys leave 42's graph in its slot", GRAPH_SLOTS - 1);
	for (uint64_t k = 1; k < GRAPH_SLOTS; k++) {
		plan(&c, k, &s);
		plan(&c, k, &s);   /* captured */
	}
	CHECK(plan(&c, GRAPH_SLOTS, &s) == GRAPH_WALK_EAGER && s == first && dropped == 1,
	      "one key more takes the least recently used slot, 42's, and drops its graph (%d)", dropped);
	CHECK(plan(&c, 42, &s) == GRAPH_WALK_EAGER, "42 again after its eviction: eager, as new");

	/* misses */
	graph_cache_init(&c, drop);
	dropped = 0;
	plan(&c, 7, &s), plan(&c, 7, &s);
	graph_missed(&c, s);
	CHECK(dropped == 1 && plan(&c, 7, &s) == GRAPH_WALK_CAPTURE,
	      "a replay whose walk differed drops the graph, and the key is captured again");
	for (int i = 1; i < 2 * GRAPH_MISSES_MAX; i++) {   /* each miss followed by a replay */
		graph_missed(&c, s);
		plan(&c, 7, &s);
		graph_replayed(s);
	}
	CHECK(plan(&c, 7, &s) == GRAPH_WALK_REPLAY && dropped == 2 * GRAPH_MISSES_MAX,
	      "misses with replays between them: the key is still captured and replayed");
	for (int i = 1; i < GRAPH_MISSES_MAX; i++) {
		graph_missed(&c, s);
		plan(&c, 7, &s);
	}
	graph_missed(&c, s);
	CHECK(plan(&c, 7, &s) == GRAPH_WALK_EAGER && plan(&c, 7, &s) == GRAPH_WALK_EAGER,
	      "after %d misses in a row the key stays eager", GRAPH_MISSES_MAX);
	graph_cache_init(&c, drop);
	dropped = 0;
	plan(&c, 8, &s);
	graph_plan(&c, 8, &s);   /* a capture that a grown buffer gives up */
	graph_missed(&c, s);
	CHECK(dropped == 0 && plan(&c, 8, &s) == GRAPH_WALK_CAPTURE,
	      "a miss in a capture drops no graph, and the key is captured again");

	/* failures */
	graph_cache_init(&c, drop);
	plan(&c, 1, &s);
	graph_plan(&c, 1, &s);
	const char *note = graph_failed(&c, s, "an upload inside the pass");
	CHECK(note && strstr(note, "an upload inside the pass") && !strstr(note, "every other"),
	      "a failed capture's note says why: %s", note);
	CHECK(plan(&c, 1, &s) == GRAPH_WALK_EAGER, "a key whose capture failed stays eager");
	plan(&c, 2, &s);
	CHECK(plan(&c, 2, &s) == GRAPH_WALK_CAPTURE, "other keys are still captured");
	for (uint64_t k = 3; k < 3 + GRAPH_FAILURES_MAX - 1; k++) {
		plan(&c, k, &s);
		graph_plan(&c, k, &s);
		note = graph_failed(&c, s, "a buffer grew");
	}
	CHECK(c.off && strstr(note, "every other"), "at %d failures graphs are off: %s",
	      GRAPH_FAILURES_MAX, note);
	CHECK(plan(&c, 2, &s) == GRAPH_WALK_EAGER, "off: even a captured key walks eagerly");
}

int main(void)
{
	test_trace();
	test_cache();
	CHECK_DONE();
}
