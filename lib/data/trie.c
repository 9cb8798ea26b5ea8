#include "data/trie.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <stdlib.h>
#include <string.h>

/* Frozen, each node's children are a run of edges sorted by byte, and the
 * root's a table of all 256. Before, the strings wait in a list. */
struct node {
	int32_t value;
	uint32_t edges;           /* the first of its edges */
	uint16_t nedges;
	int32_t dense;            /* with many children: its row of 256 in dense, else -1 */
};

/* A node of more children than this gets a row of all 256 (searching many
 * children a byte at a time is most of a Unigram's work). */
enum { DENSE_FROM = 16 };

struct edge {
	unsigned char byte;
	int32_t node;
};

struct key {
	uint32_t at, n;           /* in keys */
	int32_t value;
	uint32_t order;           /* when it was added: the last of equal strings wins */
};

struct trie {
	struct node *nodes;
	size_t n, cap;
	struct edge *edges;
	size_t nedges, edge_cap;
	int32_t root[256];
	int32_t *dense;           /* rows of 256 children (-1: none) */
	size_t ndense;
	struct strbuf keys;       /* the strings added, until trie_freeze */
	struct key *pending;
	size_t npending, pending_cap;
};

struct trie *trie_new(void)
{
	return xcalloc(1, sizeof(struct trie));
}

void trie_free(struct trie *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->edges);
	free(t->dense);
	sb_free(&t->keys);
	free(t->pending);
	free(t);
}

void trie_add(struct trie *t, const char *s, size_t n, int32_t value)
{
	if (t->keys.n + n > UINT32_MAX)
		die("a tokenizer's strings take more than 4 GB");
	grow(&t->pending, &t->pending_cap, t->npending + 1, sizeof *t->pending);
	t->pending[t->npending] = (struct key){(uint32_t)t->keys.n, (uint32_t)n, value, (uint32_t)t->npending};
	t->npending++;
	sb_add(&t->keys, s, n);
}

static const char *sort_keys;   /* qsort has no context argument */

static int by_bytes(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	int c = memcmp(sort_keys + x->at, sort_keys + y->at, x->n < y->n ? x->n : y->n);
	if (c)
		return c;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int32_t new_node(struct trie *t)
{
	grow(&t->nodes, &t->cap, t->n + 1, sizeof *t->nodes);
	t->nodes[t->n] = (struct node){.value = -1, .dense = -1};
	return (int32_t)t->n++;
}

/* Gives node the run of edges of groups children. */
static size_t edges_for(struct trie *t, int32_t node, size_t groups)
{
	grow(&t->edges, &t->edge_cap, t->nedges + groups, sizeof *t->edges);
	size_t first = t->nedges;
	t->nedges += groups;
	t->nodes[node].edges = (uint32_t)first;
	t->nodes[node].nedges = (uint16_t)groups;
	return first;
}

/* The node of the sorted keys k[0..n), which share their first depth bytes;
 * its children, one a byte that follows, get a run of edges of their own.
 * A node of one child goes on in the loop, not a call: a long string makes
 * a long chain, not a deep stack. */
static int32_t build(struct trie *t, const struct key *k, size_t n, uint32_t depth)
{
	int32_t top = new_node(t);
	for (int32_t node = top;; depth++) {
		size_t i = 0;
		while (i < n && k[i].n == depth)   /* equal strings: the last added wins */
			t->nodes[node].value = k[i++].value;
		k += i, n -= i;
		size_t groups = 0;
		for (size_t j = 0; j < n; j++)
			groups += j == 0 || t->keys.s[k[j].at + depth] != t->keys.s[k[j - 1].at + depth];
		size_t first = edges_for(t, node, groups);
		if (groups == 1) {
			int32_t child = new_node(t);
			t->edges[first] = (struct edge){(unsigned char)t->keys.s[k[0].at + depth], child};
			node = child;
			continue;
		}
		for (size_t g = 0, i0 = 0; i0 < n; g++) {
			unsigned char byte = (unsigned char)t->keys.s[k[i0].at + depth];
			size_t j = i0;
			while (j < n && (unsigned char)t->keys.s[k[j].at + depth] == byte)
				j++;
			int32_t child = build(t, k + i0, j - i0, depth + 1);
			t->edges[first + g] = (struct edge){byte, child};
			i0 = j;
		}
		return top;
	}
}

void trie_freeze(struct trie *t)
{
	sort_keys = t->keys.s;
	if (t->npending) {
		qsort(t->pending, t->npending, sizeof *t->pending, by_bytes);
		build(t, t->pending, t->npending, 0);
	} else {
		new_node(t);   /* the root alone */
	}
	for (int b = 0; b < 256; b++)
		t->root[b] = -1;
	const struct node *root = &t->nodes[0];
	for (uint32_t e = root->edges; e < root->edges + root->nedges; e++)
		t->root[t->edges[e].byte] = t->edges[e].node;
	for (size_t i = 1; i < t->n; i++)
		if (t->nodes[i].nedges > DENSE_FROM)
			t->ndense++;
	t->dense = xmalloc((t->ndense ? t->ndense : 1) * 256 * sizeof *t->dense);
	for (size_t i = 1, row = 0; i < t->n; i++) {
		struct node *nd = &t->nodes[i];
		if (nd->nedges <= DENSE_FROM)
			continue;
		int32_t *r = t->dense + 256 * row;
		for (int b = 0; b < 256; b++)
			r[b] = -1;
		for (uint32_t e = nd->edges; e < nd->edges + nd->nedges; e++)
			r[t->edges[e].byte] = t->edges[e].node;
		nd->dense = (int32_t)row++;
	}
	sb_free(&t->keys);
	free(t->pending);
	t->pending = NULL;
	t->npending = t->pending_cap = 0;
}

/* The child of a node other than the root by byte, or -1. */
static int32_t child(const struct trie *t, const struct node *nd, unsigned char byte)
{
	if (nd->dense >= 0)
		return t->dense[256 * (size_t)nd->dense + byte];
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

int32_t trie_step(const struct trie *t, int32_t node, unsigned char byte)
{
	return node == 0 ? t->root[byte] : child(t, &t->nodes[node], byte);
}

int32_t trie_value(const struct trie *t, int32_t node) { return t->nodes[node].value; }

void trie_prefixes(const struct trie *t, const char *s, size_t n, struct trie_hits *h)
{
	h->n = 0;
	int32_t node = n ? t->root[(unsigned char)s[0]] : -1;
	for (size_t i = 1; node >= 0; i++) {
		if (t->nodes[node].value >= 0) {
			grow(&h->v, &h->cap, h->n + 1, sizeof *h->v);
			h->v[h->n++] = (struct trie_hit){(uint32_t)i, t->nodes[node].value};
		}
		if (i == n)
			break;
		node = child(t, &t->nodes[node], (unsigned char)s[i]);
	}
}
