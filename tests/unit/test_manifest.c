/* Data dir manifests (write, read back, refuse bad ones) and --split specs
 * (parsing, exact rounding, refusals). */
#include "check.h"
#include "data/manifest.h"
#include "data/splitspec.h"
#include "expect_die.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[] = "/tmp/ts-test-manifest.XXXXXX";

/* Counts for a spec and total, as "a b c". */
static const char *counts_of(const char *spec, uint64_t total)
{
	static char out[256];
	struct splitspec s;
	splitspec_parse(spec, &s);
	uint64_t c[16];
	splitspec_counts(&s, total, c);
	size_t n = 0;
	out[0] = 0;
	for (int i = 0; i < s.n; i++)
		n += (size_t)snprintf(out + n, sizeof out - n, "%s%llu", i ? " " : "", (unsigned long long)c[i]);
	splitspec_free(&s);
	return out;
}

static void expect_counts(const char *spec, uint64_t total, const char *want)
{
	const char *got = counts_of(spec, total);
	CHECK(!strcmp(got, want), "split %s of %llu: %s (got %s)", spec, (unsigned long long)total, want, got);
}

static void parse_only(const void *spec)
{
	struct splitspec s;
	splitspec_parse(spec, &s);
	exit(0);
}

static void expect_refused(const char *spec, const char *pattern)
{
	char what[256];
	snprintf(what, sizeof what, "--split %s is refused", spec);
	expect_usage(what, parse_only, spec, pattern);
}

static void too_many(const void *arg)
{
	(void)arg;
	counts_of("a=60,b=50", 100);
	exit(0);
}

static void test_splitspec(void)
{
	expect_counts("train=0.8,valid=0.1,test=0.1", 10, "8 1 1");
	expect_counts("train=0.8,valid=0.1,test=0.1", 7, "5 0 2");
	expect_counts("train=0.8,valid=0.1,test=0.1", 1000003, "800002 100000 100001");
	/* 0.29 * 100 is 28.999999999999996 in binary floating point */
	expect_counts("a=0.29,b=0.71", 100, "29 71");
	expect_counts("a=.5,b=.5", 3, "1 2");
	expect_counts("only=1.0", 5, "5");
	expect_counts("valid=5,test=5,train=rest", 100, "5 5 90");
	expect_counts("a=10,b=20", 100, "10 20");
	expect_counts("valid=0.1,test=0.1,train=rest", 10, "1 1 8");
	expect_counts("a=0,b=rest", 4, "0 4");
	expect_counts("test=@t.rec,train=0.9,valid=0.1", 10, "0 9 1");
	expect_counts("train=0.8,test=@t.rec,valid=rest", 10, "8 0 2");
	expect_counts("train=@a.rec,test=@b.rec", 10, "0 0");
	expect_die("counts above the records", too_many, NULL, "--split asks for 110 records but there are only 100");
	expect_refused("a=0.5,b=0.4", "the fractions sum to 0.9, not 1");
	expect_refused("a=0.5,b=50", "'b=50' is a count and 'a=0.5' a fraction: give every share as a fraction or every one as a count");
	expect_refused("a=rest,b=0.5", "'a=rest' is not the last share: only the last may be 'rest'");
	expect_refused("a=0.5,b=0.4,c=@t.rec", "the fractions sum to 0.9, not 1");
	expect_refused("a=@", "'a=@' names no file");
	expect_refused("a=1.5", "fraction 1.5 of 'a' is more than 1");
	expect_refused("a=x", "'x' of 'a' is neither a fraction");
	expect_refused("a=-1", "neither a fraction");
	expect_refused("train", "'train' is not NAME=VALUE");
	expect_refused("=0.5,b=0.5", "'=0.5' has no NAME before '='");
	expect_refused("a/b=1.0", "bad name 'a/b'");
	expect_refused("a=@x,y", "'y' is not NAME=VALUE: the comma after 'a=@x' ends its path");
	expect_refused("a=0.5,a=0.5", "'a' named twice");
	expect_refused("a=0.5,,b=0.5", "empty part");
	expect_refused("a=0.9,b=rest,", "empty part");
}

static struct tokrec rec(int32_t label, size_t n)
{
	static int32_t ids[300];
	struct tokrec t = {0};
	t.ids = ids;
	t.n = n;
	t.label_kind = LABEL_INT;
	t.label = label;
	t.fold = -1;
	return t;
}

static struct manifest *sample(void)
{
	struct manifest *m = xcalloc(1, sizeof *m);
	static char *names[] = {"ham", "spam", "eggs"};
	m->vocab_sha256 = xstrdup("0123abcd");
	m->labels = xcalloc(3, sizeof *m->labels);
	for (int i = 0; i < 3; i++)
		m->labels[m->nlabels++] = xstrdup(names[i]);
	m->label_kind = LABEL_INT;
	m->max_len = 128;
	m->lower = 1;
	m->seed = 42;
	m->dedupe = 1;
	m->records_in = 10;
	m->duplicates_dropped = 2;
	m->records_left_out = 1;
	m->nsplits = 2;
	m->splits = xcalloc(2, sizeof *m->splits);
	m->splits[0].name = xstrdup("train");
	m->splits[0].file = xstrdup("train.shard");
	m->splits[1].name = xstrdup("test");
	m->splits[1].file = xstrdup("test.shard");
	/* train: lengths 0 1 2 3 4 5 100; labels ham x3, spam x4 */
	size_t lens[] = {0, 1, 2, 3, 4, 5, 100};
	for (int i = 0; i < 7; i++) {
		struct tokrec t = rec(i < 3 ? 0 : 1, lens[i]);
		manifest_split_add(&m->splits[0], &t);
	}
	struct tokrec t = rec(2, 256);
	manifest_split_add(&m->splits[1], &t);
	return m;
}

static json_int_t jint(json_t *root, const char *path)
{
	json_t *v = root;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *save, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
	return v && json_is_integer(v) ? json_integer_value(v) : -1;
}

static void test_write_read(void)
{
	struct manifest *m = sample();
	manifest_write(tmpdir, m);

	char path[256];
	snprintf(path, sizeof path, "%s/manifest.json", tmpdir);
	json_t *j = json_load_file(path, 0, NULL);
	CHECK(j && !strcmp(json_string_value(json_object_get(j, "format")), "topspin-data"), "format topspin-data");
	CHECK(jint(j, "splits.train.count") == 7 && jint(j, "splits.train.tokens") == 115 &&
	      jint(j, "splits.train.max_tokens") == 100, "train count, tokens, max_tokens");
	CHECK(jint(j, "splits.train.label_counts.ham") == 3 && jint(j, "splits.train.label_counts.spam") == 4 &&
	      jint(j, "splits.train.label_counts.eggs") == 0, "label counts by name, zeros included");
	/* bins: (0,1] holds 0 and 1; (1,2]; (2,4] holds 3 and 4; (4,8]; (64,128] */
	CHECK(jint(j, "splits.train.length_hist.0.0") == 1 && jint(j, "splits.train.length_hist.0.1") == 2 &&
	      jint(j, "splits.train.length_hist.1.0") == 2 && jint(j, "splits.train.length_hist.1.1") == 1 &&
	      jint(j, "splits.train.length_hist.2.0") == 4 && jint(j, "splits.train.length_hist.2.1") == 2 &&
	      jint(j, "splits.train.length_hist.3.0") == 8 && jint(j, "splits.train.length_hist.3.1") == 1 &&
	      jint(j, "splits.train.length_hist.4.0") == 128 && jint(j, "splits.train.length_hist.4.1") == 1 &&
	      json_array_size(json_object_get(json_object_get(json_object_get(j, "splits"), "train"), "length_hist")) == 5,
	      "length histogram: non-empty power-of-two bins");
	CHECK(jint(j, "splits.test.length_hist.0.0") == 256, "256 tokens fall in the bin up to 256");
	json_decref(j);

	struct manifest *r = manifest_read(tmpdir);
	CHECK(r->vocab_sha256 && !strcmp(r->vocab_sha256, "0123abcd") && r->nlabels == 3 &&
	      !strcmp(r->labels[2], "eggs") && r->label_kind == LABEL_INT && r->max_len == 128 && r->lower &&
	      r->seed == 42 && r->dedupe && r->records_in == 10 && r->duplicates_dropped == 2 &&
	      r->records_left_out == 1, "top-level fields read back");
	const struct manifest_split *tr = manifest_split(r, "train");
	CHECK(r->nsplits == 2 && !strcmp(r->splits[0].name, "train") && !strcmp(r->splits[1].name, "test"),
	      "splits keep their order");
	CHECK(tr && tr->count == 7 && tr->tokens == 115 && tr->max_tokens == 100 &&
	      !memcmp(tr->length_hist, m->splits[0].length_hist, sizeof tr->length_hist) &&
	      manifest_label_count(tr, 0) == 3 && manifest_label_count(tr, 1) == 4 && manifest_label_count(tr, 2) == 0,
	      "split fields read back");
	char *sp = manifest_shard_path(tmpdir, tr);
	CHECK(strstr(sp, "/train.shard") && !strncmp(sp, tmpdir, strlen(tmpdir)), "shard path %s", sp);
	free(sp);
	CHECK(!manifest_split(r, "valid"), "an absent split is NULL");
	manifest_free(r);
	manifest_free(m);
}

static void test_ids_without_names(void)
{
	struct manifest *m = xcalloc(1, sizeof *m);
	m->label_kind = LABEL_LIST;
	m->nsplits = 1;
	m->splits = xcalloc(1, sizeof *m->splits);
	m->splits[0].name = xstrdup("all");
	m->splits[0].file = xstrdup("all.shard");
	int32_t labels[3] = {7, -2, 7};
	struct tokrec t = rec(0, 3);
	t.label_kind = LABEL_LIST;
	t.labels = labels;
	t.nlabels = 3;
	manifest_split_add(&m->splits[0], &t);
	manifest_write(tmpdir, m);
	struct manifest *r = manifest_read(tmpdir);
	CHECK(!r->vocab_sha256 && r->nlabels == 0 && r->max_len == 0 && r->label_kind == LABEL_LIST,
	      "unknown vocab, names and max_len read back as unknown");
	CHECK(manifest_label_count(&r->splits[0], 7) == 2 && manifest_label_count(&r->splits[0], -2) == 1 &&
	      r->splits[0].nlabel_counts == 2, "list labels counted by id");
	CHECK(!r->labels, "no names: labels NULL, so classes are named by number");
	manifest_free(r);
	manifest_free(m);
	char path[256];
	snprintf(path, sizeof path, "%s/manifest.json", tmpdir);
	json_t *j = json_load_file(path, 0, NULL);
	const char *first = json_object_iter_key(json_object_iter(
		json_object_get(json_object_get(json_object_get(j, "splits"), "all"), "label_counts")));
	CHECK(first && !strcmp(first, "-2"), "ids without names are written in id order, not as first seen");
	json_decref(j);
}

/* Thousands of labels, seen in no order, count as they should (in linear time). */
static void test_many_labels(void)
{
	struct manifest_split sp = {0};
	for (int32_t k = 0; k < 3; k++)
		for (int32_t i = 0; i < 20000; i++) {
			struct tokrec t = rec((i * 7919 + k) % 20000, 1);
			manifest_split_add(&sp, &t);
		}
	uint64_t total = 0;
	for (int32_t i = 0; i < 20000; i++)
		total += manifest_label_count(&sp, i);
	CHECK(sp.nlabel_counts == 20000 && total == 60000 && manifest_label_count(&sp, 20000) == 0,
	      "20000 labels counted: %zu, %llu records", sp.nlabel_counts, (unsigned long long)total);
	free(sp.label_counts);
	free(sp.slot);
}

/* The largest token id goes into the manifest; one written before it was kept reads as unknown. */
static void test_max_id(void)
{
	struct manifest *m = sample();
	int32_t ids[3] = {101, 30521, 102};
	struct tokrec t = rec(0, 3);
	t.ids = ids;
	manifest_split_add(&m->splits[1], &t);
	manifest_write(tmpdir, m);
	struct manifest *r = manifest_read(tmpdir);
	CHECK(manifest_split(r, "test")->max_id == 30521 && manifest_split(r, "train")->max_id == 0,
	      "max_id read back");
	manifest_free(r);
	char path[256];
	snprintf(path, sizeof path, "%s/manifest.json", tmpdir);
	json_t *j = json_load_file(path, 0, NULL);
	json_object_del(json_object_get(json_object_get(j, "splits"), "test"), "max_id");
	json_dump_file(j, path, 0);
	json_decref(j);
	r = manifest_read(tmpdir);
	CHECK(manifest_split(r, "test")->max_id == -1, "a manifest without max_id reads it as unknown (-1)");
	manifest_write(tmpdir, r);   /* unknown stays unknown, not a -1 that reads as an error */
	manifest_free(r);
	r = manifest_read(tmpdir);
	CHECK(manifest_split(r, "test")->max_id == -1, "an unknown max_id writes back and reads again");
	manifest_free(r);
	manifest_free(m);
}

/* A key TopSpin does not read may hold an integer past 64 bits, as Python
 * writes one: the manifest still reads. */
static void test_wide_unread(void)
{
	struct manifest *m = sample();
	manifest_write(tmpdir, m);
	char path[256];
	snprintf(path, sizeof path, "%s/manifest.json", tmpdir);
	struct strbuf b = {0};
	sb_add_file(&b, path);
	FILE *f = fopen(path, "w");
	fprintf(f, "{\"note\": 1000000000000000019884624838656, %s", b.s + 1);
	fclose(f);
	sb_free(&b);
	struct manifest *r = manifest_read(tmpdir);
	CHECK(manifest_split(r, "train")->count == 7, "an unread key past 64 bits is no matter");
	manifest_free(r);
	manifest_free(m);
}

static void read_it(const void *dir)
{
	manifest_read(dir);
	exit(0);
}

static void expect_bad(const char *text, const char *pattern)
{
	char path[256];
	snprintf(path, sizeof path, "%s/manifest.json", tmpdir);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	expect_die(pattern, read_it, tmpdir, pattern);
}

static void test_bad(void)
{
	char nowhere[300];
	snprintf(nowhere, sizeof nowhere, "%s/none", tmpdir);
	expect_die("missing manifest", read_it, nowhere, "cannot open");
	expect_die("a missing data dir is named", read_it, nowhere, "none: No such file or directory");
	snprintf(nowhere, sizeof nowhere, "%s/empty", tmpdir);
	mkdir(nowhere, 0700);
	expect_die("a dir without a manifest is no data dir", read_it, nowhere, "empty: not a data dir (no manifest.json");
	expect_bad("{\"format\":", "manifest.json: line 1: not valid JSON");
	expect_bad("[]", "manifest.json: not a JSON object");
	expect_bad("{\"format\":\"other\"}", "not a TopSpin data manifest (format 'other')");
	expect_bad("{\"format\":\"topspin-data\",\"version\":9}", "manifest version 9 is newer");
	const char *head = "{\"format\":\"topspin-data\",\"version\":1,\"labels\":[\"a\"],\"label_kind\":\"int\","
			   "\"lower\":false,\"seed\":0,\"dedupe\":false,\"records_in\":1,\"duplicates_dropped\":0,"
			   "\"records_left_out\":0";
	char text[2048];
	snprintf(text, sizeof text, "%s}", head);
	expect_bad(text, "'splits' is missing or not an object");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"../x\",\"count\":1,\"tokens\":1,"
		 "\"max_tokens\":1,\"length_hist\":[]}}}", head);
	expect_bad(text, "split 't': 'file' is not a file name in the data dir");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"t.shard\",\"count\":-1}}}", head);
	expect_bad(text, "split 't': 'count' is negative");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"t.shard\",\"count\":18446744073709551616}}}", head);
	expect_bad(text, "split 't': 'count' is missing or not a whole number");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"t.shard\",\"count\":1,\"tokens\":1,"
		 "\"max_tokens\":1,\"length_hist\":[[3,1]]}}}", head);
	expect_bad(text, "'length_hist' entry 1 is not [power of two, count]");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"t.shard\",\"count\":1,\"tokens\":1,"
		 "\"max_tokens\":1,\"length_hist\":[],\"label_counts\":{\"zz\":1}}}}", head);
	expect_bad(text, "'label_counts' has unknown label 'zz'");
	snprintf(text, sizeof text, "%s,\"splits\":{\"t\":{\"file\":\"t.shard\",\"count\":1,\"tokens\":1,"
		 "\"max_tokens\":1,\"length_hist\":[],\"label_counts\":{\" 5\":1}}}}", head);
	expect_bad(text, "'label_counts' has unknown label ' 5'");   /* written back as "5", another label's name */
	expect_bad("{\"format\":\"topspin-data\",\"version\":1,\"labels\":[\"a\",\"b\",\"a\"]}",
		   "manifest.json: label 'a' appears twice");
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		die("mkdtemp:");
	test_splitspec();
	test_write_read();
	test_ids_without_names();
	test_many_labels();
	test_max_id();
	test_wide_unread();
	test_bad();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd))
		return 1;
	CHECK_DONE();
}
