#include "data/wpmodel.h"
#include "data/tokmap.h"
#include "data/wordcache.h"
#include <stdlib.h>
#include <string.h>

struct wpmodel {
	struct tokmap vocab;
	int32_t unk;
	char *prefix;
	size_t prefix_n;
	long long max_chars;
};

struct wpmodel_space {
	struct wordcache *cache;
	struct strbuf piece;
};

struct wpmodel *wpmodel_new(const struct tjwhere *w, json_t *j)
{
	struct wpmodel *m = xcalloc(1, sizeof *m);
	tokmap_read(w, json_object_get(j, "vocab"), &m->vocab);
	const char *unk = tj_str(w, j, "unk_token", "[UNK]");
	if ((m->unk = tokmap_id(&m->vocab, unk, strlen(unk))) < 0)
		tj_die(w, "unk_token '%s' is not in the vocab", unk);
	m->prefix = xstrdup(tj_str(w, j, "continuing_subword_prefix", "##"));
	m->prefix_n = strlen(m->prefix);
	json_t *max = json_object_get(j, "max_input_chars_per_word");
	m->max_chars = max && !json_is_null(max) ? tj_int(w, j, "max_input_chars_per_word", 0, 1LL << 40) : 100;
	return m;
}

void wpmodel_free(struct wpmodel *m)
{
	if (!m)
		return;
	tokmap_free(&m->vocab);
	free(m->prefix);
	free(m);
}

int32_t wpmodel_id(const struct wpmodel *m, const char *tok, size_t n) { return tokmap_id(&m->vocab, tok, n); }
const char *wpmodel_token(const struct wpmodel *m, int32_t id) { return tokmap_token(&m->vocab, id); }
int32_t wpmodel_size(const struct wpmodel *m) { return m->vocab.size; }

int wpmodel_continues(const struct wpmodel *m, int32_t id)
{
	const char *tok = tokmap_token(&m->vocab, id);
	return tok && m->prefix_n && !strncmp(tok, m->prefix, m->prefix_n);
}

struct wpmodel_space *wpmodel_space_new(void)
{
	struct wpmodel_space *s = xcalloc(1, sizeof *s);
	s->cache = wordcache_new();
	return s;
}

void wpmodel_space_free(struct wpmodel_space *s)
{
	if (!s)
		return;
	wordcache_free(s->cache);
	sb_free(&s->piece);
	free(s);
}

/* The id of the longest piece of w at start (with the prefix after the
 * first), *end past it; -1 where there is none. */
static int32_t longest(const struct wpmodel *m, struct strbuf *piece, const char *w, size_t n, size_t start, size_t *end)
{
	for (size_t e = n; e > start;) {
		piece->n = 0;
		if (start)
			sb_add(piece, m->prefix, m->prefix_n);
		sb_add(piece, w + start, e - start);
		int32_t id = tokmap_id(&m->vocab, piece->s, piece->n);
		if (id >= 0) {
			*end = e;
			return id;
		}
		do   /* one character shorter */
			e--;
		while (e > start && ((unsigned char)w[e] & 0xC0) == 0x80);
	}
	return -1;
}

static void encode_uncached(const struct wpmodel *m, struct wpmodel_space *sp, const char *w, size_t n,
			    struct ids *out)
{
	size_t chars = 0, first = out->n;
	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)w[i] & 0xC0) != 0x80;
	if ((long long)chars > m->max_chars) {
		ids_push(out, m->unk);
		return;
	}
	for (size_t start = 0, end; start < n; start = end) {
		int32_t id = longest(m, &sp->piece, w, n, start, &end);
		if (id < 0) {
			out->n = first;
			ids_push(out, m->unk);
			return;
		}
		ids_push(out, id);
	}
}

void wpmodel_encode(const struct wpmodel *m, struct wpmodel_space *sp, const char *w, size_t n, struct ids *out)
{
	if (wordcache_get(sp->cache, w, n, out))
		return;
	size_t from = out->n;
	encode_uncached(m, sp, w, n, out);
	wordcache_put(sp->cache, w, n, out, from);
}
