/* safetensors files (lib/format/safetensors.c), opened as a model dir is: every
 * tensor found by name, the float ones converted to fp32, written back with
 * st_write and read again, and the values must come back bit for bit. */
#include "format/safetensors.h"
#include "fuzz.h"

struct ctx {
	char *in, *out;
	struct st_file *f, *back;
	struct tensor_ref *refs;
	int nrefs;
};

static int is_float(int dtype)
{
	return dtype == ST_F32 || dtype == ST_F16 || dtype == ST_BF16 || dtype == ST_F64;
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->f = st_open(c->in);
	int n = st_count(c->f);
	c->refs = xcalloc((size_t)n, sizeof *c->refs);
	for (int i = 0; i < n; i++) {
		const struct st_tensor *t = st_get(c->f, i);
		if (st_find(c->f, t->name) != t)
			abort();
		if (!is_float(t->dtype) || t->ndim > TENSOR_MAX_DIMS)
			continue;
		struct tensor_ref *r = &c->refs[c->nrefs++];
		*r = (struct tensor_ref){.name = t->name, .ndim = t->ndim};
		memcpy(r->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
		r->data = xmalloc((size_t)tensor_numel(r) * sizeof *r->data);
		st_to_f32(t, r->data);
	}
	fuzz_die_is_bug(1);
	st_write(c->out, c->refs, c->nrefs);
	c->back = st_open(c->out);
	fuzz_die_is_bug(0);
	if (st_count(c->back) != c->nrefs)
		abort();
	for (int i = 0; i < c->nrefs; i++) {
		const struct st_tensor *t = st_find(c->back, c->refs[i].name);
		if (!t || t->dtype != ST_F32 || t->nbytes != (size_t)tensor_numel(&c->refs[i]) * sizeof(float) ||
		    memcmp(t->data, c->refs[i].data, t->nbytes))
			abort();
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	for (int i = 0; i < c->nrefs; i++)
		free(c->refs[i].data);
	free(c->refs);
	st_close(c->back);
	st_close(c->f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.in = fuzz_file("in.safetensors", data, size),
			.out = path_join(fuzz_tmpdir(), "out.safetensors")};
	fuzz_survive(run, release, &c);
	free(c.in);
	free(c.out);
	return 0;
}
