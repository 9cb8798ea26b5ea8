/* Multi-head self-attention on the GPU, with the meaning and the dropout
 * masks of the CPU's (lib/backend/cpu_attention.c, lib/backend/cpu_ops.h), on
 * acts that are floats, bf16 or fp16: q, k, v are read into shared memory as
 * floats, everything is computed in fp32, and ctx, dq, dk, dv are rounded
 * into the acts' type once, when stored; dctx is fp32.
 *
 * Layout, as the CPU's: sequence b's len keys and values are rows k0 =
 * kv_start[b].. of k and v (stride ldkv), its nq queries rows q0.. of q
 * (stride ldq), q0 = kv_start[b] or q_start[b]; head h is columns h*d.. of
 * each. Sequence b's probabilities are numbered from p_start[b], nq x len
 * per head, head after head, and they sit at those offsets in a scratch
 * shared by every layer; the dropout draw of element (i, j) is numbered by
 * its offset, cut to 32 bits. Keys from n on get zero weight and no work, n
 * being one past the last real key, or len when no key is real (the row is
 * then uniform). A local band (ModernBERT's local layers) narrows a row's
 * keys to those at most band rows from its own (cpu_attention.c's
 * band_keys, the same rule where none of them is real); a band runs on these
 * kernels, not cuDNN's. The forward keeps for the backward, per query row and
 * head, its softmax's maximum and reciprocal sum (STATE floats at state +
 * STATE * (row * H + h)); the backward works the probabilities out again
 * from them, with the forward's bits.
 *
 * Design: a block of 8 warps works on a tile of 32 rows of one (sequence,
 * head) pair; each warp owns 4 of the rows, and a lane owns one key of a
 * 32-key tile or columns lane, lane+32, .. of a head (d <= 256). Row and key
 * tiles are staged in shared memory, rows padded to an odd stride, so that
 * a lane walking its own key's row and the warp reading one row meet no
 * bank conflicts.
 *  forward, per (sequence, head, query tile): scores = Q K^T / sqrt(d) go
 *   straight into their place in the scratch: no limit on T; each warp
 *   turns its rows into the masked softmax there (a lane reads back only
 *   what it wrote), keeping its statistics; then ctx = dropout(P) V over key
 *   tiles.
 *  backward, per (sequence, head, query tile): the scores again, and P from
 *   them and the statistics, into the scratch; dP = dctx V^T into a second
 *   scratch laid out alike, then in place dS = P (dP*mask - sum(P dP*mask)),
 *   and dQ = dS K / sqrt(d);
 *   per (sequence, head, key tile): dV = dropout(P)^T dctx and
 *   dK = dS^T Q / sqrt(d), looping over query tiles in order.
 * Every sum is one thread's, in a fixed order (or a fixed warp butterfly), so
 * results do not change from run to run; no atomics. */
#include "backend/dropout.h"
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_types.h"
#include "cuda_warp.h"
#include "util/err.h"
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define TILE 32                 /* rows or keys of a tile: one key per lane */
#define WARPS 8
#define THREADS (WARPS * 32)
#define PER_WARP (TILE / WARPS) /* the rows of a tile each warp owns */
#define MAX_D 256               /* the widest head */
#define CHUNKS (MAX_D / 32)     /* a lane's columns of a head row */
#define WLD (TILE + 1)          /* row stride of a weight tile in shared memory */
#define STATE CUDA_ATTENTION_STATE

/* struct attention, worked out for the kernels. */
struct att {
	const void *q, *k, *v;     /* acts: floats, bf16 or fp16 */
	const int32_t *kv_start, *q_start;
	const int64_t *p_start;
	const uint8_t *mask;
	int C, H, d, ldq, ldkv;
	int tiles;                 /* tiles of TILE rows (or keys) of the longest sequence */
	float scale;               /* 1/sqrt(d) */
	uint32_t key, threshold;   /* dropout on the probabilities; threshold 0: none */
	float keep_scale;
	int band;                  /* a query's keys at most band rows from its own; 0: all */
	const int32_t *q_at;       /* the row in k of each row of q; NULL: the same */
};

/* One (sequence, head) pair as cpu_attention.c's head_task sees it. */
struct seq {
	int q0, nq;                /* its query rows */
	int k0, len;               /* its key rows */
	int real;                  /* one past the last real key; 0: none */
	int n;                     /* keys that take part: real, or len when none is */
	size_t probs;              /* the number of its first probability */
};

/* The (tile, head, sequence) of this block: grids are one-dimensional. */
static __device__ __forceinline__ void block_coords(const struct att *a, int *tile, int *h,
						    int *b)
{
	unsigned id = blockIdx.x;
	*tile = (int)(id % (unsigned)a->tiles);
	id /= (unsigned)a->tiles;
	*h = (int)(id % (unsigned)a->H);
	*b = (int)(id / (unsigned)a->H);
}

/* Sequence b, head h. The whole block calls it: it finds the last real key
 * with a block-wide reduction. */
static __device__ struct seq seq_of(const struct att *a, int b, int h)
{
	__shared__ int warp_real[WARPS];
	struct seq s;
	const int32_t *q = a->q_start ? a->q_start : a->kv_start;
	s.q0 = q[b];
	s.nq = q[b + 1] - s.q0;
	s.k0 = a->kv_start[b];
	s.len = a->kv_start[b + 1] - s.k0;
	s.real = s.len;
	if (a->mask) {
		const uint8_t *m = a->mask + s.k0;
		int last = 0;
		for (int j = threadIdx.x; j < s.len; j += THREADS)
			if (m[j])
				last = j + 1;
		for (int o = 16; o; o >>= 1)
			last = max(last, __shfl_xor_sync(FULL, last, o));
		if (threadIdx.x % 32 == 0)
			warp_real[threadIdx.x / 32] = last;
		__syncthreads();
		s.real = 0;
		for (int w = 0; w < WARPS; w++)
			s.real = max(s.real, warp_real[w]);
	}
	s.n = s.real ? s.real : s.len;
	s.probs = (size_t)a->p_start[b] + (size_t)h * s.nq * s.len;
	return s;
}

/* A TILE-row tile into shared s (row stride ld), as floats: rows r < rows are
 * d elements of g (row stride ldg), the others zeros, so that they add
 * nothing when weighted by zero. The whole block calls it. */
template <typename G>
static __device__ void load_rows(float *s, const G *g, size_t ldg, int rows, int d, int ld)
{
	for (int e = threadIdx.x; e < TILE * d; e += THREADS) {
		int r = e / d, c = e % d;
		s[r * ld + c] = r < rows ? as_float(g[(size_t)r * ldg + c]) : 0.0f;
	}
}

/* A TILE x TILE tile of a matrix shaped as probs (row stride T, a
 * sequence's length) at w, whose element (i, j) is taken for i < ni, j < nj
 * (zero elsewhere), times its dropout factor when drop is set: the draw
 * numbered base + i*T + j, base
 * being w's offset in probs, as the CPU numbers it. Stored at s[i][j], or at
 * s[j][i] when trans (row stride WLD). The whole block calls it. */
static __device__ void load_weights(float *s, const float *w, size_t base, int T, int ni, int nj,
				    int trans, int drop, const struct att *a)
{
	for (int e = threadIdx.x; e < TILE * TILE; e += THREADS) {
		int i = e / TILE, j = e % TILE;
		float x = 0.0f;
		if (i < ni && j < nj) {
			size_t off = (size_t)i * T + j;
			x = w[off];
			if (drop)
				x *= dropout_hash(a->key, (uint32_t)(base + off)) >= a->threshold ?
				     a->keep_scale : 0.0f;
		}
		s[trans ? j * WLD + i : i * WLD + j] = x;
	}
}

/* acc[r] = row r of the warp's rows x (stride ld) dotted with row lane of y. */
static __device__ __forceinline__ void warp_dots(float acc[PER_WARP], const float *x,
						 const float *y, int d, int ld)
{
	const float *yl = y + (threadIdx.x % 32) * ld;
#pragma unroll
	for (int r = 0; r < PER_WARP; r++)
		acc[r] = 0.0f;
	for (int t = 0; t < d; t++) {
		float yv = yl[t];
#pragma unroll
		for (int r = 0; r < PER_WARP; r++)
			acc[r] += x[r * ld + t] * yv;
	}
}

/* acc[r][c] += sum over m < TILE, in order, of w[r][m] (the warp's rows of a
 * weight tile) times y[m][lane + 32c] (rows of stride ld). */
static __device__ __forceinline__ void warp_weighted_sum(float acc[PER_WARP][CHUNKS],
							 const float *w, const float *y, int d,
							 int ld)
{
	int lane = threadIdx.x % 32;
	for (int m = 0; m < TILE; m++) {
		float yv[CHUNKS];
#pragma unroll
		for (int c = 0; c < CHUNKS; c++) {
			int col = lane + 32 * c;
			yv[c] = c * 32 < d && col < d ? y[m * ld + col] : 0.0f;
		}
#pragma unroll
		for (int r = 0; r < PER_WARP; r++) {
			float wv = w[r * WLD + m];
#pragma unroll
			for (int c = 0; c < CHUNKS; c++)
				if (c * 32 < d)
					acc[r][c] += wv * yv[c];
		}
	}
}

/* Rows i < rows of out (stride ld, d wide) from the warp's acc times scale,
 * in out's type; rows from live on get zeros. */
template <typename O>
static __device__ __forceinline__ void store_rows(O *out, size_t ld,
						  float acc[PER_WARP][CHUNKS], int rows, int live,
						  float scale, int d)
{
	int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * PER_WARP;
#pragma unroll
	for (int r = 0; r < PER_WARP; r++) {
		int i = w0 + r;
		if (i >= rows)
			continue;
#pragma unroll
		for (int c = 0; c < CHUNKS; c++) {
			int col = lane + 32 * c;
			if (col < d)
				store(out + (size_t)i * ld + col, i < live ? acc[r][c] * scale : 0.0f);
		}
	}
}

/* The keys [lo, hi) a row takes part with, of the n that do: all, or
 * those of the band (cpu_attention.c's band_keys); real: whether one of
 * them is real (else the row attends to them uniformly and its scores get
 * no gradient). */
struct keys {
	int lo, hi, real, band;
};

/* The keys a row without a real one attends to uniformly: all len, or
 * the band's (none where it has none). */
static __device__ __forceinline__ void uniform_keys(struct keys k, int len, int *lo, int *hi)
{
	*lo = k.band ? k.lo : 0;
	*hi = k.band ? k.hi : len;
}

/* One warp: scores p[0..n) of a row in, probabilities p[0..len) out, as the
 * CPU's masked_softmax_row over the keys k, with the maximum and 1/sum into
 * st[STATE]. A band's maximum reads scores other lanes wrote; past it lane
 * l touches p[j] only for j = l mod 32 below n, the elements it wrote. */
static __device__ void softmax_row(float *p, float *st, const uint8_t *m, int n, int len, struct keys k)
{
	int lane = threadIdx.x % 32;
	__syncwarp();
	if (!k.real) {
		int lo, hi;
		uniform_keys(k, len, &lo, &hi);
		float u = hi > lo ? 1.0f / (hi - lo) : 0.0f;
		for (int j = lane; j < len; j += 32)
			p[j] = j >= lo && j < hi ? u : 0.0f;
		if (!lane)
			st[0] = -INFINITY, st[1] = u;
		return;
	}
	float mx = -INFINITY;
	for (int j = k.lo + lane; j < k.hi; j += 32)
		if (!m || m[j])
			mx = fmaxf(mx, p[j]);
	mx = warp_max(mx);
	float sum = 0.0f;
	for (int j = lane; j < n; j += 32) {
		float e = j >= k.lo && j < k.hi && (!m || m[j]) ? expf(p[j] - mx) : 0.0f;
		p[j] = e;
		sum += e;
	}
	float inv = 1.0f / warp_sum(sum);
	for (int j = lane; j < n; j += 32)
		p[j] *= inv;
	for (int j = n + lane; j < len; j += 32)
		p[j] = 0.0f;
	if (!lane)
		st[0] = mx, st[1] = inv;
}

/* One warp: softmax_row's probabilities again from the same scores and its
 * statistics st, with the same bits. */
static __device__ void softmax_again_row(float *p, const float *st, const uint8_t *m, int n,
					 int len, struct keys k)
{
	int lane = threadIdx.x % 32;
	float mx = st[0], inv = st[1];
	if (!k.real) {
		int lo, hi;
		uniform_keys(k, len, &lo, &hi);
		for (int j = lane; j < len; j += 32)
			p[j] = j >= lo && j < hi ? inv : 0.0f;
		return;
	}
	for (int j = lane; j < n; j += 32) {
		float e = j >= k.lo && j < k.hi && (!m || m[j]) ? expf(p[j] - mx) : 0.0f;
		p[j] = e * inv;
	}
	for (int j = n + lane; j < len; j += 32)
		p[j] = 0.0f;
}

/* One warp: the gradient of a row of dropped probabilities dp[0..n) in, that
 * of its scores out, as the CPU's softmax_dropout_backward_row: through the
 * dropout (its draws numbered base + j), then ds = p (dp - sum(p dp)), or 0
 * when no key is real. Lane l touches dp[j] only for j = l mod 32. */
static __device__ void softmax_backward_row(float *dp, const float *p, size_t base, int n,
					    int real, const struct att *a)
{
	int lane = threadIdx.x % 32;
	if (!real) {
		for (int j = lane; j < n; j += 32)
			dp[j] = 0.0f;
		return;
	}
	float dot = 0.0f;
	for (int j = lane; j < n; j += 32) {
		float g = dp[j];
		if (a->threshold) {
			g *= dropout_hash(a->key, (uint32_t)(base + j)) >= a->threshold ?
			     a->keep_scale : 0.0f;
			dp[j] = g;
		}
		dot += p[j] * g;
	}
	dot = warp_sum(dot);
	for (int j = lane; j < n; j += 32)
		dp[j] = p[j] * (dp[j] - dot);
}

/* A block's tile of query rows of one (sequence, head), for the forward
 * and the backward by rows. */
struct qtile {
	struct seq s;
	int h, r0, rows;           /* rows r0.. of the sequence's queries, rows of them */
	int T;                     /* the sequence's length: the row stride of probs */
	int w0;                    /* the first of this warp's rows */
	size_t kv;                 /* where its keys and values start */
	size_t p0;                 /* where its first row starts in probs */
};

/* This block's tile; 0 when the sequence has no such rows. The whole block calls it. */
static __device__ int query_tile(const struct att *a, struct qtile *t)
{
	int tile, b;
	block_coords(a, &tile, &t->h, &b);
	t->s = seq_of(a, b, t->h);
	t->r0 = tile * TILE;
	if (t->r0 >= t->s.nq)
		return 0;
	t->rows = min(TILE, t->s.nq - t->r0);
	t->T = t->s.len;
	t->w0 = threadIdx.x / 32 * PER_WARP;
	t->kv = (size_t)t->s.k0 * a->ldkv + (size_t)t->h * a->d;
	t->p0 = t->s.probs + (size_t)t->r0 * t->T;
	return 1;
}

/* One warp: the keys of the tile's row r. */
static __device__ struct keys row_keys(const struct att *a, const struct qtile *t, int r)
{
	struct keys k = { 0, t->s.n, t->s.real != 0, a->band != 0 };
	if (!a->band)
		return k;
	int i = t->s.q0 + t->r0 + r, at = (a->q_at ? a->q_at[i] : i) - t->s.k0;
	k.lo = max(at - a->band, 0);
	k.hi = min(at + a->band + 1, t->s.n);
	if (k.hi <= k.lo)
		k.hi = k.lo = 0;
	const uint8_t *m = a->mask ? a->mask + t->s.k0 : NULL;
	int any = 0;
	for (int j = k.lo + threadIdx.x % 32; j < k.hi; j += 32)
		any |= !m || m[j];
	k.real = __any_sync(FULL, any);
	return k;
}

/* out (shaped as probs, at the tile's first row) = scale * X Y^T for keys
 * below n: X the tile's rows of x (stride ldx), Y the keys' rows of y (the
 * sequence's keys or values). xs and ys are shared row tiles. */
template <typename X, typename Y>
static __device__ void tile_dot_keys(float *out, const X *x, size_t ldx, const Y *y, float scale,
				     float *xs, float *ys, const struct att *a, const struct qtile *t)
{
	int d = a->d, ld = d | 1, n = t->s.n, lane = threadIdx.x % 32;
	load_rows(xs, x + (size_t)(t->s.q0 + t->r0) * ldx + (size_t)t->h * d, ldx, t->rows, d, ld);
	for (int j0 = 0; j0 < n; j0 += TILE) {
		__syncthreads();
		load_rows(ys, y + t->kv + (size_t)j0 * a->ldkv, a->ldkv, min(TILE, n - j0), d, ld);
		__syncthreads();
		float acc[PER_WARP];
		warp_dots(acc, xs + t->w0 * ld, ys, d, ld);
		int j = j0 + lane;
#pragma unroll
		for (int r = 0; r < PER_WARP; r++)
			if (t->w0 + r < t->rows && j < n)
				out[(size_t)(t->w0 + r) * t->T + j] = acc[r] * scale;
	}
}

/* acc = W Y over keys below n: W the tile's rows of w (shaped as probs, at
 * the tile's first row; times the dropout factors when drop is set), Y the
 * keys' rows of y. ys and ws are shared tiles; the barrier at the top of
 * each key tile makes what the block wrote to w before visible. */
template <typename Y>
static __device__ void tile_weigh_keys(float acc[PER_WARP][CHUNKS], const float *w, int drop, const Y *y,
				       float *ys, float *ws, const struct att *a, const struct qtile *t)
{
	int d = a->d, ld = d | 1, n = t->s.n;
	for (int j0 = 0; j0 < n; j0 += TILE) {
		__syncthreads();
		load_rows(ys, y + t->kv + (size_t)j0 * a->ldkv, a->ldkv, min(TILE, n - j0), d, ld);
		load_weights(ws, w + j0, t->p0 + j0, t->T, t->rows, min(TILE, n - j0), 0, drop, a);
		__syncthreads();
		warp_weighted_sum(acc, ws + t->w0 * WLD, ys, d, ld);
	}
}

/* The statistics of the tile's row r (of the sequence's queries). */
static __device__ __forceinline__ size_t state_at(const struct att *a, const struct qtile *t, int r)
{
	return STATE * (((size_t)t->s.q0 + t->r0 + r) * a->H + t->h);
}

/* Forward, one block per (sequence, head, tile of 32 query rows): scores
 * into probs, the softmax there, then ctx = dropout(P) V. Dynamic shared
 * memory: the query tile, a key or value tile, a weight tile. */
template <typename A>
static __global__ void __launch_bounds__(THREADS)
attention_forward_kernel(A *ctx, float *state, float *probs, struct att a)
{
	const A *q = (const A *)a.q, *k = (const A *)a.k, *v = (const A *)a.v;
	extern __shared__ float sh[];
	int ld = a.d | 1;
	float *qs = sh, *ys = sh + TILE * ld, *ws = ys + TILE * ld;
	struct qtile t;
	if (!query_tile(&a, &t))
		return;
	float *pr = probs + t.p0;

	/* scores = Q K^T / sqrt(d) for keys below n */
	tile_dot_keys(pr, q, a.ldq, k, a.scale, qs, ys, &a, &t);

	/* each warp's rows to probabilities */
	const uint8_t *m = a.mask ? a.mask + t.s.k0 : NULL;
	for (int r = 0; r < PER_WARP; r++)
		if (t.w0 + r < t.rows)
			softmax_row(pr + (size_t)(t.w0 + r) * t.T, state + state_at(&a, &t, t.w0 + r), m,
				    t.s.n, t.T, row_keys(&a, &t, t.w0 + r));

	/* ctx = dropout(P) V */
	float acc[PER_WARP][CHUNKS] = {};
	tile_weigh_keys(acc, pr, a.threshold != 0, v, ys, ws, &a, &t);
	store_rows(ctx + (size_t)(t.s.q0 + t.r0) * a.C + (size_t)t.h * a.d, a.C, acc, t.rows, t.rows, 1.0f,
		   a.d);
}

/* Backward by query rows, one block per (sequence, head, tile of 32 query
 * rows): P again into probs from the scores and the forward's statistics,
 * dP = dctx V^T into ds (laid out as probs), dS in its place, then
 * dq = dS K / sqrt(d). Shared memory as the forward's. */
template <typename A>
static __global__ void __launch_bounds__(THREADS)
attention_backward_rows_kernel(A *dq, float *ds, float *probs, const float *dctx,
			       const float *state, struct att a)
{
	const A *q = (const A *)a.q, *k = (const A *)a.k, *v = (const A *)a.v;
	extern __shared__ float sh[];
	int ld = a.d | 1;
	float *xs = sh, *ys = sh + TILE * ld, *ws = ys + TILE * ld;
	struct qtile t;
	if (!query_tile(&a, &t))
		return;
	float *dsr = ds + t.p0, *pr = probs + t.p0;

	/* P as the forward made it */
	tile_dot_keys(pr, q, a.ldq, k, a.scale, xs, ys, &a, &t);
	const uint8_t *m = a.mask ? a.mask + t.s.k0 : NULL;
	for (int r = 0; r < PER_WARP; r++)
		if (t.w0 + r < t.rows)
			softmax_again_row(pr + (size_t)(t.w0 + r) * t.T, state + state_at(&a, &t, t.w0 + r),
					  m, t.s.n, t.T, row_keys(&a, &t, t.w0 + r));
	__syncthreads();

	/* dP = dctx V^T for keys below n */
	tile_dot_keys(dsr, dctx, a.C, v, 1.0f, xs, ys, &a, &t);

	/* through dropout and softmax, each warp its rows */
	for (int r = 0; r < PER_WARP; r++) {
		size_t off = (size_t)(t.w0 + r) * t.T;
		if (t.w0 + r < t.rows)
			softmax_backward_row(dsr + off, pr + off, t.p0 + off, t.s.n, row_keys(&a, &t, t.w0 + r).real,
					     &a);
	}

	/* dq = dS K / sqrt(d) */
	float acc[PER_WARP][CHUNKS] = {};
	tile_weigh_keys(acc, dsr, 0, k, ys, ws, &a, &t);
	store_rows(dq + (size_t)(t.s.q0 + t.r0) * a.ldq + (size_t)t.h * a.d, a.ldq, acc, t.rows, t.rows,
		   a.scale, a.d);
}

/* Backward by keys, one block per (sequence, head, tile of 32 keys): over
 * the query rows in order, dv = dropout(P)^T dctx and dk = dS^T Q / sqrt(d);
 * keys from n on, and all keys of a sequence without queries, get zeros.
 * Dynamic shared memory: a dctx tile, a query tile, two weight tiles. */
template <typename A>
static __global__ void __launch_bounds__(THREADS)
attention_backward_keys_kernel(A *dk, A *dv, const float *ds, const float *dctx,
			       const float *probs, struct att a)
{
	extern __shared__ float sh[];
	int d = a.d, ld = d | 1;
	float *cs = sh, *qs = sh + TILE * ld, *pw = qs + TILE * ld, *sw = pw + TILE * WLD;
	int tile, h, b;
	block_coords(&a, &tile, &h, &b);
	struct seq s = seq_of(&a, b, h);
	int T = s.len, j0 = tile * TILE;   /* T: the row stride of probs */
	if (j0 >= T)
		return;
	int keys = min(TILE, T - j0);
	int live = s.nq ? max(0, min(TILE, s.n - j0)) : 0;   /* keys with a gradient */
	int w0 = threadIdx.x / 32 * PER_WARP;
	float accv[PER_WARP][CHUNKS] = {}, acck[PER_WARP][CHUNKS] = {};

	for (int i0 = 0; live && i0 < s.nq; i0 += TILE) {
		int ni = min(TILE, s.nq - i0);
		size_t p0 = s.probs + (size_t)i0 * T + j0;
		__syncthreads();
		load_rows(cs, dctx + (size_t)(s.q0 + i0) * a.C + (size_t)h * d, a.C, ni, d, ld);
		load_rows(qs, (const A *)a.q + (size_t)(s.q0 + i0) * a.ldq + (size_t)h * d, a.ldq, ni, d,
			  ld);
		load_weights(pw, probs + p0, p0, T, ni, live, 1, a.threshold != 0, &a);
		load_weights(sw, ds + p0, p0, T, ni, live, 1, 0, &a);
		__syncthreads();
		warp_weighted_sum(accv, pw + w0 * WLD, cs, d, ld);
		warp_weighted_sum(acck, sw + w0 * WLD, qs, d, ld);
	}
	size_t kv = ((size_t)s.k0 + j0) * a.ldkv + (size_t)h * d;
	store_rows(dv + kv, a.ldkv, accv, keys, live, 1.0f, d);
	store_rows(dk + kv, a.ldkv, acck, keys, live, a.scale, d);
}

/* Dynamic shared memory for two row tiles and `weights` weight tiles. */
static size_t shared_need(int d, int weights)
{
	return sizeof(float) * ((size_t)2 * TILE * (d | 1) + (size_t)weights * TILE * WLD);
}

int cuda_attention_widest(void)
{
	static int widest;
	if (!widest) {
		int dev, most;
		CUDA_CHECK(cudaGetDevice(&dev));
		CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
		widest = MAX_D;
		while (widest > 1 && shared_need(widest, 2) > (size_t)most)
			widest--;
	}
	return widest;
}

static struct att att_of(const struct attention *a)
{
	struct att t;
	memset(&t, 0, sizeof t);   /* its padding too: a graph's trace compares the bytes */
	t.band = a->band, t.q_at = a->q_at;
	t.q = a->q, t.k = a->k, t.v = a->v;
	t.kv_start = a->kv_start, t.q_start = a->q_start, t.p_start = a->p_start;
	t.mask = a->mask;
	t.C = a->C, t.H = a->H, t.d = a->C / a->H;
	t.ldq = a->ldq, t.ldkv = a->ldkv;
	t.tiles = (a->T + TILE - 1) / TILE;
	t.scale = 1.0f / sqrtf((float)t.d);
	t.threshold = dropout_threshold(a->p);
	t.key = dropout_key(a->seed);
	t.keep_scale = 1.0f / (1.0f - a->p);
	if (t.d < 1 || t.d > cuda_attention_widest())
		die("cuda attention: heads %d wide; the CUDA kernels take 1 to %d on this GPU", t.d,
		    cuda_attention_widest());
	return t;
}

/* Blocks for every (sequence, head, tile); 0 when there is nothing to do. */
static unsigned blocks_of(const struct att *t, int B)
{
	size_t n = (size_t)t->tiles * t->H * B;
	if (n > INT_MAX)
		die("cuda attention: %zu blocks of work are more than one launch takes", n);
	return (unsigned)n;
}

/* shared_need, let past the default 48 KiB when wide heads need it. */
static size_t shared_bytes(const void *kernel, int d, int weights)
{
	size_t bytes = shared_need(d, weights);
	if (bytes > 48 * 1024)
		CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
						(int)bytes));
	return bytes;
}

/* The probabilities and the backward's dS, each laid out as probs and
 * grown to n floats: grown, never shrunk. */
static void *scratch_buf;
static size_t scratch_cap;

static float *scratch(size_t n)
{
	return (float *)cuda_grow(&scratch_buf, &scratch_cap, 2 * n * sizeof(float));
}

/* Floats of each of the two scratches: a sequence has at most T keys and T
 * query rows; T rounded up to 64, as a CUDA graph's key rounds it, so that
 * the scratch does not grow between passes of one graph. */
static size_t scratch_floats(int B, int T, int H)
{
	size_t t = ((size_t)T + 63) / 64 * 64;
	return (size_t)B * t * H * t;
}

double cuda_attention_scratch(int B, int T, int C, int H)
{
	(void)C;
	return 2.0 * sizeof(float) * scratch_floats(B, T, H);
}

template <typename A>
static void forward(A *ctx, float *state, const struct attention *a)
{
	struct att t = att_of(a);
	unsigned blocks = blocks_of(&t, a->B);
	if (!blocks)
		return;
	float *probs = scratch(scratch_floats(a->B, a->T, a->H));
	size_t smem = shared_bytes((const void *)attention_forward_kernel<A>, t.d, 1);
	CUDA_LAUNCH(attention_forward_kernel<A>, blocks, THREADS, smem, ctx, state, probs, t);
}

template <typename A>
static void backward(A *dq, A *dk, A *dv, const float *dctx, const float *state,
		     const struct attention *a)
{
	struct att t = att_of(a);
	unsigned blocks = blocks_of(&t, a->B);
	if (!blocks)
		return;
	size_t n = scratch_floats(a->B, a->T, a->H);
	float *probs = scratch(n), *ds = probs + n;
	size_t smem = shared_bytes((const void *)attention_backward_rows_kernel<A>, t.d, 1);
	CUDA_LAUNCH(attention_backward_rows_kernel<A>, blocks, THREADS, smem, dq, ds, probs, dctx,
		state, t);
	smem = shared_bytes((const void *)attention_backward_keys_kernel<A>, t.d, 2);
	CUDA_LAUNCH(attention_backward_keys_kernel<A>, blocks, THREADS, smem, dk, dv, ds, dctx,
		probs, t);
}

static long runs[ATTENTION_KERNELS];

long cuda_attention_runs(enum attention_kernel k)
{
	return runs[k];
}

void cuda_attention_forward(struct act *ctx, float *state, const struct attention *a)
{
	forward((float *)ctx, state, a);
	runs[ATT_OWN]++;
}

void cuda_attention_backward(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			     const float *state, const struct attention *a)
{
	backward((float *)dq, (float *)dk, (float *)dv, dctx, state, a);
	runs[ATT_OWN]++;
}

/* bf16 (half 0) or fp16 acts: cuDNN where it takes the call, else the own kernel */
template <typename A>
static void forward_half(struct act *ctx, float *state, const struct attention *a, int half)
{
	enum attention_kernel k = a->band ? ATT_OWN : cuda_sdpa_forward(ctx, state, a, half);
	if (k == ATT_OWN)
		forward((A *)ctx, state, a);
	runs[k]++;
}

template <typename A>
static void backward_half(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			  const float *state, const struct attention *a, int half)
{
	enum attention_kernel k = a->band ? ATT_OWN : cuda_sdpa_backward(dq, dk, dv, dctx, state, a, half);
	if (k == ATT_OWN)
		backward((A *)dq, (A *)dk, (A *)dv, dctx, state, a);
	runs[k]++;
}

void cuda_attention_forward_bf16(struct act *ctx, float *state, const struct attention *a)
{
	forward_half<bf16>(ctx, state, a, 0);
}

void cuda_attention_backward_bf16(struct act *dq, struct act *dk, struct act *dv,
				  const float *dctx, const float *state, const struct attention *a)
{
	backward_half<bf16>(dq, dk, dv, dctx, state, a, 0);
}

void cuda_attention_forward_fp16(struct act *ctx, float *state, const struct attention *a)
{
	forward_half<f16>(ctx, state, a, 1);
}

void cuda_attention_backward_fp16(struct act *dq, struct act *dk, struct act *dv,
				  const float *dctx, const float *state, const struct attention *a)
{
	backward_half<f16>(dq, dk, dv, dctx, state, a, 1);
}

/* ---- cuDNN's attention's helpers (cuda_sdpa.cpp) ---- */

/* Per sequence b < B (of Bp, the rest empty): its query rows and real keys,
 * and the ragged offsets of Q, K|V, O and the statistics. One warp a
 * sequence finds its last real key. */
static __global__ void sdpa_indices_kernel(int32_t *seq_q, int32_t *seq_kv, int32_t *off_q,
					   int32_t *off_kv, int32_t *off_o, int32_t *off_st,
					   const int32_t *kv_start, const int32_t *q_start,
					   const uint8_t *mask, int B, int Bp, int ldq, int ldkv, int C, int H)
{
	int b = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (b > Bp)
		return;
	const int32_t *qs = q_start ? q_start : kv_start;
	int c = b < B ? b : B;   /* past the last sequence: empty ones at the end */
	int k0 = kv_start[c], q0 = qs[c];
	if (!lane)
		off_q[b] = q0 * ldq, off_kv[b] = k0 * ldkv, off_o[b] = q0 * C, off_st[b] = q0 * H;
	if (b == Bp)
		return;
	int len = b < B ? kv_start[b + 1] - k0 : 0, last = 0;
	for (int j = lane; j < len; j += 32)
		if (!mask || mask[k0 + j])
			last = j + 1;
	for (int o = 16; o; o >>= 1)
		last = max(last, __shfl_xor_sync(FULL, last, o));
	if (!lane) {
		seq_q[b] = b < B ? qs[b + 1] - q0 : 0;
		seq_kv[b] = last ? last : len;
	}
}

void cuda_sdpa_indices(int32_t *out, size_t stride, const struct attention *a, int Bp)
{
	int32_t *o = out;
	CUDA_LAUNCH(sdpa_indices_kernel, (Bp + 1 + WARPS - 1) / WARPS, THREADS, 0,
		o, o + stride, o + 2 * stride, o + 3 * stride, o + 4 * stride, o + 5 * stride, a->kv_start,
		a->q_start, a->mask, a->B, Bp, a->ldq, a->ldkv, a->C, a->H);
}

static __global__ void sdpa_seed_kernel(int64_t *rng, int64_t seed)
{
	rng[0] = seed, rng[1] = 0;
}

void cuda_sdpa_seed(int64_t *rng, uint64_t seed)
{
	CUDA_LAUNCH(sdpa_seed_kernel, 1, 1, 0, rng, (int64_t)(seed & 0x7fffffffffffffffull));
}

static __global__ void state_from_lse_kernel(float *state, const float *lse, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		state[STATE * i] = lse[i];
		state[STATE * i + 1] = 1.0f;
	}
}

/* lse = maximum + log(sum) of either forward's state: cuDNN's (lse, 1) or the
 * own kernel's (maximum, 1/sum) */
static __global__ void lse_from_state_kernel(float *lse, const float *state, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		lse[i] = state[STATE * i] - logf(state[STATE * i + 1]);
}

static unsigned grid_of(size_t n)
{
	size_t b = cuda_blocks(n);
	return b > 16384 ? 16384u : (unsigned)b;
}

void cuda_state_from_lse(float *state, const float *lse, size_t n)
{
	if (n) {
		CUDA_LAUNCH(state_from_lse_kernel, grid_of(n), THREADS, 0, state, lse, n);
	}
}

void cuda_lse_from_state(float *lse, const float *state, size_t n)
{
	if (n) {
		CUDA_LAUNCH(lse_from_state_kernel, grid_of(n), THREADS, 0, lse, state, n);
	}
}

/* A block a sequence: zeroes its dk and dv rows past its last real key, or
 * all of them where it has no query rows (2-byte acts). */
static __global__ void zero_skipped_kernel(uint16_t *dk, uint16_t *dv, const int32_t *seq_q,
					   const int32_t *seq_kv, const int32_t *kv_start, int ld, int C)
{
	int b = blockIdx.x, k0 = kv_start[b], len = kv_start[b + 1] - k0;
	int from = seq_q[b] ? seq_kv[b] : 0;
	size_t n = (size_t)(len - from) * C;
	for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
		size_t at = (size_t)(k0 + from + (int)(i / C)) * ld + i % C;
		dk[at] = 0;
		dv[at] = 0;
	}
}

void cuda_sdpa_zero_skipped(struct act *dk, struct act *dv, const int32_t *seq_q,
			    const int32_t *seq_kv, const struct attention *a)
{
	CUDA_LAUNCH(zero_skipped_kernel, a->B, THREADS, 0, (uint16_t *)dk, (uint16_t *)dv, seq_q,
		seq_kv, a->kv_start, a->ldkv, a->C);
}
