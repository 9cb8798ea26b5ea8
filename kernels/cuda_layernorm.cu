/* LayerNorm on the GPU, as lib/backend/cpu_ops.c's ops of the same names:
 * plain, after a residual add and dropout, and over the embeddings (the
 * lookup, its LayerNorm, dropout and acts copy in one kernel), forward and
 * backward (with the branch's gradient through its dropout in acts). A
 * row's statistics are one warp's: each lane sums a fixed stride of the
 * row, then a fixed shuffle tree; the columns' sums (dw, db) go in two
 * passes, partial sums over fixed chunks of rows, then one thread per
 * column adds the chunks in order: the same bits on every run. Dropout
 * draws the CPU's masks (dropout.h). */
#include "cuda_grid.h"
#include "backend/dropout.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_types.h"
#include "cuda_warp.h"
#include <math.h>

enum { LN_WARPS = 8 };  /* rows (one per warp) of a LayerNorm block */

/* A dropout's draw on the GPU: dropout.h's key, threshold (0: nothing
 * dropped) and the scale of what is kept. */
struct drop {
	uint32_t key, threshold;
	float scale;
};

static struct drop drop_of(float p, uint64_t seed)
{
	struct drop d = { dropout_key(seed), 0, 1.0f };
	if (p > 0.0f) {
		d.threshold = dropout_threshold(p);
		d.scale = 1.0f / (1.0f - p);
	}
	return d;
}

/* x through the draw of element i: dropout_apply's value */
static __device__ __forceinline__ float dropped(float x, struct drop d, uint32_t i)
{
	return d.threshold ? x * (dropout_hash(d.key, i) >= d.threshold ? d.scale : 0.0f) : x;
}

/* One row's LayerNorm by one warp, x already final in memory (a lane reads
 * back only what it wrote): biased variance about the mean, eps inside the
 * square root; then dropout d, the draw of element j numbered base + j. out
 * may be x; low, when not NULL, gets out in acts too. */
template <typename L>
static __device__ void layernorm_warp(float *out, L *low, float *mean, float *rstd,
				      const float *x, const float *__restrict__ w,
				      const float *__restrict__ b, int C, float eps, float s,
				      struct drop d, uint32_t base)
{
	int lane = threadIdx.x & 31;
	float m = warp_sum(s) / C;
	float v = 0.0f;
	for (int j = lane; j < C; j += 32) {
		float d = x[j] - m;
		v += d * d;
	}
	float rs = 1.0f / sqrtf(warp_sum(v) / C + eps);
	for (int j = lane; j < C; j += 32) {
		float y = dropped((x[j] - m) * rs * w[j] + b[j], d, base + (uint32_t)j);
		out[j] = y;
		if (low)
			store(low + j, y);
	}
	if (lane == 0) {
		*mean = m;
		*rstd = rs;
	}
}

/* One warp per row. */
static __global__ void layernorm_forward_kernel(float *out, float *__restrict__ mean,
						float *__restrict__ rstd, const float *in,
						const float *__restrict__ w,
						const float *__restrict__ b, int N, int C, float eps)
{
	int r = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (r >= N)
		return;
	const float *x = in + (size_t)r * C;
	float s = 0.0f;
	for (int j = threadIdx.x & 31; j < C; j += 32)
		s += x[j];
	layernorm_warp(out + (size_t)r * C, (float *)NULL, mean + r, rstd + r, x, w, b, C, eps, s,
		       drop{ 0, 0, 1.0f }, 0);
}

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *in,
			    const float *w, const float *b, int N, int C, float eps)
{
	if (N <= 0 || C <= 0)
		return;
	CUDA_LAUNCH(layernorm_forward_kernel, div_up(N, LN_WARPS), LN_WARPS * 32, 0,
		out, mean, rstd, in, w, b, N, C, eps);
}

/* One warp per row: sum = res + dropout(sum + bias), the dropout draw of
 * element j numbered r*C + j cut to 32 bits as on the CPU, then out =
 * LayerNorm(sum). */
template <typename L>
static __global__ void residual_layernorm_kernel(float *out, L *low, float *sum,
						 float *__restrict__ mean,
						 float *__restrict__ rstd, const float *res,
						 const float *__restrict__ bias,
						 const float *__restrict__ w,
						 const float *__restrict__ b, int N, int C,
						 float eps, struct drop d)
{
	int r = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	float *x = sum + o;
	const float *rx = res + o;
	float s = 0.0f;
	for (int j = threadIdx.x & 31; j < C; j += 32) {
		float v = rx[j] + dropped(x[j] + bias[j], d, (uint32_t)o + (uint32_t)j);
		x[j] = v;
		s += v;
	}
	layernorm_warp(out + o, low ? low + o : NULL, mean + r, rstd + r, x, w, b, C, eps, s,
		       drop{ 0, 0, 1.0f }, 0);
}

/* low: NULL, or out's copy in acts */
template <typename L>
static void residual_layernorm(float *out, L *low, float *sum, float *mean, float *rstd,
			       const float *res, const float *bias, const float *w, const float *b,
			       int N, int C, float eps, float p, uint64_t seed)
{
	if (N <= 0 || C <= 0)
		return;
	CUDA_LAUNCH(residual_layernorm_kernel<L>, div_up(N, LN_WARPS), LN_WARPS * 32, 0,
		out, low, sum, mean, rstd, res, bias, w, b, N, C, eps, drop_of(p, seed));
}

void cuda_residual_layernorm_forward(float *out, struct act *low, float *sum, float *mean,
				     float *rstd, const float *res, const float *bias,
				     const float *w, const float *b, int N, int C, float eps, float p,
				     uint64_t seed)
{
	(void)low;   /* out itself */
	residual_layernorm(out, (float *)NULL, sum, mean, rstd, res, bias, w, b, N, C, eps, p, seed);
}

void cuda_residual_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					  float *rstd, const float *res, const float *bias,
					  const float *w, const float *b, int N, int C, float eps,
					  float p, uint64_t seed)
{
	residual_layernorm(out, (bf16 *)low, sum, mean, rstd, res, bias, w, b, N, C, eps, p, seed);
}

void cuda_residual_layernorm_forward_fp16(float *out, struct act *low, float *sum, float *mean,
					  float *rstd, const float *res, const float *bias,
					  const float *w, const float *b, int N, int C, float eps,
					  float p, uint64_t seed)
{
	residual_layernorm(out, (f16 *)low, sum, mean, rstd, res, bias, w, b, N, C, eps, p, seed);
}

/* One warp per row: sum = the lookup of row r, out = dropout(LayerNorm(sum)),
 * the draw of element j numbered r*C + j as on the CPU. */
template <typename L>
static __global__ void embedding_layernorm_kernel(float *out, L *low, float *sum,
						  float *__restrict__ mean,
						  float *__restrict__ rstd, struct embedding e,
						  const float *__restrict__ w,
						  const float *__restrict__ b, float eps,
						  struct drop d)
{
	int r = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (r >= e.N)
		return;
	int C = e.C;
	size_t o = (size_t)r * C;
	const float *wr = e.word + (size_t)e.ids[r] * C, *pr = e.pos + (size_t)e.positions[r] * C;
	const float *tr = e.type + (size_t)(e.types ? e.types[r] : 0) * C;
	float *x = sum + o;
	float s = 0.0f;
	for (int j = threadIdx.x & 31; j < C; j += 32) {
		float v = wr[j] + pr[j] + tr[j];
		x[j] = v;
		s += v;
	}
	layernorm_warp(out + o, low ? low + o : NULL, mean + r, rstd + r, x, w, b, C, eps, s, d,
		       (uint32_t)o);
}

/* low: NULL, or out's copy in acts */
template <typename L>
static void embedding_layernorm(float *out, L *low, float *sum, float *mean, float *rstd,
				const struct embedding *e, const float *w, const float *b, float eps,
				float p, uint64_t seed)
{
	if (e->N <= 0 || e->C <= 0)
		return;
	CUDA_LAUNCH(embedding_layernorm_kernel<L>, div_up(e->N, LN_WARPS), LN_WARPS * 32, 0,
		out, low, sum, mean, rstd, *e, w, b, eps, drop_of(p, seed));
}

void cuda_embedding_layernorm_forward(float *out, struct act *low, float *sum, float *mean,
				      float *rstd, const struct embedding *e, const float *w,
				      const float *b, float eps, float p, uint64_t seed)
{
	(void)low;   /* out itself */
	embedding_layernorm(out, (float *)NULL, sum, mean, rstd, e, w, b, eps, p, seed);
}

void cuda_embedding_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					   float *rstd, const struct embedding *e, const float *w,
					   const float *b, float eps, float p, uint64_t seed)
{
	embedding_layernorm(out, (bf16 *)low, sum, mean, rstd, e, w, b, eps, p, seed);
}

void cuda_embedding_layernorm_forward_fp16(float *out, struct act *low, float *sum, float *mean,
					   float *rstd, const struct embedding *e, const float *w,
					   const float *b, float eps, float p, uint64_t seed)
{
	embedding_layernorm(out, (f16 *)low, sum, mean, rstd, e, w, b, eps, p, seed);
}

/* dw and db's first pass: chunk k (blockIdx.y) of chunk rows sums
 * dout * xhat and dout down column c, rows in order, into pw[k][c], pb[k][c]. */
static __global__ void layernorm_partials_kernel(float *__restrict__ pw, float *__restrict__ pb,
						 const float *dout, const float *__restrict__ in,
						 const float *__restrict__ mean,
						 const float *__restrict__ rstd, int N, int C,
						 int chunk)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int k = blockIdx.y;
	if (c >= C)
		return;
	int r0 = k * chunk;
	int r1 = (int)min((int64_t)N, (int64_t)r0 + chunk);
	float sw = 0.0f, sb = 0.0f;
	for (int r = r0; r < r1; r++) {
		size_t o = (size_t)r * C + c;
		float g = dout[o];
		sw += g * (in[o] - mean[r]) * rstd[r];
		sb += g;
	}
	pw[(size_t)k * C + c] = sw;
	pb[(size_t)k * C + c] = sb;
}

/* The second pass: dw[c] += pw's chunks in order, db[c] likewise. */
static __global__ void layernorm_sums_kernel(float *__restrict__ dw, float *__restrict__ db,
					     const float *__restrict__ pw,
					     const float *__restrict__ pb, int nchunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float sw = 0.0f, sb = 0.0f;
	for (int k = 0; k < nchunks; k++) {
		sw += pw[(size_t)k * C + c];
		sb += pb[(size_t)k * C + c];
	}
	dw[c] += sw;
	db[c] += sb;
}

/* din, one warp per row; din may be dout (a lane reads back only the
 * elements it writes, after the row's sums). branch, when not NULL, gets din
 * through dropout d (element j of row r numbered r*C + j) in acts. */
template <typename L>
static __global__ void layernorm_din_kernel(float *din, L *branch, const float *dout,
					    const float *__restrict__ in,
					    const float *__restrict__ mean,
					    const float *__restrict__ rstd,
					    const float *__restrict__ w, int N, int C, struct drop d)
{
	int r = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;
	if (r >= N)
		return;
	size_t o = (size_t)r * C;
	const float *g = dout + o, *x = in + o;
	float m = mean[r], rs = rstd[r];
	float sg = 0.0f, sgx = 0.0f;
	for (int j = lane; j < C; j += 32) {
		float gw = g[j] * w[j];
		sg += gw;
		sgx += gw * (x[j] - m) * rs;
	}
	float mg = warp_sum(sg) / C, mgx = warp_sum(sgx) / C;
	for (int j = lane; j < C; j += 32) {
		float v = rs * (g[j] * w[j] - mg - (x[j] - m) * rs * mgx);
		din[o + j] = v;
		if (branch)
			store(branch + o + j, dropped(v, d, (uint32_t)o + (uint32_t)j));
	}
}

template <typename L>
static void layernorm_backward_with(float *din, L *branch, float *dw, float *db, const float *dout,
				    const float *in, const float *mean, const float *rstd,
				    const float *w, int N, int C, float p, uint64_t seed)
{
	if (N <= 0 || C <= 0)
		return;
	int chunk = chunk_rows(N), nchunks = div_up(N, chunk);
	size_t part_bytes = align_up((size_t)nchunks * C * sizeof(float));
	char *buf = (char *)cuda_op_scratch(2 * part_bytes);
	float *pw = (float *)buf, *pb = (float *)(buf + part_bytes);

	/* the parameter grads first: din may overwrite dout */
	dim3 grid((unsigned)div_up(C, THREADS), (unsigned)nchunks);
	CUDA_LAUNCH(layernorm_partials_kernel, grid, THREADS, 0, pw, pb, dout, in, mean, rstd, N, C,
		chunk);
	CUDA_LAUNCH(layernorm_sums_kernel, div_up(C, THREADS), THREADS, 0, dw, db, pw, pb, nchunks, C);
	CUDA_LAUNCH(layernorm_din_kernel<L>, div_up(N, LN_WARPS), LN_WARPS * 32, 0,
		din, branch, dout, in, mean, rstd, w, N, C, drop_of(p, seed));
}

void cuda_layernorm_backward(float *din, float *dw, float *db, const float *dout,
			     const float *in, const float *mean, const float *rstd, const float *w,
			     int N, int C)
{
	layernorm_backward_with(din, (float *)NULL, dw, db, dout, in, mean, rstd, w, N, C, 0, 0);
}

void cuda_residual_layernorm_backward(float *din, struct act *dbranch, float *dw, float *db,
				      const float *dout, const float *in, const float *mean,
				      const float *rstd, const float *w, int N, int C, float p,
				      uint64_t seed)
{
	layernorm_backward_with(din, (float *)dbranch, dw, db, dout, in, mean, rstd, w, N, C, p,
				seed);
}

void cuda_residual_layernorm_backward_bf16(float *din, struct act *dbranch, float *dw, float *db,
					   const float *dout, const float *in, const float *mean,
					   const float *rstd, const float *w, int N, int C, float p,
					   uint64_t seed)
{
	layernorm_backward_with(din, (bf16 *)dbranch, dw, db, dout, in, mean, rstd, w, N, C, p,
				seed);
}

void cuda_residual_layernorm_backward_fp16(float *din, struct act *dbranch, float *dw, float *db,
					   const float *dout, const float *in, const float *mean,
					   const float *rstd, const float *w, int N, int C, float p,
					   uint64_t seed)
{
	layernorm_backward_with(din, (f16 *)dbranch, dw, db, dout, in, mean, rstd, w, N, C, p,
				seed);
}
