/* Token record streams (lib/format/rec.c, lib/data/tokrec.c), read as ts-shard reads
 * them: a header, then token records. Every record that unpacks must pack
 * and unpack to the same record. */
#include "fuzz.h"
#include "same_tokrec.h"

struct ctx {
	char *path;
	struct rec_reader *r;
	struct stream_header acc, h;
	char *from;
	struct tokrec t, back;
	msgpack_sbuffer sb;
	msgpack_unpacked u;
};

static void roundtrip(struct ctx *c)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, &c->sb, msgpack_sbuffer_write);
	c->sb.size = 0;
	tokrec_pack(&pk, &c->t);
	if (msgpack_unpack_next(&c->u, c->sb.data, c->sb.size, NULL) != MSGPACK_UNPACK_SUCCESS)
		abort();
	fuzz_die_is_bug(1);
	tokrec_unpack(c->r, &c->u.data, &c->back);
	fuzz_die_is_bug(0);
	if (!same_tokrec(&c->t, &c->back))
		abort();
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->r = rec_open(c->path);
	const msgpack_object *o;
	while ((o = rec_next(c->r))) {
		if (rec_number(c->r) == 1 && header_unpack(c->r, o, &c->h)) {
			header_merge(&c->acc, &c->from, c->r, &c->h);
			continue;
		}
		tokrec_unpack(c->r, o, &c->t);
		roundtrip(c);
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->r)
		rec_close(c->r);
	header_free(&c->acc);
	header_free(&c->h);
	free(c->from);
	tokrec_free(&c->t);
	tokrec_free(&c->back);
	msgpack_sbuffer_destroy(&c->sb);
	msgpack_unpacked_destroy(&c->u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.path = fuzz_file("in.msgpack", data, size)};
	msgpack_sbuffer_init(&c.sb);
	msgpack_unpacked_init(&c.u);
	fuzz_survive(run, release, &c);
	free(c.path);
	return 0;
}
