#include "data/unigram.h"
#include "data/strmap.h"
#include "data/wordcache.h"
#include "data/trie.h"
#include "data/utf8.h"
#include "util/strbuf.h"
#include <float.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a character no piece covers costs below the lowest score (HF's and
 * SentencePiece's kUnkPenalty). */
#define UNK_PENALTY 10.0
/* Token ids are below this (as in bpe.c). */
#define MAX_ID (1 << 24)

struct unigram {
	struct trie *trie;        /* piece -> id */
	struct strmap *ids;       /* piece -> id, for whole strings */
	double *score;
	struct strbuf text;       /* the pieces, each NUL-terminated */
	uint32_t *at;             /* by id: the piece's offset in text */
	int32_t size, unk, bytes[256];   /* bytes: <0xNN>'s ids under byte fallback, else -1 */
	double unk_score;
	int byte_fallback;
};

/* The best path to a place in the word: its score, where its last piece
 * starts, and that piece's id. */
struct node {
	double score;
	int32_t start, id;
};

struct unigram_space {
	struct trie_hits hits;
	struct node *lattice;
	size_t cap;
	struct wordcache *cache;
	int32_t *path;
	size_t path_cap;
};

/* The ids of the pieces in u->ids; the index of the first piece met
 * before, or -1. */
static long index_pieces(struct unigram *u)
{
	for (int32_t i = 0; i < u->size; i++) {
		const char *piece = u->text.s + u->at[i];
		if (strmap_put(u->ids, piece, strlen(piece), i) >= 0)
			return i;
	}
	return -1;
}

/* The pieces of u->text in u->trie; a pthread's start. */
static void *plant_pieces(void *up)
{
	struct unigram *u = up;
	for (int32_t i = 0; i < u->size; i++) {
		const char *piece = u->text.s + u->at[i];
		trie_add(u->trie, piece, strlen(piece), i);
	}
	trie_freeze(u->trie);
	return NULL;
}

static void read_pieces(const struct tjwhere *w, json_t *vocab, struct unigram *u)
{
	if (!json_is_array(vocab) || !json_array_size(vocab))
		tj_die(w, "\"vocab\" is not a list of [piece, score]");
	if (json_array_size(vocab) >= MAX_ID)
		tj_die(w, "vocab: %zu pieces, more than %d", json_array_size(vocab), MAX_ID - 1);
	u->size = (int32_t)json_array_size(vocab);
	u->score = xmalloc((size_t)u->size * sizeof *u->score);
	u->at = xmalloc((size_t)u->size * sizeof *u->at);
	u->trie = trie_new();
	u->ids = strmap_new((size_t)u->size);
	double lowest = DBL_MAX;
	size_t i;
	json_t *e;
	json_array_foreach(vocab, i, e) {
		json_t *p = json_array_get(e, 0), *s = json_array_get(e, 1);
		if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(s))
			tj_die(w, "vocab: entry %zu is not [piece, score]", i);
		const char *piece = json_string_value(p);
		size_t n = json_string_length(p);
		if (!n || memchr(piece, 0, n))
			tj_die(w, "vocab: entry %zu is an empty piece or holds a NUL", i);
		u->score[i] = json_number_value(s);
		u->at[i] = (uint32_t)u->text.n;
		sb_add(&u->text, piece, n + 1);
		if (u->score[i] < lowest)
			lowest = u->score[i];
	}
	pthread_t planter;   /* the two tables of the pieces, one a thread */
	int threads = !pthread_create(&planter, NULL, plant_pieces, u);
	if (!threads)
		plant_pieces(u);
	long twice = index_pieces(u);
	if (threads)
		pthread_join(planter, NULL);
	if (twice >= 0)
		tj_die(w, "vocab: the piece '%s' appears twice", u->text.s + u->at[twice]);
	u->unk_score = lowest - UNK_PENALTY;
}

struct unigram *unigram_new(const struct tjwhere *w, json_t *j)
{
	struct unigram *u = xcalloc(1, sizeof *u);
	read_pieces(w, json_object_get(j, "vocab"), u);
	json_t *unk = json_object_get(j, "unk_id");
	u->unk = -1;
	if (unk && !json_is_null(unk))
		u->unk = (int32_t)tj_int(w, j, "unk_id", 0, u->size - 1);
	u->byte_fallback = tj_bool(w, j, "byte_fallback", 0);
	for (int b = 0; b < 256; b++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", b);
		u->bytes[b] = u->byte_fallback ? strmap_get(u->ids, name, 6) : -1;
	}
	return u;
}

void unigram_free(struct unigram *u)
{
	if (!u)
		return;
	trie_free(u->trie);
	strmap_free(u->ids);
	free(u->score);
	free(u->at);
	sb_free(&u->text);
	free(u);
}

int32_t unigram_id(const struct unigram *u, const char *tok, size_t n) { return strmap_get(u->ids, tok, n); }
const char *unigram_token(const struct unigram *u, int32_t id)
{
	return id >= 0 && id < u->size ? u->text.s + u->at[id] : NULL;
}
int32_t unigram_size(const struct unigram *u) { return u->size; }

struct unigram_space *unigram_space_new(void)
{
	struct unigram_space *s = xcalloc(1, sizeof *s);
	s->cache = wordcache_new();
	return s;
}

void unigram_space_free(struct unigram_space *s)
{
	if (!s)
		return;
	free(s->hits.v);
	free(s->lattice);
	wordcache_free(s->cache);
	free(s->path);
	free(s);
}

/* Offers the path ending at end with score, its last piece id from start:
 * it stays only where it is the first or strictly better (HF's tie rule). */
static void offer(struct node *end, double score, int32_t start, int32_t id)
{
	if (end->start < 0 || score > end->score)
		*end = (struct node){score, start, id};
}

/* The best path over w: lattice[i] is the best path to byte i. */
static void viterbi(const struct unigram *u, struct trie_hits *hits, struct node *lat, const char *w, size_t n)
{
	for (size_t i = 0; i <= n; i++)
		lat[i] = (struct node){0, -1, -1};
	lat[0].start = 0;
	for (size_t at = 0; at < n;) {
		size_t k = utf8_len((unsigned char)w[at]);
		double here = lat[at].score;
		int single = 0;
		trie_prefixes(u->trie, w + at, n - at, hits);
		for (size_t h = 0; h < hits->n; h++) {
			int32_t id = hits->v[h].value;
			offer(&lat[at + hits->v[h].len], here + u->score[id], (int32_t)at, id);
			single |= hits->v[h].len == k;
		}
		if (!single)
			offer(&lat[at + k], here + u->unk_score, (int32_t)at, u->unk);
		at += k;
	}
}

/* The ids of a piece of the best path that the vocab lacks: its bytes'
 * <0xNN> under byte fallback, else the unknown id. */
static void push_unknown(const struct unigram *u, const char *s, size_t n, struct ids *out)
{
	size_t i = 0;
	while (u->byte_fallback && i < n && u->bytes[(unsigned char)s[i]] >= 0)
		i++;
	if (u->byte_fallback && i == n) {
		for (i = 0; i < n; i++)
			ids_push(out, u->bytes[(unsigned char)s[i]]);
		return;
	}
	if (u->unk < 0)
		die("a Unigram tokenizer without an unk_id met a character its pieces do not cover");
	ids_push(out, u->unk);
}

/* Walks the best path back from the end; unknown pieces next to each other
 * make one, and a piece is looked up by its text, as HF does. */
static void encode_uncached(const struct unigram *u, struct unigram_space *sp, const char *w, size_t n,
			    struct ids *out)
{
	grow(&sp->lattice, &sp->cap, n + 1, sizeof *sp->lattice);
	viterbi(u, &sp->hits, sp->lattice, w, n);
	size_t np = 0;
	for (size_t end = n; end > 0;) {   /* the pieces' starts, last first */
		size_t start = (size_t)sp->lattice[end].start;
		int unk = sp->lattice[end].id == u->unk;
		while (unk && start > 0 && sp->lattice[start].id == u->unk)
			start = (size_t)sp->lattice[start].start;
		grow(&sp->path, &sp->path_cap, np + 2, sizeof *sp->path);
		sp->path[np++] = (int32_t)start;
		sp->path[np++] = (int32_t)end;
		end = start;
	}
	while (np) {
		size_t end = (size_t)sp->path[--np], start = (size_t)sp->path[--np];
		int32_t id = sp->lattice[end].id;   /* a piece's own; unknowns by their text, as HF looks them up */
		if (id == u->unk)
			id = strmap_get(u->ids, w + start, end - start);
		if (id >= 0)
			ids_push(out, id);
		else
			push_unknown(u, w + start, end - start, out);
	}
}

void unigram_encode(const struct unigram *u, struct unigram_space *sp, const char *w, size_t n, struct ids *out)
{
	if (wordcache_get(sp->cache, w, n, out))
		return;
	size_t from = out->n;
	encode_uncached(u, sp, w, n, out);
	wordcache_put(sp->cache, w, n, out, from);
}
