/* Shard files (lib/data/shard.c), read as ts-train and ts-cat read them: every
 * record fetched by index; a record that decodes must encode and decode to
 * the same record. */
#include "data/shard.h"
#include "fuzz.h"
#include "same_tokrec.h"

enum { MAX_RECORDS = 4096 };   /* the index may claim more than a small input holds */

struct ctx {
	char *path;
	struct shard *s;
	struct tokrec t, back;
	void *buf;
};

static void roundtrip(struct ctx *c)
{
	size_t n = shard_rec_size(&c->t);
	c->buf = xrealloc(c->buf, n);
	fuzz_die_is_bug(1);
	shard_rec_encode(&c->t, c->buf);
	fuzz_die_is_bug(0);
	if (shard_rec_decode(c->buf, n, &c->back) || !same_tokrec(&c->t, &c->back))
		abort();
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->s = shard_open(c->path);
	uint64_t n = shard_count(c->s);
	for (uint64_t i = 0; i < n && i < MAX_RECORDS; i++) {
		uint32_t ntok = shard_ntokens(c->s, i);
		shard_get(c->s, i, &c->t);
		if (c->t.n != ntok)
			abort();
		roundtrip(c);
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->s)
		shard_close(c->s);
	tokrec_free(&c->t);
	tokrec_free(&c->back);
	free(c->buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.path = fuzz_file("in.shard", data, size)};
	fuzz_survive(run, release, &c);
	free(c.path);
	return 0;
}
