/* Shard files: round trip of varied records, the byte layout against the
 * documented format, atomic writes, and refusal of corrupt shards. */
#include "check.h"
#include "data/shard.h"
#include "expect_die.h"
#include "testfiles.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/rng.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ts-test-shard.XXXXXX";

static size_t read_file(const char *path, unsigned char **buf)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("cannot open %s:", path);
	fseek(f, 0, SEEK_END);
	size_t n = (size_t)ftell(f);
	rewind(f);
	*buf = xmalloc(n);
	if (fread(*buf, 1, n, f) != n)
		die("cannot read %s:", path);
	fclose(f);
	return n;
}

/* Record k of the varied set: every label kind, with and without types,
 * string and number ids (empty and long ones too), folds, 0 to 600 tokens. */
static void make_record(struct rng *g, uint64_t k, struct tokrec *t)
{
	char id[2000];
	int n;
	if (k % 3 == 0) {
		n = snprintf(id, sizeof id, "%llu", (unsigned long long)(k * 1000003));
	} else if (k % 97 == 1) {
		n = 0;
	} else if (k % 89 == 2) {
		n = 1500;
		memset(id, 'x', (size_t)n);
	} else {
		n = snprintf(id, sizeof id, "rec-%llu", (unsigned long long)k);
	}
	tokrec_set_id(t, id, (size_t)n, k % 3 == 0);
	t->n = k % 50 == 0 ? 0 : rng_below(g, 600);
	grow(&t->ids, &t->cap_ids, t->n, sizeof *t->ids);
	for (size_t i = 0; i < t->n; i++)
		t->ids[i] = (int32_t)rng_below(g, 1u << 31);
	t->types = NULL;
	if (k % 4 == 1) {
		grow(&t->types_buf, &t->cap_types, t->n, 1);
		for (size_t i = 0; i < t->n; i++)
			t->types_buf[i] = (uint8_t)rng_below(g, 256);
		t->types = t->types_buf;
	}
	t->label_kind = (enum label_kind)(k % 4);
	t->label = (int32_t)rng_below(g, 100) - 3;
	t->flabel = (double)rng_below(g, 1000) / 7.0 - 20;
	t->nlabels = rng_below(g, 6);
	grow(&t->labels, &t->cap_labels, t->nlabels, sizeof *t->labels);
	for (size_t i = 0; i < t->nlabels; i++)
		t->labels[i] = (int32_t)rng_below(g, 40);
	t->fold = k % 5 == 0 ? -1 : (int)rng_below(g, 9);
}

static int same_record(const struct tokrec *a, const struct tokrec *b)
{
	if (strcmp(a->id, b->id) || a->id_is_num != b->id_is_num || a->n != b->n || a->fold != b->fold ||
	    a->label_kind != b->label_kind || !a->types != !b->types)
		return 0;
	if (a->n && (memcmp(a->ids, b->ids, a->n * 4) || (a->types && memcmp(a->types, b->types, a->n))))
		return 0;
	switch (a->label_kind) {
	case LABEL_INT: return a->label == b->label;
	case LABEL_FLOAT: return a->flabel == b->flabel;
	case LABEL_LIST: return a->nlabels == b->nlabels && (!a->nlabels || !memcmp(a->labels, b->labels, a->nlabels * 4));
	default: return 1;
	}
}

enum { NREC = 3000 };

static void test_round_trip(void)
{
	char *path = path_join(tmpdir, "rt.shard");
	struct rng g;
	struct tokrec *t = xcalloc(NREC, sizeof *t), back = {0};
	rng_seed(&g, 7);
	struct shard_writer *w = shard_create(path);
	for (uint64_t k = 0; k < NREC; k++) {
		make_record(&g, k, &t[k]);
		shard_append(w, &t[k]);
	}
	CHECK(access(path, F_OK) != 0, "nothing at the path before commit");
	shard_commit(w);

	struct shard *s = shard_open(path);
	CHECK(shard_count(s) == NREC, "count %llu", (unsigned long long)shard_count(s));
	int same = 1, lens = 1;
	for (uint64_t k = 0; k < NREC; k++) {
		lens &= shard_ntokens(s, k) == t[k].n;
		shard_get(s, k, &back);
		if (same && !same_record(&t[k], &back))
			printf("    record %llu differs\n", (unsigned long long)k);
		same &= same_record(&t[k], &back);
	}
	CHECK(lens, "shard_ntokens matches every record");
	CHECK(same, "every field of %d varied records reads back", NREC);
	same = 1;
	for (uint64_t j = 0; j < NREC; j++) {
		uint64_t k = j * 7919 % NREC;
		shard_get(s, k, &back);
		same &= same_record(&t[k], &back);
	}
	CHECK(same, "random access in another order");
	shard_close(s);
	for (uint64_t k = 0; k < NREC; k++)
		tokrec_free(&t[k]);
	free(t);
	tokrec_free(&back);
	free(path);
}

/* Little-endian reads spelled out, independent of the host and of shard.c. */
static uint32_t u32_at(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64_at(const unsigned char *p) { return u32_at(p) | (uint64_t)u32_at(p + 4) << 32; }

/* The bytes of a small shard, spelled out from the format description. */
static void test_layout(void)
{
	char *path = path_join(tmpdir, "layout.shard");
	struct tokrec t = {0};
	struct shard_writer *w = shard_create(path);
	int32_t ids[3] = {101, 0x01020304, 102};
	uint8_t types[3] = {0, 0, 1};
	tokrec_set_id(&t, "ab", 2, 0);
	t.ids = ids;
	t.n = 3;
	t.types = types;
	t.label_kind = LABEL_INT;
	t.label = 7;
	t.fold = 2;
	shard_append(w, &t);
	tokrec_set_id(&t, "12345", 5, 1);
	t.types = NULL;
	t.n = 1;
	t.label_kind = LABEL_FLOAT;
	t.flabel = 0.5;
	t.fold = -1;
	shard_append(w, &t);
	shard_commit(w);
	free(t.id);

	static const unsigned char rec0[] = {
		3, 0, 0, 0,  2, 0,  1 | 1 << 2,  0,  2, 0, 0, 0,   /* ntok, id_len, flags, reserved, fold */
		7, 0, 0, 0,  'a', 'b', 0, 0,                       /* label, id, pad */
		101, 0, 0, 0,  4, 3, 2, 1,  102, 0, 0, 0,          /* ids */
		0, 0, 1, 0,                                        /* types, pad */
	};
	static const unsigned char rec1[] = {
		1, 0, 0, 0,  5, 0,  2 | 3 << 2,  0,  0xff, 0xff, 0xff, 0xff,
		0, 0, 0, 0, 0, 0, 0xe0, 0x3f,                      /* 0.5 as f64 */
		'1', '2', '3', '4', '5', 0, 0, 0,
		101, 0, 0, 0,
	};
	unsigned char *b;
	size_t n = read_file(path, &b);
	uint64_t index = 64 + sizeof rec0 + sizeof rec1;
	index += index % 8;
	CHECK(n == index + 2 * 16, "file size %zu: header, records, 8-aligned index", n);
	if (n != index + 2 * 16)
		return;
	CHECK(!memcmp(b, "TSSHARD1", 8) && u32_at(b + 8) == 1 && u32_at(b + 12) == 0,
	      "magic TSSHARD1, version 1, flags 0");
	CHECK(u64_at(b + 16) == 2 && u64_at(b + 24) == index && u64_at(b + 32) == 64,
	      "count 2, index offset %llu, data offset 64", (unsigned long long)index);
	int zero = 1;
	for (int i = 40; i < 64; i++)
		zero &= b[i] == 0;
	CHECK(zero, "header padding is zero");
	CHECK(!memcmp(b + 64, rec0, sizeof rec0), "record 0: int label, string id, types");
	CHECK(!memcmp(b + 64 + sizeof rec0, rec1, sizeof rec1), "record 1: float label, number id, no fold");
	CHECK(u64_at(b + index) == 64 && u32_at(b + index + 8) == 3 && u32_at(b + index + 12) == 0 &&
	      u64_at(b + index + 16) == 64 + sizeof rec0 && u32_at(b + index + 24) == 1,
	      "index: offsets and token counts");
	free(b);

	struct shard *s = shard_open(path);
	struct tokrec back = {0};
	shard_get(s, 0, &back);
	CHECK(!strcmp(back.id, "ab") && back.n == 3 && back.ids[1] == 0x01020304 && back.types &&
	      back.types[2] == 1 && back.label == 7 && back.fold == 2, "record 0 reads back");
	shard_close(s);
	tokrec_free(&back);
	free(path);
}

static void test_empty(void)
{
	char *path = path_join(tmpdir, "empty.shard");
	shard_commit(shard_create(path));
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size == 64, "an empty shard is its 64-byte header");
	struct shard *s = shard_open(path);
	CHECK(shard_count(s) == 0, "an empty shard opens with count 0");
	shard_close(s);
	free(path);
}

static const char *victim;

static void open_and_read_all(const void *arg)
{
	struct shard *s = shard_open(arg);
	struct tokrec t = {0};
	for (uint64_t i = 0; i < shard_count(s); i++)
		shard_get(s, i, &t);
	exit(0);
}

/* As open_and_read_all, but killed by SIGALRM after 10 s: a FIFO must not
 * hang it. */
static void open_soon(const void *path)
{
	alarm(10);
	open_and_read_all(path);
}

/* Writes a copy of the good shard with len bytes, patched at off, and expects
 * reading it to fail with pattern. */
static void expect_corrupt(const char *what, size_t off, const void *patch, size_t plen, long cut,
			   const char *pattern)
{
	unsigned char *b;
	size_t n = read_file(victim, &b);
	if (patch)
		memcpy(b + off, patch, plen);
	char *path = path_join(tmpdir, "bad.shard");
	write_file(path, b, cut >= 0 ? (size_t)cut : n);
	expect_die(what, open_and_read_all, path, pattern);
	free(path);
	free(b);
}

static void test_corrupt(void)
{
	char *good = path_join(tmpdir, "good.shard");
	struct rng g;
	struct tokrec t = {0};
	rng_seed(&g, 3);
	struct shard_writer *w = shard_create(good);
	for (uint64_t k = 1; k <= 20; k++) {
		make_record(&g, k, &t);
		shard_append(w, &t);
	}
	shard_commit(w);
	tokrec_free(&t);
	victim = good;
	unsigned char *b;
	size_t n = read_file(good, &b);
	uint64_t index = u64_at(b + 24), rec3 = u64_at(b + index + 3 * 16);
	free(b);
	uint32_t v2 = 2, big = 0xffffff;
	uint64_t off_bad = (n + 8) & ~(uint64_t)7, off_odd = 66;
	expect_corrupt("bad magic", 0, "TSSHARD2", 8, -1, "bad.shard: not a shard file");
	expect_corrupt("newer version", 8, &v2, 4, -1, "bad.shard: unknown shard version");
	expect_corrupt("unknown flags", 12, &v2, 4, -1, "bad.shard: unknown shard version or flags");
	expect_corrupt("truncated index", 0, NULL, 0, (long)n - 5, "bad.shard: index does not match the file size");
	expect_corrupt("cut short before its index", 0, NULL, 0, 100,
		       "bad.shard: the index is past the end of the file (truncated?)");
	expect_corrupt("shorter than a header", 0, NULL, 0, 40, "bad.shard: not a shard file (too short)");
	expect_corrupt("index offset outside the file", 24, &off_bad, 8, -1, "bad.shard: the index is past the end");
	expect_corrupt("record offset outside the data", index + 5 * 16, &off_bad, 8, -1,
		       "bad.shard: record 5: corrupt shard: offset outside the data");
	expect_corrupt("misaligned record offset", index + 16, &off_odd, 8, -1, "bad.shard: record 1: corrupt shard");
	expect_corrupt("token count past the record", rec3, &big, 4, -1,
		       "bad.shard: record 4: corrupt shard: token ids run past the record");
	expect_corrupt("index count differs from the record", index + 3 * 16 + 8, &big, 4, -1,
		       "bad.shard: record 4: corrupt shard");
	char *missing = path_join(tmpdir, "nope.shard");
	expect_die("missing file", open_and_read_all, missing, "cannot open");
	if (mkfifo(missing, 0644) < 0)
		die("cannot make %s:", missing);
	expect_die("a FIFO refused at once", open_soon, missing, "nope.shard: not a regular file");
	unlink(missing);
	free(missing);
	free(good);
}

static void die_mid_write(const void *arg)
{
	struct shard_writer *w = shard_create(arg);
	struct tokrec t = {0};
	int32_t ids[2] = {1, 2};
	tokrec_set_id(&t, "x", 1, 0);
	t.ids = ids;
	t.n = 2;
	t.fold = -1;
	shard_append(w, &t);
	die("stopped on purpose");
}

static void test_atomic(void)
{
	char sub[256];
	snprintf(sub, sizeof sub, "%s/atomic", tmpdir);
	mkdir(sub, 0755);
	char path[300];
	snprintf(path, sizeof path, "%s/a.shard", sub);
	expect_die("dying mid-write", die_mid_write, path, "stopped on purpose");
	CHECK(dir_entries(sub) == 0, "dying mid-write leaves no file behind (%d entries)", dir_entries(sub));
	rmdir(sub);
}

static void test_decode_short(void)
{
	struct tokrec t = {0};
	int32_t ids[4] = {1, 2, 3, 4};
	tokrec_set_id(&t, "id", 2, 0);
	t.ids = ids;
	t.n = 4;
	t.label_kind = LABEL_LIST;
	t.labels = ids;
	t.nlabels = 2;
	t.fold = -1;
	size_t n = shard_rec_size(&t);
	unsigned char *buf = xmalloc(n);
	shard_rec_encode(&t, buf);
	struct tokrec back = {0};
	int bad_short = 1;
	for (size_t len = 0; len < n; len += 4)
		bad_short &= shard_rec_decode(buf, len, &back) != NULL;
	CHECK(bad_short, "decode refuses every cut of a record");
	CHECK(!shard_rec_decode(buf, n, &back) && back.nlabels == 2 && back.labels[1] == 2 && back.n == 4,
	      "decode of the whole record");
	CHECK(n % 4 == 0, "record size %zu is a multiple of 4", n);
	free(buf);
	free(t.id);
	tokrec_free(&back);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		die("mkdtemp:");
	test_round_trip();
	test_layout();
	test_empty();
	test_corrupt();
	test_atomic();
	test_decode_short();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd))
		return 1;
	CHECK_DONE();
}
