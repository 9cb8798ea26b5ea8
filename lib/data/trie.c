#include "data/trie.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Frozen, a node's children sit side by side, sorted by byte, and so do
 * the bytes that lead to them, in an array of their own: looking for a
 * child compares one line of bytes (16 at once), then reads the one record
 * the walk goes on with. The root has a table of all 256 besides. Before,
 * the strings wait in a list. */
struct node {
	int32_t value;
	uint32_t first;           /* its first child */
	uint16_t n;               /* children */
	int32_t dense;            /* with many children: its row of 256 in dense, else -1 */
};

/* A node of more children than this gets a row of all 256 (searching many
 * children a byte at a time is most of a Unigram's work). */
enum { DENSE_FROM = 16 };
_Static_assert(DENSE_FROM <= 16, "one compare of 16 bytes finds a child among the rest");

struct key {
	uint64_t head;            /* its first 8 bytes, big-endian, zeros after its end: sorts most keys alone */
	uint32_t at, n;           /* in keys */
	int32_t value;
	uint32_t order;           /* when it was added: the last of equal strings wins */
};

struct trie {
	struct node *nodes;
	size_t n, cap;
	int32_t root[256];
	unsigned char *byte;      /* by node: the byte that leads there; DENSE_FROM more after the last */
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
	free(t->byte);
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
	uint64_t head = 0;
	for (size_t i = 0; i < 8; i++)
		head = head << 8 | (i < n ? (unsigned char)s[i] : 0);
	t->pending[t->npending] = (struct key){head, (uint32_t)t->keys.n, (uint32_t)n, value, (uint32_t)t->npending};
	t->npending++;
	sb_add(&t->keys, s, n);
}

/* For qsort_r: keys by their bytes (context: the strings), the shorter first
 * where one begins the other, the one added first where they are equal. */
static int by_bytes(const void *a, const void *b, void *strings)
{
	const struct key *x = a, *y = b;
	const char *s = strings;
	if (x->head != y->head)
		return x->head < y->head ? -1 : 1;
	int c = memcmp(s + x->at, s + y->at, x->n < y->n ? x->n : y->n);
	if (c)
		return c;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorts k[0..n) by by_bytes: by their heads a byte at a time, the last
 * first (a stable radix sort), then each run of equal heads by the rest. */
static void sort_keys(struct key *k, size_t n, const char *strings)
{
	struct key *tmp = xmalloc(n * sizeof *tmp), *from = k, *to = tmp;
	for (int shift = 0; shift < 64; shift += 8) {
		size_t at[257] = {0};
		for (size_t i = 0; i < n; i++)
			at[(from[i].head >> shift & 0xFF) + 1]++;
		if (at[(from[0].head >> shift & 0xFF) + 1] == n)
			continue;   /* one byte for all: nothing moves */
		for (int b = 0; b < 256; b++)
			at[b + 1] += at[b];
		for (size_t i = 0; i < n; i++)
			to[at[from[i].head >> shift & 0xFF]++] = from[i];
		struct key *swap = from;
		from = to, to = swap;
	}
	if (from != k)
		memcpy(k, from, n * sizeof *k);
	free(tmp);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && k[j].head == k[i].head; j++)
			;
		if (j - i > 1)
			qsort_r(k + i, j - i, sizeof *k, by_bytes, (void *)strings);
	}
}

/* n new nodes side by side: the first's index. */
static uint32_t new_nodes(struct trie *t, size_t n)
{
	if (t->n + n > INT32_MAX)
		die("a tokenizer's strings make more than 2^31 trie nodes");
	grow(&t->nodes, &t->cap, t->n + n, sizeof *t->nodes);
	for (size_t i = 0; i < n; i++)
		t->nodes[t->n + i] = (struct node){.value = -1, .dense = -1};
	t->n += n;
	return (uint32_t)(t->n - n);
}

/* The end of the run of keys from k[i] on that have the same byte at depth. */
static size_t same_byte(const struct trie *t, const struct key *k, size_t n, size_t i, uint32_t depth)
{
	size_t j = i + 1;
	while (j < n && t->keys.s[k[j].at + depth] == t->keys.s[k[i].at + depth])
		j++;
	return j;
}

/* Fills node, of the sorted keys k[0..n) that share their first depth
 * bytes: its value, and its children, one a byte that follows, side by
 * side. A node of one child goes on in the loop, not a call: a long string
 * makes a long chain, not a deep stack. */
static void build(struct trie *t, uint32_t node, const struct key *k, size_t n, uint32_t depth)
{
	for (;; depth++) {
		size_t i = 0;
		while (i < n && k[i].n == depth)   /* equal strings: the last added wins */
			t->nodes[node].value = k[i++].value;
		k += i, n -= i;
		size_t groups = 0;
		for (size_t j = 0; j < n; j = same_byte(t, k, n, j, depth))
			groups++;
		if (!groups)
			return;
		uint32_t first = new_nodes(t, groups);
		t->nodes[node].first = first;
		t->nodes[node].n = (uint16_t)groups;   /* at most 256: one a byte */
		for (size_t g = 0, j = 0; j < n; g++, j = same_byte(t, k, n, j, depth))
			t->byte[first + g] = (unsigned char)t->keys.s[k[j].at + depth];
		if (groups == 1) {
			node = first;
			continue;
		}
		for (size_t g = 0, j = 0, end; j < n; g++, j = end) {
			end = same_byte(t, k, n, j, depth);
			build(t, first + (uint32_t)g, k + j, end - j, depth + 1);
		}
		return;
	}
}

void trie_freeze(struct trie *t)
{
	grow(&t->nodes, &t->cap, t->keys.n + 1, sizeof *t->nodes);   /* its most: a node a byte, and the root */
	t->byte = xcalloc(t->keys.n + 1 + DENSE_FROM, 1);
	new_nodes(t, 1);   /* the root */
	if (t->npending) {
		sort_keys(t->pending, t->npending, t->keys.s);
		build(t, 0, t->pending, t->npending, 0);
	}
	for (int b = 0; b < 256; b++)
		t->root[b] = -1;
	const struct node *root = &t->nodes[0];
	for (uint32_t c = root->first; c < root->first + root->n; c++)
		t->root[t->byte[c]] = (int32_t)c;
	for (size_t i = 1; i < t->n; i++)
		if (t->nodes[i].n > DENSE_FROM)
			t->ndense++;
	t->dense = xmalloc((t->ndense ? t->ndense : 1) * 256 * sizeof *t->dense);
	for (size_t i = 1, row = 0; i < t->n; i++) {
		struct node *nd = &t->nodes[i];
		if (nd->n <= DENSE_FROM)
			continue;
		int32_t *r = t->dense + 256 * row;
		for (int b = 0; b < 256; b++)
			r[b] = -1;
		for (uint32_t c = nd->first; c < nd->first + nd->n; c++)
			r[t->byte[c]] = (int32_t)c;
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
	const unsigned char *b = t->byte + nd->first;
#ifdef __SSE2__
	/* n <= DENSE_FROM = 16: one compare; the bytes past the n children ignored */
	unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)b), _mm_set1_epi8((char)byte)));
	m &= (1u << nd->n) - 1;
	return m ? (int32_t)(nd->first + (uint32_t)__builtin_ctz(m)) : -1;
#else
	for (uint32_t i = 0; i < nd->n && b[i] <= byte; i++)
		if (b[i] == byte)
			return (int32_t)(nd->first + i);
	return -1;
#endif
}

int32_t trie_step(const struct trie *t, int32_t node, unsigned char byte)
{
	return node == 0 ? t->root[byte] : child(t, &t->nodes[node], byte);
}

int32_t trie_value(const struct trie *t, int32_t node) { return t->nodes[node].value; }

void trie_prefixes(const struct trie *t, const char *s, size_t n, struct trie_hits *h)
{
	h->n = 0;
	grow(&h->v, &h->cap, n, sizeof *h->v);   /* a hit at most a byte */
	int32_t node = n ? t->root[(unsigned char)s[0]] : -1;
	for (size_t i = 1; node >= 0; i++) {
		if (t->nodes[node].value >= 0) {
			h->v[h->n++] = (struct trie_hit){(uint32_t)i, t->nodes[node].value};
		}
		if (i == n)
			break;
		node = child(t, &t->nodes[node], (unsigned char)s[i]);
	}
}
