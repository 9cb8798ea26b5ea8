/* External sort of keyed byte strings in bounded memory. Items come out in
 * (key, seq) order. What does not fit in the memory budget is sorted in
 * chunks, spilled as runs to a temp file and merged back (in several passes
 * when there are more runs than the budget can read at once). The order
 * depends only on the keys, never on the budget.
 *
 * Memory: at most the budget plus about 1 MiB and the largest item, while
 * adding and while reading out. Temp files are unlinked as soon as they are
 * created, so nothing is left behind whatever happens. */
#ifndef TS_EXTSORT_H
#define TS_EXTSORT_H
#include <stddef.h>
#include <stdint.h>

struct extsort_item {
	uint64_t key, seq;
	const void *data;   /* 8-byte aligned */
	uint32_t len;
};

struct extsort;
/* Temp files go in tmpdir; mem_bytes is the budget (at least 1 MiB). */
struct extsort *extsort_new(const char *tmpdir, size_t mem_bytes);
/* The largest item the budget holds. */
size_t extsort_max_item(const struct extsort *s);
/* Dies if one item does not fit in the budget. */
void extsort_add(struct extsort *s, uint64_t key, uint64_t seq, const void *data, uint32_t len);
/* Ends the input (on the first call) and starts the ordered output from its
 * beginning; call it again to read everything once more. */
void extsort_rewind(struct extsort *s);
/* The next item, or 0 at the end. it->data stays valid until the next call. */
int extsort_next(struct extsort *s, struct extsort_item *it);
uint64_t extsort_count(const struct extsort *s);
/* Runs spilled to disk while adding (0: everything fitted in memory). */
size_t extsort_spilled(const struct extsort *s);
void extsort_free(struct extsort *s);
#endif
