/* Whether two token records hold the same record, for round-trip checks. */
#ifndef TS_SAME_TOKREC_H
#define TS_SAME_TOKREC_H
#include "data/tokrec.h"
#include <string.h>

/* memcmp for n bytes that may be none at NULL (a record without ids) */
static inline int same_bytes(const void *a, const void *b, size_t n)
{
	return !n || !memcmp(a, b, n);
}

static inline int same_tokrec(const struct tokrec *a, const struct tokrec *b)
{
	if (a->n != b->n || !same_bytes(a->ids, b->ids, a->n * sizeof *a->ids) || strcmp(a->id, b->id) ||
	    a->id_is_num != b->id_is_num || !a->types != !b->types ||
	    (a->types && !same_bytes(a->types, b->types, a->n)) || a->label_kind != b->label_kind ||
	    a->fold != b->fold)
		return 0;
	switch (a->label_kind) {
	case LABEL_INT: return a->label == b->label;
	case LABEL_FLOAT: return !memcmp(&a->flabel, &b->flabel, sizeof a->flabel);
	case LABEL_LIST:
		return a->nlabels == b->nlabels && same_bytes(a->labels, b->labels, a->nlabels * sizeof *a->labels);
	default: return 1;
	}
}
#endif
