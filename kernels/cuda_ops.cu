/* The BERT graph's elementwise, row and table ops on the GPU: embeddings,
 * LayerNorm (plain and after a residual), bias+GELU, tanh, softmax
 * cross-entropy, dropout and the row gather and scatter-add, each with the
 * meaning lib/backend/cpu_ops.h gives the CPU function of the same name (lib/backend/cpu_ops.c
 * is the reference), computing in fp32, on cuda_stream(). The ops that touch
 * acts (the residual LayerNorm's copy, bias+GELU, GELU's backward) come for
 * float and for bf16 acts, rounding once when they store.
 *
 * No float atomics: every sum has a fixed order, so results do not change
 * from run to run.
 *  - Row statistics (LayerNorm, log-sum-exp) are one warp's or one block's:
 *    each lane sums a fixed stride of the row, then a fixed shuffle tree.
 *  - Column sums over rows (LayerNorm's dw and db, the token-type table's
 *    gradient) go in two passes: partial sums over fixed chunks of rows into
 *    a scratch buffer, then one thread per column adds the chunks in order.
 *  - Scatter-adds into table rows (the word embeddings' gradient,
 *    scatter_add_rows) give each (row, column) of the table to one lane: a
 *    warp owns 128 columns of the rows whose id falls in its bucket (id mod
 *    the bucket count), and walks the tokens in order, so each float gets the
 *    CPU's additions in the CPU's order: the same bits.
 *  - The cross-entropy's loss: per-row losses in double, then one block adds
 *    them in a fixed order.
 * Dropout masks are the CPU's to the bit (dropout.h): element i of a call
 * with (p, seed) is kept iff dropout_hash(dropout_key(seed), (uint32_t)i)
 * reaches dropout_threshold(p). */
#include "backend/dropout.h"
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_types.h"
#include "cuda_warp.h"
#include "util/err.h"
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>


enum {
	THREADS = 256,          /* elementwise and per-column kernels */
	GRID_MAX = 16384,       /* blocks of a grid-stride kernel */
	ROWS_MAX = 65535,       /* grid rows of a row-strided kernel */
	LN_WARPS = 8,           /* rows (one per warp) of a LayerNorm block */
	CHUNK_MIN = 64,         /* rows of a column-sum chunk, at least */
	CHUNKS_MAX = 1024,      /* column-sum chunks, at most */
	TYPE_SLOTS = 4,         /* token types summed in registers; others by scatter */
	TYPE_OTHER = 1u << TYPE_SLOTS,  /* chunk mask bit: a type >= TYPE_SLOTS */
	SC_VEC = 4,             /* columns of a scatter lane */
	SC_COLS = 32 * SC_VEC,  /* columns of a scatter warp */
	SC_WARPS = 4,           /* buckets (one per warp) of a scatter block */
	SC_BUCKETS_MAX = 256,
	SC_PER_BUCKET = 64,     /* tokens per bucket the bucket count aims at */
	CE_THREADS_MAX = 512,   /* threads of a cross-entropy row */
	LOSS_THREADS = 512,
};

static unsigned grid_1d(size_t n)
{
	unsigned b = cuda_blocks(n);
	return b > (unsigned)GRID_MAX ? (unsigned)GRID_MAX : b;
}

/* Column tiles of THREADS across, rows strided over the grid's y. */
static dim3 grid_rows(int cols, int rows)
{
	return dim3((unsigned)((cols + THREADS - 1) / THREADS),
		    (unsigned)(rows < (int)ROWS_MAX ? rows : (int)ROWS_MAX));
}

/* Rows per chunk of a two-pass column sum over n >= 1 rows. */
static int chunk_rows(int n)
{
	int rows = (int)(((int64_t)n + CHUNKS_MAX - 1) / CHUNKS_MAX);
	return rows < (int)CHUNK_MIN ? (int)CHUNK_MIN : rows;
}

static int div_up(int a, int b)
{
	return (int)(((int64_t)a + b - 1) / b);
}

/* ---- scratch: one buffer, grown and kept; the stream orders its users ---- */

static void *scratch;
static size_t scratch_cap;

static size_t align_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

static void *scratch_get(size_t bytes)
{
	return cuda_grow(&scratch, &scratch_cap, bytes > scratch_cap ? align_up(bytes + bytes / 4) : bytes);
}

/* ---- reductions ---- */

/* Merges a running (max m, sum s of exp(x - m)) with another. The terms are
 * symmetric, so the result does not depend on the order of the two. */
static __device__ void lse_merge(float *m, float *s, float m2, float s2)
{
	float mx = fmaxf(*m, m2);
	float a = *m == mx ? *s : *s * expf(*m - mx);
	float b = m2 == mx ? s2 : s2 * expf(m2 - mx);
	*m = mx;
	*s = a + b;
}

/* Adds x to a running (max, sum): one exp per element. A NaN leaves m alone
 * and makes s NaN, so the log-sum-exp comes out NaN. */
static __device__ void lse_add(float *m, float *s, float x)
{
	if (x > *m) {
		*s = *s * expf(*m - x) + 1.0f;
		*m = x;
	} else if (x != -INFINITY) {
		*s += expf(x - *m);
	}
}

static __device__ void warp_lse(float *m, float *s)
{
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(FULL, *m, o);
		float s2 = __shfl_xor_sync(FULL, *s, o);
		lse_merge(m, s, m2, s2);
	}
}

/* ---- embeddings ---- */

/* table[keys[r]] += src[r] over rows r of C floats, r in order, for the keys
 * k >= lo, k != skip. Warp w of block (x, y) owns columns x*SC_COLS.. (lane,
 * lane+32, ..) of the table rows whose key is bucket y*SC_WARPS + w modulo
 * nb: no float has two writers, and each gets its additions in the order of
 * r. Runs of one key stay in registers. When mask is not NULL, r runs only
 * over the chunks (of chunk rows) whose mask has bit; else over all N. */
static __global__ void scatter_ordered_kernel(float *__restrict__ table,
					      const float *__restrict__ src,
					      const int32_t *__restrict__ keys, int N, int C,
					      int lo, int skip, int nb,
					      const uint32_t *__restrict__ mask, uint32_t bit,
					      int chunk, int nchunks)
{
	int lane = threadIdx.x & 31;
	int bucket = blockIdx.y * SC_WARPS + (threadIdx.x >> 5);
	if (bucket >= nb)   /* the whole warp */
		return;
	int c0 = blockIdx.x * SC_COLS + lane;
	int cur = -1;
	float acc[SC_VEC];

	for (int q = 0; q < SC_VEC; q++)
		acc[q] = 0.0f;
	for (int kb = 0; kb < nchunks; kb += 32) {
		int k = kb + lane;
		int want = k < nchunks && (!mask || (mask[k] & bit));
		unsigned chunks = __ballot_sync(FULL, want);
		while (chunks) {
			int kk = kb + __ffs(chunks) - 1;
			chunks &= chunks - 1;
			int r0 = kk * chunk;
			int r1 = (int)min((int64_t)N, (int64_t)r0 + chunk);
			for (int base = r0; base < r1; base += 32) {
				int r = base + lane;
				int key = r < r1 ? keys[r] : -1;
				int hit = key >= lo && key >= 0 && key != skip &&
					  (uint32_t)key % (uint32_t)nb == (uint32_t)bucket;
				unsigned hits = __ballot_sync(FULL, hit);
				while (hits) {
					int j = __ffs(hits) - 1;
					hits &= hits - 1;
					int kj = __shfl_sync(FULL, key, j);
					if (kj != cur) {
						if (cur >= 0) {
							float *row = table + (size_t)cur * C;
							for (int q = 0; q < SC_VEC; q++)
								if (c0 + 32 * q < C)
									row[c0 + 32 * q] = acc[q];
						}
						const float *row = table + (size_t)kj * C;
						for (int q = 0; q < SC_VEC; q++)
							acc[q] = c0 + 32 * q < C ? row[c0 + 32 * q]
										 : 0.0f;
						cur = kj;
					}
					const float *g = src + (size_t)(base + j) * C;
					for (int q = 0; q < SC_VEC; q++)
						if (c0 + 32 * q < C)
							acc[q] += g[c0 + 32 * q];
				}
			}
		}
	}
	if (cur >= 0) {
		float *row = table + (size_t)cur * C;
		for (int q = 0; q < SC_VEC; q++)
			if (c0 + 32 * q < C)
				row[c0 + 32 * q] = acc[q];
	}
}

/* The scatter over N rows of C floats into the keys' table rows. */
static void scatter_ordered(float *table, const float *src, const int32_t *keys, int N, int C,
			    int lo, int skip, const uint32_t *mask, uint32_t bit, int chunk,
			    int nchunks, int nb)
{
	dim3 grid((unsigned)div_up(C, SC_COLS), (unsigned)div_up(nb, SC_WARPS));
	CUDA_LAUNCH(scatter_ordered_kernel, grid, SC_WARPS * 32, 0,
		table, src, keys, N, C, lo, skip, nb, mask, bit, chunk, nchunks);
}

/* Buckets for a scatter of n rows: about SC_PER_BUCKET rows each. */
static int scatter_buckets(int n)
{
	int nb = n / SC_PER_BUCKET;
	return nb < 1 ? 1 : nb > (int)SC_BUCKETS_MAX ? (int)SC_BUCKETS_MAX : nb;
}

/* The token-type gradient's first pass: chunk k (blockIdx.y) of chunk rows
 * sums dout's rows of each type s < TYPE_SLOTS into part[k][s][c], rows in
 * order; mask[k] gets bit s for each type s the chunk holds, TYPE_OTHER for
 * any larger one. */
static __global__ void type_partials_kernel(float *__restrict__ part, uint32_t *__restrict__ mask,
					    const float *__restrict__ dout,
					    const int32_t *__restrict__ types, int N, int C,
					    int chunk)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int k = blockIdx.y;
	if (c >= C)
		return;
	int r0 = k * chunk;
	int r1 = (int)min((int64_t)N, (int64_t)r0 + chunk);
	float acc[TYPE_SLOTS];
	uint32_t seen = 0;

	for (int s = 0; s < TYPE_SLOTS; s++)
		acc[s] = 0.0f;
	for (int r = r0; r < r1; r++) {
		int t = types ? types[r] : 0;
		float g = dout[(size_t)r * C + c];
		if (t >= TYPE_SLOTS)
			seen |= TYPE_OTHER;
		else if (t >= 0)
			seen |= 1u << t;
		/* selects, not a dynamic index: acc stays in registers; an
		 * acc that starts at +0 is unchanged by adding +0 */
		for (int s = 0; s < TYPE_SLOTS; s++)
			acc[s] += t == s ? g : 0.0f;
	}
	for (int s = 0; s < TYPE_SLOTS; s++)
		part[((size_t)k * TYPE_SLOTS + s) * C + c] = acc[s];
	if (c == 0)
		mask[k] = seen;
}

/* The second pass: dtype[s][c] += the chunks' sums in chunk order, for the
 * types s (blockIdx.y) that occur at all (the table may have no row s). */
static __global__ void type_sum_kernel(float *__restrict__ dtype, const float *__restrict__ part,
				       const uint32_t *__restrict__ mask, int nchunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int s = blockIdx.y;
	if (c >= C)
		return;
	float acc = 0.0f;
	uint32_t any = 0;
	for (int k = 0; k < nchunks; k++) {
		any |= mask[k];
		acc += part[((size_t)k * TYPE_SLOTS + s) * C + c];
	}
	if (any >> s & 1)
		dtype[(size_t)s * C + c] += acc;
}

void cuda_embedding_backward(float *dword, float *dpos, float *dtype, const float *dout,
			     const int32_t *ids, const int32_t *types, const int32_t *positions,
			     int N, int C, int pad_id)
{
	if (N <= 0 || C <= 0)
		return;

	/* word: tokens equal to pad_id add nothing (pad_id < 0 matches no id) */
	scatter_ordered(dword, dout, ids, N, C, 0, pad_id < 0 ? -1 : pad_id, NULL, 0, N, 1,
			scatter_buckets(N));

	scatter_ordered(dpos, dout, positions, N, C, 0, -1, NULL, 0, N, 1, scatter_buckets(N));

	/* type: few rows, many tokens each: column sums by type in two passes;
	 * types past the register slots, if any, by the ordered scatter */
	int chunk = chunk_rows(N), nchunks = div_up(N, chunk);
	size_t part_bytes = align_up((size_t)nchunks * TYPE_SLOTS * C * sizeof(float));
	char *buf = (char *)scratch_get(part_bytes + (size_t)nchunks * sizeof(uint32_t));
	float *part = (float *)buf;
	uint32_t *mask = (uint32_t *)(buf + part_bytes);
	dim3 grid((unsigned)div_up(C, THREADS), (unsigned)nchunks);
	CUDA_LAUNCH(type_partials_kernel, grid, THREADS, 0, part, mask, dout, types, N, C, chunk);
	grid.y = TYPE_SLOTS;
	CUDA_LAUNCH(type_sum_kernel, grid, THREADS, 0, dtype, part, mask, nchunks, C);
	if (types)
		scatter_ordered(dtype, dout, types, N, C, TYPE_SLOTS, -1, mask, TYPE_OTHER, chunk,
				nchunks, 1);
}

/* ---- LayerNorm ---- */

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
	char *buf = (char *)scratch_get(2 * part_bytes);
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

/* ---- GELU and tanh ---- */

/* Exact GELU's Phi(x) and phi(x). */
static __device__ float normal_pdf(float x)
{
	return 0.39894228040143268f * expf(-0.5f * x * x);
}

/* pre += bias (kept, in pre's type), out = GELU of pre as kept; out may be
 * pre. */
template <typename P, typename O>
static __global__ void bias_gelu_kernel(O *out, P *pre, const float *__restrict__ bias, int N, int F)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= F)
		return;
	float bc = bias[c];
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t o = (size_t)r * F + c;
		float x = rounded<P>(as_float(pre[o]) + bc);
		store(pre + o, x);
		store(out + o, x * normcdff(x));
	}
}

template <typename P, typename O>
static void bias_gelu(O *out, P *pre, const float *bias, int N, int F)
{
	if (N <= 0 || F <= 0)
		return;
	CUDA_LAUNCH((bias_gelu_kernel<P, O>), grid_rows(F, N), THREADS, 0, out, pre, bias, N, F);
}

void cuda_bias_gelu_forward(float *out, struct act *low, struct act *pre, const float *bias,
			    int N, int F)
{
	bias_gelu(out ? out : (float *)low, (float *)pre, bias, N, F);
}

/* pre and low in acts of type A */
template <typename A>
static void bias_gelu_acts(float *out, struct act *low, struct act *pre, const float *bias, int N, int F)
{
	if (out)
		bias_gelu(out, (A *)pre, bias, N, F);
	else
		bias_gelu((A *)low, (A *)pre, bias, N, F);
}

void cuda_bias_gelu_forward_bf16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F)
{
	bias_gelu_acts<bf16>(out, low, pre, bias, N, F);
}

void cuda_bias_gelu_forward_fp16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F)
{
	bias_gelu_acts<f16>(out, low, pre, bias, N, F);
}

/* dpre = dout * (Phi(x) + x phi(x)); dpre may be dout. */
template <typename P>
static __global__ void gelu_backward_kernel(P *dpre, const float *dout, const P *pre, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float x = as_float(pre[i]);
		store(dpre + i, dout[i] * (normcdff(x) + x * normal_pdf(x)));
	}
}

template <typename P>
static void gelu_backward(P *dpre, const float *dout, const P *pre, int N, int F)
{
	size_t n = N > 0 && F > 0 ? (size_t)N * F : 0;
	if (!n)
		return;
	CUDA_LAUNCH(gelu_backward_kernel<P>, grid_1d(n), THREADS, 0, dpre, dout, pre, n);
}

void cuda_gelu_backward(struct act *dpre, const float *dout, const struct act *pre, int N, int F)
{
	gelu_backward((float *)dpre, dout, (const float *)pre, N, F);
}

void cuda_gelu_backward_bf16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F)
{
	gelu_backward((bf16 *)dpre, dout, (const bf16 *)pre, N, F);
}

void cuda_gelu_backward_fp16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F)
{
	gelu_backward((f16 *)dpre, dout, (const f16 *)pre, N, F);
}

/* ---- acts ---- */

template <typename A>
static __global__ void to_acts_kernel(A *out, const float *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		store(out + i, in[i]);
}

template <typename A>
static const struct act *to_acts(struct act *space, const float *x, size_t n)
{
	if (n) {
		CUDA_LAUNCH(to_acts_kernel<A>, grid_1d(n), THREADS, 0, (A *)space, x, n);
	}
	return space;
}

const struct act *cuda_as_bf16(struct act *space, const float *x, size_t n)
{
	return to_acts<bf16>(space, x, n);
}

const struct act *cuda_as_fp16(struct act *space, const float *x, size_t n)
{
	return to_acts<f16>(space, x, n);
}

static __global__ void tanh_forward_kernel(float *out, const float *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = tanhf(in[i]);
}

void cuda_tanh_forward(float *out, const float *in, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(tanh_forward_kernel, grid_1d(n), THREADS, 0, out, in, n);
}

/* din = dout * (1 - out^2); din may be dout. */
static __global__ void tanh_backward_kernel(float *din, const float *dout, const float *out,
					    size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float y = out[i];
		din[i] = dout[i] * (1.0f - y * y);
	}
}

void cuda_tanh_backward(float *din, const float *dout, const float *out, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(tanh_backward_kernel, grid_1d(n), THREADS, 0, din, dout, out, n);
}

/* ---- softmax cross-entropy ---- */

/* One block per row: the log-sum-exp in one pass (a running max and sum per
 * thread, then a fixed tree), lse[r] and loss[r] = lse - (1 - e) logit[label]
 * - e mean(logits) in double; rows without a label get 0 in both. */
static __global__ void crossentropy_rows_kernel(float *__restrict__ lse, double *__restrict__ loss,
						const float *__restrict__ logits,
						const int32_t *__restrict__ labels, int V, float e)
{
	__shared__ float sm[32], ss[32];
	__shared__ double sx[32];
	int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
	int y = labels[r];
	if (y < 0) {   /* the whole block */
		if (tid == 0) {
			lse[r] = 0.0f;
			loss[r] = 0.0;
		}
		return;
	}
	const float *x = logits + (size_t)r * V;
	float m = -INFINITY, s = 0.0f;
	double sum = 0.0;
	for (int j = tid; j < V; j += blockDim.x) {
		lse_add(&m, &s, x[j]);
		sum += x[j];
	}
	warp_lse(&m, &s);
	sum = warp_sum_double(sum);
	if (lane == 0) {
		sm[wid] = m;
		ss[wid] = s;
		sx[wid] = sum;
	}
	__syncthreads();
	if (wid)
		return;
	int nw = blockDim.x >> 5;
	m = lane < nw ? sm[lane] : -INFINITY;
	s = lane < nw ? ss[lane] : 0.0f;
	sum = warp_sum_double(lane < nw ? sx[lane] : 0.0);
	warp_lse(&m, &s);
	if (lane == 0) {
		float l = m + logf(s);
		lse[r] = l;
		loss[r] = (double)l - (1.0 - e) * (double)x[y] - e * sum / V;
	}
}

/* One block: out += weight times the sum of loss[0..n), each thread's share
 * in order, then a fixed tree. */
static __global__ void sum_losses_kernel(double *__restrict__ out, double weight,
					 const double *__restrict__ loss, int n)
{
	__shared__ double part[32];
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
	double s = 0.0;
	for (int i = tid; i < n; i += blockDim.x)
		s += loss[i];
	s = warp_sum_double(s);
	if (lane == 0)
		part[wid] = s;
	__syncthreads();
	if (wid)
		return;
	s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
	s = warp_sum_double(s);
	if (lane == 0)
		*out += weight * s;
}

/* *out += weight times the sum of loss[0..n), on the GPU. */
static void add_losses(double *out, double weight, const double *loss, int n)
{
	CUDA_LAUNCH(sum_losses_kernel, 1, LOSS_THREADS, 0, out, weight, loss, n);
}

void cuda_crossentropy_forward(double *out, double weight, float *lse, const float *logits,
			       const int32_t *labels, int N, int V, float e)
{
	if (N <= 0)
		return;
	double *loss = (double *)scratch_get((size_t)N * sizeof(double));
	int threads = (V + 31) / 32 * 32;
	if (threads > CE_THREADS_MAX)
		threads = CE_THREADS_MAX;
	if (threads < 32)
		threads = 32;
	CUDA_LAUNCH(crossentropy_rows_kernel, N, threads, 0, lse, loss, logits, labels, V, e);
	add_losses(out, weight, loss, N);
}

/* dlogits = scale * (softmax - smoothed onehot(label)) on labelled rows, 0
 * on others: columns across the grid's x, rows strided over its y. */
static __global__ void crossentropy_backward_kernel(float *dlogits, const float *logits,
						    const float *__restrict__ lse,
						    const int32_t *__restrict__ labels, int N,
						    int V, float e, float scale)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= V)
		return;
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t o = (size_t)r * V + j;
		int y = labels[r];
		if (y < 0) {
			dlogits[o] = 0.0f;
			continue;
		}
		float d = scale * expf(logits[o] - lse[r]) - scale * e / V;
		if (j == y)
			d -= scale * (1.0f - e);
		dlogits[o] = d;
	}
}

void cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
				const int32_t *labels, int N, int V, float e, float scale)
{
	if (N <= 0 || V <= 0)
		return;
	CUDA_LAUNCH(crossentropy_backward_kernel, grid_rows(V, N), THREADS, 0,
		dlogits, logits, lse, labels, N, V, e, scale);
}

/* ---- divergences between distributions (distillation, VAT, R-Drop) ---- */

enum { ROW_THREADS = 256 };   /* a block per row */

/* The block's sum (or max) of v in every thread; red holds 32 doubles. */
static __device__ double block_reduce(double v, double *red, int max)
{
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) {
		double w = __shfl_xor_sync(FULL, v, o);
		v = max ? fmax(v, w) : v + w;
	}
	__syncthreads();   /* red may still be read by an earlier reduction */
	if (lane == 0)
		red[wid] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : max ? -INFINITY : 0.0;
	for (int o = 16; o > 0; o >>= 1) {
		double w = __shfl_xor_sync(FULL, v, o);
		v = max ? fmax(v, w) : v + w;
	}
	return v;
}

/* The log-sum-exp of x[0..V) / temp, in every thread of the block. */
static __device__ double block_lse(const float *x, int V, float temp, double *red)
{
	double mx = -INFINITY, s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmax(mx, (double)x[j] / temp);
	mx = block_reduce(mx, red, 1);
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += exp((double)x[j] / temp - mx);
	return mx + log(block_reduce(s, red, 0));
}

static __global__ void softmax_rows_kernel(float *out, const float *__restrict__ logits, int V, float temp)
{
	__shared__ double red[32];
	const float *x = logits + (size_t)blockIdx.x * V;
	double l = block_lse(x, V, temp, red);
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		out[(size_t)blockIdx.x * V + j] = (float)exp((double)x[j] / temp - l);
}

void cuda_softmax_rows(float *out, const float *logits, int N, int V, float temp)
{
	if (N <= 0)
		return;
	CUDA_LAUNCH(softmax_rows_kernel, N, ROW_THREADS, 0, out, logits, V, temp);
}

static __global__ void kl_rows_kernel(float *lse, double *loss, const float *__restrict__ logits,
				      const float *__restrict__ target, int V, float temp)
{
	__shared__ double red[32];
	size_t r = blockIdx.x;
	const float *x = logits + r * V, *t = target + r * V;
	double l = block_lse(x, V, temp, red), s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		if (t[j] > 0)
			s += t[j] * (log((double)t[j]) - ((double)x[j] / temp - l));
	s = block_reduce(s, red, 0);
	if (threadIdx.x == 0) {
		lse[r] = (float)l;
		loss[r] = s;
	}
}

void cuda_kl_forward(double *out, double weight, float *lse, const float *logits,
		     const float *target, int N, int V, float temp)
{
	if (N <= 0)
		return;
	double *loss = (double *)scratch_get((size_t)N * sizeof(double));
	CUDA_LAUNCH(kl_rows_kernel, N, ROW_THREADS, 0, lse, loss, logits, target, V, temp);
	add_losses(out, weight, loss, N);
}

static __global__ void kl_backward_kernel(float *dlogits, const float *logits, const float *__restrict__ lse,
					  const float *__restrict__ target, int N, int V, float temp, float scale)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= V)
		return;
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t i = (size_t)r * V + j;
		dlogits[i] += scale / temp * (expf(logits[i] / temp - lse[r]) - target[i]);
	}
}

void cuda_kl_backward(float *dlogits, const float *logits, const float *lse, const float *target, int N, int V,
		      float temp, float scale)
{
	if (N <= 0 || V <= 0)
		return;
	CUDA_LAUNCH(kl_backward_kernel, grid_rows(V, N), THREADS, 0, dlogits, logits, lse, target, N, V,
		temp, scale);
}

/* KL(p ‖ q) of rows a and b, in every thread of the block. */
static __device__ double block_kl(const float *a, double la, const float *b, double lb, int V, double *red)
{
	double s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += exp(a[j] - la) * ((a[j] - la) - (b[j] - lb));
	return block_reduce(s, red, 0);
}

/* A block per pair: with grad, adds scale times the gradient; else loss[r]. */
static __global__ void symkl_kernel(double *loss, float *dlogits, const float *__restrict__ logits, int P, int V,
				    float scale)
{
	__shared__ double red[32];
	size_t r = blockIdx.x;
	const float *a = logits + r * V, *b = logits + (P + r) * V;
	double la = block_lse(a, V, 1, red), lb = block_lse(b, V, 1, red);
	double pq = block_kl(a, la, b, lb, V, red), qp = block_kl(b, lb, a, la, V, red);
	if (!dlogits) {
		if (threadIdx.x == 0)
			loss[r] = pq + qp;
		return;
	}
	float *da = dlogits + r * V, *db = dlogits + (P + r) * V;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		double lp = a[j] - la, lq = b[j] - lb, p = exp(lp), q = exp(lq);
		da[j] += (float)(scale * (p * (lp - lq - pq) + p - q));
		db[j] += (float)(scale * (q * (lq - lp - qp) + q - p));
	}
}

void cuda_symkl_forward(double *out, double weight, const float *logits, int P, int V)
{
	if (P <= 0)
		return;
	double *loss = (double *)scratch_get((size_t)P * sizeof(double));
	CUDA_LAUNCH(symkl_kernel, P, ROW_THREADS, 0, loss, nullptr, logits, P, V, 0);
	add_losses(out, weight, loss, P);
}

void cuda_symkl_backward(float *dlogits, const float *logits, int P, int V, float scale)
{
	if (P <= 0)
		return;
	CUDA_LAUNCH(symkl_kernel, P, ROW_THREADS, 0, nullptr, dlogits, logits, P, V, scale);
}

static __global__ void axpy_kernel(float *y, const float *__restrict__ x, size_t n, float a)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		y[i] += a * x[i];
}

void cuda_axpy(float *y, const float *x, size_t n, float a)
{
	if (!n)
		return;
	CUDA_LAUNCH(axpy_kernel, grid_1d(n), THREADS, 0, y, x, n, a);
}

/* ---- squared error and binary cross-entropy (regression, multi-label) ---- */

/* loss[i] per element, in double: (pred - target)^2, or for bce the stable
 * max(x, 0) - x y + log(1 + e^-|x|). */
static __global__ void elementwise_loss_kernel(double *__restrict__ loss, const float *__restrict__ x,
					       const float *__restrict__ y, size_t n, int bce)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		double xi = x[i], yi = y[i];
		loss[i] = bce ? fmax(xi, 0.0) - xi * yi + log1p(exp(-fabs(xi))) : (xi - yi) * (xi - yi);
	}
}

/* *out += weight times the sum of the per-element losses, in a fixed order. */
static void elementwise_loss(double *out, double weight, const float *x, const float *y, size_t n,
			     int bce)
{
	if (!n)
		return;
	if (n > INT_MAX)
		die("a loss over %zu values: more than one sum takes", n);
	double *loss = (double *)scratch_get(n * sizeof(double));
	CUDA_LAUNCH(elementwise_loss_kernel, grid_1d(n), THREADS, 0, loss, x, y, n, bce);
	add_losses(out, weight, loss, (int)n);
}

/* dx = scale * 2 (x - y), or for bce scale * (sigmoid(x) - y). */
static __global__ void elementwise_loss_backward_kernel(float *dx, const float *x,
							const float *__restrict__ y, size_t n,
							float scale, int bce)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dx[i] = bce ? scale * (1.0f / (1.0f + expf(-x[i])) - y[i]) : scale * 2.0f * (x[i] - y[i]);
}

static void elementwise_loss_backward(float *dx, const float *x, const float *y, size_t n, float scale,
				      int bce)
{
	if (!n)
		return;
	CUDA_LAUNCH(elementwise_loss_backward_kernel, grid_1d(n), THREADS, 0, dx, x, y, n, scale, bce);
}

void cuda_mse_forward(double *out, double weight, const float *pred, const float *target, int N)
{
	elementwise_loss(out, weight, pred, target, (size_t)(N > 0 ? N : 0), 0);
}

void cuda_mse_backward(float *dpred, const float *pred, const float *target, int N, float scale)
{
	elementwise_loss_backward(dpred, pred, target, (size_t)(N > 0 ? N : 0), scale, 0);
}

void cuda_bce_forward(double *out, double weight, const float *logits, const float *targets,
		      size_t n)
{
	elementwise_loss(out, weight, logits, targets, n, 1);
}

void cuda_bce_backward(float *dlogits, const float *logits, const float *targets, size_t n, float scale)
{
	elementwise_loss_backward(dlogits, logits, targets, n, scale, 1);
}

/* ---- dropout ---- */

/* out[i] = in[i] * (kept ? scale : 0); out may be in. */
static __global__ void dropout_kernel(float *out, const float *in, size_t n, uint32_t key,
				      uint32_t threshold, float scale)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = in[i] * (dropout_hash(key, (uint32_t)i) >= threshold ? scale : 0.0f);
}

void cuda_dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed)
{
	if (!n)
		return;
	if (p <= 0.0f) {
		if (out != in && cuda_graph_call_of("copy", out, in, n))
			CUDA_CHECK_WALK(cudaMemcpyAsync(out, in, n * sizeof(float),
							cudaMemcpyDeviceToDevice, cuda_stream()));
		return;
	}
	CUDA_LAUNCH(dropout_kernel, grid_1d(n), THREADS, 0,
		out, in, n, dropout_key(seed), dropout_threshold(p), 1.0f / (1.0f - p));
}

/* ---- row gather and scatter-add ---- */

/* out[m] = in[rows[m]] */
static __global__ void gather_rows_kernel(float *__restrict__ out, const float *__restrict__ in,
					  const int32_t *__restrict__ rows, int M, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	for (int m = blockIdx.y; m < M; m += gridDim.y)
		out[(size_t)m * C + c] = in[(size_t)rows[m] * C + c];
}

void cuda_gather_rows(float *out, const float *in, const int32_t *rows, int M, int C)
{
	if (M <= 0 || C <= 0)
		return;
	CUDA_LAUNCH(gather_rows_kernel, grid_rows(C, M), THREADS, 0, out, in, rows, M, C);
}

/* out[rows[m]] += in[m], m in order for a row named twice. */
void cuda_scatter_add_rows(float *out, const float *in, const int32_t *rows, int M, int C)
{
	if (M <= 0 || C <= 0)
		return;
	scatter_ordered(out, in, rows, M, C, 0, -1, NULL, 0, M, 1, scatter_buckets(M));
}
