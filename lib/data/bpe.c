#include "data/bpe.h"
#include <utf8proc.h>
#include "data/tokmap.h"
#include "data/wordcache.h"
#include "data/utf8.h"
#include "util/strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A merge: (left << 32 | right) -> (rank << 32 | merged id). */
struct merge {
	uint64_t key, value;
};

struct bpe {
	struct tokmap vocab;
	struct merge *merges;      /* an open-addressed table, mmask + 1 slots */
	size_t mmask;
	int32_t unk;               /* -1: none */
	int fuse_unk, byte_fallback, ignore_merges;
	char *prefix, *suffix;
	size_t prefix_n, suffix_n;
	int32_t *small;            /* without affixes: the id of each character below U+0800, or -1 */
};

enum { SMALL = 0x800 };

struct sym {
	int32_t id, prev, next;
	uint64_t merge;   /* the merge of this symbol and the next: merge_of's */
};

struct bpe_space {
	struct wordcache *cache;
	struct sym *syms;
	size_t sym_cap;
	uint64_t *heap;   /* a long word's pairs to merge: merge_all_long's */
	size_t heap_cap;
	struct strbuf key;
};

static const uint64_t EMPTY = UINT64_MAX;

/* The slot of key, or the empty one where it would go: the key's bits
 * mixed by a multiply (Fibonacci hashing), the table probed on from there,
 * a key and its value in one cache line. */
static struct merge *merge_slot(const struct bpe *b, uint64_t key)
{
	uint64_t h = key * 0x9E3779B97F4A7C15u;
	for (size_t i = (size_t)(h ^ h >> 32) & b->mmask;; i = (i + 1) & b->mmask)
		if (b->merges[i].key == key || b->merges[i].key == EMPTY)
			return &b->merges[i];
}

/* The rank and merged id of the pair (l, r), or EMPTY. */
static uint64_t merge_of(const struct bpe *b, int32_t l, int32_t r)
{
	uint64_t key = (uint64_t)l << 32 | (uint32_t)r;
	const struct merge *k = merge_slot(b, key);
	return k->key == key ? k->value : EMPTY;
}

/* The two tokens of merge e: "a b" or ["a", "b"]. */
static void merge_parts(const struct tjwhere *w, json_t *e, size_t i, const char **a, size_t *na, const char **b,
			size_t *nb)
{
	if (json_is_string(e)) {
		const char *s = json_string_value(e), *sp = strchr(s, ' ');
		if (!sp || strchr(sp + 1, ' '))
			tj_die(w, "merge %zu ('%s') is not two tokens with a space between", i + 1, s);
		*a = s, *na = (size_t)(sp - s), *b = sp + 1, *nb = strlen(sp + 1);
	} else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
		   json_is_string(json_array_get(e, 1))) {
		*a = json_string_value(json_array_get(e, 0)), *na = json_string_length(json_array_get(e, 0));
		*b = json_string_value(json_array_get(e, 1)), *nb = json_string_length(json_array_get(e, 1));
	} else {
		tj_die(w, "merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i + 1);
	}
}

static int32_t known(const struct tjwhere *w, const struct bpe *b, const char *tok, size_t n, size_t i)
{
	int32_t id = tokmap_id(&b->vocab, tok, n);
	if (id < 0)
		tj_die(w, "merge %zu names '%.*s', which is not in the vocab", i + 1, (int)n, tok);
	return id;
}

static void read_merges(const struct tjwhere *w, json_t *merges, struct bpe *b)
{
	if (!json_is_array(merges))
		tj_die(w, "\"merges\" is not a list");
	size_t n = json_array_size(merges), slots = 16;
	while (slots < 2 * n)
		slots *= 2;
	b->merges = xmalloc(slots * sizeof *b->merges);
	memset(b->merges, 0xff, slots * sizeof *b->merges);
	b->mmask = slots - 1;
	struct strbuf joined = {0};
	for (size_t i = 0; i < n; i++) {
		const char *l, *r;
		size_t nl, nr;
		merge_parts(w, json_array_get(merges, i), i, &l, &nl, &r, &nr);
		if (nr < b->prefix_n)
			tj_die(w, "merge %zu: '%.*s' is shorter than continuing_subword_prefix", i + 1, (int)nr, r);
		joined.n = 0;
		sb_add(&joined, l, nl);
		sb_add(&joined, r + b->prefix_n, nr - b->prefix_n);
		int32_t a = known(w, b, l, nl, i), c = known(w, b, r, nr, i);
		int32_t m = known(w, b, joined.s, joined.n, i);
		uint64_t key = (uint64_t)a << 32 | (uint32_t)c;
		/* a pair merged twice keeps its later rank, as HF's map does */
		*merge_slot(b, key) = (struct merge){ key, (uint64_t)i << 32 | (uint32_t)m };
	}
	sb_free(&joined);
}

static char *affix(const struct tjwhere *w, json_t *j, const char *key, size_t *n)
{
	const char *s = tj_str(w, j, key, "");
	*n = strlen(s);
	return xstrdup(s);
}

struct bpe *bpe_new(const struct tjwhere *w, json_t *j)
{
	struct bpe *b = xcalloc(1, sizeof *b);
	b->prefix = affix(w, j, "continuing_subword_prefix", &b->prefix_n);
	b->suffix = affix(w, j, "end_of_word_suffix", &b->suffix_n);
	b->fuse_unk = tj_bool(w, j, "fuse_unk", 0);
	b->byte_fallback = tj_bool(w, j, "byte_fallback", 0);
	b->ignore_merges = tj_bool(w, j, "ignore_merges", 0);
	json_t *dropout = json_object_get(j, "dropout");
	if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
		tj_die(w, "\"dropout\" is not supported: records must be the same every time the text is tokenized "
			  "(make it null)");
	tokmap_read(w, json_object_get(j, "vocab"), &b->vocab);
	read_merges(w, json_object_get(j, "merges"), b);
	if (!b->prefix_n && !b->suffix_n) {   /* GPT-2's byte alphabet lies below U+0800 */
		b->small = xmalloc(SMALL * sizeof *b->small);
		for (int32_t c = 0; c < SMALL; c++) {
			char u[4];
			b->small[c] = tokmap_id(&b->vocab, u, (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)u));
		}
	}
	const char *unk = tj_str(w, j, "unk_token", NULL);
	b->unk = unk ? tokmap_id(&b->vocab, unk, strlen(unk)) : -1;
	if (unk && b->unk < 0)
		tj_die(w, "unk_token '%s' is not in the vocab", unk);
	return b;
}

void bpe_free(struct bpe *b)
{
	if (!b)
		return;
	tokmap_free(&b->vocab);
	free(b->merges);
	free(b->prefix);
	free(b->suffix);
	free(b->small);
	free(b);
}

int32_t bpe_id(const struct bpe *b, const char *tok, size_t n) { return tokmap_id(&b->vocab, tok, n); }
const char *bpe_token(const struct bpe *b, int32_t id) { return tokmap_token(&b->vocab, id); }
int32_t bpe_size(const struct bpe *b) { return b->vocab.size; }

struct bpe_space *bpe_space_new(void)
{
	struct bpe_space *s = xcalloc(1, sizeof *s);
	s->cache = wordcache_new();
	return s;
}

void bpe_space_free(struct bpe_space *s)
{
	if (!s)
		return;
	wordcache_free(s->cache);
	free(s->syms);
	free(s->heap);
	sb_free(&s->key);
	free(s);
}

static void push_sym(struct bpe_space *sp, size_t *n, int32_t id)
{
	grow(&sp->syms, &sp->sym_cap, *n + 1, sizeof *sp->syms);
	sp->syms[*n] = (struct sym){id, (int32_t)*n - 1, (int32_t)*n + 1, EMPTY};
	++*n;
}

/* One character of the word as the vocab spells it: with the prefix and
 * suffix its place asks for; *n its length. */
static const char *char_key(const struct bpe *b, struct bpe_space *sp, const char *c, size_t k, int first, int last,
			    size_t *n)
{
	if (!(b->prefix_n && !first) && !(b->suffix_n && last))
		return *n = k, c;
	struct strbuf *key = &sp->key;
	key->n = 0;
	if (!first)
		sb_add(key, b->prefix, b->prefix_n);
	sb_add(key, c, k);
	if (last)
		sb_add(key, b->suffix, b->suffix_n);
	return *n = key->n, key->s;
}

/* Pushes the <0xNN> tokens of the bytes of s, where the vocab has them all;
 * returns whether it did. */
static int push_bytes(const struct bpe *b, struct bpe_space *sp, size_t *ns, const char *s, size_t n)
{
	size_t at = *ns;
	for (size_t j = 0; j < n; j++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", (unsigned char)s[j]);
		int32_t id = tokmap_id(&b->vocab, name, 6);
		if (id < 0) {
			*ns = at;
			return 0;
		}
		push_sym(sp, ns, id);
	}
	return 1;
}

/* The word's characters as symbols: each its id, else under byte fallback
 * the <0xNN> of the bytes the vocab would spell it with (affixes too, as HF
 * does), else the unknown token (one for a run of them when fused), else
 * nothing. */
static size_t initial_symbols(const struct bpe *b, struct bpe_space *sp, const char *w, size_t n)
{
	size_t ns = 0, k, len;
	int last_unk = 0;
	for (size_t i = 0; i < n; i += k) {
		k = utf8_len((unsigned char)w[i]);
		if (b->small && k <= 2) {
			int32_t c = k == 1 ? (unsigned char)w[i] : ((unsigned char)w[i] & 0x1F) << 6 | ((unsigned char)w[i + 1] & 0x3F);
			if (b->small[c] >= 0) {
				push_sym(sp, &ns, b->small[c]);
				last_unk = 0;
				continue;
			}
		}
		const char *key = char_key(b, sp, w + i, k, i == 0, i + k == n, &len);
		int32_t id = tokmap_id(&b->vocab, key, len);
		if (id >= 0 || (b->byte_fallback && push_bytes(b, sp, &ns, key, len))) {
			if (id >= 0)
				push_sym(sp, &ns, id);
			last_unk = 0;
			continue;
		}
		if (b->unk >= 0 && !(b->fuse_unk && last_unk))
			push_sym(sp, &ns, b->unk);
		last_unk = b->unk >= 0;
	}
	if (ns)
		sp->syms[ns - 1].next = -1;
	return ns;
}

/* Merges the pair of s[at] and the next symbol into s[at], and looks up
 * the merges of the pairs it then makes with its neighbours. */
static void merge_at(const struct bpe *b, struct sym *s, int32_t at)
{
	int32_t gone = s[at].next;
	s[at].id = (int32_t)(uint32_t)s[at].merge;
	s[at].next = s[gone].next;
	s[at].merge = s[gone].merge = EMPTY;
	if (s[at].next >= 0) {
		s[s[at].next].prev = at;
		s[at].merge = merge_of(b, s[at].id, s[s[at].next].id);
	}
	if (s[at].prev >= 0)
		s[s[at].prev].merge = merge_of(b, s[s[at].prev].id, s[at].id);
}

/* A word of at most this many symbols finds each merge by a scan of its
 * pairs; a longer one keeps them in a heap, so that its time is not the
 * square of its length. */
enum { SCAN_MOST = 48 };

/* The key of the pair of s[i] in the heap: its rank, then its place. */
static uint64_t heap_key(const struct sym *s, int32_t i)
{
	return (s[i].merge >> 32) << 32 | (uint32_t)i;
}

static void heap_push(struct bpe_space *sp, size_t *n, uint64_t key)
{
	grow(&sp->heap, &sp->heap_cap, *n + 1, sizeof *sp->heap);
	uint64_t *h = sp->heap;
	size_t i = (*n)++;
	for (; i && h[(i - 1) / 2] > key; i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = key;
}

static uint64_t heap_pop(struct bpe_space *sp, size_t *n)
{
	uint64_t *h = sp->heap, top = h[0], last = h[--*n];
	size_t i = 0;
	for (size_t c; (c = 2 * i + 1) < *n; i = c) {
		if (c + 1 < *n && h[c + 1] < h[c])
			c++;
		if (h[c] >= last)
			break;
		h[i] = h[c];
	}
	h[i] = last;
	return top;
}

/* merge_all for a long word: each pair's merge in a heap, the lowest rank
 * and then the leftmost on top. A pair's entry is stale where its symbol's
 * merge has since changed rank (a merge's rank names its pair) or gone. */
static void merge_all_long(const struct bpe *b, struct bpe_space *sp)
{
	struct sym *s = sp->syms;
	size_t n = 0;
	for (int32_t i = 0; s[i].next >= 0; i = s[i].next)
		if (s[i].merge != EMPTY)
			heap_push(sp, &n, heap_key(s, i));
	while (n) {
		uint64_t top = heap_pop(sp, &n);
		int32_t at = (int32_t)(uint32_t)top;
		if (s[at].merge == EMPTY || (s[at].merge >> 32) != top >> 32)
			continue;
		merge_at(b, s, at);
		if (s[at].merge != EMPTY)
			heap_push(sp, &n, heap_key(s, at));
		if (s[at].prev >= 0 && s[s[at].prev].merge != EMPTY)
			heap_push(sp, &n, heap_key(s, s[at].prev));
	}
}

/* Merges the symbols: the pair of lowest rank, the leftmost of equals, until
 * no pair has a merge. */
static void merge_all(const struct bpe *b, struct bpe_space *sp, size_t ns)
{
	struct sym *s = sp->syms;
	if (ns < 2)
		return;
	for (int32_t i = 0; s[i].next >= 0; i = s[i].next)   /* each pair's merge, looked up once */
		s[i].merge = merge_of(b, s[i].id, s[s[i].next].id);
	if (ns > SCAN_MOST) {
		merge_all_long(b, sp);
		return;
	}
	for (;;) {
		uint64_t best = EMPTY;
		int32_t at = -1;
		for (int32_t i = 0; s[i].next >= 0; i = s[i].next)
			if ((s[i].merge >> 32) < (best >> 32))   /* the rank decides; EMPTY's is above all */
				best = s[i].merge, at = i;
		if (at < 0)
			return;
		merge_at(b, s, at);
	}
}

static void encode_uncached(const struct bpe *b, struct bpe_space *sp, const char *w, size_t n, struct ids *out)
{
	int32_t whole;
	if (b->ignore_merges && (whole = tokmap_id(&b->vocab, w, n)) >= 0) {
		ids_push(out, whole);
		return;
	}
	size_t ns = initial_symbols(b, sp, w, n);
	merge_all(b, sp, ns);
	for (int32_t i = ns ? 0 : -1; i >= 0; i = sp->syms[i].next)
		ids_push(out, sp->syms[i].id);
}

void bpe_encode(const struct bpe *b, struct bpe_space *sp, const char *w, size_t n, struct ids *out)
{
	if (wordcache_get(sp->cache, w, n, out))
		return;
	size_t from = out->n;
	encode_uncached(b, sp, w, n, out);
	wordcache_put(sp->cache, w, n, out, from);
}
