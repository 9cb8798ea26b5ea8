/* lib/data/trie.c against a search of the strings one by one: random
 * strings over a few bytes (NUL, 0xFF, and bytes enough that some nodes get
 * a row of all 256), many sharing their first 8 bytes or more, some added
 * twice with other values; for random texts, trie_prefixes must give every
 * string that begins the text, shortest first, each with the value it was
 * added with last, and trie_step/trie_value must walk to the same. */
#include "data/trie.h"
#include "check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { KEYS = 4000, TEXTS = 3000, MAX_LEN = 14 };

struct str {
	unsigned char s[MAX_LEN];
	size_t n;
	int32_t value;
};

static uint64_t state = 0x9E3779B97F4A7C15u;

static uint32_t next(void)
{
	state ^= state << 13, state ^= state >> 7, state ^= state << 17;
	return (uint32_t)(state >> 16);
}

/* A byte: mostly from a small alphabet (deep, shared paths), sometimes any
 * (wide nodes). */
static unsigned char some_byte(void)
{
	static const unsigned char few[] = { 0, 'a', 'b', 0xFF };
	return next() % 5 ? few[next() % sizeof few] : (unsigned char)next();
}

static void random_str(struct str *s, size_t min)
{
	s->n = min + next() % (MAX_LEN - min + 1);
	for (size_t i = 0; i < s->n; i++)
		s->s[i] = some_byte();
}

/* The value the last of keys[0..n) equal to s[0..len) was added with, or -1. */
static int32_t brute_value(const struct str *keys, size_t n, const unsigned char *s, size_t len)
{
	int32_t v = -1;
	for (size_t k = 0; k < n; k++)
		if (keys[k].n == len && !memcmp(keys[k].s, s, len))
			v = keys[k].value;
	return v;
}

int main(void)
{
	static struct str keys[KEYS];
	struct trie *t = trie_new();
	for (size_t k = 0; k < KEYS; k++) {
		if (k > 0 && next() % 8 == 0)
			keys[k] = keys[next() % k];   /* added again */
		else if (k > 0 && keys[k - 1].n >= 8 && next() % 2) {   /* another's first 8 bytes, its own after */
			random_str(&keys[k], 8);
			memcpy(keys[k].s, keys[next() % 2 ? k - 1 : k - 1 - next() % (k < 20 ? k : 20)].s, 8);
		} else {
			random_str(&keys[k], 1);
		}
		keys[k].value = (int32_t)k;
		trie_add(t, (const char *)keys[k].s, keys[k].n, keys[k].value);
	}
	trie_freeze(t);

	struct trie_hits hits = { 0 };
	size_t bad_hits = 0, bad_walks = 0, found = 0;
	for (size_t x = 0; x < TEXTS; x++) {
		struct str text;
		if (x % 2)
			random_str(&text, 1);
		else {   /* a key with more after it */
			text = keys[next() % KEYS];
			for (; text.n < MAX_LEN && next() % 2; text.n++)
				text.s[text.n] = some_byte();
		}
		trie_prefixes(t, (const char *)text.s, text.n, &hits);
		size_t h = 0;
		int32_t node = 0;
		for (size_t len = 1; len <= text.n; len++) {
			int32_t want = brute_value(keys, KEYS, text.s, len);
			if (node >= 0)
				node = trie_step(t, node, text.s[len - 1]);
			int32_t walked = node >= 0 ? trie_value(t, node) : -1;
			bad_walks += walked != want;
			if (want < 0)
				continue;
			found++;
			if (h >= hits.n || hits.v[h].len != len || hits.v[h].value != want)
				bad_hits++;
			h++;
		}
		bad_hits += h != hits.n;
	}
	CHECK(found > TEXTS, "the texts begin with %zu strings of the trie", found);
	CHECK(bad_hits == 0, "trie_prefixes gives each string that begins a text, shortest first, its last value (%zu texts wrong)",
	      bad_hits);
	CHECK(bad_walks == 0, "trie_step and trie_value walk to the same values (%zu places wrong)", bad_walks);

	struct trie *empty = trie_new();
	trie_freeze(empty);
	trie_prefixes(empty, "abc", 3, &hits);
	CHECK(hits.n == 0 && trie_step(empty, 0, 'a') < 0, "a trie of no strings holds none");
	trie_free(empty);
	free(hits.v);
	trie_free(t);
	CHECK_DONE();
}
