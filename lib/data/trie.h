/* A byte trie of strings with an int32 value each, walked a byte at a
 * time: for the longest added token at a place in text, and the pieces of a
 * Unigram vocab that start there. Built by adding, then frozen into sorted
 * arrays that a walk searches. */
#ifndef TS_TRIE_H
#define TS_TRIE_H
#include <stddef.h>
#include <stdint.h>

struct trie;

struct trie *trie_new(void);
void trie_free(struct trie *t);
/* Sets the value (>= 0) of s[0..n), n > 0; before trie_freeze only. */
void trie_add(struct trie *t, const char *s, size_t n, int32_t value);
void trie_freeze(struct trie *t);
/* The root is node 0. The child of node by byte, or -1. */
int32_t trie_step(const struct trie *t, int32_t node, unsigned char byte);
/* The value of the string that ends at node, or -1. */
int32_t trie_value(const struct trie *t, int32_t node);

/* The strings that begin s[0..n): each its length and value, shortest
 * first, into h (grown). */
struct trie_hit {
	uint32_t len;
	int32_t value;
};
struct trie_hits {
	struct trie_hit *v;
	size_t n, cap;
};
void trie_prefixes(const struct trie *t, const char *s, size_t n, struct trie_hits *h);
#endif
