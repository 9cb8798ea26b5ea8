/* bf16 matrix work on the CPU (ts-train --precision bf16): the linear layers'
 * GEMMs run on oneDNN's matmul with bf16 inputs, fp32 accumulation and fp32
 * outputs, on processors with AVX512-BF16 or AMX-BF16, and the attention's
 * products on cpu_attention_bf16.c's kernels. Each GEMM takes its inputs
 * rounded to bf16 (nearest even): a layer's input once in the forward,
 * kept for its weight gradient; the residual LayerNorm's and GELU's
 * outputs, and GELU's gradient, by those ops themselves (the handoff
 * below), which run on cpu_rows_bf16.c's kernels, as the LayerNorm
 * backward does. Weights, gradients, optimizer state and every other op
 * stay fp32. oneDNN shares OpenMP's threads with the rest of the CPU
 * backend. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "util/err.h"
#include <stdint.h>
#include <string.h>

#ifndef TS_DNNL
int bf16_available(const char **why)
{
	*why = "this build has no oneDNN (the bf16 GEMMs' library; a STATIC=1 build leaves it out)";
	return 0;
}

void linear_forward_bf16(float *out, const float *in, const float *w, const float *bias,
			 int N, int Cin, int Cout)
{
	(void)out, (void)in, (void)w, (void)bias, (void)N, (void)Cin, (void)Cout;
	die("bf16 GEMMs without oneDNN");
}

void linear_backward_bf16(float *din, float *dw, float *dbias, const float *dout,
			  const float *in, const float *w, int N, int Cin, int Cout, int accumulate)
{
	(void)din, (void)dw, (void)dbias, (void)dout, (void)in, (void)w, (void)N, (void)Cin,
		(void)Cout, (void)accumulate;
	die("bf16 GEMMs without oneDNN");
}

void bias_gelu_forward_bf16(float *out, float *pre, const float *bias, int N, int F)
{
	(void)out, (void)pre, (void)bias, (void)N, (void)F;
	die("bf16 GEMMs without oneDNN");
}

void gelu_backward_bf16(float *dpre, const float *dout, const float *pre, int N, int F)
{
	(void)dpre, (void)dout, (void)pre, (void)N, (void)F;
	die("bf16 GEMMs without oneDNN");
}

void residual_layernorm_forward_bf16(float *out, float *sum, float *mean, float *rstd,
				     const float *res, const float *bias, const float *w,
				     const float *b, int N, int C, float eps, float p,
				     uint64_t seed)
{
	(void)out, (void)sum, (void)mean, (void)rstd, (void)res, (void)bias, (void)w, (void)b,
		(void)N, (void)C, (void)eps, (void)p, (void)seed;
	die("bf16 GEMMs without oneDNN");
}

void layernorm_backward_bf16(float *din, float *dw, float *db, const float *dout,
			     const float *in, const float *mean, const float *rstd,
			     const float *w, int N, int C)
{
	(void)din, (void)dw, (void)db, (void)dout, (void)in, (void)mean, (void)rstd, (void)w,
		(void)N, (void)C;
	die("bf16 GEMMs without oneDNN");
}

void attention_forward_bf16(float *ctx, float *state, const struct attention *a)
{
	(void)ctx, (void)state, (void)a;
	die("bf16 GEMMs without oneDNN");
}

void attention_backward_bf16(float *dq, float *dk, float *dv, const float *dctx,
			     const float *state, const struct attention *a)
{
	(void)dq, (void)dk, (void)dv, (void)dctx, (void)state, (void)a;
	die("bf16 GEMMs without oneDNN");
}
#else
#include "backend/cpu_simd.h"
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>

int bf16_available(const char **why)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16)
		return 1;
	*why = "this processor has neither AVX512-BF16 nor AMX-BF16";
	return 0;
}

static void check(dnnl_status_t s, const char *what)
{
	if (s != dnnl_success)
		die("oneDNN: %s failed (status %d)", what, (int)s);
}

/* The GEMMs a linear layer takes, with the rows of the batch (N) left to
 * run time so that one primitive serves every batch:
 *   FWD   out[N,Cout]  = in[N,Cin] w[Cout,Cin]^T + bias
 *   DATA  din[N,Cin]  (+)= dout[N,Cout] w[Cout,Cin]
 *   WGT   dw[Cout,Cin] += dout[N,Cout]^T in[N,Cin]  */
enum gemm_kind { FWD, DATA, WGT };

struct gemm {
	enum gemm_kind kind;
	int Cin, Cout, flag;       /* flag: FWD a bias, DATA accumulate */
	dnnl_primitive_t p;
};

enum { MAX_GEMMS = 256 };
static struct gemm gemms[MAX_GEMMS];
static int ngemms;
static dnnl_engine_t engine;
static dnnl_stream_t stream;

/* A row-major [rows, cols] matrix, or its transpose with trans. */
static dnnl_memory_desc_t matrix(int64_t rows, int64_t cols, dnnl_data_type_t t, int trans)
{
	dnnl_memory_desc_t d;
	dnnl_dims_t dims = { trans ? cols : rows, trans ? rows : cols };
	dnnl_dims_t strides = { trans ? 1 : cols, trans ? cols : 1 };
	check(dnnl_memory_desc_init_by_strides(&d, 2, dims, t, strides), "a memory descriptor");
	return d;
}

/* The matmul's src, weights and dst descriptors of a gemm over n rows
 * (DNNL_RUNTIME_DIM_VAL when creating the primitive). */
static void gemm_descs(const struct gemm *g, int64_t n, dnnl_memory_desc_t d[3])
{
	switch (g->kind) {
	case FWD:
		d[0] = matrix(n, g->Cin, dnnl_bf16, 0);
		d[1] = matrix(g->Cout, g->Cin, dnnl_bf16, 1);
		d[2] = matrix(n, g->Cout, dnnl_f32, 0);
		break;
	case DATA:
		d[0] = matrix(n, g->Cout, dnnl_bf16, 0);
		d[1] = matrix(g->Cout, g->Cin, dnnl_bf16, 0);
		d[2] = matrix(n, g->Cin, dnnl_f32, 0);
		break;
	case WGT:
		d[0] = matrix(n, g->Cout, dnnl_bf16, 1);
		d[1] = matrix(n, g->Cin, dnnl_bf16, 0);
		d[2] = matrix(g->Cout, g->Cin, dnnl_f32, 0);
		break;
	}
}

static void gemm_create(struct gemm *g)
{
	dnnl_memory_desc_t d[3], bias;
	gemm_descs(g, DNNL_RUNTIME_DIM_VAL, d);
	if (g->kind == FWD && g->flag)
		bias = matrix(1, g->Cout, dnnl_f32, 0);
	dnnl_primitive_attr_t attr;
	check(dnnl_primitive_attr_create(&attr), "an attribute");
	if (g->kind == WGT || (g->kind == DATA && g->flag)) {
		dnnl_post_ops_t ops;
		check(dnnl_post_ops_create(&ops), "post-ops");
		check(dnnl_post_ops_append_sum(ops, 1.0f), "a sum post-op");
		check(dnnl_primitive_attr_set_post_ops(attr, ops), "setting post-ops");
		dnnl_post_ops_destroy(ops);
	}
	dnnl_matmul_desc_t md;
	check(dnnl_matmul_desc_init(&md, &d[0], &d[1], g->kind == FWD && g->flag ? &bias : NULL, &d[2]),
	      "a matmul descriptor");
	dnnl_primitive_desc_t pd;
	check(dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL), "a matmul");
	check(dnnl_primitive_create(&g->p, pd), "a matmul primitive");
	dnnl_primitive_desc_destroy(pd);
	dnnl_primitive_attr_destroy(attr);
}

static struct gemm *gemm_get(enum gemm_kind kind, int Cin, int Cout, int flag)
{
	if (!engine) {
		check(dnnl_engine_create(&engine, dnnl_cpu, 0), "the CPU engine");
		check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "a stream");
	}
	for (int i = 0; i < ngemms; i++)
		if (gemms[i].kind == kind && gemms[i].Cin == Cin && gemms[i].Cout == Cout &&
		    gemms[i].flag == flag)
			return &gemms[i];
	if (ngemms == MAX_GEMMS)
		die("bf16: more than %d linear shapes", MAX_GEMMS);
	struct gemm *g = &gemms[ngemms++];
	*g = (struct gemm){ kind, Cin, Cout, flag, NULL };
	gemm_create(g);
	return g;
}

static dnnl_memory_t wrap(const dnnl_memory_desc_t *d, const void *p)
{
	dnnl_memory_t m;
	check(dnnl_memory_create(&m, d, engine, (void *)p), "a memory object");
	return m;
}

/* Runs g over n rows: a, b the bf16 operands, c the fp32 result. */
static void gemm_run(const struct gemm *g, int64_t n, const uint16_t *a, const uint16_t *b,
		     float *c, const float *bias)
{
	dnnl_memory_desc_t d[3];
	gemm_descs(g, n, d);
	dnnl_memory_t m[4] = { wrap(&d[0], a), wrap(&d[1], b), wrap(&d[2], c), NULL };
	dnnl_exec_arg_t args[4] = {
		{ DNNL_ARG_SRC, m[0] }, { DNNL_ARG_WEIGHTS, m[1] }, { DNNL_ARG_DST, m[2] },
	};
	int nargs = 3;
	if (bias) {
		dnnl_memory_desc_t bd = matrix(1, g->Cout, dnnl_f32, 0);
		m[3] = wrap(&bd, bias);
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, m[3] };
	}
	check(dnnl_primitive_execute(g->p, stream, nargs, args), "a matmul");
	check(dnnl_stream_wait(stream), "the stream");
	for (int i = 0; i < nargs; i++)
		dnnl_memory_destroy(m[i]);
}

HOT_ELEMENTWISE static void to_bf16_span(uint16_t *dst, const float *src, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		dst[i] = to_bf16(src[i]);
}

/* Scratch for the bf16 copies: slot 0 and 1 the GEMM's operands. */
static uint16_t *scratch[2];
static size_t scratch_n[2];

/* dst[n] = src[n] in bf16. */
static void round_into(uint16_t *dst, const float *src, size_t n)
{
	enum { SPAN = 16384 };
	size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
	for (size_t s = 0; s < spans; s++) {
		size_t i = s * SPAN;
		to_bf16_span(dst + i, src + i, n - i < SPAN ? n - i : SPAN);
	}
}

/* src[n] in bf16 in scratch slot. */
static const uint16_t *bf16_copy(int slot, const float *src, size_t n)
{
	cpu_grow(&scratch[slot], &scratch_n[slot], n, sizeof **scratch);
	round_into(scratch[slot], src, n);
	return scratch[slot];
}

/* Runs row(ctx, r, sum) over rows 0..N, each adding its C values into sum,
 * in spans of SUM_ROWS rows whose sums start from zero, and adds the spans'
 * sums in order into acc[C]: the same bits for any thread count. */
static void rows_with_colsums(float *acc, int N, int C,
			      void (*row)(const void *ctx, size_t r, float *sum), const void *ctx)
{
	enum { SUM_ROWS = 64 };
	static float *part;
	static size_t part_n;
	size_t spans = ((size_t)N + SUM_ROWS - 1) / SUM_ROWS;
	grow(&part, &part_n, spans * C, sizeof *part);
#pragma omp parallel for schedule(static)
	for (size_t s = 0; s < spans; s++) {
		float *sum = part + s * C;
		memset(sum, 0, C * sizeof *sum);
		size_t end = (s + 1) * SUM_ROWS < (size_t)N ? (s + 1) * SUM_ROWS : (size_t)N;
		for (size_t r = s * SUM_ROWS; r < end; r++)
			row(ctx, r, sum);
	}
	for (size_t s = 0; s < spans; s++)
		for (int c = 0; c < C; c++)
			acc[c] += part[s * C + c];
}

/* A row-wise op's operands, for rows_with_colsums. */
struct rows {
	uint16_t *copy;
	float *out;
	const float *in, *pre;
	int C;
};

HOT_ELEMENTWISE static void to_bf16_sum_row(uint16_t *dst, float *sum, const float *src, int n)
{
#pragma omp simd
	for (int j = 0; j < n; j++) {
		dst[j] = to_bf16(src[j]);
		sum[j] += src[j];
	}
}

static void copy_sum_row(const void *ctx, size_t r, float *sum)
{
	const struct rows *x = ctx;
	size_t o = r * x->C;
	to_bf16_sum_row(x->copy + o, sum, x->in + o, x->C);
}

/* dout[N,Cout] in bf16 in scratch slot 0, and its column sums added to
 * dbias, in one pass over dout. */
static const uint16_t *bf16_copy_colsum(float *dbias, const float *dout, int N, int Cout)
{
	cpu_grow(&scratch[0], &scratch_n[0], (size_t)N * Cout, sizeof **scratch);
	struct rows x = { .copy = scratch[0], .in = dout, .C = Cout };
	rows_with_colsums(dbias, N, Cout, copy_sum_row, &x);
	return scratch[0];
}

/* A bf16 copy of an op's fp32 output made by the op itself, handed to the
 * linear op that comes next: the residual LayerNorm's output, the input of
 * the FFN or of the next layer's QKV; GELU's output, the input of the FFN's
 * second layer; and GELU's backward, the dout of its first, with its column
 * sums (the bias gradient). The next linear op takes it when its input (or
 * dout) is that output and drops it either way, so an output must reach
 * that op unchanged, as it does in the model's graph. */
static struct {
	const float *src;          /* NULL: none */
	size_t n;
	uint16_t *copy;
	float *sums;               /* the column sums of its rows of sum_cols */
	size_t sums_cap;
	int sum_cols;              /* 0: none */
} handoff;

/* Each output's copies are made in space of its own, kept until its op
 * runs again, for the linear op that takes a copy keeps it for its
 * backward by reference: each buffer is touched once and stays put (when
 * buffers of two sizes traded places instead, each step until they had all
 * grown faulted fresh pages in, which cost the first steps 10 to 35 ms). */
struct site {
	const float *out;
	uint16_t *copy;
	size_t cap;
};

enum { MAX_SITES = 512 };
static struct site sites[MAX_SITES];
static int nsites;

static void forget_kept(const uint16_t *copy);

/* Space for out's copy of n values; NULL when the table is full. */
static uint16_t *site_copy(const float *out, size_t n)
{
	int i = 0;
	while (i < nsites && sites[i].out != out)
		i++;
	if (i == MAX_SITES)
		return NULL;
	if (i == nsites)
		sites[nsites++] = (struct site){ .out = out };
	if (n > sites[i].cap)
		forget_kept(sites[i].copy);   /* the space moves */
	cpu_grow(&sites[i].copy, &sites[i].cap, n, sizeof *sites[i].copy);
	return sites[i].copy;
}

/* The handoff's copy of src[n] (with the sums of sum_cols columns, or
 * none), or NULL; the handoff is dropped either way. */
static uint16_t *take_handoff(const float *src, size_t n, int sum_cols)
{
	const float *from = handoff.src;
	handoff.src = NULL;
	return from == src && handoff.n == n && handoff.sum_cols == sum_cols ? handoff.copy : NULL;
}

/* Space for a handoff of src[n], from now on; when the sites are full,
 * space whose copy goes to no one. */
static uint16_t *hand_off(const float *src, size_t n, int sum_cols)
{
	static uint16_t *spill;
	static size_t spill_cap;
	handoff.copy = site_copy(src, n);
	if (!handoff.copy) {
		cpu_grow(&spill, &spill_cap, n, sizeof *spill);
		handoff.src = NULL;
		return spill;
	}
	handoff.src = src, handoff.n = n, handoff.sum_cols = sum_cols;
	return handoff.copy;
}

void residual_layernorm_forward_bf16(float *out, float *sum, float *mean, float *rstd,
				     const float *res, const float *bias, const float *w,
				     const float *b, int N, int C, float eps, float p,
				     uint64_t seed)
{
	uint16_t *copy = hand_off(out, (size_t)N * C, 0);
	uint32_t threshold = dropout_threshold(p), key = dropout_key(seed);
	float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		residual_layernorm_row_bf16(out + o, copy + o, sum + o, mean + r, rstd + r, res + o,
					    bias, w, b, C, eps, key, (uint32_t)o, threshold, scale);
	}
}

void bias_gelu_forward_bf16(float *out, float *pre, const float *bias, int N, int F)
{
	uint16_t *copy = hand_off(out, (size_t)N * F, 0);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * F;
		bias_gelu_row_bf16(out + o, copy + o, pre + o, bias, F);
	}
}

static void gelu_backward_row(const void *ctx, size_t r, float *sum)
{
	const struct rows *x = ctx;
	size_t o = r * x->C;
	gelu_backward_row_bf16(x->out + o, x->copy + o, sum, x->in + o, x->pre + o, x->C);
}

void gelu_backward_bf16(float *dpre, const float *dout, const float *pre, int N, int F)
{
	struct rows x = { hand_off(dpre, (size_t)N * F, F), dpre, dout, pre, F };
	grow(&handoff.sums, &handoff.sums_cap, (size_t)F, sizeof *handoff.sums);
	memset(handoff.sums, 0, sizeof *handoff.sums * (size_t)F);
	rows_with_colsums(handoff.sums, N, F, gelu_backward_row, &x);
}

/* A LayerNorm backward's operands, for rows_with_colsums. */
struct norm_rows {
	float *din;
	const float *dout, *in, *mean, *rstd, *w;
	int C;
};

static void norm_backward_row(const void *ctx, size_t r, float *sums)
{
	const struct norm_rows *x = ctx;
	size_t o = r * x->C;
	layernorm_backward_row_bf16(x->din + o, sums, x->dout + o, x->in + o, x->mean[r],
				    x->rstd[r], x->w, x->C);
}

void layernorm_backward_bf16(float *din, float *dw, float *db, const float *dout,
			     const float *in, const float *mean, const float *rstd,
			     const float *w, int N, int C)
{
	static float *sums;
	static size_t cap;
	grow(&sums, &cap, 2 * (size_t)C, sizeof *sums);
	memset(sums, 0, sizeof *sums * 2 * (size_t)C);
	struct norm_rows x = { din, dout, in, mean, rstd, w, C };
	rows_with_colsums(sums, N, 2 * C, norm_backward_row, &x);
	for (int c = 0; c < C; c++) {
		dw[c] += sums[c];
		db[c] += sums[C + c];
	}
}

/* The bf16 copy of a layer's input that its forward made, kept for its
 * backward: one per weight, with the input and size it was made from; a
 * handed-off copy, or one rounded into its own space. */
struct input_copy {
	const float *w, *in;
	size_t n, cap;
	const uint16_t *copy;
	uint16_t *own;
};

enum { MAX_INPUTS = 512 };
static struct input_copy inputs[MAX_INPUTS];
static int ninputs;

/* w's entry, a new one for a new w; NULL when the table is full. */
static struct input_copy *input_of(const float *w)
{
	for (int i = 0; i < ninputs; i++)
		if (inputs[i].w == w)
			return &inputs[i];
	if (ninputs == MAX_INPUTS)
		return NULL;
	inputs[ninputs] = (struct input_copy){ .w = w };
	return &inputs[ninputs++];
}

/* Drops the kept copies that are copy: a backward rounds their inputs again. */
static void forget_kept(const uint16_t *copy)
{
	for (int i = 0; i < ninputs; i++)
		if (inputs[i].copy == copy)
			inputs[i].in = NULL, inputs[i].copy = NULL;
}

/* in[n] in bf16, kept as w's input copy (in scratch slot 0 when the table
 * is full): given, when the op that made in handed it off, or rounded now. */
static const uint16_t *keep_input(const float *w, const float *in, size_t n,
				  const uint16_t *given)
{
	struct input_copy *c = input_of(w);
	if (!c)
		return given ? given : bf16_copy(0, in, n);
	if (given) {
		c->copy = given;
	} else {
		cpu_grow(&c->own, &c->cap, n, sizeof *c->own);
		round_into(c->own, in, n);
		c->copy = c->own;
	}
	c->in = in, c->n = n;
	return c->copy;
}

/* in[n] in bf16: w's input copy when the forward made it from in, else
 * rounded again into scratch slot 1. */
static const uint16_t *kept_input(const float *w, const float *in, size_t n)
{
	struct input_copy *c = input_of(w);
	return c && c->in == in && c->n == n ? c->copy : bf16_copy(1, in, n);
}

void linear_forward_bf16(float *out, const float *in, const float *w, const float *bias,
			 int N, int Cin, int Cout)
{
	uint16_t *given = take_handoff(in, (size_t)N * Cin, 0);
	if (!N)
		return;
	const struct gemm *g = gemm_get(FWD, Cin, Cout, bias != NULL);
	const uint16_t *a = keep_input(w, in, (size_t)N * Cin, given);
	const uint16_t *b = bf16_copy(1, w, (size_t)Cout * Cin);
	gemm_run(g, N, a, b, out, bias);
}

void linear_backward_bf16(float *din, float *dw, float *dbias, const float *dout,
			  const float *in, const float *w, int N, int Cin, int Cout, int accumulate)
{
	const uint16_t *d = take_handoff(dout, (size_t)N * Cout, Cout);
	if (!N)
		return;
	if (d && dbias)
		for (int c = 0; c < Cout; c++)
			dbias[c] += handoff.sums[c];
	else if (!d)
		d = dbias ? bf16_copy_colsum(dbias, dout, N, Cout) : bf16_copy(0, dout, (size_t)N * Cout);
	if (din)
		gemm_run(gemm_get(DATA, Cin, Cout, accumulate), N, d, bf16_copy(1, w, (size_t)Cout * Cin),
			 din, NULL);
	gemm_run(gemm_get(WGT, Cin, Cout, 1), N, d, kept_input(w, in, (size_t)N * Cin), dw, NULL);
}

/* The heads' products on gemm_bf16, in space for the longest sequence
 * and the head width. */
static void reserve_heads(const struct attention *a)
{
	int d = a->C / a->H;
	gemm_bf16_reserve(a->T > d ? a->T : d);
}

void attention_forward_bf16(float *ctx, float *state, const struct attention *a)
{
	(void)state;
	reserve_heads(a);
	attention_forward_with(ctx, a, gemm_bf16, softmax_row_bf16);
}

void attention_backward_bf16(float *dq, float *dk, float *dv, const float *dctx,
			     const float *state, const struct attention *a)
{
	(void)state;
	reserve_heads(a);
	attention_backward_with(dq, dk, dv, dctx, a, gemm_bf16, softmax_row_bf16,
				softmax_backward_row_bf16);
}
#endif

/* The fp32 table with the ops that compute in bf16. */
const struct backend *backend_cpu_bf16(const char **why)
{
	static struct backend bf16;
	if (!bf16_available(why))
		return NULL;
	bf16 = *backend_cpu();
	bf16.name = "cpu bf16";
	bf16.precise = backend_cpu();
	bf16.linear_forward = linear_forward_bf16;
	bf16.linear_backward = linear_backward_bf16;
	bf16.bias_gelu_forward = bias_gelu_forward_bf16;
	bf16.gelu_backward = gelu_backward_bf16;
	bf16.layernorm_backward = layernorm_backward_bf16;
	bf16.residual_layernorm_forward = residual_layernorm_forward_bf16;
	bf16.attention_forward = attention_forward_bf16;
	bf16.attention_backward = attention_backward_bf16;
	return &bf16;
}
