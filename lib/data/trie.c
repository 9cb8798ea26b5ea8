#include "data/trie.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

/* While building, each node's children are a list; frozen, they are a run
 * of edges sorted by byte, and the root's a table of all 256. */
struct node {
	int32_t value;
	int32_t child, sibling;   /* building */
	uint32_t edges;           /* frozen: the first of its edges */
	uint16_t nedges;
	unsigned char byte;
};

struct edge {
	unsigned char byte;
	int32_t node;
};

struct trie {
	struct node *nodes;
	size_t n, cap;
	struct edge *edges;
	int32_t root[256];
};

static int32_t new_node(struct trie *t, unsigned char byte)
{
	grow(&t->nodes, &t->cap, t->n + 1, sizeof *t->nodes);
	t->nodes[t->n] = (struct node){.value = -1, .child = -1, .sibling = -1, .byte = byte};
	return (int32_t)t->n++;
}

struct trie *trie_new(void)
{
	struct trie *t = xcalloc(1, sizeof *t);
	new_node(t, 0);
	return t;
}

void trie_free(struct trie *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->edges);
	free(t);
}

static int32_t list_child(const struct trie *t, int32_t n, unsigned char byte)
{
	int32_t c = t->nodes[n].child;
	while (c >= 0 && t->nodes[c].byte != byte)
		c = t->nodes[c].sibling;
	return c;
}

void trie_add(struct trie *t, const char *s, size_t n, int32_t value)
{
	int32_t at = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char byte = (unsigned char)s[i];
		int32_t c = list_child(t, at, byte);
		if (c < 0) {
			c = new_node(t, byte);
			t->nodes[c].sibling = t->nodes[at].child;
			t->nodes[at].child = c;
		}
		at = c;
	}
	t->nodes[at].value = value;
}

static int by_byte(const void *a, const void *b)
{
	return ((const struct edge *)a)->byte - ((const struct edge *)b)->byte;
}

void trie_freeze(struct trie *t)
{
	t->edges = xmalloc((t->n ? t->n : 1) * sizeof *t->edges);
	uint32_t ne = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct node *nd = &t->nodes[i];
		nd->edges = ne;
		for (int32_t c = nd->child; c >= 0; c = t->nodes[c].sibling)
			t->edges[ne++] = (struct edge){t->nodes[c].byte, c};
		nd->nedges = (uint16_t)(ne - nd->edges);
		qsort(t->edges + nd->edges, nd->nedges, sizeof *t->edges, by_byte);
	}
	for (int b = 0; b < 256; b++)
		t->root[b] = list_child(t, 0, (unsigned char)b);
}

int32_t trie_step(const struct trie *t, int32_t node, unsigned char byte)
{
	if (node == 0)
		return t->root[byte];
	const struct node *nd = &t->nodes[node];
	size_t lo = nd->edges, hi = lo + nd->nedges;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->edges[mid].byte < byte)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nd->edges + nd->nedges && t->edges[lo].byte == byte ? t->edges[lo].node : -1;
}

int32_t trie_value(const struct trie *t, int32_t node) { return t->nodes[node].value; }
int trie_starts(const struct trie *t, unsigned char byte) { return t->root[byte] >= 0; }
