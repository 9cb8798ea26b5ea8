/* The vocab of a tokenizer.json's BPE or WordPiece model: {"token": id, ...},
 * ids checked (whole numbers below 2^24, none twice), looked up both ways. */
#ifndef TS_TOKMAP_H
#define TS_TOKMAP_H
#include "data/strmap.h"
#include "data/tjson.h"
#include "util/strbuf.h"

struct tokmap {
	struct strmap *ids;        /* token -> id */
	struct strbuf text;        /* the tokens, each NUL-terminated */
	uint32_t *at;              /* by id: the token's offset in text + 1, 0 for none */
	int32_t size;              /* one more than the largest id */
};

/* Token ids are below this: more than any vocab holds (Gemma's has 262,144). */
#define TOKMAP_MAX_ID (1 << 24)

void tokmap_read(const struct tjwhere *w, json_t *vocab, struct tokmap *m);
void tokmap_free(struct tokmap *m);
static inline int32_t tokmap_id(const struct tokmap *m, const char *tok, size_t n) { return strmap_get(m->ids, tok, n); }
/* The token of id, or NULL. */
static inline const char *tokmap_token(const struct tokmap *m, int32_t id)
{
	return id >= 0 && id < m->size && m->at[id] ? m->text.s + m->at[id] - 1 : NULL;
}
#endif
