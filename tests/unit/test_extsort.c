/* External sort: output order and content against an in-memory reference
 * sort, whatever the memory budget (many runs and merge passes, or none). */
#include "check.h"
#include "data/extsort.h"
#include "expect_die.h"
#include "util/err.h"
#include "util/rng.h"
#include <stdlib.h>
#include <string.h>

static char tmpdir[] = "/tmp/ts-test-extsort.XXXXXX";

enum { NITEMS = 12000 };

struct ref { uint64_t key, seq; };

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Item seq: a key with many ties (to exercise the seq order) and bytes that
 * say which item they belong to. */
static uint64_t item_key(uint64_t seq) { return rng_hash(5, seq) % 3000; }
static uint32_t item_len(uint64_t seq) { return (uint32_t)(rng_hash(6, seq) % 2000); }
static uint8_t item_byte(uint64_t seq, uint32_t i) { return (uint8_t)(seq * 31 + i); }

static struct extsort *fill_sort(size_t mem)
{
	struct extsort *s = extsort_new(tmpdir, mem);
	uint8_t buf[2000];
	for (uint64_t seq = 0; seq < NITEMS; seq++) {
		uint32_t len = item_len(seq);
		for (uint32_t i = 0; i < len; i++)
			buf[i] = item_byte(seq, i);
		extsort_add(s, item_key(seq), seq, buf, len);
	}
	return s;
}

/* Reads the whole output; 1 when it is the reference order with intact items. */
static int output_matches(struct extsort *s, const struct ref *ref)
{
	struct extsort_item it;
	uint64_t n = 0;
	int ok = 1;
	extsort_rewind(s);
	while (extsort_next(s, &it)) {
		ok &= n < NITEMS && it.key == ref[n].key && it.seq == ref[n].seq && it.len == item_len(it.seq) &&
		      (uintptr_t)it.data % 8 == 0;
		for (uint32_t i = 0; ok && i < it.len; i++)
			ok &= ((const uint8_t *)it.data)[i] == item_byte(it.seq, i);
		n++;
	}
	return ok && n == NITEMS;
}

static void test_order(void)
{
	struct ref *ref = xmalloc(NITEMS * sizeof *ref);
	for (uint64_t seq = 0; seq < NITEMS; seq++)
		ref[seq] = (struct ref){item_key(seq), seq};
	qsort(ref, NITEMS, sizeof *ref, ref_cmp);

	struct extsort *small = fill_sort(1 << 20);
	CHECK(extsort_spilled(small) >= 10, "1 MiB budget spills %zu runs (more than one merge pass reads)",
	      extsort_spilled(small));
	CHECK(extsort_count(small) == NITEMS, "count");
	CHECK(output_matches(small, ref), "spilled: (key, seq) order, every item intact");
	CHECK(output_matches(small, ref), "spilled: a second read after rewind is the same");
	extsort_free(small);

	struct extsort *big = fill_sort(64 << 20);
	CHECK(extsort_spilled(big) == 0, "64 MiB budget keeps everything in memory");
	CHECK(output_matches(big, ref), "in memory: the same order");
	CHECK(output_matches(big, ref), "in memory: a second read is the same");
	extsort_free(big);
	free(ref);

	struct extsort *none = extsort_new(tmpdir, 1 << 20);
	struct extsort_item it;
	extsort_rewind(none);
	CHECK(!extsort_next(none, &it), "no items: empty output");
	extsort_free(none);
}

static void add_huge(const void *arg)
{
	(void)arg;
	struct extsort *s = extsort_new(tmpdir, 1 << 20);
	char *big = xcalloc(1 << 20, 1);
	extsort_add(s, 1, 1, big, 1 << 20);
	exit(0);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		die("mkdtemp:");
	test_order();
	expect_die("an item larger than the budget", add_huge, NULL, "does not fit in the sort memory");
	CHECK(rmdir(tmpdir) == 0, "temp files are gone (the temp dir is empty)");
	CHECK_DONE();
}
