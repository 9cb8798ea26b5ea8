/* --batch-tokens's groups: the budget met exactly, a record of the whole
 * budget alone, a record that would pass it starting the next group, the
 * last short group, cuts that depend only on the order and the budget, the
 * refusal of a record longer than the budget, and of a token id below the
 * vocab in a damaged shard. */
#include "check.h"
#include "expect_die.h"
#include "model/batcher.h"
#include "util/afile.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ts-test-batcher.XXXXXX";

/* A shard at path of n records with ids "r0", "r1", ... of lens[i] tokens. */
static struct shard *make_shard(const char *path, const uint32_t *lens, int n)
{
	struct shard_writer *w = shard_create(path);
	struct tokrec t = {0};
	for (int i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof id, "r%d", i);
		tokrec_set_id(&t, id, strlen(id), 0);
		t.n = lens[i];
		grow(&t.ids, &t.cap_ids, t.n, sizeof *t.ids);
		for (size_t k = 0; k < t.n; k++)
			t.ids[k] = (int32_t)k;
		shard_append(w, &t);
	}
	shard_commit(w);
	tokrec_free(&t);
	return shard_open(path);
}

/* The group ends of order[0..n) under a budget, in ends; returns how many. */
static int cut(const struct shard *s, const uint64_t *order, uint64_t n, int64_t budget, uint64_t *ends)
{
	int g = 0;
	for (uint64_t at = 0; at < n; at = ends[g++])
		ends[g] = token_group_end(s, order, n, at, budget);
	return g;
}

static const uint32_t lens[] = {3, 4, 3, 10, 5, 4, 6, 2, 1};
enum { N = sizeof lens / sizeof *lens };

static void test_cuts(const struct shard *s)
{
	uint64_t order[N], ends[N];
	for (uint64_t i = 0; i < N; i++)
		order[i] = i;
	int g = cut(s, order, N, 10, ends);
	CHECK(g == 4, "budget 10: 4 groups (got %d)", g);
	CHECK(ends[0] == 3, "3 + 4 + 3 meet the budget exactly: one group");
	CHECK(g > 1 && ends[1] == 4, "a record of 10 tokens, the whole budget, is a group alone");
	CHECK(g > 2 && ends[2] == 6, "5 + 4, then 6 would pass 10: it starts the next group");
	CHECK(g > 3 && ends[3] == N, "the last group is short: 6 + 2 + 1");
	CHECK(token_group_end(s, order, N, 3, 9) == 4, "a record over the budget takes a group alone");
	CHECK(token_group_end(s, order, N, N, 10) == N, "at the end: an empty group");
}

/* A seeded shuffle is cut alike every time, greedily. */
static void test_determinism(const struct shard *s)
{
	uint64_t a[N], b[N], ea[N], eb[N];
	epoch_order(s, 9, 2, 1, 0, a);
	epoch_order(s, 9, 2, 1, 0, b);
	int ga = cut(s, a, N, 12, ea), gb = cut(s, b, N, 12, eb);
	CHECK(ga == gb && !memcmp(ea, eb, (size_t)ga * sizeof *ea), "the same seed and epoch: the same cuts");
	int fits = 1;
	for (int i = 0; i < ga; i++) {
		uint64_t from = i ? ea[i - 1] : 0, tokens = 0;
		for (uint64_t k = from; k < ea[i]; k++)
			tokens += shard_ntokens(s, a[k]);
		fits &= tokens <= 12 && (ea[i] == N || tokens + shard_ntokens(s, a[ea[i]]) > 12);
	}
	CHECK(fits, "every group of the shuffled order holds at most 12 tokens, and the next record would pass them");
}

static void check_budget(const void *s)
{
	struct batch_source src = {.shard = s, .name = "data/train.shard"};
	batch_check_tokens(&src, 9, "--batch-tokens 9");
}

static void check_fits(const void *s)
{
	struct batch_source src = {.shard = s, .name = "data/train.shard"};
	batch_check_tokens(&src, 10, "--batch-tokens 10");
}

/* A shard's one record with token id -5, which ts-shard never writes. */
static void check_negative_id(const void *path)
{
	struct shard_writer *w = shard_create(path);
	int32_t ids[] = {101, -5, 102};
	struct tokrec t = {.ids = ids, .n = 3, .label_kind = LABEL_INT, .fold = -1};
	shard_append(w, &t);
	shard_commit(w);
	struct batch_source src = {.shard = shard_open(path), .name = "data/train.shard", .task = TASK_CLS,
				   .num_labels = 2, .vocab = 200};
	batch_check_records(&src);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		die("mkdtemp:");
	char *path = path_join(tmpdir, "lens.shard");
	struct shard *s = make_shard(path, lens, N);
	test_cuts(s);
	test_determinism(s);
	expect_die("a record longer than the budget", check_budget, s,
		   "data/train.shard: record 4: 'r3' has 10 tokens, more than --batch-tokens 9; the longest record has 10 tokens");
	char err[256];
	CHECK(run_child(check_fits, s, err, sizeof err) == 0 && !*err, "every record within the budget: no error");
	shard_close(s);
	free(path);
	path = path_join(tmpdir, "negative.shard");
	expect_die("a negative token id", check_negative_id, path, "data/train.shard: record 1: token id -5 is negative");
	free(path);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd))
		return 1;
	CHECK_DONE();
}
