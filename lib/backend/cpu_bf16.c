/* bf16 matrix work on the CPU (ts-train --precision bf16): its acts
 * (backend.h) are bf16. The linear layers' GEMMs run on oneDNN's matmul with
 * bf16 inputs, fp32 accumulation and fp32 (or bf16) outputs, on processors
 * with AVX512-BF16 or AMX-BF16, and the attention's products on
 * cpu_attention_bf16.c's kernels. What feeds a product is bf16, rounded to
 * nearest even by the op that makes it: in bf16 only (the QKV product, the
 * attention's context, GELU's input and output, and the gradients of
 * those), or beside its fp32 (the LayerNorms' outputs, which the residual
 * stream carries on; a branch's gradient and the head's, by as_act); the
 * weights' copies by as_act, once a forward (a model that only scores: by
 * as_fixed_act, once, and packed for oneDNN once). The residual LayerNorm, GELU
 * and their backwards run on cpu_rows_bf16.c's kernels. Weights, gradients,
 * optimizer state and every other op stay fp32. oneDNN shares OpenMP's
 * threads with the rest of the CPU backend. */
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

int bf16_amx(void)
{
	return 0;
}

const struct backend *backend_cpu_bf16(const char **why)
{
	bf16_available(why);
	return NULL;
}
#else
#include "backend/cpu_simd.h"
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int bf16_available(const char **why)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16)
		return 1;
	*why = "this processor has neither AVX512-BF16 nor AMX-BF16";
	return 0;
}

int bf16_amx(void)
{
#ifdef SYS_arch_prctl
	enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	return (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx &&
	       syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
	return 0;
#endif
}

static void check(dnnl_status_t s, const char *what)
{
	if (s != dnnl_success)
		die("oneDNN: %s failed (status %d)", what, (int)s);
}

/* The GEMMs a linear layer takes over the N rows of a batch:
 *   FWD   out[N,Cout]  = in[N,Cin] w[Cout,Cin]^T + bias
 *   DATA  din[N,Cin]  (+)= dout[N,Cout] w[Cout,Cin]
 *   WGT   dw[Cout,Cin] += dout[N,Cout]^T in[N,Cin]
 * Each primitive is made for one N: oneDNN gives a product whose sizes it
 * knows its blocked kernels (AMX where the CPU has it), and one whose rows
 * are left to run time a general GEMM that is up to 3 times slower and,
 * for a bf16 output, mallocs an fp32 copy of it on every call. Making one
 * takes about a millisecond; the cache keeps the last MAX_GEMMS used. */
enum gemm_kind { FWD, DATA, WGT };
/* FWD's output: fp32 or bf16 */
enum gemm_out { OUT_F32, OUT_BF16 };

struct gemm {
	enum gemm_kind kind;
	int Cin, Cout, flag;       /* flag: FWD a bias, DATA accumulate */
	enum gemm_out out;
	int packed;                /* FWD: its weights packed in oneDNN's layout (w_md), not [Cout, Cin] */
	int64_t n;                 /* the rows */
	uint64_t used;             /* when it last ran, in calls */
	dnnl_primitive_t p;
	dnnl_memory_desc_t w_md;   /* the weights' layout */
};

enum { MAX_GEMMS = 256 };
static struct gemm gemms[MAX_GEMMS];
static int ngemms;
static uint64_t calls;
static dnnl_engine_t engine;
static dnnl_stream_t stream;
/* the scratch memory of every product, one at a time: the largest asked */
static void *scratch;
static size_t scratch_n;

/* A row-major [rows, cols] matrix, or its transpose with trans. */
static dnnl_memory_desc_t matrix(int64_t rows, int64_t cols, dnnl_data_type_t t, int trans)
{
	dnnl_memory_desc_t d;
	dnnl_dims_t dims = { trans ? cols : rows, trans ? rows : cols };
	dnnl_dims_t strides = { trans ? 1 : cols, trans ? cols : 1 };
	check(dnnl_memory_desc_init_by_strides(&d, 2, dims, t, strides), "a memory descriptor");
	return d;
}

/* The matmul's src, weights and dst descriptors of g. */
static void gemm_descs(const struct gemm *g, dnnl_memory_desc_t d[3])
{
	switch (g->kind) {
	case FWD:
		d[0] = matrix(g->n, g->Cin, dnnl_bf16, 0);
		d[1] = matrix(g->Cout, g->Cin, dnnl_bf16, 1);
		if (g->packed) {
			dnnl_dims_t dims = { g->Cin, g->Cout };
			check(dnnl_memory_desc_init_by_tag(&d[1], 2, dims, dnnl_bf16, dnnl_format_tag_any),
			      "a memory descriptor");
		}
		d[2] = matrix(g->n, g->Cout, g->out == OUT_F32 ? dnnl_f32 : dnnl_bf16, 0);
		break;
	case DATA:
		d[0] = matrix(g->n, g->Cout, dnnl_bf16, 0);
		d[1] = matrix(g->Cout, g->Cin, dnnl_bf16, 0);
		d[2] = matrix(g->n, g->Cin, dnnl_f32, 0);
		break;
	case WGT:
		d[0] = matrix(g->n, g->Cout, dnnl_bf16, 1);
		d[1] = matrix(g->n, g->Cin, dnnl_bf16, 0);
		d[2] = matrix(g->Cout, g->Cin, dnnl_f32, 0);
		break;
	}
}

static void gemm_create(struct gemm *g)
{
	dnnl_memory_desc_t d[3], bias;
	gemm_descs(g, d);
	if (g->kind == FWD && g->flag)
		bias = matrix(1, g->Cout, dnnl_f32, 0);
	dnnl_primitive_attr_t attr;
	check(dnnl_primitive_attr_create(&attr), "an attribute");
	check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratch memory");
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
	g->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	const dnnl_memory_desc_t *scratch_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	grow(&scratch, &scratch_n, dnnl_memory_desc_get_size(scratch_md), 1);
	check(dnnl_primitive_create(&g->p, pd), "a matmul primitive");
	dnnl_primitive_desc_destroy(pd);
	dnnl_primitive_attr_destroy(attr);
}

/* The product of those sizes over n rows, made (in the place of the one
 * used longest ago, where the cache is full) if it is not in the cache. */
static struct gemm *gemm_get(enum gemm_kind kind, int Cin, int Cout, int flag, enum gemm_out out, int packed,
			     int64_t n)
{
	if (!engine) {
		check(dnnl_engine_create(&engine, dnnl_cpu, 0), "the CPU engine");
		check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "a stream");
	}
	struct gemm *g = NULL;
	for (int i = 0; i < ngemms && !g; i++)
		if (gemms[i].kind == kind && gemms[i].Cin == Cin && gemms[i].Cout == Cout &&
		    gemms[i].flag == flag && gemms[i].out == out && gemms[i].packed == packed && gemms[i].n == n)
			g = &gemms[i];
	if (!g) {
		if (ngemms < MAX_GEMMS) {
			g = &gemms[ngemms++];
		} else {
			g = &gemms[0];
			for (int i = 1; i < MAX_GEMMS; i++)
				if (gemms[i].used < g->used)
					g = &gemms[i];
			dnnl_primitive_destroy(g->p);
		}
		*g = (struct gemm){ kind, Cin, Cout, flag, out, packed, n, 0, NULL, { 0 } };
		gemm_create(g);
	}
	g->used = ++calls;
	return g;
}

static dnnl_memory_t wrap(const dnnl_memory_desc_t *d, const void *p)
{
	dnnl_memory_t m;
	check(dnnl_memory_create(&m, d, engine, (void *)p), "a memory object");
	return m;
}

/* Runs g: a, b the bf16 operands, c the result. */
static void gemm_run(const struct gemm *g, const void *a, const void *b, void *c, const float *bias)
{
	dnnl_memory_desc_t d[5];
	gemm_descs(g, d);
	d[1] = g->w_md;
	dnnl_dims_t scratch_dims = { (int64_t)scratch_n };
	check(dnnl_memory_desc_init_by_tag(&d[3], 1, scratch_dims, dnnl_u8, dnnl_a), "a scratch descriptor");
	dnnl_memory_t m[5] = { wrap(&d[0], a), wrap(&d[1], b), wrap(&d[2], c), wrap(&d[3], scratch), NULL };
	dnnl_exec_arg_t args[5] = {
		{ DNNL_ARG_SRC, m[0] }, { DNNL_ARG_WEIGHTS, m[1] }, { DNNL_ARG_DST, m[2] },
		{ DNNL_ARG_SCRATCHPAD, m[3] },
	};
	int nargs = 4;
	if (bias) {
		d[4] = matrix(1, g->Cout, dnnl_f32, 0);
		m[4] = wrap(&d[4], bias);
		args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, m[4] };
	}
	check(dnnl_primitive_execute(g->p, stream, nargs, args), "a matmul");
	check(dnnl_stream_wait(stream), "the stream");
	for (int i = 0; i < nargs; i++)
		dnnl_memory_destroy(m[i]);
}

/* The weights' bf16 copies as_fixed_act made last, at [fixed_lo,
 * fixed_hi): FWD products read them packed in oneDNN's own layout, each
 * packed once, by the first product that reads it, where a [Cout, Cin]
 * matrix is packed again inside every product. An as_act over any of that
 * space ends it. */
static uintptr_t fixed_lo, fixed_hi;

struct pack {
	const void *w;             /* the copy it was packed from */
	int Cin, Cout;
	dnnl_memory_desc_t md;
	void *buf;
};
static struct pack *packs;
static size_t npacks, packs_cap;

static void unfix_weights(void)
{
	for (size_t i = 0; i < npacks; i++)
		free(packs[i].buf);
	npacks = 0;
	fixed_lo = fixed_hi = 0;
}

static int fixed(const void *w)
{
	return (uintptr_t)w >= fixed_lo && (uintptr_t)w < fixed_hi;
}

/* Fixed weights w [Cout, Cin] in g's layout, packed (by a reorder) the first
 * time g's layout asks for them. */
static const void *packed_weights(const struct gemm *g, const void *w)
{
	for (size_t i = 0; i < npacks; i++)
		if (packs[i].w == w && packs[i].Cin == g->Cin && packs[i].Cout == g->Cout &&
		    dnnl_memory_desc_equal(&packs[i].md, &g->w_md))
			return packs[i].buf;
	size_t bytes = (dnnl_memory_desc_get_size(&g->w_md) + 63) / 64 * 64;
	void *buf = aligned_alloc(64, bytes);
	if (!buf)
		die("out of memory: %zu bytes of packed weights", bytes);
	grow(&packs, &packs_cap, npacks + 1, sizeof *packs);
	packs[npacks++] = (struct pack){ w, g->Cin, g->Cout, g->w_md, buf };
	dnnl_memory_desc_t plain = matrix(g->Cout, g->Cin, dnnl_bf16, 1);
	dnnl_primitive_desc_t pd;
	check(dnnl_reorder_primitive_desc_create(&pd, &plain, engine, &g->w_md, engine, NULL), "a reorder");
	dnnl_primitive_t r;
	check(dnnl_primitive_create(&r, pd), "a reorder primitive");
	dnnl_primitive_desc_destroy(pd);
	dnnl_memory_t m[2] = { wrap(&plain, w), wrap(&g->w_md, buf) };
	dnnl_exec_arg_t args[2] = { { DNNL_ARG_FROM, m[0] }, { DNNL_ARG_TO, m[1] } };
	check(dnnl_primitive_execute(r, stream, 2, args), "a reorder");
	check(dnnl_stream_wait(stream), "the stream");
	dnnl_memory_destroy(m[0]);
	dnnl_memory_destroy(m[1]);
	dnnl_primitive_destroy(r);
	return buf;
}

/* A FWD product: in w^T (+ bias) over N rows into out, as kind says. */
static void linear_fwd(void *out, const struct act *in, const struct act *w, const float *bias, int N, int Cin,
		       int Cout, enum gemm_out kind)
{
	if (!N)
		return;
	int packed = fixed(w);
	const struct gemm *g = gemm_get(FWD, Cin, Cout, bias != NULL, kind, packed, N);
	gemm_run(g, in, packed ? packed_weights(g, w) : w, out, bias);
}

/* dst[n] = src[n] in bf16. */
static void round_into(uint16_t *dst, const float *src, size_t n)
{
	enum { SPAN = 16384 };
	size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
	for (size_t s = 0; s < spans; s++) {
		size_t i = s * SPAN;
		round_bf16(dst + i, src + i, n - i < SPAN ? n - i : SPAN);
	}
}

static const struct act *as_act_bf16(struct act *space, const float *x, size_t n)
{
	uintptr_t lo = (uintptr_t)space, hi = lo + n * sizeof(uint16_t);
	if (lo < fixed_hi && hi > fixed_lo)
		unfix_weights();   /* written over */
	round_into((uint16_t *)space, x, n);
	return space;
}

static const struct act *as_fixed_act_bf16(struct act *space, const float *x, size_t n)
{
	unfix_weights();
	round_into((uint16_t *)space, x, n);
	fixed_lo = (uintptr_t)space;
	fixed_hi = fixed_lo + n * sizeof(uint16_t);
	return space;
}

/* dst = src through dropout p (seed) in bf16: dropout_apply's values rounded. */
static void dropout_round(uint16_t *dst, const float *src, size_t n, float p, uint64_t seed)
{
	uint32_t threshold = p > 0.0f ? dropout_threshold(p) : 0, key = dropout_key(seed);
	float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		dst[i] = to_bf16(src[i] * dropout_factor(key, (uint32_t)i, threshold, scale));
}

/* the fp32 op, its output rounded into low */
static void embedding_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					     float *rstd, const struct embedding *e, const float *w,
					     const float *b, float eps, float p, uint64_t seed)
{
	backend_cpu()->embedding_layernorm_forward(out, NULL, sum, mean, rstd, e, w, b, eps, p, seed);
	round_into((uint16_t *)low, out, (size_t)e->N * e->C);
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

/* Rows of bf16s, for rows_with_colsums. */
struct rows {
	const uint16_t *x;
	int C;
};

HOT_ELEMENTWISE static void sum_row(float *sum, const uint16_t *x, int n)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		sum[j] += from_bf16(x[j]);
}

static void add_row(const void *ctx, size_t r, float *sum)
{
	const struct rows *x = ctx;
	sum_row(sum, x->x + r * x->C, x->C);
}

static void residual_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					    float *rstd, const float *res, const float *bias,
					    const float *w, const float *b, int N, int C, float eps,
					    float p, uint64_t seed)
{
	uint16_t *copy = (uint16_t *)low;
	uint32_t threshold = dropout_threshold(p), key = dropout_key(seed);
	float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		residual_layernorm_row_bf16(out + o, copy + o, sum + o, mean + r, rstd + r, res + o,
					    bias, w, b, C, eps, key, (uint32_t)o, threshold, scale);
	}
}

static void bias_gelu_forward_bf16(float *out, struct act *low, struct act *pre,
				   const float *bias, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * F;
		bias_gelu_row_bf16(out ? out + o : NULL, out ? NULL : (uint16_t *)low + o,
				   (uint16_t *)pre + o, bias, F);
	}
}

static void rotary_bf16(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, int rows,
			float theta, int inverse)
{
	rotary_rows(x, 1, ld, parts, C, heads, pos, rows, theta, inverse);
}

static void geglu_forward_bf16(struct act *out, const struct act *in, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		geglu_row_bf16((uint16_t *)out + (size_t)r * F, (const uint16_t *)in + (size_t)r * 2 * F, F);
}

static void geglu_backward_bf16(struct act *din, const float *dout, const struct act *in, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * 2 * F;
		geglu_backward_row_bf16((uint16_t *)din + o, dout + (size_t)r * F, (const uint16_t *)in + o, F);
	}
}

static void gelu_backward_bf16(struct act *dpre, const float *dout, const struct act *pre, int N,
			       int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * F;
		gelu_backward_row_bf16((uint16_t *)dpre + o, dout + o, (const uint16_t *)pre + o, F);
	}
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

static void layernorm_backward_bf16(float *din, float *dw, float *db, const float *dout,
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

static void residual_layernorm_backward_bf16(float *din, struct act *dbranch, float *dw, float *db,
					     const float *dout, const float *in, const float *mean,
					     const float *rstd, const float *w, int N, int C, float p,
					     uint64_t seed)
{
	layernorm_backward_bf16(din, dw, db, dout, in, mean, rstd, w, N, C);
	if (dbranch)
		dropout_round((uint16_t *)dbranch, din, (size_t)N * C, p, seed);
}

static void linear_forward_bf16(float *out, const struct act *in, const struct act *w,
				const float *bias, int N, int Cin, int Cout)
{
	linear_fwd(out, in, w, bias, N, Cin, Cout, OUT_F32);
}

static void linear_forward_act_bf16(struct act *out, const struct act *in, const struct act *w,
				    const float *bias, int N, int Cin, int Cout)
{
	linear_fwd(out, in, w, bias, N, Cin, Cout, OUT_BF16);
}

static void linear_gelu_forward_act_bf16(struct act *out, const struct act *in, const struct act *w,
					 const float *bias, int N, int Cin, int Cout)
{
	linear_fwd(out, in, w, bias, N, Cin, Cout, OUT_BF16);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		gelu_row_bf16((uint16_t *)out + (size_t)r * Cout, Cout);
}

static void linear_backward_bf16(float *din, float *dw, float *dbias, const struct act *dout,
				 const struct act *in, const struct act *w, int N, int Cin,
				 int Cout, int accumulate)
{
	if (!N)
		return;
	if (dbias) {
		struct rows x = { (const uint16_t *)dout, Cout };
		rows_with_colsums(dbias, N, Cout, add_row, &x);
	}
	if (din)
		gemm_run(gemm_get(DATA, Cin, Cout, accumulate, OUT_F32, 0, N), dout, w, din, NULL);
	gemm_run(gemm_get(WGT, Cin, Cout, 1, OUT_F32, 0, N), dout, in, dw, NULL);
}

/* The heads' products on gemm_bf16, or on AMX's tiles where bf16_amx, in
 * space for the longest sequence and the head width; q, k, v and ctx in
 * bf16. */
static const struct attention_kernels heads_avx512 = { gemm_bf16, softmax_row_bf16,
						       softmax_backward_row_bf16, 1 };
static const struct attention_kernels heads_amx = { gemm_amx, softmax_row_bf16,
						    softmax_backward_row_bf16, 1, head_forward_amx };
static const struct attention_kernels *heads_bf16;

static void reserve_heads(const struct attention *a)
{
	int d = a->C / a->H;
	gemm_bf16_reserve(a->T > d ? a->T : d);
}

static void attention_forward_bf16(struct act *ctx, float *state, const struct attention *a)
{
	(void)state;
	reserve_heads(a);
	attention_forward_with(ctx, a, heads_bf16);
}

static void attention_backward_bf16(struct act *dq, struct act *dk, struct act *dv,
				    const float *dctx, const float *state, const struct attention *a)
{
	(void)state;
	reserve_heads(a);
	attention_backward_with(dq, dk, dv, dctx, a, heads_bf16);
}

/* The fp32 table with the ops that compute in bf16. */
const struct backend *backend_cpu_bf16(const char **why)
{
	static struct backend bf16;
	if (!bf16_available(why))
		return NULL;
	heads_bf16 = bf16_amx() ? &heads_amx : &heads_avx512;
	gelu_table_bf16();
	bf16 = *backend_cpu();
	bf16.name = "cpu bf16";
	bf16.precise = backend_cpu();
	bf16.act_size = sizeof(uint16_t);
	bf16.as_act = as_act_bf16;
	bf16.as_fixed_act = as_fixed_act_bf16;
	bf16.linear_forward = linear_forward_bf16;
	bf16.linear_forward_act = linear_forward_act_bf16;
	bf16.linear_gelu_forward_act = linear_gelu_forward_act_bf16;
	bf16.linear_backward = linear_backward_bf16;
	bf16.bias_gelu_forward = bias_gelu_forward_bf16;
	bf16.gelu_backward = gelu_backward_bf16;
	bf16.rotary = rotary_bf16;
	bf16.geglu_forward = geglu_forward_bf16;
	bf16.geglu_backward = geglu_backward_bf16;
	bf16.layernorm_backward = layernorm_backward_bf16;
	bf16.embedding_layernorm_forward = embedding_layernorm_forward_bf16;
	bf16.residual_layernorm_backward = residual_layernorm_backward_bf16;
	bf16.residual_layernorm_forward = residual_layernorm_forward_bf16;
	bf16.attention_forward = attention_forward_bf16;
	bf16.attention_backward = attention_backward_bf16;
	return &bf16;
}
#endif
