/* A run's events.msgpack (lib/format/events.c writes it) as ts-cat reads it:
 * records to JSON lines (lib/format/rec.c, lib/format/mpjson.c), and those back to records
 * as ts-cat --from-json does (lib/data/catfile.c). Not every stream goes there and
 * back (a map key with a NUL, an integer past INT64_MAX), so the way back may
 * die. The reader is held here, not in cat_to_json, so that a death does not
 * lose its buffers: over many inputs they would fill the memory. */
#include "data/catfile.h"
#include "format/mpjson.h"
#include "format/rec.h"
#include "fuzz.h"

struct ctx {
	char *in, *json, *back;
	struct rec_reader *r;
	struct strbuf b;
	struct afile *out;
};

static void to_json(struct ctx *c)
{
	c->r = rec_open(c->in);
	const msgpack_object *o;
	while ((o = rec_next(c->r))) {
		mp_to_json(o, &c->b);
		sb_addc(&c->b, '\n');
	}
	c->out = afile_open(c->json);
	afile_write(c->out, c->b.s, c->b.n);
	afile_commit(c->out);
	c->out = NULL;
}

static void from_json(struct ctx *c)
{
	struct cat_opts co = {.left = -1};
	c->out = afile_open(c->back);
	cat_from_json(c->json, c->out, &co);
	afile_commit(c->out);
	c->out = NULL;
}

static void run(void *arg)
{
	to_json(arg);
	from_json(arg);
}

/* A death before the commit leaves the afile: die() has removed its temp. */
static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->r)
		rec_close(c->r);
	sb_free(&c->b);
	if (c->out)
		afile_abort(c->out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.in = fuzz_file("events.msgpack", data, size),
			.json = path_join(fuzz_tmpdir(), "events.jsonl"),
			.back = path_join(fuzz_tmpdir(), "back.msgpack")};
	fuzz_survive(run, release, &c);
	free(c.in);
	free(c.json);
	free(c.back);
	return 0;
}
