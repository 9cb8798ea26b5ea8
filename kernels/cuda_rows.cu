/* The ops that move rows of tables on the GPU, as lib/backend/cpu_ops.c's
 * of the same names: the embeddings' gradient (embedding_backward: the word
 * and position rows scattered, the token-type table summed), gather_rows
 * and scatter_add_rows. No float atomics: a scatter-add into table rows
 * gives each (row, column) of the table to one lane: a warp owns 128
 * columns of the rows whose id falls in its bucket (id mod the bucket
 * count), and walks the tokens in order, so each float gets the CPU's
 * additions in the CPU's order: the same bits. The token types' sums go in
 * two passes: partial sums over fixed chunks of rows, then one thread per
 * column adds the chunks in order. */
#include "cuda_grid.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_warp.h"

enum {
	TYPE_SLOTS = 4,         /* token types summed in registers; others by scatter */
	TYPE_OTHER = 1u << TYPE_SLOTS,  /* chunk mask bit: a type >= TYPE_SLOTS */
	SC_VEC = 4,             /* columns of a scatter lane */
	SC_COLS = 32 * SC_VEC,  /* columns of a scatter warp */
	SC_WARPS = 4,           /* buckets (one per warp) of a scatter block */
	SC_BUCKETS_MAX = 256,
	SC_PER_BUCKET = 64,     /* tokens per bucket the bucket count aims at */
};

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
	char *buf = (char *)cuda_op_scratch(part_bytes + (size_t)nchunks * sizeof(uint32_t));
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

/* The mean of sequence b's real rows, a column a thread (the CPU's order). */
static __global__ void mean_rows_kernel(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask,
					int B, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	for (int b = blockIdx.y; b < B; b += gridDim.y) {
		float s = 0.0f;
		int n = 0;
		for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
			if (mask[r])
				s += x[(size_t)r * C + c], n++;
		out[(size_t)b * C + c] = n ? s / (float)n : 0.0f;
	}
}

void cuda_mean_rows(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask, int B, int C)
{
	if (B <= 0 || C <= 0)
		return;
	CUDA_LAUNCH(mean_rows_kernel, grid_rows(C, B), THREADS, 0, out, x, kv_start, mask, B, C);
}

static __global__ void mean_rows_backward_kernel(float *dx, const float *dout, const int32_t *kv_start,
						 const uint8_t *mask, int B, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	for (int b = blockIdx.y; b < B; b += gridDim.y) {
		int n = 0;
		for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
			n += mask[r] != 0;
		for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
			if (mask[r])
				dx[(size_t)r * C + c] = dout[(size_t)b * C + c] / (float)n;
	}
}

void cuda_mean_rows_backward(float *dx, const float *dout, const int32_t *kv_start, const uint8_t *mask, int B,
			     int C)
{
	if (B <= 0 || C <= 0)
		return;
	CUDA_LAUNCH(mean_rows_backward_kernel, grid_rows(C, B), THREADS, 0, dx, dout, kv_start, mask, B, C);
}

/* out[rows[m]] += in[m], m in order for a row named twice. */
void cuda_scatter_add_rows(float *out, const float *in, const int32_t *rows, int M, int C)
{
	if (M <= 0 || C <= 0)
		return;
	scatter_ordered(out, in, rows, M, C, 0, -1, NULL, 0, M, 1, scatter_buckets(M));
}
