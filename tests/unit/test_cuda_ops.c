/* Every op of the CUDA backend against the CPU op of the same name, on the
 * same random inputs: fp32 within stated tolerances (the two sum in different
 * orders and the GPU fuses multiply-adds), the optimizer's updates and sums bit
 * for bit, dropout masks bit for bit. Without the CUDA backend or a GPU every
 * check is reported as skipped. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "check.h"
#include "device/device.h"
#include "util/err.h"
#include "util/rng.h"
#include <stdlib.h>
#include <string.h>
#ifdef TS_GPU
#include "cuda_api.h"
#include "gpu_check.h"
#include "groups.h"

/* ---- the graph's ops ---- */

/* The losses add weight times their sum into a double on the GPU: each
 * check starts it at LOSS_START, adds at weight 1/2 and reads back what
 * was added. */
static const double LOSS_START = 0.25;
static double *d_loss;

static double *loss_from_start(void)
{
	if (!d_loss)
		d_loss = gpu->alloc(sizeof *d_loss);
	gpu->upload(d_loss, &LOSS_START, sizeof LOSS_START);
	return d_loss;
}

static double loss_added(void)
{
	double v;
	gpu->download(&v, d_loss, sizeof v);
	return (v - LOSS_START) * 2;
}

enum { N = 67, C = 96, F = 384, V = 1003 };
static const double ATOL = 1e-5, RTOL = 1e-4;

static void test_linear(void)
{
	float *in = randoms((size_t)N * C, 1), *w = randoms((size_t)F * C, 0.1f), *b = randoms(F, 1);
	float *out = xcalloc((size_t)N * F, sizeof *out), *dout = randoms((size_t)N * F, 1);
	float *din = randoms((size_t)N * C, 1), *dw = randoms((size_t)F * C, 1), *db = randoms(F, 1);
	float *d_in = on_gpu(in, N * C * 4), *d_w = on_gpu(w, F * C * 4), *d_b = on_gpu(b, F * 4);
	float *d_out = on_gpu(out, N * F * 4), *d_dout = on_gpu(dout, N * F * 4);
	float *d_din = on_gpu(din, N * C * 4), *d_dw = on_gpu(dw, F * C * 4), *d_db = on_gpu(db, F * 4);
	linear_forward(out, in, w, NULL, N, C, F);
	gpu->linear_forward(d_out, float_acts(d_in), float_acts(d_w), NULL, N, C, F);
	expect_close("linear_forward without a bias", d_out, out, (size_t)N * F, ATOL, RTOL);
	linear_forward(out, in, w, b, N, C, F);
	gpu->linear_forward(d_out, float_acts(d_in), float_acts(d_w), d_b, N, C, F);
	expect_close("linear_forward", d_out, out, (size_t)N * F, ATOL, RTOL);
	linear_backward(din, dw, db, dout, in, w, N, C, F, 1);
	gpu->linear_backward(d_din, d_dw, d_db, float_acts(d_dout), float_acts(d_in), float_acts(d_w),
			     N, C, F, 1);
	expect_close("linear_backward din, accumulated", d_din, din, (size_t)N * C, ATOL, RTOL);
	expect_close("linear_backward dw", d_dw, dw, (size_t)F * C, 1e-4, RTOL);
	expect_close("linear_backward dbias", d_db, db, F, 1e-4, RTOL);
	linear_backward(din, dw, NULL, dout, in, w, N, C, F, 0);
	gpu->linear_backward(d_din, d_dw, NULL, float_acts(d_dout), float_acts(d_in), float_acts(d_w),
			     N, C, F, 0);
	expect_close("linear_backward din, written", d_din, din, (size_t)N * C, ATOL, RTOL);
	float *ptrs[] = { d_in, d_w, d_b, d_out, d_dout, d_din, d_dw, d_db, in, w, b, out, dout, din,
			  dw, db };
	for (int i = 0; i < 8; i++)
		gpu->release(ptrs[i]);
	for (int i = 8; i < 16; i++)
		free(ptrs[i]);
}

enum { EB = 3, ET = 23, TYPES = 2, POS = 32 };

/* embedding_layernorm_forward against the CPU's on the lookup e (its
 * arrays on the GPU in d): the sum, the statistics and the output through
 * dropout p, the same mask. */
static void check_embedding_layernorm(const char *what, const struct embedding *e,
				      const struct embedding *d, float p)
{
	size_t n = (size_t)e->N * e->C;
	float *w = randoms(e->C, 1), *b = randoms(e->C, 1), *sum = xmalloc(n * 4);
	float *out = xmalloc(n * 4), *mean = xmalloc(e->N * 4), *rstd = xmalloc(e->N * 4);
	float *d_w = on_gpu(w, e->C * 4), *d_b = on_gpu(b, e->C * 4), *d_sum = gpu->alloc(n * 4);
	float *d_out = gpu->alloc(n * 4), *d_mean = gpu->alloc(e->N * 4), *d_rstd = gpu->alloc(e->N * 4);
	backend_cpu()->embedding_layernorm_forward(out, NULL, sum, mean, rstd, e, w, b, 1e-12f, p, 42);
	gpu->embedding_layernorm_forward(d_out, NULL, d_sum, d_mean, d_rstd, d, d_w, d_b, 1e-12f, p, 42);
	char line[160];
	snprintf(line, sizeof line, "embedding_layernorm_forward, %s: the lookup's sum", what);
	expect_close(line, d_sum, sum, n, ATOL, RTOL);
	snprintf(line, sizeof line, "embedding_layernorm_forward, %s: mean and rstd", what);
	expect_close(line, d_mean, mean, e->N, ATOL, RTOL);
	expect_close(line, d_rstd, rstd, e->N, ATOL, RTOL);
	snprintf(line, sizeof line, "embedding_layernorm_forward, %s: the output, dropout %.1f", what, p);
	expect_close(line, d_out, out, n, 1e-4, RTOL);
	float *bufs[] = { d_w, d_b, d_sum, d_out, d_mean, d_rstd };
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		gpu->release(bufs[i]);
	free(w), free(b), free(sum), free(out), free(mean), free(rstd);
}

static void test_embedding(void)
{
	int32_t ids[EB * ET], types[EB * ET], positions[EB * ET];
	for (int i = 0; i < EB * ET; i++) {
		ids[i] = i % 5 == 4 ? 0 : (int32_t)rng_below(&gen, V);   /* 0 is [PAD] */
		types[i] = (int32_t)rng_below(&gen, TYPES);
		positions[i] = (int32_t)rng_below(&gen, POS);
	}
	float *word = randoms((size_t)V * C, 1), *pos = randoms(POS * C, 1), *type = randoms(TYPES * C, 1);
	float *dout = randoms((size_t)EB * ET * C, 1);
	float *dword = randoms((size_t)V * C, 1), *dpos = randoms(POS * C, 1), *dtype = randoms(TYPES * C, 1);
	int32_t *d_ids = on_gpu(ids, sizeof ids), *d_types = on_gpu(types, sizeof types);
	int32_t *d_positions = on_gpu(positions, sizeof positions);
	float *d_word = on_gpu(word, (size_t)V * C * 4), *d_pos = on_gpu(pos, POS * C * 4);
	float *d_type = on_gpu(type, TYPES * C * 4);
	float *d_dout = on_gpu(dout, EB * ET * C * 4), *d_dword = on_gpu(dword, (size_t)V * C * 4);
	float *d_dpos = on_gpu(dpos, POS * C * 4), *d_dtype = on_gpu(dtype, TYPES * C * 4);
	struct embedding e = { ids, types, positions, word, pos, type, EB * ET, C };
	struct embedding de = { d_ids, d_types, d_positions, d_word, d_pos, d_type, EB * ET, C };
	check_embedding_layernorm("69 tokens", &e, &de, 0.1f);
	embedding_backward(dword, dpos, dtype, dout, ids, types, positions, EB * ET, C, 0);
	gpu->embedding_backward(d_dword, d_dpos, d_dtype, d_dout, d_ids, d_types, d_positions,
				EB * ET, C, 0);
	expect_close("embedding_backward dword (pad row untouched)", d_dword, dword, (size_t)V * C,
		     ATOL, RTOL);
	expect_close("embedding_backward dpos", d_dpos, dpos, POS * C, ATOL, RTOL);
	expect_close("embedding_backward dtype", d_dtype, dtype, TYPES * C, 1e-4, RTOL);
	void *d[] = { d_ids,  d_types, d_positions, d_word,  d_pos,
		      d_type, d_dout,  d_dword,     d_dpos,  d_dtype };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(word), free(pos), free(type), free(dout), free(dword), free(dpos), free(dtype);
}

/* EN tokens over a few hundred ids (many scatter buckets, repeated ids),
 * a width that ends in a partial column tile, token types past the four
 * summed in registers or none at all, and no padding id: the scatter-adds
 * give the CPU's bits. */
static void test_embedding_many(int EN, int with_types)
{
	enum { EC = 200, EV = 499, ETYPES = 6, EPOS = 512 };
	int32_t *ids = xmalloc((size_t)EN * 4), *types = xmalloc((size_t)EN * 4);
	int32_t *positions = xmalloc((size_t)EN * 4);
	for (int i = 0; i < EN; i++) {
		ids[i] = (int32_t)rng_below(&gen, EV);
		types[i] = (int32_t)rng_below(&gen, ETYPES);
		positions[i] = i % EPOS;
	}
	size_t nw = (size_t)EV * EC, np = (size_t)EPOS * EC, nt = (size_t)ETYPES * EC, n = (size_t)EN * EC;
	float *word = randoms(nw, 1), *pos = randoms(np, 1), *type = randoms(nt, 1);
	float *dout = randoms(n, 1);
	float *dword = randoms(nw, 1), *dpos = randoms(np, 1), *dtype = randoms(nt, 1);
	int32_t *d_ids = on_gpu(ids, (size_t)EN * 4);
	int32_t *d_types = with_types ? on_gpu(types, (size_t)EN * 4) : NULL;
	int32_t *d_positions = on_gpu(positions, (size_t)EN * 4);
	float *d_word = on_gpu(word, nw * 4), *d_pos = on_gpu(pos, np * 4), *d_type = on_gpu(type, nt * 4);
	float *d_dout = on_gpu(dout, n * 4);
	float *d_dword = on_gpu(dword, nw * 4), *d_dpos = on_gpu(dpos, np * 4);
	float *d_dtype = on_gpu(dtype, nt * 4);
	const int32_t *ty = with_types ? types : NULL;
	const char *what = with_types ? "6 token types" : "no token types";
	char line[128];
	struct embedding e = { ids, ty, positions, word, pos, type, EN, EC };
	struct embedding de = { d_ids, d_types, d_positions, d_word, d_pos, d_type, EN, EC };
	snprintf(line, sizeof line, "%d tokens, %s", EN, what);
	check_embedding_layernorm(line, &e, &de, with_types ? 0.1f : 0);
	embedding_backward(dword, dpos, dtype, dout, ids, ty, positions, EN, EC, -1);
	gpu->embedding_backward(d_dword, d_dpos, d_dtype, d_dout, d_ids, d_types, d_positions, EN, EC,
				-1);
	snprintf(line, sizeof line, "embedding_backward dword, %d tokens, no padding id", EN);
	expect_same(line, d_dword, dword, nw);
	snprintf(line, sizeof line, "embedding_backward dpos, %d tokens", EN);
	expect_same(line, d_dpos, dpos, np);
	snprintf(line, sizeof line, "embedding_backward dtype, %d tokens, %s", EN, what);
	expect_close(line, d_dtype, dtype, nt, 1e-3, RTOL);
	void *d[] = { d_ids, d_positions, d_word, d_pos, d_type, d_dout, d_dword, d_dpos, d_dtype };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	if (d_types)
		gpu->release(d_types);
	free(ids), free(types), free(positions), free(word), free(pos), free(type);
	free(dout), free(dword), free(dpos), free(dtype);
}

/* rows x cols, more than one chunk of rows and tile of columns when
 * they are large, with dropout p in the residual's. */
static void test_layernorm(int rows, int cols, float p)
{
	size_t n = (size_t)rows * cols;
	float *in = randoms(n, 2), *w = randoms(cols, 1), *b = randoms(cols, 1), *res = randoms(n, 1);
	float *bias = randoms(cols, 1), *out = xcalloc(n, 4), *mean = xcalloc(rows, 4);
	float *rstd = xcalloc(rows, 4), *sum = xmalloc(n * 4), *dout = randoms(n, 1);
	float *dw = randoms(cols, 1), *db = randoms(cols, 1);
	memcpy(sum, in, n * 4);
	float *d_in = on_gpu(in, n * 4), *d_w = on_gpu(w, cols * 4), *d_b = on_gpu(b, cols * 4);
	float *d_res = on_gpu(res, n * 4), *d_bias = on_gpu(bias, cols * 4), *d_out = on_gpu(out, n * 4);
	float *d_mean = on_gpu(mean, rows * 4), *d_rstd = on_gpu(rstd, rows * 4);
	float *d_sum = on_gpu(sum, n * 4);
	float *d_dout = on_gpu(dout, n * 4), *d_dw = on_gpu(dw, cols * 4), *d_db = on_gpu(db, cols * 4);
	char what[96];
	if (p == 0) {
		layernorm_forward(out, mean, rstd, in, w, b, rows, cols, 1e-12f);
		gpu->layernorm_forward(d_out, d_mean, d_rstd, d_in, d_w, d_b, rows, cols, 1e-12f);
		snprintf(what, sizeof what, "layernorm_forward %dx%d", rows, cols);
		expect_close(what, d_out, out, n, ATOL, RTOL);
	} else {
		residual_layernorm_forward(out, sum, mean, rstd, res, bias, w, b, rows, cols, 1e-12f, p,
					   42);
		gpu->residual_layernorm_forward(d_out, (struct act *)d_out, d_sum, d_mean, d_rstd, d_res,
						d_bias, d_w, d_b, rows, cols, 1e-12f, p, 42);
		snprintf(what, sizeof what, "residual_layernorm_forward %dx%d p %.1f: the sum", rows,
			 cols, p);
		expect_close(what, d_sum, sum, n, ATOL, RTOL);
		snprintf(what, sizeof what, "residual_layernorm_forward %dx%d p %.1f: the output", rows,
			 cols, p);
		expect_close(what, d_out, out, n, ATOL, RTOL);
	}
	expect_close("layernorm mean", d_mean, mean, rows, ATOL, RTOL);
	expect_close("layernorm rstd", d_rstd, rstd, rows, ATOL, RTOL);
	const float *x = p == 0 ? in : sum;
	const float *d_x = p == 0 ? d_in : d_sum;
	layernorm_backward(dout, dw, db, dout, x, mean, rstd, w, rows, cols);  /* in place, as bert_graph.c */
	gpu->layernorm_backward(d_dout, d_dw, d_db, d_dout, d_x, d_mean, d_rstd, d_w, rows, cols);
	expect_close("layernorm_backward din (in place)", d_dout, dout, n, 1e-4, RTOL);
	/* sums over the rows in another order: the error grows with them */
	double sum_atol = 1e-4 + 2e-7 * rows;
	expect_close("layernorm_backward dw", d_dw, dw, cols, sum_atol, RTOL);
	expect_close("layernorm_backward db", d_db, db, cols, sum_atol, RTOL);
	/* at a residual sum, with the branch's gradient through its dropout */
	backend_cpu()->residual_layernorm_backward(dout, (struct act *)out, dw, db, dout, x, mean,
						   rstd, w, rows, cols, p, 43);
	gpu->residual_layernorm_backward(d_dout, (struct act *)d_out, d_dw, d_db, d_dout, d_x, d_mean,
					 d_rstd, d_w, rows, cols, p, 43);
	snprintf(what, sizeof what, "residual_layernorm_backward %dx%d p %.1f: din", rows, cols, p);
	expect_close(what, d_dout, dout, n, 1e-3, RTOL);
	snprintf(what, sizeof what, "residual_layernorm_backward %dx%d p %.1f: the branch", rows, cols,
		 p);
	expect_close(what, d_out, out, n, 1e-3, RTOL);
	void *d[] = { d_in, d_w, d_b, d_res, d_bias, d_out, d_mean, d_rstd, d_sum, d_dout, d_dw, d_db };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(in), free(w), free(b), free(res), free(bias), free(out), free(mean), free(rstd);
	free(sum), free(dout), free(dw), free(db);
}

static void test_elementwise(void)
{
	size_t n = (size_t)N * F;
	float *pre = randoms(n, 2), *bias = randoms(F, 1), *out = xcalloc(n, 4), *dout = randoms(n, 1);
	float *d_pre = on_gpu(pre, n * 4), *d_bias = on_gpu(bias, F * 4), *d_out = on_gpu(out, n * 4);
	float *d_dout = on_gpu(dout, n * 4);
	bias_gelu_forward(out, pre, bias, N, F);
	gpu->bias_gelu_forward(d_out, NULL, (struct act *)d_pre, d_bias, N, F);
	expect_close("bias_gelu_forward: pre + bias", d_pre, pre, n, ATOL, RTOL);
	expect_close("bias_gelu_forward: gelu", d_out, out, n, ATOL, RTOL);
	gelu_backward(dout, dout, pre, N, F);
	gpu->gelu_backward((struct act *)d_dout, d_dout, float_acts(d_pre), N, F);
	expect_close("gelu_backward (in place)", d_dout, dout, n, ATOL, RTOL);
	tanh_forward(out, pre, n);
	gpu->tanh_forward(d_out, d_pre, n);
	expect_close("tanh_forward", d_out, out, n, ATOL, RTOL);
	tanh_backward(dout, dout, out, n);
	gpu->tanh_backward(d_dout, d_dout, d_out, n);
	expect_close("tanh_backward (in place)", d_dout, dout, n, ATOL, RTOL);
	relu_forward(out, pre, n);
	gpu->relu_forward(d_out, d_pre, n);
	expect_same("relu_forward", d_out, out, n);
	relu_backward(dout, dout, out, n);
	gpu->relu_backward(d_dout, d_dout, d_out, n);
	expect_same("relu_backward (in place)", d_dout, dout, n);
	/* rotary over Q and K of [N, 3C] rows (6 heads of 16), and back */
	int32_t pos[N];
	for (int r = 0; r < N; r++)
		pos[r] = 61 * r;
	float *qkv = randoms((size_t)N * 3 * C, 1), *d_qkv = on_gpu(qkv, (size_t)N * 3 * C * 4);
	int32_t *d_pos = on_gpu(pos, sizeof pos);
	rotary_rows(qkv, 0, 3 * C, 2, C, 6, pos, N, 160000.0f, 0);
	gpu->rotary((struct act *)d_qkv, 3 * C, 2, C, 6, d_pos, N, 160000.0f, 0);
	expect_close("rotary at positions to 4026", d_qkv, qkv, (size_t)N * 3 * C, 1e-4, RTOL);
	rotary_rows(qkv, 0, 3 * C, 2, C, 6, pos, N, 160000.0f, 1);
	gpu->rotary((struct act *)d_qkv, 3 * C, 2, C, 6, d_pos, N, 160000.0f, 1);
	expect_close("rotary's inverse", d_qkv, qkv, (size_t)N * 3 * C, 1e-4, RTOL);
	/* GeGLU over [N, F/2 * 2] */
	int G = F / 2;
	geglu_rows(out, pre, N, G);
	gpu->geglu_forward((struct act *)d_out, float_acts(d_pre), N, G);
	expect_close("geglu_forward", d_out, out, (size_t)N * G, ATOL, RTOL);
	float *din = xcalloc(n, sizeof *din), *d_din = on_gpu(din, n * 4);
	geglu_backward_rows(din, dout, pre, N, G);
	gpu->geglu_backward((struct act *)d_din, d_dout, float_acts(d_pre), N, G);
	expect_close("geglu_backward", d_din, din, n, ATOL, RTOL);
	gpu->release(d_qkv), gpu->release(d_pos), gpu->release(d_din), free(qkv), free(din);
	/* dropout: the same mask, and values scaled by the same float */
	dropout_apply(out, pre, n, 0.1f, 7);
	gpu->dropout_apply(d_out, d_pre, n, 0.1f, 7);
	expect_same("dropout_apply p 0.1", d_out, out, n);
	dropout_apply(pre, pre, n, 0.5f, 8);
	gpu->dropout_apply(d_pre, d_pre, n, 0.5f, 8);
	expect_same("dropout_apply p 0.5 in place", d_pre, pre, n);
	gpu->release(d_pre), gpu->release(d_bias), gpu->release(d_out), gpu->release(d_dout);
	free(pre), free(bias), free(out), free(dout);
}

/* A walk for the CUDA graph checks: a memset, a dropout (its seed changes
 * from walk to walk), an axpy (its factor too) and a cuBLAS product, into
 * out, from x and w (C x C) of n = R x C floats at t and y. */
struct walk {
	float *x, *t, *y, *w, *out;
	int R, C;
};

static void graph_walk(const struct walk *k, uint64_t seed, float a)
{
	size_t n = (size_t)k->R * k->C;
	gpu->zero(k->y, n * sizeof(float));
	gpu->dropout_apply(k->t, k->x, n, 0.1f, seed);
	gpu->axpy(k->y, k->t, n, a);
	gpu->linear_forward(k->out, float_acts(k->y), float_acts(k->w), NULL, k->R, k->C, k->C);
}

/* The same walk four times under one key: eager, captured, replayed,
 * replayed, each with its own seed and factor, the same bits as the walks
 * run eagerly; a walk whose product reads another buffer is walked again
 * eagerly; one that uploads is not captured, and says so. */
static void test_graphs(void)
{
	enum { R = 67, CC = 48, WALKS = 4 };
	size_t n = (size_t)R * CC;
	float *x = randoms(n, 1), *w = randoms((size_t)CC * CC, 0.2f);
	struct walk k = { on_gpu(x, n * 4), gpu->alloc(n * 4), gpu->alloc(n * 4),
			  on_gpu(w, (size_t)CC * CC * 4), gpu->alloc(n * 4), R, CC };
	float *want[WALKS];
	for (int i = 0; i < WALKS; i++) {   /* eagerly */
		graph_walk(&k, 100 + i, 0.5f + i);
		want[i] = back(k.out, n);
	}
	const enum graph_done how[WALKS] = { GRAPH_EAGER, GRAPH_CAPTURED, GRAPH_REPLAYED, GRAPH_REPLAYED };
	const char *names[] = { "again", "eager", "captured", "replayed" };
	for (int i = 0; i < WALKS; i++) {
		const char *note = NULL;
		gpu->graph_begin(77);
		graph_walk(&k, 100 + i, 0.5f + i);
		enum graph_done d = gpu->graph_end(&note);
		float *got = back(k.out, n);
		CHECK(d == how[i] && !note && !memcmp(got, want[i], n * sizeof *got),
		      "CUDA graphs: walk %d of one key %s (%s), the eager walk's bits", i + 1, names[how[i]],
		      names[d]);
		free(got);
	}
	/* the product writes another buffer: a graph cannot patch cuBLAS's nodes */
	struct walk other = k;
	other.out = gpu->alloc(n * 4);
	graph_walk(&k, 200, 2);
	float *a = back(k.out, n);
	const char *note = NULL;
	gpu->graph_begin(77);
	graph_walk(&other, 200, 2);
	enum graph_done d = gpu->graph_end(&note);
	float *b = back(other.out, n);
	CHECK(d == GRAPH_AGAIN && !note && b[0] == 0 && !memcmp(b, b + 1, (n - 1) * sizeof *b),
	      "CUDA graphs: a walk whose product writes elsewhere runs none of it: walk again (%s)",
	      names[d]);
	free(b);
	graph_walk(&other, 200, 2);
	b = back(other.out, n);
	CHECK(!memcmp(a, b, n * sizeof *a), "CUDA graphs: and walked again eagerly, the eager walk's bits");
	free(a), free(b);
	/* an upload inside the walk: no graph, and a note */
	for (int i = 0; i < 2; i++) {
		gpu->graph_begin(78);
		gpu->upload(k.x, x, n * 4);
		graph_walk(&k, 300, 1);
		d = gpu->graph_end(&note);
	}
	CHECK(d == GRAPH_AGAIN && note && strstr(note, "an upload"),
	      "CUDA graphs: an upload in a walk spoils its capture: %s", note ? note : "(no note)");
	for (int i = 0; i < WALKS; i++)
		free(want[i]);
	gpu->release(k.x), gpu->release(k.t), gpu->release(k.y), gpu->release(k.w);
	gpu->release(k.out), gpu->release(other.out);
	free(x), free(w);
}

static void test_rows(void)
{
	enum { M = 9 };
	int32_t rows[M] = { 0, 3, 4, 10, 11, 30, 50, 51, 66 };
	float *in = randoms((size_t)N * C, 1), *g = xcalloc((size_t)M * C, 4), *acc = randoms((size_t)N * C, 1);
	float *d_in = on_gpu(in, N * C * 4), *d_g = on_gpu(g, M * C * 4), *d_acc = on_gpu(acc, N * C * 4);
	int32_t *d_rows = on_gpu(rows, sizeof rows);
	gather_rows(g, in, rows, M, C);
	gpu->gather_rows(d_g, d_in, d_rows, M, C);
	expect_same("gather_rows", d_g, g, (size_t)M * C);
	scatter_add_rows(acc, g, rows, M, C);
	gpu->scatter_add_rows(d_acc, d_g, d_rows, M, C);
	expect_same("scatter_add_rows", d_acc, acc, (size_t)N * C);
	/* mean pooling over 3 sequences of the N rows, one with a padding row,
	 * one with none real; its backward into the real rows only */
	int32_t kv_start[4] = { 0, 20, 21, N };
	uint8_t mask[N];
	for (int r = 0; r < N; r++)
		mask[r] = r != 7 && r != 20;
	int32_t *d_kv = on_gpu(kv_start, sizeof kv_start);
	uint8_t *d_mask = on_gpu(mask, sizeof mask);
	mean_rows(g, in, kv_start, mask, 3, C);
	gpu->mean_rows(d_g, d_in, d_kv, d_mask, 3, C);
	expect_close("mean_rows", d_g, g, (size_t)3 * C, ATOL, RTOL);
	mean_rows_backward(acc, g, kv_start, mask, 3, C);
	gpu->mean_rows_backward(d_acc, d_g, d_kv, d_mask, 3, C);
	expect_close("mean_rows_backward", d_acc, acc, (size_t)N * C, ATOL, RTOL);
	gpu->release(d_in), gpu->release(d_g), gpu->release(d_acc), gpu->release(d_rows);
	gpu->release(d_kv), gpu->release(d_mask);
	free(in), free(g), free(acc);
}

/* More rows than a grid has blocks in y (65535): the kernels that stride
 * rows over it must reach the last ones. */
static void test_many_rows(void)
{
	enum { MR = 70001, MW = 5, IDS = 11, POSITIONS = 13 };
	size_t n = (size_t)MR * MW;
	float *pre = randoms(n, 2), *bias = randoms(MW, 1), *out = xcalloc(n, 4), *g = xcalloc(n, 4);
	float *lse = xcalloc(MR, 4), *t = xcalloc(n, 4), *d = randoms(n, 1);
	float *word = randoms(IDS * MW, 1), *pos = randoms(POSITIONS * MW, 1), *type = randoms(2 * MW, 1);
	int32_t *rows = xmalloc(MR * 4), *labels = xmalloc(MR * 4), *ids = xmalloc(MR * 4);
	int32_t *positions = xmalloc(MR * 4), *types = xmalloc(MR * 4);
	for (int r = 0; r < MR; r++) {
		rows[r] = MR - 1 - r;
		labels[r] = r % 7 == 6 ? -100 : r % MW;
		ids[r] = r % IDS, positions[r] = r % POSITIONS, types[r] = r % 2;
	}
	float *d_pre = on_gpu(pre, n * 4), *d_bias = on_gpu(bias, MW * 4), *d_out = on_gpu(out, n * 4);
	float *d_g = on_gpu(g, n * 4), *d_lse = on_gpu(lse, MR * 4), *d_t = on_gpu(t, n * 4);
	float *d_d = on_gpu(d, n * 4), *d_word = on_gpu(word, IDS * MW * 4);
	float *d_pos = on_gpu(pos, POSITIONS * MW * 4), *d_type = on_gpu(type, 2 * MW * 4);
	int32_t *d_rows = on_gpu(rows, MR * 4), *d_labels = on_gpu(labels, MR * 4);
	int32_t *d_ids = on_gpu(ids, MR * 4), *d_positions = on_gpu(positions, MR * 4);
	int32_t *d_types = on_gpu(types, MR * 4);
	bias_gelu_forward(out, pre, bias, MR, MW);
	gpu->bias_gelu_forward(NULL, (struct act *)d_out, (struct act *)d_pre, d_bias, MR, MW);
	expect_close("bias_gelu_forward, 70001 rows", d_out, out, n, ATOL, RTOL);
	gather_rows(g, pre, rows, MR, MW);   /* pre: the same bits on both sides */
	gpu->gather_rows(d_g, d_pre, d_rows, MR, MW);
	expect_same("gather_rows, 70001 rows", d_g, g, n);
	scatter_add_rows(t, pre, rows, MR, MW);
	gpu->scatter_add_rows(d_t, d_pre, d_rows, MR, MW);
	expect_same("scatter_add_rows, 70001 rows", d_t, t, n);
	gelu_backward(g, d, pre, MR, MW);
	gpu->gelu_backward((struct act *)d_g, d_d, float_acts(d_pre), MR, MW);
	expect_close("gelu_backward, 70001 rows", d_g, g, n, ATOL, RTOL);
	dropout_apply(out, pre, n, 0.1f, 9);
	gpu->dropout_apply(d_out, d_pre, n, 0.1f, 9);
	expect_same("dropout_apply, 70001 rows", d_out, out, n);
	struct embedding e = { ids, types, positions, word, pos, type, MR, MW };
	struct embedding de = { d_ids, d_types, d_positions, d_word, d_pos, d_type, MR, MW };
	check_embedding_layernorm("70001 rows", &e, &de, 0.1f);
	double want = crossentropy_forward(lse, pre, labels, MR, MW, 0);
	gpu->crossentropy_forward(loss_from_start(), 0.5, d_lse, d_pre, d_labels, MR, MW, 0);
	double got = loss_added();
	CHECK(close_enough(got, want, 1e-3, 1e-6), "crossentropy_forward, 70001 rows: %.9g, CPU %.9g",
	      got, want);
	crossentropy_backward(out, pre, lse, labels, MR, MW, 0, 0.5f);
	gpu->crossentropy_backward(d_out, d_pre, d_lse, d_labels, MR, MW, 0, 0.5f);
	expect_close("crossentropy_backward, 70001 rows", d_out, out, n, 1e-6, RTOL);
	softmax_rows(t, g, MR, MW, 1.5f);
	gpu->softmax_rows(d_t, d_g, MR, MW, 1.5f);
	kl_forward(lse, pre, t, MR, MW, 1.5f);
	gpu->kl_forward(loss_from_start(), 0.5, d_lse, d_pre, d_t, MR, MW, 1.5f);
	kl_backward(d, pre, lse, t, MR, MW, 1.5f, 0.25f);
	gpu->kl_backward(d_d, d_pre, d_lse, d_t, MR, MW, 1.5f, 0.25f);
	expect_close("kl_backward, 70001 rows", d_d, d, n, 1e-6, RTOL);
	void *dv[] = { d_pre, d_bias, d_out, d_g, d_lse, d_t, d_d, d_word, d_pos, d_type, d_rows,
		       d_labels, d_ids, d_positions, d_types };
	for (size_t i = 0; i < sizeof dv / sizeof *dv; i++)
		gpu->release(dv[i]);
	free(pre), free(bias), free(out), free(g), free(lse), free(t), free(d), free(word), free(pos);
	free(type), free(rows), free(labels), free(ids), free(positions), free(types);
}

/* The backend's memory: zeroed when allocated, copied both ways, zeroed
 * in part; dropout 0 copies. */
static void test_memory(void)
{
	size_t n = 1001;
	float *x = randoms(n, 1), *want = xcalloc(n, 4);
	float *d = gpu->alloc(n * 4), *d2 = gpu->alloc(n * 4);
	expect_same("alloc: zeroed", d, want, n);
	gpu->upload(d, x, n * 4);
	expect_same("upload, then download", d, x, n);
	gpu->dropout_apply(d2, d, n, 0, 3);
	expect_same("dropout_apply p 0 copies", d2, x, n);
	gpu->zero(d + 1, (n - 2) * 4);
	want[0] = x[0], want[n - 1] = x[n - 1];
	expect_same("zero: the bytes asked, no more", d, want, n);
	gpu->release(d), gpu->release(d2);
	free(x), free(want);
}

static void test_crossentropy(int width, float smoothing, const char *what)
{
	enum { R = 41 };
	int32_t labels[R];
	for (int i = 0; i < R; i++)
		labels[i] = i % 4 == 3 ? -100 : (int32_t)rng_below(&gen, width);
	size_t n = (size_t)R * width;
	float *logits = randoms(n, 3), *lse = xcalloc(R, 4), *d = xcalloc(n, 4);
	float *d_logits = on_gpu(logits, n * 4), *d_lse = on_gpu(lse, R * 4), *d_d = on_gpu(d, n * 4);
	int32_t *d_labels = on_gpu(labels, sizeof labels);
	double want = crossentropy_forward(lse, logits, labels, R, width, smoothing);
	gpu->crossentropy_forward(loss_from_start(), 0.5, d_lse, d_logits, d_labels, R, width, smoothing);
	double got = loss_added();
	CHECK(close_enough(got, want, 1e-4, 1e-5), "crossentropy_forward %s: summed loss %.9g, CPU %.9g",
	      what, got, want);
	expect_close("crossentropy_forward: log-sum-exp", d_lse, lse, R, ATOL, RTOL);
	crossentropy_backward(d, logits, lse, labels, R, width, smoothing, 0.25f);
	gpu->crossentropy_backward(d_d, d_logits, d_lse, d_labels, R, width, smoothing, 0.25f);
	expect_close("crossentropy_backward (ignored rows zero)", d_d, d, n, 1e-6, RTOL);
	gpu->release(d_logits), gpu->release(d_lse), gpu->release(d_d), gpu->release(d_labels);
	free(logits), free(lse), free(d);
}

/* Squared error (regression) and binary cross-entropy (multi-label),
 * forward and backward, against the CPU's. */
static void test_elementwise_losses(void)
{
	enum { N = 1000 };
	float *x = randoms(N, 3), *y = randoms(N, 1), *d = xcalloc(N, 4);
	for (int i = 0; i < N; i++)   /* targets in [0, 1]: some 0 and 1, most soft */
		y[i] = i % 3 ? fabsf(y[i]) - floorf(fabsf(y[i])) : (float)(i % 2);
	float *d_x = on_gpu(x, N * 4), *d_y = on_gpu(y, N * 4), *d_d = on_gpu(d, N * 4);
	gpu->mse_forward(loss_from_start(), 0.5, d_x, d_y, N);
	double want = mse_forward(x, y, N), got = loss_added();
	CHECK(close_enough(got, want, 1e-6, 1e-9), "mse_forward: %.12g, CPU %.12g", got, want);
	mse_backward(d, x, y, N, 0.25f);
	gpu->mse_backward(d_d, d_x, d_y, N, 0.25f);
	expect_close("mse_backward", d_d, d, N, 1e-6, RTOL);
	gpu->bce_forward(loss_from_start(), 0.5, d_x, d_y, N);
	want = bce_forward(x, y, N), got = loss_added();
	CHECK(close_enough(got, want, 1e-6, 1e-9), "bce_forward: %.12g, CPU %.12g", got, want);
	bce_backward(d, x, y, N, 0.25f);
	gpu->bce_backward(d_d, d_x, d_y, N, 0.25f);
	expect_close("bce_backward", d_d, d, N, 1e-6, RTOL);
	gpu->release(d_x), gpu->release(d_y), gpu->release(d_d);
	free(x), free(y), free(d);
}

/* Distillation, VAT and R-Drop's divergences, and the moving average,
 * against the CPU's. */
static void test_divergences(int V)
{
	enum { R = 34 };   /* R-Drop: 17 pairs */
	size_t n = (size_t)R * V;
	float *x = randoms(n, 3), *y = randoms(n, 3), *t = xmalloc(n * 4), *lse = xcalloc(R, 4);
	float *d = randoms(n, 1);
	float *d_x = on_gpu(x, n * 4), *d_y = on_gpu(y, n * 4), *d_t = on_gpu(t, n * 4), *d_lse = on_gpu(lse, R * 4);
	float *d_d = on_gpu(d, n * 4);
	softmax_rows(t, y, R, V, 2.0f);
	gpu->softmax_rows(d_t, d_y, R, V, 2.0f);
	expect_close("softmax_rows", d_t, t, n, 1e-7, 1e-5);
	gpu->kl_forward(loss_from_start(), 0.5, d_lse, d_x, d_t, R, V, 2.0f);
	double want = kl_forward(lse, x, t, R, V, 2.0f), got = loss_added();
	CHECK(close_enough(got, want, 1e-5, 1e-5), "kl_forward, %d classes: %.9g, CPU %.9g", V, got, want);
	kl_backward(d, x, lse, t, R, V, 2.0f, 0.25f);
	gpu->kl_backward(d_d, d_x, d_lse, d_t, R, V, 2.0f, 0.25f);
	expect_close("kl_backward (adds)", d_d, d, n, 1e-6, RTOL);
	gpu->symkl_forward(loss_from_start(), 0.5, d_x, R / 2, V);
	want = symkl_forward(x, R / 2, V), got = loss_added();
	CHECK(close_enough(got, want, 1e-5, 1e-5), "symkl_forward, %d classes: %.9g, CPU %.9g", V, got, want);
	symkl_backward(d, x, R / 2, V, 0.5f);
	gpu->symkl_backward(d_d, d_x, R / 2, V, 0.5f);
	expect_close("symkl_backward (adds)", d_d, d, n, 1e-6, RTOL);
	axpy(d, x, n, 0.5f);
	gpu->axpy(d_d, d_x, n, 0.5f);
	expect_close("axpy", d_d, d, n, 1e-6, RTOL);
	gpu->upload(d_d, d, n * 4);   /* the bitwise checks start from the same bits */
	ema_update(d, x, n, 0.9f);
	gpu->ema_update(d_d, d_x, n, 0.9f);
	expect_close("ema_update", d_d, d, n, 0, 0);
	swap_floats(d, x, n);
	gpu->swap(d_d, d_x, n);
	expect_close("swap", d_x, x, n, 0, 0);
	gpu->release(d_x), gpu->release(d_y), gpu->release(d_t), gpu->release(d_lse), gpu->release(d_d);
	free(x), free(y), free(t), free(lse), free(d);
}

/* ---- attention ---- */

enum { AB = 3 };

/* Sequences packed one after another, of lengths T, T/2 + 1 and T/3 + 1,
 * H heads over C columns: when masked, the first with a padding key in its
 * middle, the second with two at its end, the third with no real key; else
 * no mask at all. */
static void test_attention(int T, int H, int C, int masked, int head_rows, float p)
{
	int lengths[AB] = { T, T / 2 + 1, T / 3 + 1 }, real[AB] = { T, T / 2 - 1, 0 };
	int32_t kv_start[AB + 1] = { 0 }, q_start[AB + 1] = { 0 };
	for (int b = 0; b < AB; b++)
		kv_start[b + 1] = kv_start[b] + lengths[b];
	int NT = kv_start[AB];
	uint8_t *mask = xmalloc((size_t)NT);
	for (int b = 0; b < AB; b++)
		for (int t = 0; t < lengths[b]; t++)
			mask[kv_start[b] + t] = t < real[b];
	mask[T / 2] = 0;
	int R = NT;
	if (head_rows) {   /* the last layer: sequence b asks for b + 1 query rows */
		for (int b = 0; b < AB; b++)
			q_start[b + 1] = q_start[b] + b + 1;
		R = q_start[AB];
	}
	int64_t p_start[AB + 1];
	attention_probs(p_start, kv_start, head_rows ? q_start : NULL, AB, H);
	size_t state_n = (size_t)R * H * gpu->attention_state;
	int ldq = head_rows ? C : 3 * C, ldkv = head_rows ? 2 * C : 3 * C;
	size_t kv_n = (size_t)NT * ldkv, q_n = (size_t)R * ldq;
	float *kv = randoms(kv_n, 1), *q = head_rows ? randoms(q_n, 1) : kv;
	float *ctx = xcalloc((size_t)R * C, 4);
	float *dctx = randoms((size_t)R * C, 1);
	float *dkv = xcalloc(kv_n, 4), *dq = head_rows ? xcalloc(q_n, 4) : dkv;
	float *d_kv = on_gpu(kv, kv_n * 4), *d_q = head_rows ? on_gpu(q, q_n * 4) : d_kv;
	float *d_ctx = on_gpu(ctx, (size_t)R * C * 4), *d_state = gpu->alloc(state_n * 4);
	float *d_dctx = on_gpu(dctx, (size_t)R * C * 4), *d_dkv = on_gpu(dkv, kv_n * 4);
	float *d_dq = head_rows ? on_gpu(dq, q_n * 4) : d_dkv;
	uint8_t *d_mask = masked ? on_gpu(mask, (size_t)NT) : NULL;
	int32_t *d_kv_start = on_gpu(kv_start, sizeof kv_start);
	int32_t *d_q_start = on_gpu(q_start, sizeof q_start);
	int64_t *d_p_start = on_gpu(p_start, sizeof p_start);
	/* fused [N, 3C] q|k|v, or q apart and k|v [N, 2C], as bert_graph.c lays them out */
	const float *k = head_rows ? kv : kv + C, *d_k = head_rows ? d_kv : d_kv + C;
	struct attention cpu_a = { AB, T, C, H, float_acts(q), float_acts(k), float_acts(k + C),
				   ldq, ldkv, kv_start, head_rows ? q_start : NULL, p_start,
				   masked ? mask : NULL, p, 99 };
	struct attention gpu_a = { AB, T, C, H, float_acts(d_q), float_acts(d_k),
				   float_acts(d_k + C), ldq, ldkv, d_kv_start,
				   head_rows ? d_q_start : NULL, d_p_start, d_mask, p, 99 };
	char what[160];
	char rows[64];
	snprintf(rows, sizeof rows, "%s, %d heads of %d, %s", head_rows ? "head rows" : "all rows",
		 H, C / H, masked ? "masked" : "no mask");
	attention_forward(ctx, NULL, &cpu_a);
	gpu->attention_forward((struct act *)d_ctx, d_state, &gpu_a);
	snprintf(what, sizeof what, "attention_forward T %d, %s, p %.1f: ctx", T, rows, p);
	expect_close(what, d_ctx, ctx, (size_t)R * C, ATOL, RTOL);
	float *dk = head_rows ? dkv : dkv + C, *d_dk = head_rows ? d_dkv : d_dkv + C;
	attention_backward(dq, dk, dk + C, dctx, NULL, &cpu_a);
	gpu->attention_backward((struct act *)d_dq, (struct act *)d_dk, (struct act *)(d_dk + C),
				d_dctx, d_state, &gpu_a);
	snprintf(what, sizeof what, "attention_backward T %d, %s, p %.1f: dq, dk, dv", T, rows, p);
	expect_close(what, d_dkv, dkv, kv_n, 1e-4, RTOL);
	if (head_rows) {
		snprintf(what, sizeof what, "attention_backward T %d, %s, p %.1f: dq", T, rows, p);
		expect_close(what, d_dq, dq, q_n, 1e-4, RTOL);
		gpu->release(d_q), gpu->release(d_dq), free(q), free(dq);
	}
	void *d[] = { d_kv, d_ctx, d_state, d_dctx, d_dkv, d_kv_start, d_q_start, d_p_start };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	if (d_mask)
		gpu->release(d_mask);
	free(mask), free(kv), free(ctx), free(dctx), free(dkv);
}

/* More probabilities than a 32-bit index reaches: SEQS sequences of ALEN
 * keys, one head, the last one's probabilities past float 2^31 (8193 x 512^2)
 * in the attention's scratch. The others are zeros, there for their size;
 * the last one's results against the CPU's attention over it alone (no
 * dropout: a draw is numbered by its offset, which differs). Some 26 GB of
 * GPU memory. */
static void test_attention_past_2g(void)
{
	enum { ALEN = 512, AC = 64, SEQS = (1 << 13) + 2, LD = 3 * AC };
	const double need = 28e9;
	if (gpu->memory() < need) {
		SKIP("attention past 2^31 probabilities: the GPU has %.1f GB free, not %.0f",
		     gpu->memory() / 1e9, need / 1e9);
		return;
	}
	int32_t *kv_start = xmalloc((SEQS + 1) * sizeof *kv_start);
	int64_t *p_start = xmalloc((SEQS + 1) * sizeof *p_start), one_p[2];
	for (int b = 0; b <= SEQS; b++)
		kv_start[b] = b * ALEN;
	int64_t probs_n = attention_probs(p_start, kv_start, NULL, SEQS, 1);
	int32_t one_kv[2] = { 0, ALEN };
	attention_probs(one_p, one_kv, NULL, 1, 1);
	size_t rows = (size_t)SEQS * ALEN, last = rows - ALEN;
	float *kv = randoms((size_t)ALEN * LD, 1), *dctx = randoms((size_t)ALEN * AC, 1);
	float *ctx = xcalloc((size_t)ALEN * AC, 4), *dkv = xcalloc((size_t)ALEN * LD, 4);
	float *d_kv = gpu->alloc(rows * LD * 4), *d_dkv = gpu->alloc(rows * LD * 4);
	float *d_ctx = gpu->alloc(rows * AC * 4), *d_dctx = gpu->alloc(rows * AC * 4);
	float *d_state = gpu->alloc(rows * gpu->attention_state * 4);
	int32_t *d_kv_start = on_gpu(kv_start, (SEQS + 1) * sizeof *kv_start);
	int64_t *d_p_start = on_gpu(p_start, (SEQS + 1) * sizeof *p_start);
	gpu->upload(d_kv + last * LD, kv, (size_t)ALEN * LD * 4);
	gpu->upload(d_dctx + last * AC, dctx, (size_t)ALEN * AC * 4);
	struct attention cpu_a = { 1, ALEN, AC, 1, float_acts(kv), float_acts(kv + AC),
				   float_acts(kv + 2 * AC), LD, LD, one_kv, NULL, one_p, NULL, 0, 99 };
	struct attention gpu_a = { SEQS, ALEN, AC, 1, float_acts(d_kv), float_acts(d_kv + AC),
				   float_acts(d_kv + 2 * AC), LD, LD, d_kv_start, NULL, d_p_start, NULL,
				   0, 99 };
	attention_forward(ctx, NULL, &cpu_a);
	gpu->attention_forward((struct act *)d_ctx, d_state, &gpu_a);
	CHECK(p_start[SEQS - 1] > INT32_MAX && probs_n > p_start[SEQS - 1],
	      "the last sequence's probabilities start past 2^31 (%lld)", (long long)p_start[SEQS - 1]);
	expect_close("attention_forward past 2^31 probabilities: ctx", d_ctx + last * AC, ctx,
		     (size_t)ALEN * AC, ATOL, RTOL);
	attention_backward(dkv, dkv + AC, dkv + 2 * AC, dctx, NULL, &cpu_a);
	gpu->attention_backward((struct act *)d_dkv, (struct act *)(d_dkv + AC),
				(struct act *)(d_dkv + 2 * AC), d_dctx, d_state, &gpu_a);
	expect_close("attention_backward past 2^31 probabilities: dq, dk, dv", d_dkv + last * LD,
		     dkv, (size_t)ALEN * LD, 1e-4, RTOL);
	void *d[] = { d_kv, d_dkv, d_ctx, d_dctx, d_state, d_kv_start, d_p_start };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(kv_start), free(p_start), free(kv), free(dctx), free(ctx), free(dkv);
}

/* ---- the optimizer ---- */

/* n floats: 16384-float chunks (the last short, its length not a multiple of
 * the CPU's eight lanes, when n says so), 32 chunks to a GPU block. */
static void test_optimizer(size_t n)
{
	float *p = randoms(n, 1), *g = randoms(n, 0.1f), *m = randoms(n, 0.01f), *v = randoms(n, 0.01f);
	for (size_t i = 0; i < n; i++)
		v[i] = v[i] * v[i];
	float *d_p = on_gpu(p, n * 4), *d_g = on_gpu(g, n * 4), *d_m = on_gpu(m, n * 4);
	float *d_v = on_gpu(v, n * 4);
	double want = sum_squares(g, n), got = gpu->sum_squares(d_g, n);
	CHECK(got == want, "sum_squares of %zu: %.17g, the CPU's %.17g", n, got, want);
	scale_floats(g, n, 0.7f);
	gpu->scale(d_g, n, 0.7f);
	expect_same("scale", d_g, g, n);
	const struct adam_coef coefs[2] = {
		{ 1, 0.999f, 0, 0.9f, 0.1f, 0.999f, 0.001f, 1e-3f, 0.3f, 1e-8f },   /* AdamW */
		{ 0.3f, 1, 0.01f, 0.9f, 0.1f, 0.999f, 0.001f, 1e-3f, 0.3f, 1e-8f }, /* Adam, L2, clipped */
	};
	for (int k = 0; k < 2; k++) {
		const char *how = k ? "adam_update with L2 (Adam)" : "adam_update";
		char what[96];
		struct adam_tensor one = { d_p, d_g, d_m, d_v, n, coefs[k] };
		adam_update(p, g, m, v, n, &coefs[k]);
		gpu->adam_update(&one, 1);
		snprintf(what, sizeof what, "%s: p", how), expect_same(what, d_p, p, n);
		snprintf(what, sizeof what, "%s: m", how), expect_same(what, d_m, m, n);
		snprintf(what, sizeof what, "%s: v", how), expect_same(what, d_v, v, n);
	}
	/* one launch for a table: three tensors of n, each with its own coefficients,
	 * one of them a single element, one empty */
	size_t cut[5] = { 0, n / 3, n / 3 + 1, n / 3 + 1, n };
	struct adam_tensor table[4];
	for (int i = 0; i < 4; i++) {
		size_t at = cut[i], len = cut[i + 1] - cut[i];
		adam_update(p + at, g + at, m + at, v + at, len, &coefs[i % 2]);
		table[i] = (struct adam_tensor){ d_p + at, d_g + at, d_m + at, d_v + at, len, coefs[i % 2] };
	}
	gpu->adam_update(table, 4);
	expect_same("adam_update of a table of 4 tensors in one launch: p", d_p, p, n);
	expect_same("adam_update of a table of 4 tensors in one launch: m", d_m, m, n);
	expect_same("adam_update of a table of 4 tensors in one launch: v", d_v, v, n);
	sgd_update(p, g, m, n, 0.3f, 0.01f, 0.9f, 0.01f);
	gpu->sgd_update(d_p, d_g, d_m, n, 0.3f, 0.01f, 0.9f, 0.01f);
	expect_same("sgd_update with momentum: p", d_p, p, n);
	expect_same("sgd_update with momentum: m", d_m, m, n);
	sgd_update(p, g, NULL, n, 1, 0.01f, 0, 0.01f);
	gpu->sgd_update(d_p, d_g, NULL, n, 1, 0.01f, 0, 0.01f);
	expect_same("sgd_update without momentum: p", d_p, p, n);
	struct lamb_coef l = { 0.3f, 0.9f, 0.1f, 0.999f, 0.001f, 0.5f, 0.3f, 1e-6f, 0.01f };
	double s_cpu[2], s_gpu[2];
	lamb_moments(p, g, m, v, n, &l, s_cpu);
	gpu->lamb_moments(d_p, d_g, d_m, d_v, n, &l, s_gpu);
	CHECK(s_cpu[0] == s_gpu[0] && s_cpu[1] == s_gpu[1], "lamb_moments: sums %.17g %.17g, the CPU's",
	      s_gpu[0], s_gpu[1]);
	lamb_apply(p, m, v, n, &l, 1e-3f);
	gpu->lamb_apply(d_p, d_m, d_v, n, &l, 1e-3f);
	expect_same("lamb_apply: p", d_p, p, n);
	gpu->release(d_p), gpu->release(d_g), gpu->release(d_m), gpu->release(d_v);
	free(p), free(g), free(m), free(v);
}

static void test_linear_all(void)
{
	test_memory();
	test_linear();
}

static void test_embeddings(void)
{
	test_embedding();
	test_embedding_many(3001, 1);
	test_embedding_many(3001, 0);
	test_embedding_many(70001, 1);   /* more rows than a grid has blocks in y */
}

static void test_layernorms(void)
{
	test_layernorm(N, C, 0);
	test_layernorm(N, C, 0.1f);
	test_layernorm(300, 768, 0);
	test_layernorm(300, 768, 0.1f);
	test_layernorm(70001, 37, 0);
	test_layernorm(70001, 37, 0.1f);
}

static void test_rows_all(void)
{
	test_rows();
	test_many_rows();
}

static void test_losses(void)
{
	test_crossentropy(3, 0, "3 classes");
	test_crossentropy(V, 0, "a vocab of 1003");
	test_crossentropy(V, 0.1f, "label smoothing 0.1");
	test_elementwise_losses();
	test_divergences(3);
	test_divergences(V);
}

static void test_attentions(void)
{
	test_attention(17, 4, 64, 1, 0, 0);
	test_attention(17, 4, 64, 1, 1, 0);
	test_attention(128, 4, 64, 1, 0, 0.1f);
	test_attention(128, 4, 64, 1, 1, 0.1f);
	test_attention(512, 4, 64, 1, 0, 0.1f);
	test_attention(77, 2, 128, 1, 0, 0.1f);   /* BERT's heads, 64 wide */
	test_attention(77, 2, 128, 0, 1, 0.1f);
	test_attention(65, 12, 768, 0, 0, 0);
	/* the widest head this GPU takes (256 from sm_80): shared memory past 48 KiB */
	test_attention(40, 1, cuda_attention_widest(), 1, 0, 0.1f);
	test_attention(40, 1, cuda_attention_widest(), 1, 1, 0);
}

static void test_optimizers(void)
{
	test_optimizer(5);
	test_optimizer(100003);
	test_optimizer(33 * 16384 + 12345);
}

static const struct group groups[] = {
	{ "linear", test_linear_all }, { "embedding", test_embeddings }, { "layernorm", test_layernorms },
	{ "elementwise", test_elementwise }, { "graphs", test_graphs }, { "rows", test_rows_all },
	{ "losses", test_losses }, { "attention", test_attentions }, { "attention_2g", test_attention_past_2g },
	{ "optimizer", test_optimizers },
};

static int open_gpu(void)
{
	if (cuda_device_count() == 0) {
		SKIP("CUDA ops against the CPU's: no GPU here");
		return 0;
	}
	gpu = backend_open("cuda", PREC_FP32);
	rng_seed(&gen, 17);
	return 1;
}
#endif

int main(int argc, char **argv)
{
#ifndef TS_GPU
	(void)argc, (void)argv;
	SKIP("CUDA ops against the CPU's: this build has no CUDA backend (GPU=1)");
	return check_failed;
#else
	return run_groups(argc, argv, groups, sizeof groups / sizeof *groups, open_gpu);
#endif
}
