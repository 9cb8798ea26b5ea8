/* What the bf16 path's AVX-512 kernels share (cpu_attention_bf16.c,
 * cpu_rows_bf16.c): their target, lane masks, stores and e^x, 16 floats at
 * a time. Only for x86-64 with GCC or Clang. */
#ifndef TS_CPU_AVX512_H
#define TS_CPU_AVX512_H
#include <immintrin.h>
#include <stdint.h>

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* The first n of 16 lanes. */
static inline __mmask16 first(int n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* The lanes m of p, zero for the others: a plain load when m is full, for
 * a masked load that misses the cache runs several times slower on some
 * processors. */
BF16 static inline __m512 load16(const float *p, __mmask16 m)
{
	return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

/* The lanes m of v to p: a plain store when m is full, for a masked store
 * to a line not in the cache runs several times slower on some processors. */
BF16 static inline void store16(float *p, __mmask16 m, __m512 v)
{
	if (m == 0xffff)
		_mm512_storeu_ps(p, v);
	else
		_mm512_mask_storeu_ps(p, m, v);
}

/* The lanes m of 16 bf16s at p as floats, the others zero; a plain load
 * when m is full, as load16's. */
BF16 static inline __m512 load16_bf16(const uint16_t *p, __mmask16 m)
{
	__m256i h = m == 0xffff ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The lanes m of v to p in bf16, rounded to nearest even. */
BF16 static inline void store16_bf16(uint16_t *p, __mmask16 m, __m512 v)
{
	__m256i h = (__m256i)_mm512_cvtneps_pbh(v);
	if (m == 0xffff)
		_mm256_storeu_si256((__m256i *)p, h);
	else
		_mm256_mask_storeu_epi16(p, m, h);
}

/* e^x as cpu_simd.h's exp_approx (Cody-Waite reduction, Cephes'
 * polynomial, inputs clamped to [-87, 88]), 16 at a time; a NaN stays NaN. */
BF16 static inline __m512 exp16(__m512 x)
{
	x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	return _mm512_scalef_ps(p, n);
}
#endif
