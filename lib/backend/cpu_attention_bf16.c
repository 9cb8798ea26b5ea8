/* The bf16 path's attention kernels (ts-train --precision bf16), on
 * AVX512-BF16 and AVX-512:
 * - the heads' small GEMMs: one thread's row-major C = alpha op(A) op(B) +
 *   beta C with float operands rounded to bf16 (bf16 ones as they lie) and
 *   fp32 sums. Each operand is packed as pairs of bf16 along the summed
 *   dimension, one 32-bit word a pair; the kernel broadcasts a pair of A and
 *   multiplies it with 16 of B's columns at once. On AMX-BF16 the same
 *   packing feeds the tiles (A's rows of 16 pairs, B's 16 pairs of 16
 *   columns), a 32x32 block of C four tiles;
 * - the masked softmax of a row of scores and its backward, 16 keys at a
 *   time. */
#include "backend/cpu_ops.h"
#include "util/err.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Each thread's packing space, made before the parallel region (die() must
 * not run inside one). */
struct pack_space {
	uint32_t *a, *b, *rows, *v;
	size_t cap;                /* words in each */
};

static struct pack_space *spaces;
static int nspaces;

static int round_up(int x, int m)
{
	return (x + m - 1) / m * m;
}

void gemm_bf16_reserve(int dim)
{
	int threads = omp_get_max_threads();
	if (threads > nspaces) {
		spaces = xrealloc(spaces, sizeof *spaces * (size_t)threads);
		memset(spaces + nspaces, 0, sizeof *spaces * (size_t)(threads - nspaces));
		nspaces = threads;
	}
	int pairs = round_up((dim + 1) / 2, 16);   /* and 32 rows of scores for head_forward_amx */
	size_t need = (size_t)round_up(dim, 32) * (size_t)(pairs > 32 ? pairs : 32);
	for (int t = 0; t < threads; t++) {
		struct pack_space *s = &spaces[t];
		if (s->cap >= need)
			continue;
		free(s->a), free(s->b), free(s->rows), free(s->v);
		s->a = xmalloc(need * sizeof *s->a);
		s->b = xmalloc(need * sizeof *s->b);
		s->rows = xmalloc(need * sizeof *s->rows);
		s->v = xmalloc(need * sizeof *s->v);
		s->cap = need;
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "backend/cpu_avx512.h"

enum { MR = 8 };               /* rows of C a kernel step makes; 32 columns */

/* Lane j: the pair (lo[j], hi[j]) in bf16, rounded to nearest even. */
BF16 static inline __m512i interleave_pairs(__m512 lo, __m512 hi)
{
	static const uint16_t order[32] = { 0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
					    21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
					    11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
	__m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
	return _mm512_permutexvar_epi16(_mm512_loadu_si512(order), both);
}

/* dst[r * K2p + kk] = (X[r][2kk], X[r][2kk+1]) for R rows of K floats (the
 * pairs along each row, K2p words a row), the words past K and rows
 * R..R_pad zero. */
BF16 static void pack_along_rows(uint32_t *dst, const float *X, int ld, int R, int R_pad, int K, int K2p)
{
	int K2 = (K + 1) / 2;
	for (int r = 0; r < R; r++) {
		const float *x = X + (size_t)r * ld;
		uint32_t *d = dst + (size_t)r * K2p;
		for (int k = 0; k < K; k += 32) {
			__m512 lo = load16(x + k, first(K - k));
			__m512 hi = load16(x + k + 16, first(K - k - 16));
			__m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
			_mm512_mask_storeu_epi32(d + k / 2, first(K2 - k / 2), pairs);
		}
		memset(d + K2, 0, sizeof *d * (size_t)(K2p - K2));
	}
	memset(dst + (size_t)R * K2p, 0, sizeof *dst * (size_t)(R_pad - R) * K2p);
}

/* dst[kk * R_pad + r] = (X[2kk][r], X[2kk+1][r]) for the R columns of K rows
 * of X (the pairs down each column), columns R..R_pad zero; R_pad a
 * multiple of 16. */
BF16 static void pack_down_columns(uint32_t *dst, const float *X, int ld, int R, int R_pad, int K)
{
	for (int kk = 0; kk < (K + 1) / 2; kk++) {
		const float *x0 = X + (size_t)2 * kk * ld, *x1 = x0 + ld;
		int two = 2 * kk + 1 < K;
		for (int r = 0; r < R_pad; r += 16) {
			__mmask16 m = first(R - r);
			__m512 lo = load16(x0 + r, m);
			__m512 hi = two ? load16(x1 + r, m) : _mm512_setzero_ps();
			_mm512_storeu_si512(dst + (size_t)kk * R_pad + r, interleave_pairs(lo, hi));
		}
	}
}

/* pack_along_rows over bf16s: their pairs as they lie. */
static void pack_along_rows_bf16(uint32_t *dst, const uint16_t *X, int ld, int R, int R_pad, int K,
				 int K2p)
{
	for (int r = 0; r < R; r++) {
		uint16_t *d = (uint16_t *)(dst + (size_t)r * K2p);
		memcpy(d, X + (size_t)r * ld, sizeof *d * (size_t)K);
		memset(d + K, 0, sizeof *d * (size_t)(2 * K2p - K));
	}
	memset(dst + (size_t)R * K2p, 0, sizeof *dst * (size_t)(R_pad - R) * K2p);
}

/* pack_down_columns over bf16s. */
BF16 static void pack_down_columns_bf16(uint32_t *dst, const uint16_t *X, int ld, int R, int R_pad,
					int K)
{
	for (int kk = 0; kk < (K + 1) / 2; kk++) {
		const uint16_t *x0 = X + (size_t)2 * kk * ld, *x1 = x0 + ld;
		int two = 2 * kk + 1 < K;
		for (int r = 0; r < R_pad; r += 16) {
			__mmask16 m = first(R - r);
			__m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x0 + r));
			__m512i hi = two ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x1 + r))
					 : _mm512_setzero_si512();
			_mm512_storeu_si512(dst + (size_t)kk * R_pad + r,
					    _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
		}
	}
}

/* An operand's R rows of K, packed as pack_along_rows does. */
static void pack_rows(uint32_t *dst, struct operand X, int R, int R_pad, int K, int K2p)
{
	if (X.bf16)
		pack_along_rows_bf16(dst, X.p, X.ld, R, R_pad, K, K2p);
	else
		pack_along_rows(dst, X.p, X.ld, R, R_pad, K, K2p);
}

/* An operand's R columns of K rows, packed as pack_down_columns does. */
static void pack_columns(uint32_t *dst, struct operand X, int R, int R_pad, int K)
{
	if (X.bf16)
		pack_down_columns_bf16(dst, X.p, X.ld, R, R_pad, K);
	else
		pack_down_columns(dst, X.p, X.ld, R, R_pad, K);
}

/* dst[kk * R_pad + r] = src[r * K2 + kk], columns R..R_pad zero. */
static void transpose_words(uint32_t *dst, const uint32_t *src, int R, int R_pad, int K2)
{
	for (int kk = 0; kk < K2; kk++) {
		uint32_t *d = dst + (size_t)kk * R_pad;
		for (int r = 0; r < R; r++)
			d[r] = src[(size_t)r * K2 + kk];
		memset(d + R, 0, sizeof *d * (size_t)(R_pad - R));
	}
}

/* C[M,N] = alpha A B + beta C over K2 pairs: A's pair (i, kk) at
 * a[i * a_row + kk * a_k] (rows up to M rounded up to MR there, zero past
 * M), B's 16 columns j.. of pair kk at b[kk * N_pad + j]. */
BF16 static void kernel(const uint32_t *a, size_t a_row, size_t a_k, const uint32_t *b, int N_pad,
			int M, int N, int K2, float alpha, float beta, float *C, int ldc)
{
	for (int i0 = 0; i0 < M; i0 += MR) {
		const uint32_t *ai = a + (size_t)i0 * a_row;
		for (int j0 = 0; j0 < N; j0 += 32) {
			__m512 acc[MR][2];
#pragma GCC unroll 8
			for (int r = 0; r < MR; r++)
				acc[r][0] = acc[r][1] = _mm512_setzero_ps();
			const uint32_t *bj = b + j0;
			for (int kk = 0; kk < K2; kk++, bj += N_pad) {
				__m512bh b0 = (__m512bh)_mm512_loadu_si512(bj);
				__m512bh b1 = (__m512bh)_mm512_loadu_si512(bj + 16);
#pragma GCC unroll 8
				for (int r = 0; r < MR; r++) {
					__m512bh p = (__m512bh)_mm512_set1_epi32(
						(int)ai[(size_t)r * a_row + (size_t)kk * a_k]);
					acc[r][0] = _mm512_dpbf16_ps(acc[r][0], p, b0);
					acc[r][1] = _mm512_dpbf16_ps(acc[r][1], p, b1);
				}
			}
			int rows = M - i0 < MR ? M - i0 : MR;
			for (int r = 0; r < rows; r++)
				for (int h = 0; h < 2 && j0 + 16 * h < N; h++) {
					float *c = C + (size_t)(i0 + r) * ldc + j0 + 16 * h;
					__mmask16 m = first(N - j0 - 16 * h);
					__m512 v = _mm512_mul_ps(_mm512_set1_ps(alpha), acc[r][h]);
					if (beta != 0.0f)
						v = _mm512_fmadd_ps(_mm512_set1_ps(beta),
								    load16(c, m), v);
					_mm512_mask_storeu_ps(c, m, v);
				}
		}
	}
}

/* Keys j.. (up to 16 of the first n) that are real. */
BF16 static inline __mmask16 real16(const uint8_t *mask, int j, int n)
{
	__mmask16 in = first(n - j);
	return _mm_mask_cmpneq_epi8_mask(in, _mm_maskz_loadu_epi8(in, mask + j), _mm_setzero_si128());
}

BF16 void softmax_row_bf16(float *p, const uint8_t *mask, int n, int len)
{
	__m512 mx = _mm512_set1_ps(-INFINITY);
	for (int j = 0; j < n; j += 16)
		mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), real16(mask, j, n),
							     p + j));
	float m = _mm512_reduce_max_ps(mx);
	if (m == -INFINITY) {
		for (int j = 0; j < len; j++)
			p[j] = 1.0f / len;
		return;
	}
	__m512 sum = _mm512_setzero_ps();
	for (int j = 0; j < n; j += 16) {
		__mmask16 real = real16(mask, j, n);
		__m512 x = load16(p + j, real);
		__m512 e = _mm512_maskz_mov_ps(real, exp16(_mm512_sub_ps(x, _mm512_set1_ps(m))));
		_mm512_mask_storeu_ps(p + j, first(n - j), e);
		sum = _mm512_add_ps(sum, e);
	}
	__m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
	for (int j = 0; j < n; j += 16) {
		__mmask16 in = first(n - j);
		store16(p + j, in, _mm512_mul_ps(load16(p + j, in), inv));
	}
	memset(p + n, 0, sizeof *p * (size_t)(len - n));
}

BF16 void softmax_backward_row_bf16(float *dp, const float *p, int n)
{
	__m512 dot = _mm512_setzero_ps();
	for (int j = 0; j < n; j += 16) {
		__mmask16 m = first(n - j);
		dot = _mm512_fmadd_ps(load16(p + j, m), load16(dp + j, m), dot);
	}
	__m512 sum = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
	for (int j = 0; j < n; j += 16) {
		__mmask16 m = first(n - j);
		__m512 d = _mm512_sub_ps(load16(dp + j, m), sum);
		store16(dp + j, m, _mm512_mul_ps(load16(p + j, m), d));
	}
}

/* op(B)'s N columns of K packed down the columns into s->b, N_pad a
 * row. */
static void pack_b(struct pack_space *s, char transb, struct operand B, int N, int N_pad, int K)
{
	if (transb == 'N') {
		pack_columns(s->b, B, N, N_pad, K);
	} else {
		int K2 = (K + 1) / 2;
		pack_rows(s->rows, B, N, N, K, K2);
		transpose_words(s->b, s->rows, N, N_pad, K2);
	}
}

void gemm_bf16(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	       struct operand B, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return;
	struct pack_space *s = &spaces[omp_get_thread_num()];
	int K2 = (K + 1) / 2, N_pad = round_up(N, 32);
	size_t a_row = 1, a_k = (size_t)round_up(M, 16);
	if (transa == 'N') {
		pack_rows(s->a, A, M, round_up(M, MR), K, K2);
		a_row = (size_t)K2, a_k = 1;
	} else {
		pack_columns(s->a, A, M, round_up(M, 16), K);
	}
	pack_b(s, transb, B, N, N_pad, K);
	kernel(s->a, a_row, a_k, s->b, N_pad, M, N, K2, alpha, beta, C, ldc);
}

#define AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* The tiles' shapes (palette 1): each 16 rows of 64 bytes. C's 32x32
 * block is tiles 0 to 3, two of A's 16 rows (4, 5), two of B's 16 columns
 * (6, 7). */
struct tile_config {
	uint8_t palette, start_row, reserved[14];
	uint16_t bytes[16];
	uint8_t rows[16];
};

/* Eight tiles of 16 rows of 64 bytes: 0 to 3 a 32x32 block of sums, 4 to 7
 * the rows and columns multiplied into it. */
AMX static void tiles_on(void)
{
	struct tile_config cfg = { .palette = 1 };
	for (int t = 0; t < 8; t++)
		cfg.rows[t] = 16, cfg.bytes[t] = 64;
	_tile_loadconfig(&cfg);
}

/* Tiles 0 to 3 (a 32x32 block) = A's 32 rows (a, K2p words a row) times
 * B's 32 columns (b, N_pad words a pair), over K2p pairs. */
AMX static void block_amx(const uint32_t *a, int K2p, const uint32_t *b, int N_pad)
{
	size_t a_stride = (size_t)K2p * 4, b_stride = (size_t)N_pad * 4;
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	for (int kk = 0; kk < K2p; kk += 16) {
		_tile_loadd(4, a + kk, a_stride);
		_tile_loadd(5, a + (size_t)16 * K2p + kk, a_stride);
		_tile_loadd(6, b + (size_t)kk * N_pad, b_stride);
		_tile_loadd(7, b + (size_t)kk * N_pad + 16, b_stride);
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
}

/* The block of tiles 0 to 3 into 32 rows of out, ld floats apart. */
AMX static void store_block(float *out, size_t ld)
{
	_tile_stored(0, out, ld * 4);
	_tile_stored(1, out + 16, ld * 4);
	_tile_stored(2, out + 16 * ld, ld * 4);
	_tile_stored(3, out + 16 * ld + 16, ld * 4);
}

/* kernel's work on the tiles: A's pair (i, kk) at a[i * K2p + kk] (rows up
 * to M rounded up to 32, zero past M), B's as kernel takes it, K2p pairs
 * of both a multiple of 16 (zero past K). */
AMX static void kernel_amx(const uint32_t *a, int K2p, const uint32_t *b, int N_pad, int M, int N,
			   float alpha, float beta, float *C, int ldc)
{
	tiles_on();
	float block[32 * 32];
	for (int i0 = 0; i0 < M; i0 += 32) {
		for (int j0 = 0; j0 < N; j0 += 32) {
			block_amx(a + (size_t)i0 * K2p, K2p, b + j0, N_pad);
			store_block(block, 32);
			int rows = M - i0 < 32 ? M - i0 : 32;
			for (int r = 0; r < rows; r++)
				for (int h = 0; h < 2 && j0 + 16 * h < N; h++) {
					float *c = C + (size_t)(i0 + r) * ldc + j0 + 16 * h;
					__mmask16 m = first(N - j0 - 16 * h);
					__m512 v = _mm512_mul_ps(_mm512_set1_ps(alpha),
								 _mm512_loadu_ps(block + r * 32 + 16 * h));
					if (beta != 0.0f)
						v = _mm512_fmadd_ps(_mm512_set1_ps(beta), load16(c, m), v);
					_mm512_mask_storeu_ps(c, m, v);
				}
		}
	}
	_tile_release();
}

void gemm_amx(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	      struct operand B, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return;
	struct pack_space *s = &spaces[omp_get_thread_num()];
	int K2 = (K + 1) / 2, K2p = round_up(K2, 16), N_pad = round_up(N, 32), M_pad = round_up(M, 32);
	if (transa == 'N') {
		pack_rows(s->a, A, M, M_pad, K, K2p);
	} else {   /* A's columns packed, then made rows (K2p words a row, zero past K2) */
		pack_columns(s->rows, A, M, M_pad, K);
		transpose_words(s->a, s->rows, K2, K2p, M_pad);
	}
	pack_b(s, transb, B, N, N_pad, K);
	memset(s->b + (size_t)K2 * N_pad, 0, sizeof *s->b * (size_t)(K2p - K2) * N_pad);
	kernel_amx(s->a, K2p, s->b, N_pad, M, N, alpha, beta, C, ldc);
}

/* The head's queries i0.. (rows of them, at most 32) as A's rows: K2p
 * words a row, zero past the head's width and past rows, up to 32. */
BF16 static void pack_queries(uint32_t *qa, const struct head_view *h, int i0, int rows, int K2p)
{
	for (int r = 0; r < 32; r++)
		for (int c = 0; c < 2 * K2p; c += 32) {
			int w = r < rows ? h->d - c : 0;
			__mmask32 m = w >= 32 ? ~0u : w <= 0 ? 0 : (1u << w) - 1;
			_mm512_storeu_si512(qa + (size_t)r * K2p + c / 2,
					    _mm512_maskz_loadu_epi16(m, h->q + (size_t)(i0 + r) * h->ldq + c));
		}
}

/* The head's keys as B's columns (the transpose of their rows of words):
 * K2p pairs of N_pad columns, zero past the head's width and past n. */
BF16 static void pack_keys(uint32_t *kp, const struct head_view *h, int K2p, int N_pad)
{
	int K2 = h->d / 2;
	__m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
					_mm512_set1_epi32(h->ldkv / 2));
	for (int j0 = 0; j0 < N_pad; j0 += 16) {
		__mmask16 m = first(h->n - j0);
		const int *row = (const int *)(h->k + (size_t)j0 * h->ldkv);
		for (int kk = 0; kk < K2; kk++)
			_mm512_storeu_si512(kp + (size_t)kk * N_pad + j0,
					    _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, row + kk, 4));
	}
	memset(kp + (size_t)K2 * N_pad, 0, sizeof *kp * (size_t)(K2p - K2) * N_pad);
}

/* 32 rows of raw scores (N_pad floats a row) from the packed
 * queries qa (K2p words a row) and keys kp. */
AMX static void scores_amx(float *S, const uint32_t *qa, int K2p, const uint32_t *kp, int N_pad)
{
	for (int j0 = 0; j0 < N_pad; j0 += 32) {
		block_amx(qa, K2p, kp + j0, N_pad);
		store_block(S + j0, (size_t)N_pad);
	}
}

/* 2^t to 6e-5 relative: 2^n times 2^f's Taylor polynomial to the fourth
 * power, n the whole number nearest t and f what is left, within 1/2.
 * Enough for a weight rounded to bf16 (2^-9 relative) and summed in floats. */
BF16 static inline __m512 exp2_weight(__m512 t)
{
	__m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 f = _mm512_sub_ps(t, n);
	__m512 p = _mm512_set1_ps(9.6181291e-3f);
	p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
	p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
	p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
	p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, n);
}

/* A row of raw scores s (n keys) to its softmax's weights before they are
 * divided by their sum, e^(scale (s - max)), rounded to bf16 in order into
 * w (pairs words, zero past n); returns the inverse of their sum. A row
 * with no real key weighs all n alike. */
BF16 static float weights_row(uint32_t *w, const float *s, const uint8_t *mask, int n, int pairs, float scale)
{
	__m512 mx = _mm512_set1_ps(-INFINITY);
	for (int j = 0; j < n; j += 16)
		mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, real16(mask, j, n), s + j));
	float m = _mm512_reduce_max_ps(mx);
	float k = scale * 1.44269504088896341f;   /* e^(scale x) = 2^(k x) */
	__m512 sum = _mm512_setzero_ps(), vk = _mm512_set1_ps(k), mk = _mm512_set1_ps(m * k);
	for (int j = 0; j < 2 * pairs; j += 32) {
		__m512 e[2];
		for (int h = 0; h < 2; h++) {
			__mmask16 real = real16(mask, j + 16 * h, n);
			if (m == -INFINITY)
				e[h] = _mm512_maskz_mov_ps(first(n - j - 16 * h), _mm512_set1_ps(1.0f));
			else
				e[h] = _mm512_maskz_mov_ps(real, exp2_weight(_mm512_fmsub_ps(
					_mm512_maskz_loadu_ps(real, s + j + 16 * h), vk, mk)));
			sum = _mm512_add_ps(sum, e[h]);
		}
		_mm512_storeu_si512(w + j / 2, (__m512i)_mm512_cvtne2ps_pbh(e[1], e[0]));
	}
	return 1.0f / _mm512_reduce_add_ps(sum);
}

/* The context of queries i0.. (rows of them): the weights wa (32 rows of
 * K2p words) times the packed values vp (d_pad columns), each row times
 * its inv, rounded into ctx. */
AMX static void context_amx(const struct head_view *h, const uint32_t *wa, int K2p, const uint32_t *vp,
			    int d_pad, const float *inv, int i0, int rows)
{
	float block[32 * 32];
	for (int c0 = 0; c0 < h->d; c0 += 32) {
		block_amx(wa, K2p, vp + c0, d_pad);
		store_block(block, 32);
		for (int r = 0; r < rows; r++)
			for (int c = c0; c < c0 + 32 && c < h->d; c += 16)
				store16_bf16(h->ctx + (size_t)(i0 + r) * h->ldc + c, first(h->d - c),
					     _mm512_mul_ps(_mm512_loadu_ps(block + r * 32 + c - c0),
							   _mm512_set1_ps(inv[r])));
	}
}

AMX void head_forward_amx(const struct head_view *h)
{
	struct pack_space *s = &spaces[omp_get_thread_num()];
	int d = h->d, n = h->n, K2pd = round_up(d / 2, 16), N_pad = round_up(n, 32);
	int K2k = (n + 1) / 2, K2pk = round_up(K2k, 16), d_pad = round_up(d, 32);
	pack_keys(s->b, h, K2pd, N_pad);
	pack_down_columns_bf16(s->v, h->v, h->ldkv, d, d_pad, n);
	memset(s->v + (size_t)K2k * d_pad, 0, sizeof *s->v * (size_t)(K2pk - K2k) * d_pad);
	tiles_on();
	float *S = (float *)s->rows, inv[32];
	for (int i0 = 0; i0 < h->nq; i0 += 32) {
		int rows = h->nq - i0 < 32 ? h->nq - i0 : 32;
		pack_queries(s->a, h, i0, rows, K2pd);
		scores_amx(S, s->a, K2pd, s->b, N_pad);
		for (int r = 0; r < rows; r++)   /* the weights over the queries, now read */
			inv[r] = weights_row(s->a + (size_t)r * K2pk, S + (size_t)r * N_pad, h->mask, n, K2pk,
					     h->scale);
		context_amx(h, s->a, K2pk, s->v, d_pad, inv, i0, rows);
	}
	_tile_release();
}
#else
void gemm_amx(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	      struct operand B, float beta, float *C, int ldc)
{
	(void)transa, (void)transb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)B,
		(void)beta, (void)C, (void)ldc;
	abort();                   /* bf16_amx is false off x86-64 */
}

void head_forward_amx(const struct head_view *h)
{
	(void)h;
	abort();                   /* bf16_amx is false off x86-64 */
}

void gemm_bf16(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	       struct operand B, float beta, float *C, int ldc)
{
	(void)transa, (void)transb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)B,
		(void)beta, (void)C, (void)ldc;
	abort();                   /* bf16_available is false off x86-64 */
}

void softmax_row_bf16(float *p, const uint8_t *mask, int n, int len)
{
	(void)p, (void)mask, (void)n, (void)len;
	abort();
}

void softmax_backward_row_bf16(float *dp, const float *p, int n)
{
	(void)dp, (void)p, (void)n;
	abort();
}
#endif
