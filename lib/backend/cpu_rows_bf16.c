/* The bf16 path's row kernels on AVX-512 (ts-train --precision bf16): the
 * residual LayerNorm, GELU and GELU's backward, which round their results
 * to bf16 for the next GEMM in the same pass, and the LayerNorm backward in
 * one pass over its rows. They compute in fp32, as cpu_ops.c's kernels do,
 * but not to the same bits: 1/x is rcp14 with a Newton step, and sums run
 * 16 lanes wide. */
#include "backend/cpu_ops.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "backend/cpu_avx512.h"

/* Phi(x) and e^(-x^2/2) as cpu_simd.h's normal_cdf_pdf takes them
 * (Abramowitz & Stegun 7.1.26 for the lower tail). */
BF16 static inline __m512 normal_cdf16(__m512 x, __m512 *e)
{
	__m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
	__m512 d = _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f));
	__m512 t = _mm512_rcp14_ps(d);
	t = _mm512_fmadd_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(1.0f)), t);
	__m512 p = _mm512_fmadd_ps(t, _mm512_set1_ps(1.061405429f), _mm512_set1_ps(-1.453152027f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
	p = _mm512_mul_ps(p, t);
	__m512 h = _mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f));
	/* zero below exp16's clamp, where x e^h (the slope's term) would grow with x */
	*e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(h, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), exp16(h));
	__m512 tail = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_set1_ps(0.5f)), *e);
	__mmask16 upper = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
	return _mm512_mask_sub_ps(tail, upper, _mm512_set1_ps(1.0f), tail);
}

/* Lane i: dropout's factor for element base + i (dropout.h's mask). */
BF16 static inline __m512 dropout16(uint32_t key, uint32_t base, uint32_t threshold, float scale)
{
	__m512i i = _mm512_add_epi32(_mm512_set1_epi32((int)base),
				     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
						       14, 15));
	__m512i x = _mm512_add_epi32(_mm512_mullo_epi32(i, _mm512_set1_epi32((int)0x9e3779b9u)),
				     _mm512_set1_epi32((int)key));
	x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 17));
	x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0xed5ad4bbu));
	x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 11));
	x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0xac4c1b51u));
	x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
	x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x31848babu));
	x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 14));
	__mmask16 keep = _mm512_cmpge_epu32_mask(x, _mm512_set1_epi32((int)threshold));
	return _mm512_maskz_mov_ps(keep, _mm512_set1_ps(scale));
}

BF16 void residual_layernorm_row_bf16(float *out, uint16_t *copy, float *sum, float *mean,
				      float *rstd, const float *res, const float *bias,
				      const float *w, const float *b, int C, float eps,
				      uint32_t key, uint32_t base, uint32_t threshold, float scale)
{
	__m512 acc = _mm512_setzero_ps();
	for (int j = 0; j < C; j += 16) {
		__mmask16 k = first(C - j);
		__m512 branch = _mm512_add_ps(load16(sum + j, k), load16(bias + j, k));
		if (threshold)
			branch = _mm512_mul_ps(branch,
					       dropout16(key, base + (uint32_t)j, threshold, scale));
		__m512 s = _mm512_add_ps(load16(res + j, k), branch);
		store16(sum + j, k, s);
		acc = _mm512_add_ps(acc, s);
	}
	float mu = _mm512_reduce_add_ps(acc) / C;
	__m512 m = _mm512_set1_ps(mu);
	acc = _mm512_setzero_ps();
	for (int j = 0; j < C; j += 16) {
		__mmask16 k = first(C - j);
		__m512 c = _mm512_maskz_sub_ps(k, load16(sum + j, k), m);
		acc = _mm512_fmadd_ps(c, c, acc);
	}
	float rs = 1.0f / sqrtf(_mm512_reduce_add_ps(acc) / C + eps);
	__m512 r = _mm512_set1_ps(rs);
	for (int j = 0; j < C; j += 16) {
		__mmask16 k = first(C - j);
		__m512 xh = _mm512_mul_ps(_mm512_sub_ps(load16(sum + j, k), m), r);
		__m512 y = _mm512_fmadd_ps(xh, load16(w + j, k), load16(b + j, k));
		store16(out + j, k, y);
		store16_bf16(copy + j, k, y);
	}
	*mean = mu;
	*rstd = rs;
}

/* GELU's output rounded to bf16, and its slope, for every bf16 input, by
 * its bits: where the input is bf16, a lookup (a gather from 128 KiB or 256
 * KiB, of which the values a layer meets take a few lines) in place of the
 * polynomials, with the same bits. One entry more in the first for the
 * gathers' 4-byte reads. */
static uint16_t gelu_table[65536 + 1];
static float gelu_slopes[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

/* GELU's slope at x, with Phi(x) and e^(-x^2/2) from normal_cdf16. */
BF16 static inline __m512 gelu_slope16(__m512 x, __m512 cdf, __m512 e)
{
	return _mm512_fmadd_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.39894228040143268f)), e, cdf);
}

BF16 static void fill_gelu_table(void)
{
	__m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	for (int i = 0; i < 65536; i += 16) {
		__m512i bits = _mm512_add_epi32(_mm512_set1_epi32(i), lane);
		__m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)), e, cdf = normal_cdf16(x, &e);
		store16_bf16(gelu_table + i, 0xffff, _mm512_mul_ps(x, cdf));
		_mm512_storeu_ps(gelu_slopes + i, gelu_slope16(x, cdf, e));
	}
}

void gelu_table_bf16(void)
{
	pthread_once(&gelu_once, fill_gelu_table);
}

/* The lanes m of low: GELU of the bf16s in the lanes m of x (low may be x). */
BF16 static inline void store16_gelu(uint16_t *low, const uint16_t *x, __mmask16 m)
{
	__m512i bits = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x));
	__m512i y = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, bits, gelu_table, 2);
	_mm256_mask_storeu_epi16(low, m, _mm512_cvtepi32_epi16(y));
}

BF16 void bias_gelu_row_bf16(float *out, uint16_t *low, uint16_t *pre, const float *bias, int n)
{
	for (int j = 0; j < n; j += 16) {
		__mmask16 m = first(n - j);
		store16_bf16(pre + j, m, _mm512_add_ps(load16_bf16(pre + j, m), load16(bias + j, m)));
		if (out) {
			__m512 x = load16_bf16(pre + j, m), e;   /* as the backward sees it */
			store16(out + j, m, _mm512_mul_ps(x, normal_cdf16(x, &e)));
		} else {
			store16_gelu(low + j, pre + j, m);
		}
	}
}

BF16 void gelu_row_bf16(uint16_t *x, int n)
{
	for (int j = 0; j < n; j += 16)
		store16_gelu(x + j, x + j, first(n - j));
}

BF16 void gelu_backward_row_bf16(uint16_t *dpre, const float *dout, const uint16_t *pre, int n)
{
	for (int j = 0; j < n; j += 16) {
		__mmask16 m = first(n - j);
		__m512i bits = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, pre + j));
		__m512 slope = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, bits, gelu_slopes, 4);
		store16_bf16(dpre + j, m, _mm512_mul_ps(load16(dout + j, m), slope));
	}
}

BF16 void geglu_row_bf16(uint16_t *out, const uint16_t *in, int F)
{
	for (int j = 0; j < F; j += 16) {
		__mmask16 m = first(F - j);
		__m512 x = load16_bf16(in + j, m), g = load16_bf16(in + F + j, m), e;
		store16_bf16(out + j, m, _mm512_mul_ps(_mm512_mul_ps(x, normal_cdf16(x, &e)), g));
	}
}

BF16 void geglu_backward_row_bf16(uint16_t *din, const float *dout, const uint16_t *in, int F)
{
	for (int j = 0; j < F; j += 16) {
		__mmask16 m = first(F - j);
		__m512 x = load16_bf16(in + j, m), g = load16_bf16(in + F + j, m), dy = load16(dout + j, m), e;
		__m512 cdf = normal_cdf16(x, &e);
		store16_bf16(din + j, m, _mm512_mul_ps(_mm512_mul_ps(dy, g), gelu_slope16(x, cdf, e)));
		store16_bf16(din + F + j, m, _mm512_mul_ps(dy, _mm512_mul_ps(x, cdf)));
	}
}

BF16 void layernorm_backward_row_bf16(float *din, float *sums, const float *dout, const float *x,
				      float mean, float rstd, const float *w, int C)
{
	__m512 m = _mm512_set1_ps(mean), rs = _mm512_set1_ps(rstd);
	__m512 sg = _mm512_setzero_ps(), sgx = _mm512_setzero_ps();
	for (int j = 0; j < C; j += 16) {
		__mmask16 k = first(C - j);
		__m512 g = load16(dout + j, k);
		__m512 xh = _mm512_mul_ps(_mm512_sub_ps(load16(x + j, k), m), rs);
		__m512 gw = _mm512_mul_ps(g, load16(w + j, k));
		sg = _mm512_add_ps(sg, gw);
		sgx = _mm512_fmadd_ps(gw, xh, sgx);
		store16(sums + j, k, _mm512_fmadd_ps(g, xh, load16(sums + j, k)));
		store16(sums + C + j, k, _mm512_add_ps(g, load16(sums + C + j, k)));
	}
	__m512 mg = _mm512_set1_ps(_mm512_reduce_add_ps(sg) / C);
	__m512 mgx = _mm512_set1_ps(_mm512_reduce_add_ps(sgx) / C);
	for (int j = 0; j < C; j += 16) {
		__mmask16 k = first(C - j);
		__m512 xh = _mm512_mul_ps(_mm512_sub_ps(load16(x + j, k), m), rs);
		__m512 gw = _mm512_mul_ps(load16(dout + j, k), load16(w + j, k));
		__m512 d = _mm512_fnmadd_ps(xh, mgx, _mm512_sub_ps(gw, mg));
		store16(din + j, k, _mm512_mul_ps(rs, d));
	}
}
#else
void residual_layernorm_row_bf16(float *out, uint16_t *copy, float *sum, float *mean,
				 float *rstd, const float *res, const float *bias,
				 const float *w, const float *b, int C, float eps,
				 uint32_t key, uint32_t base, uint32_t threshold, float scale)
{
	(void)out, (void)copy, (void)sum, (void)mean, (void)rstd, (void)res, (void)bias, (void)w,
		(void)b, (void)C, (void)eps, (void)key, (void)base, (void)threshold, (void)scale;
	abort();                   /* bf16_available is false off x86-64 */
}

void bias_gelu_row_bf16(float *out, uint16_t *low, uint16_t *pre, const float *bias, int n)
{
	(void)out, (void)low, (void)pre, (void)bias, (void)n;
	abort();
}

void gelu_table_bf16(void)
{
	abort();
}

void gelu_row_bf16(uint16_t *x, int n)
{
	(void)x, (void)n;
	abort();
}

void gelu_backward_row_bf16(uint16_t *dpre, const float *dout, const uint16_t *pre, int n)
{
	(void)dpre, (void)dout, (void)pre, (void)n;
	abort();
}

void layernorm_backward_row_bf16(float *din, float *sums, const float *dout, const float *x,
				 float mean, float rstd, const float *w, int C)
{
	(void)din, (void)sums, (void)dout, (void)x, (void)mean, (void)rstd, (void)w, (void)C;
	abort();
}

void geglu_row_bf16(uint16_t *out, const uint16_t *in, int F)
{
	(void)out, (void)in, (void)F;
	abort();
}

void geglu_backward_row_bf16(uint16_t *din, const float *dout, const uint16_t *in, int F)
{
	(void)din, (void)dout, (void)in, (void)F;
	abort();
}
#endif
