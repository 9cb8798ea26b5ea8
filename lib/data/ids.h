/* A growable array of token ids, what every tokenizer appends to. */
#ifndef TS_IDS_H
#define TS_IDS_H
#include "util/err.h"
#include <stddef.h>
#include <stdint.h>

struct ids { int32_t *v; size_t n, cap; };

static inline void ids_push(struct ids *ids, int32_t id)
{
	if (ids->n == ids->cap)
		grow(&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v);
	ids->v[ids->n++] = id;
}
#endif
