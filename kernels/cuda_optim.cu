/* The optimizer's ops on the GPU: what lib/backend/backend.h says of sum_squares,
 * scale, adam_update (all of a step's tensors in one launch), sgd_update,
 * lamb_moments and lamb_apply, with lib/backend/cpu_optim.c as the reference
 * to the last bit.
 *
 * The updates are elementwise and spell out the CPU's expressions one float
 * operation at a time with round-to-nearest intrinsics (__fmul_rn and kin),
 * so nvcc contracts nothing into an FMA and division and square root are
 * IEEE's whatever -prec-div and -prec-sqrt say: p, m and v come out bit for
 * bit as on the CPU, which is compiled without contraction.
 *
 * The sums take the CPU's order exactly, so they equal its bits too: chunks
 * of SUM_CHUNK elements, each summed in double (LAMB's in element order, the
 * sum of squares in cpu_optim.c's eight lanes), then the chunk sums added in
 * chunk order (on the host, after the one download). A chunk's sum is a
 * chain of SUM_CHUNK (or SUM_CHUNK/8) dependent double adds, so a block takes
 * ROWS chunks side by side: its loader warps stage a TILE-wide slice of each
 * chunk in shared memory, coalesced, while its adder warp, one lane per
 * chunk, runs down the slice staged before. Long inputs are then bound by
 * memory bandwidth; a call costs at least one chunk's chain of SUM_CHUNK
 * dependent adds, some 50 to 100 microseconds. The partial sums' buffers grow
 * and are kept; like the backend's one stream they are not for concurrent
 * callers. */
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "util/err.h"
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

enum {
	SUM_CHUNK = 1 << 14,    /* cpu_optim.c's chunk: the sums' bits depend on it */
	ROWS = 32,              /* chunks a block sums, one per lane of its adder warp */
	TILE = 128,             /* elements of each chunk staged at a time */
	LOADERS = 256,          /* threads that stage; the adder warp comes after them */
	SUM_THREADS = LOADERS + 32,
	PER_LOADER = ROWS * TILE / LOADERS,
	GRID_MAX = 65535,       /* blocks of an elementwise kernel; its threads stride on */
	LANES = 8,              /* cpu_optim.c's running sums of squares: the bits depend on it */
	ADAM_CHUNK = 4096,      /* elements of a tensor a block of the Adam kernel updates */
};
static_assert(ROWS == 32 && TILE % 32 == 0 && LOADERS % 32 == 0 && ROWS * TILE % LOADERS == 0,
	      "a warp of loaders reads 32 floats of one row; the tile splits evenly");
static_assert(SUM_CHUNK % TILE == 0, "a chunk is a whole number of tiles");
static_assert(TILE % LANES == 0, "a tile is a whole number of groups of lanes");

/* Two stages (the one being filled, the one being added) of nsum staged
 * values per element: LAMB's two fill the 64 KiB a block may have on sm_75. */
#define STAGE_BYTES(nsum) ((size_t)2 * (nsum) * ROWS * TILE * sizeof(float))

/* ---- elementwise ---- */

/* x *= s */
static __global__ void scale_kernel(float *x, size_t n, float s)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = __fmul_rn(x[i], s);
}

/* adam_update: torch.optim.Adam/AdamW in cpu_optim.c's order, eps outside
 * the square root, for every tensor of a table in one launch. Block k takes
 * ADAM_CHUNK elements of the tensor whose chunks it falls in: chunk_at[i]
 * is tensor i's first chunk, chunk_at[n] the total. */
static __global__ void adam_kernel(const struct adam_tensor *__restrict__ ts,
				   const size_t *__restrict__ chunk_at, int n)
{
	size_t chunk = blockIdx.x;
	int lo = 0, hi = n;   /* the tensor i with chunk_at[i] <= chunk < chunk_at[i + 1] */
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (chunk_at[mid] <= chunk)
			lo = mid;
		else
			hi = mid;
	}
	const struct adam_tensor *t = &ts[lo];
	const struct adam_coef a = t->c;
	size_t first = (chunk - chunk_at[lo]) * ADAM_CHUNK;
	size_t end = min(first + ADAM_CHUNK, t->n);
	float *__restrict__ p = t->p, *__restrict__ m = t->m, *__restrict__ v = t->v;
	const float *__restrict__ grad = t->g;
	for (size_t i = first + threadIdx.x; i < end; i += blockDim.x) {
		float pi = p[i];
		/* g = grad*gscale + l2*p */
		float g = __fadd_rn(__fmul_rn(grad[i], a.gscale), __fmul_rn(a.l2, pi));
		/* m = m*b1 + omb1*g */
		float mi = __fadd_rn(__fmul_rn(m[i], a.b1), __fmul_rn(a.omb1, g));
		/* v = v*b2 + omb2*g*g, the products from the left */
		float vi = __fadd_rn(__fmul_rn(v[i], a.b2), __fmul_rn(__fmul_rn(a.omb2, g), g));
		/* denom = sqrt(v)/bc2_sqrt + eps */
		float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), a.bc2_sqrt), a.eps);

		m[i] = mi;
		v[i] = vi;
		/* p = p*keep - step_size*(m/denom) */
		p[i] = __fsub_rn(__fmul_rn(pi, a.keep),
				 __fmul_rn(a.step_size, __fdiv_rn(mi, denom)));
	}
}

/* sgd_update: torch.optim.SGD, no dampening or Nesterov; m NULL: no momentum. */
static __global__ void sgd_kernel(float *__restrict__ p, const float *__restrict__ grad,
				  float *__restrict__ m, size_t n, float gscale, float lr,
				  float momentum, float wd)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float pi = p[i];
		/* g = grad*gscale + wd*p */
		float g = __fadd_rn(__fmul_rn(grad[i], gscale), __fmul_rn(wd, pi));

		if (m) {
			/* g = m = m*momentum + g */
			g = __fadd_rn(__fmul_rn(m[i], momentum), g);
			m[i] = g;
		}
		/* p = p - lr*g */
		p[i] = __fsub_rn(pi, __fmul_rn(lr, g));
	}
}

/* lamb_direction (cpu_optim.c): u = m/bc1/(sqrt(v/bc2) + eps) + wd*p */
static __device__ __forceinline__ float lamb_dir(struct lamb_coef a, float m, float v, float p)
{
	float den = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, a.bc2)), a.eps);

	return __fadd_rn(__fdiv_rn(__fdiv_rn(m, a.bc1), den), __fmul_rn(a.wd, p));
}

/* lamb_apply: p -= step*u, u recomputed from the moved moments. */
static __global__ void lamb_apply_kernel(float *__restrict__ p, const float *__restrict__ m,
					 const float *__restrict__ v, size_t n, struct lamb_coef a,
					 float step)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float pi = p[i];

		p[i] = __fsub_rn(pi, __fmul_rn(step, lamb_dir(a, m[i], v[i], pi)));
	}
}

/* ---- sums in the CPU's order ----
 *
 * Block b sums chunks b*ROWS .. b*ROWS + ROWS-1. Tile t of the block holds
 * elements t*TILE .. t*TILE + TILE-1 of each of its chunks; element e of a
 * tile (0 <= e < ROWS*TILE) is column e % TILE of row e / TILE (chunk
 * b*ROWS + e/TILE), and loader thread e % LOADERS stages it, so a warp of
 * loaders reads 32 consecutive floats of one chunk. Elements at or past n
 * are staged as 0: the sums start at +0 and every term is +0 or more (or
 * NaN), so adding +0 leaves a sum's bits as they are. */

extern __shared__ float stage[];

/* Where element e of tile t lies in the input, from the block's first index
 * base. */
static __device__ __forceinline__ size_t tile_src(size_t base, int t, unsigned e)
{
	return base + (size_t)(e / TILE) * SUM_CHUNK + (size_t)t * TILE + e % TILE;
}

/* Where column j of row r lies in a stage: rows TILE floats apart, with no
 * padding, their columns permuted by the row, so that the adder warp, lane r
 * reading column j of row r, meets 32 banks ((j ^ r) % 32), and so does a
 * loader warp writing 32 aligned columns of one row. */
static __device__ __forceinline__ unsigned staged(unsigned r, unsigned j)
{
	return r * TILE + (j ^ r);
}

/* Where element e of a tile lies in its stage. */
static __device__ __forceinline__ unsigned tile_dst(unsigned e)
{
	return staged(e / TILE, e % TILE);
}

/* Stage loader tid's share of tile t of x. */
static __device__ __forceinline__ void stage_floats(float *tile, const float *__restrict__ x,
						    size_t n, size_t base, int t, unsigned tid)
{
	float val[PER_LOADER];

	#pragma unroll
	for (int k = 0; k < PER_LOADER; k++) {    /* every load in flight at once */
		size_t i = tile_src(base, t, tid + k * LOADERS);

		val[k] = i < n ? x[i] : 0.0f;
	}
	#pragma unroll
	for (int k = 0; k < PER_LOADER; k++)
		tile[tile_dst(tid + k * LOADERS)] = val[k];
}

static __device__ __forceinline__ double add_square(double s, float x)
{
	double d = x;

	return __dadd_rn(s, __dmul_rn(d, d));
}

/* Adds the squares of the TILE floats of row r of stage st, elements from..
 * of its chunk, to cpu_optim.c's eight lanes (squares): element i to lane i %
 * LANES, or to lane 0 from full (the chunk's length in whole groups of
 * LANES) on. from and full are whole groups, so a group goes one way. */
static __device__ __forceinline__ void add_squares(double lane[LANES], const float *st, unsigned r,
						   int from, int full)
{
	for (int j = 0; j < TILE; j += LANES) {
		if (from + j < full) {
			#pragma unroll
			for (int k = 0; k < LANES; k++)
				lane[k] = add_square(lane[k], st[staged(r, j + k)]);
		} else {   /* the chunk's last few elements, and zeros past n */
			#pragma unroll
			for (int k = 0; k < LANES; k++)
				lane[0] = add_square(lane[0], st[staged(r, j + k)]);
		}
	}
}

/* The elements of the chunk from start in whole groups of LANES (0 past n). */
static __device__ __forceinline__ int whole_groups(size_t n, size_t start)
{
	if (start >= n)
		return 0;
	return (int)((n - start < SUM_CHUNK ? n - start : SUM_CHUNK) / LANES * LANES);
}

/* sum_squares: part[c] = the lanes of (double)x[i]*x[i] over chunk c, added
 * in lane order. */
static __global__ void __launch_bounds__(SUM_THREADS)
squares_kernel(const float *__restrict__ x, size_t n, double *__restrict__ part)
{
	size_t c0 = (size_t)blockIdx.x * ROWS, base = c0 * SUM_CHUNK;
	size_t len = n - base < SUM_CHUNK ? n - base : SUM_CHUNK;    /* the longest row's */
	int ntile = (int)((len + TILE - 1) / TILE);
	unsigned tid = threadIdx.x, row = tid - LOADERS;    /* an adder's row: its chunk */
	size_t start = base + (size_t)row * SUM_CHUNK;
	int full = tid < LOADERS ? 0 : whole_groups(n, start);
	double lane[LANES] = {};

	if (tid < LOADERS)
		stage_floats(stage, x, n, base, 0, tid);
	__syncthreads();
	for (int t = 0; t < ntile; t++) {
		/* loaders fill stage (t+1) % 2 while the adder warp reads stage t % 2 */
		if (tid < LOADERS) {
			if (t + 1 < ntile)
				stage_floats(stage + ((t + 1) & 1) * ROWS * TILE, x, n, base,
					     t + 1, tid);
		} else {
			add_squares(lane, stage + (t & 1) * ROWS * TILE, row, t * TILE, full);
		}
		__syncthreads();
	}
	if (tid >= LOADERS && start < n) {
		double s = 0;

		for (int k = 0; k < LANES; k++)
			s = __dadd_rn(s, lane[k]);
		part[c0 + row] = s;
	}
}

/* Moves m and v for loader tid's share of tile t, as lamb_chunk (cpu_optim.c),
 * and stages p in the first half of the stage and u in the second. */
static __device__ __forceinline__ void stage_lamb(float *tile, const float *__restrict__ p,
						  const float *__restrict__ g,
						  float *__restrict__ m, float *__restrict__ v,
						  size_t n, struct lamb_coef a, size_t base, int t,
						  unsigned tid)
{
	float pk[PER_LOADER], gk[PER_LOADER], mk[PER_LOADER], vk[PER_LOADER];

	#pragma unroll
	for (int k = 0; k < PER_LOADER; k++) {    /* every load in flight at once */
		size_t i = tile_src(base, t, tid + k * LOADERS);

		pk[k] = gk[k] = mk[k] = vk[k] = 0.0f;
		if (i < n) {
			pk[k] = p[i];
			gk[k] = __fmul_rn(g[i], a.gscale);
			mk[k] = m[i];
			vk[k] = v[i];
		}
	}
	#pragma unroll
	for (int k = 0; k < PER_LOADER; k++) {
		unsigned e = tid + k * LOADERS;
		size_t i = tile_src(base, t, e);
		float u = 0.0f;

		if (i < n) {
			/* m = m*b1 + omb1*g; v = v*b2 + omb2*g*g, the products from the left */
			float mi = __fadd_rn(__fmul_rn(mk[k], a.b1), __fmul_rn(a.omb1, gk[k]));
			float vi = __fadd_rn(__fmul_rn(vk[k], a.b2),
					     __fmul_rn(__fmul_rn(a.omb2, gk[k]), gk[k]));

			m[i] = mi;
			v[i] = vi;
			u = lamb_dir(a, mi, vi, pk[k]);
		}
		tile[tile_dst(e)] = pk[k];
		tile[ROWS * TILE + tile_dst(e)] = u;
	}
}

/* lamb_moments: moves m and v, and part[2c], part[2c+1] = the sums of
 * (double)p*p and (double)u*u over chunk c, in order. */
static __global__ void __launch_bounds__(SUM_THREADS)
lamb_moments_kernel(const float *__restrict__ p, const float *__restrict__ g,
		    float *__restrict__ m, float *__restrict__ v, size_t n, struct lamb_coef a,
		    double *__restrict__ part)
{
	size_t c0 = (size_t)blockIdx.x * ROWS, base = c0 * SUM_CHUNK;
	size_t len = n - base < SUM_CHUNK ? n - base : SUM_CHUNK;    /* the longest row's */
	int ntile = (int)((len + TILE - 1) / TILE);
	unsigned tid = threadIdx.x;
	double sp = 0, su = 0;

	if (tid < LOADERS)
		stage_lamb(stage, p, g, m, v, n, a, base, 0, tid);
	__syncthreads();
	for (int t = 0; t < ntile; t++) {
		/* loaders fill stage (t+1) % 2 while the adder warp reads stage t % 2 */
		if (tid < LOADERS) {
			if (t + 1 < ntile)
				stage_lamb(stage + ((t + 1) & 1) * 2 * ROWS * TILE, p, g, m, v,
					   n, a, base, t + 1, tid);
		} else {
			const float *ps = stage + (t & 1) * 2 * ROWS * TILE, *us = ps + ROWS * TILE;
			unsigned row = tid - LOADERS;

			#pragma unroll 16
			for (int j = 0; j < TILE; j++) {
				double dp = ps[staged(row, j)], du = us[staged(row, j)];

				sp = __dadd_rn(sp, __dmul_rn(dp, dp));
				su = __dadd_rn(su, __dmul_rn(du, du));
			}
		}
		__syncthreads();
	}
	if (tid >= LOADERS) {
		unsigned lane = tid - LOADERS;

		if (base + (size_t)lane * SUM_CHUNK < n) {
			part[2 * (c0 + lane)] = sp;
			part[2 * (c0 + lane) + 1] = su;
		}
	}
}

/* ---- host side ---- */

static void *part_dev;                 /* chunk sums on the GPU */
static double *part_host;              /* their pinned host copy */
static size_t part_cap, part_bytes;    /* doubles the host copy has room for; the GPU's bytes */

/* Room for count chunk sums on the GPU, grown (never shrunk) as needed. */
static double *part_room(size_t count)
{
	if (count > part_cap) {
		size_t cap = count > 2 * part_cap ? count : 2 * part_cap;

		/* every use of the old host copy ended with the stream's synchronisation */
		if (part_host)
			CUDA_CHECK(cudaFreeHost(part_host));
		CUDA_CHECK(cudaMallocHost(&part_host, cap * sizeof *part_host));
		cuda_grow(&part_dev, &part_bytes, cap * sizeof *part_host);
		part_cap = cap;
	}
	return (double *)part_dev;
}

/* out[0..nsum) = the nchunk chunk sums (nsum per chunk) added in chunk order,
 * as chunked_sums (cpu_optim.c) adds them; waits for the stream. */
static void add_chunks(size_t nchunk, int nsum, double *out)
{
	cudaStream_t st = cuda_stream();
	cuda_graph_spoil("a download");
	CUDA_CHECK(cudaMemcpyAsync(part_host, part_dev, nchunk * nsum * sizeof *part_host,
				   cudaMemcpyDeviceToHost, st));
	CUDA_CHECK(cudaStreamSynchronize(st));
	for (int s = 0; s < nsum; s++)
		out[s] = 0;
	for (size_t c = 0; c < nchunk; c++)
		for (int s = 0; s < nsum; s++)
			out[s] += part_host[c * nsum + s];
}

static size_t chunks_of(size_t n)
{
	return (n + SUM_CHUNK - 1) / SUM_CHUNK;
}

/* Blocks of SUM_THREADS for nchunk chunks, ROWS each. */
static unsigned sum_blocks(size_t nchunk)
{
	return (unsigned)((nchunk + ROWS - 1) / ROWS);
}

/* Blocks of 256 for an elementwise kernel over n > 0 items. */
static unsigned elem_blocks(size_t n)
{
	return cuda_blocks(n < (size_t)GRID_MAX * 256 ? n : (size_t)GRID_MAX * 256);
}

double cuda_sum_squares(const float *x, size_t n)
{
	size_t nchunk = chunks_of(n);
	double ss;

	if (n == 0)
		return 0;
	double *part = part_room(nchunk);
	CUDA_LAUNCH(squares_kernel, sum_blocks(nchunk), SUM_THREADS, STAGE_BYTES(1), 
		x, n, part);
	add_chunks(nchunk, 1, &ss);
	return ss;
}

void cuda_scale(float *x, size_t n, float s)
{
	if (n == 0)
		return;
	CUDA_LAUNCH(scale_kernel, elem_blocks(n), 256, 0, x, n, s);
}

static __global__ void ema_kernel(float *avg, const float *__restrict__ x, size_t n, float decay)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		avg[i] = __fadd_rn(__fmul_rn(decay, avg[i]), __fmul_rn(1.0f - decay, x[i]));
}

void cuda_ema_update(float *avg, const float *x, size_t n, float decay)
{
	if (n == 0)
		return;
	CUDA_LAUNCH(ema_kernel, elem_blocks(n), 256, 0, avg, x, n, decay);
}

static __global__ void swap_kernel(float *a, float *b, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float t = a[i];
		a[i] = b[i];
		b[i] = t;
	}
}

void cuda_swap(float *a, float *b, size_t n)
{
	if (n == 0)
		return;
	CUDA_LAUNCH(swap_kernel, elem_blocks(n), 256, 0, a, b, n);
}

/* The table and its chunks' starts, on the GPU, grown as needed; the host
 * copy goes up with the launch's work on the stream (from pageable memory,
 * so it is taken before the call returns). */
static void *table_dev;
static struct adam_tensor *table_host;
static size_t table_cap;

void cuda_adam_update(const struct adam_tensor *t, int n)
{
	size_t bytes = n * sizeof *t + (n + 1) * sizeof(size_t);
	cudaStream_t st = cuda_stream();
	if (bytes > table_cap) {
		free(table_host);
		table_host = (struct adam_tensor *)xmalloc(bytes);
	}
	cuda_grow(&table_dev, &table_cap, bytes);
	size_t *chunk_at = (size_t *)(table_host + n), chunks = 0;
	for (int i = 0; i < n; i++) {
		table_host[i] = t[i];
		chunk_at[i] = chunks;
		chunks += (t[i].n + ADAM_CHUNK - 1) / ADAM_CHUNK;
	}
	chunk_at[n] = chunks;
	if (!chunks)
		return;
	if (chunks > INT_MAX)
		die("adam_update: %zu chunks of %d are more than one launch takes", chunks, (int)ADAM_CHUNK);
	cuda_graph_spoil("an upload");
	CUDA_CHECK(cudaMemcpyAsync(table_dev, table_host, bytes, cudaMemcpyHostToDevice, st));
	const struct adam_tensor *tab = (const struct adam_tensor *)table_dev;
	CUDA_LAUNCH(adam_kernel, (unsigned)chunks, 256, 0, tab, (const size_t *)(tab + n), n);
}

void cuda_sgd_update(float *p, const float *g, float *m, size_t n, float gscale, float lr,
		     float momentum, float wd)
{
	if (n == 0)
		return;
	CUDA_LAUNCH(sgd_kernel, elem_blocks(n), 256, 0, p, g, m, n, gscale, lr, momentum, wd);
}

void cuda_lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
		       const struct lamb_coef *c, double *sums)
{
	static int stage_set;   /* the stage is past the 48 KiB granted without asking */
	size_t nchunk = chunks_of(n);

	if (n == 0) {
		sums[0] = sums[1] = 0;
		return;
	}
	if (!stage_set) {
		CUDA_CHECK(cudaFuncSetAttribute(lamb_moments_kernel,
						cudaFuncAttributeMaxDynamicSharedMemorySize,
						(int)STAGE_BYTES(2)));
		stage_set = 1;
	}
	double *part = part_room(2 * nchunk);
	CUDA_LAUNCH(lamb_moments_kernel, sum_blocks(nchunk), SUM_THREADS, STAGE_BYTES(2), 
		p, g, m, v, n, *c, part);
	add_chunks(nchunk, 2, sums);
}

void cuda_lamb_apply(float *p, const float *m, const float *v, size_t n,
		     const struct lamb_coef *c, float step)
{
	if (n == 0)
		return;
	CUDA_LAUNCH(lamb_apply_kernel, elem_blocks(n), 256, 0, p, m, v, n, *c, step);
}
