/* ts-shard --split specs (lib/data/splitspec.c): bytes 0-7 are the number
 * of records (little-endian), the rest the spec. A spec that parses must
 * divide them: a part of its own file takes none, and where the shares are
 * fractions or end in rest they take every record, else as many as they
 * name (or it dies that there are too few). */
#include "data/splitspec.h"
#include "fuzz.h"

struct ctx {
	char *text;
	uint64_t total, *counts;
	struct splitspec s;
};

static void run(void *arg)
{
	struct ctx *c = arg;
	splitspec_parse(c->text, &c->s);
	c->counts = xcalloc((size_t)c->s.n, sizeof *c->counts);
	splitspec_counts(&c->s, c->total, c->counts);
	int whole = 0, shares = 0;
	unsigned __int128 sum = 0;
	for (int i = 0; i < c->s.n; i++) {
		const struct split_part *p = &c->s.parts[i];
		if (p->file && c->counts[i])
			abort();
		shares += !p->file;
		whole |= !p->file && (p->den || p->is_rest);
		if (!p->file && !p->den && !p->is_rest && c->counts[i] != p->count)
			abort();
		sum += c->counts[i];
	}
	if (sum > c->total || (whole && sum != c->total) || shares != splitspec_shares(&c->s))
		abort();
}

static void release(void *arg)
{
	struct ctx *c = arg;
	splitspec_free(&c->s);
	free(c->counts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	struct ctx c = {.text = strndup((const char *)data + 8, size - 8)};
	for (int i = 7; i >= 0; i--)
		c.total = c.total << 8 | data[i];
	fuzz_survive(run, release, &c);
	free(c.text);
	return 0;
}
