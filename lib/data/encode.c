#include "data/encode.h"
#include "util/err.h"
#include <stdio.h>
#include <string.h>

void template_bert(struct template *t, int32_t cls, int32_t sep)
{
	*t = (struct template){
		.single = {{cls, 0}, {TPL_A, 0}, {sep, 0}}, .nsingle = 3,
		.pair = {{cls, 0}, {TPL_A, 0}, {sep, 0}, {TPL_B, 1}, {sep, 1}}, .npair = 5,
	};
}

long template_specials(const struct template *t, int pair)
{
	return pair ? t->npair - 2 : t->nsingle - 1;
}

const char *encode_check(const struct encode_opts *o, int pair)
{
	static _Thread_local char why[128];
	long specials = template_specials(o->tpl, pair);
	if (o->max_len && o->max_len <= specials + (pair && o->fold)) {
		if (pair)
			snprintf(why, sizeof why, "--max-len %ld leaves no room for the text pair (%ld at least)",
				 o->max_len, specials + 1 + (o->fold != 0));
		else
			snprintf(why, sizeof why, "--max-len must be at least %ld", specials + 1);
		return why;
	}
	if (o->fold && !o->max_len)
		return "--fold needs a --max-len";
	if (o->stride && !o->fold)
		return "--stride is the overlap of folded pieces: it goes with --fold";
	/* a pair's second text always keeps at least half the room */
	long room = o->max_len - specials;
	long folded = pair ? room - room / 2 : room;
	if (o->fold && o->stride >= folded) {
		snprintf(why, sizeof why, "--stride %ld must be smaller than the %ld tokens --max-len %ld leaves for folded text",
			 o->stride, folded, o->max_len);
		return why;
	}
	return NULL;
}

void truncate_longest_first(size_t *na, size_t *nb, size_t budget)
{
	if (*na + *nb <= budget)
		return;
	size_t n1 = *na, n2 = *nb;
	int swap = n1 > n2;
	if (swap)
		n1 = *nb, n2 = *na;
	n2 = n1 > budget ? n1 : (n1 > budget - n1 ? n1 : budget - n1);
	if (n1 + n2 > budget) {
		n1 = budget / 2;
		n2 = n1 + budget % 2;
	}
	*na = swap ? n2 : n1;
	*nb = swap ? n1 : n2;
}

/* Copies v[from, from+n) to p; v is NULL for an empty text, and then n is 0. */
static int32_t *put_ids(int32_t *p, const int32_t *v, size_t from, size_t n)
{
	if (n)
		memcpy(p, v + from, n * sizeof *p);
	return p + n;
}

/* The tags a piece of a's tokens keeps: those not left to a neighbour. */
struct kept {
	size_t from, to;
};

/* Fills t with the template around a[a0,a0+na) (and b[b0,b0+nb)) and
 * packs it; with tags, its label is their [a0,a0+na), -100 at the special
 * tokens and outside [a0+keep.from, a0+keep.to). Type ids go in only where
 * one is not 0. */
static void pack_one(const struct encode_opts *o, const struct ids *a, size_t a0, size_t na,
		     const struct ids *b, size_t b0, size_t nb, const int32_t *tags, struct kept keep,
		     struct tokrec *t, msgpack_packer *pk)
{
	const struct template_part *part = b ? o->tpl->pair : o->tpl->single;
	int nparts = b ? o->tpl->npair : o->tpl->nsingle;
	size_t n = na + (b ? nb : 0) + (size_t)template_specials(o->tpl, b != NULL);
	grow(&t->ids, &t->cap_ids, n, sizeof *t->ids);
	grow(&t->types_buf, &t->cap_types, n, 1);
	int32_t *labels = tags ? xmalloc(n * sizeof *labels) : NULL;
	size_t at = 0;
	int typed = 0;
	for (int i = 0; i < nparts; i++) {
		size_t k = part[i].id == TPL_A ? na : part[i].id == TPL_B ? nb : 1;
		if (part[i].id == TPL_A)
			put_ids(t->ids + at, a->v, a0, na);
		else if (part[i].id == TPL_B)
			put_ids(t->ids + at, b->v, b0, nb);
		else
			t->ids[at] = part[i].id;
		if (labels) {
			for (size_t j = 0; j < k; j++)
				labels[at + j] = part[i].id == TPL_A && j >= keep.from && j < keep.to ? tags[a0 + j] : -100;
		}
		memset(t->types_buf + at, part[i].type, k);
		typed |= part[i].type != 0;
		at += k;
	}
	t->n = n;
	t->types = typed ? t->types_buf : NULL;
	if (!labels) {
		tokrec_pack(pk, t);
		return;
	}
	t->label_kind = LABEL_LIST;
	t->labels = labels;
	t->nlabels = n;
	tokrec_pack(pk, t);
	t->labels = NULL;
	free(labels);
}

/* Folding cuts the last text (b for pairs, else a) into pieces of room
 * tokens overlapping by stride; a pair's first text is kept whole, cut to half
 * the room when it would leave the second none. A tag in an overlap is kept
 * in one piece, so that every word is trained and scored once: the first
 * half of the overlap (the odd token with it) in the piece before, the rest
 * in the piece after. */
static size_t pack_folds(const struct encode_opts *o, const struct ids *a, const struct ids *b,
			 const int32_t *tags, struct tokrec *t, msgpack_packer *pk)
{
	size_t room = (size_t)(o->max_len - template_specials(o->tpl, b != NULL)), na = a->n;
	const struct ids *cut = a;
	if (b) {
		if (na > room / 2 && na + b->n > room)
			na = room / 2;
		room -= na;
		cut = b;
	}
	size_t step = room - (size_t)o->stride, half = (size_t)o->stride - (size_t)o->stride / 2;
	size_t pieces = 0;
	for (size_t start = 0;; start += step) {
		size_t len = cut->n - start < room ? cut->n - start : room;
		t->fold = (int)pieces++;
		struct kept keep = { start ? half : 0, start + len < cut->n ? step + half : len };
		if (b)
			pack_one(o, a, 0, na, b, start, len, NULL, keep, t, pk);
		else
			pack_one(o, a, start, len, NULL, 0, 0, tags, keep, t, pk);
		if (start + len >= cut->n)
			break;
	}
	return pieces;
}

size_t encode_pack(const struct encode_opts *o, const struct ids *a, const struct ids *b,
		   const int32_t *tags, struct tokrec *t, msgpack_packer *pk)
{
	if (o->fold)
		return pack_folds(o, a, b, tags, t, pk);
	t->fold = -1;
	size_t na = a->n, nb = b ? b->n : 0;
	if (o->max_len) {
		size_t budget = (size_t)(o->max_len - template_specials(o->tpl, b != NULL));
		if (b)
			truncate_longest_first(&na, &nb, budget);
		else if (na > budget)
			na = budget;
	}
	pack_one(o, a, 0, na, b, 0, nb, tags, (struct kept){ 0, na }, t, pk);
	return 1;
}
