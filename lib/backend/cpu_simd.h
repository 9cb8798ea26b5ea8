/* Building blocks shared by the CPU op files: how hot loops are compiled,
 * branch-free selects, a vectorisable exp and row max, the dropout mask,
 * streaming stores and bf16 rounding.
 * Internal to lib/cpu_*.c. */
#ifndef TS_CPU_SIMD_H
#define TS_CPU_SIMD_H
#include "backend/dropout.h"
#include "util/rng.h"
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Hot loops get an AVX2+FMA clone chosen when the program loads, so one
 * portable binary still runs them 8 floats wide where the CPU allows; GCC,
 * which contracts nothing under -std=c11, may fuse multiply-adds there
 * (Clang does so by default). */
#if defined(__x86_64__) && defined(__clang__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default"), \
			   optimize("fp-contract=fast")))
#else
#define HOT
#endif

/* Loops where each output element depends on its own inputs alone (no sum
 * across elements) also get an AVX-512 clone, 16 floats wide: the same
 * operations on each element as the AVX2 clone, so the same bits, in about
 * half the time where the math is the cost (GELU, the dropout hash). */
#if defined(__x86_64__) && defined(__clang__)
#define HOT_ELEMENTWISE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__)
#define HOT_ELEMENTWISE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), \
				       optimize("fp-contract=fast")))
#else
#define HOT_ELEMENTWISE
#endif

/* Elementwise loops that must round as written (the optimizers' updates,
 * which follow PyTorch's float operations): the AVX-512 and AVX2 clones of
 * HOT_ELEMENTWISE without its licence to fuse multiply-adds under GCC, so
 * every clone gives the plain loop's bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HOT_EXACT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOT_EXACT
#endif

/* cond ? a : b as bit masks. GCC (with the default -ftrapping-math) will
 * not vectorise a loop where a float ternary feeds later arithmetic, since
 * jump threading turns it into branches; masks stay branch-free. */
static inline float select_float(int cond, float a, float b)
{
	int32_t ai, bi, m = -(int32_t)(cond != 0);
	memcpy(&ai, &a, sizeof ai);
	memcpy(&bi, &b, sizeof bi);
	ai = (ai & m) | (bi & ~m);
	memcpy(&a, &ai, sizeof a);
	return a;
}

/* exp(x) in plain arithmetic that vectorises inside "omp simd" loops
 * (libm's expf does not): Cody-Waite reduction and Cephes' polynomial,
 * about 2 ulp. Inputs are clamped to [-87, 88]: tiny results come out as
 * about 1.6e-38 instead of 0, huge ones as 1.65e38 instead of inf. A NaN
 * is computed as 0, since converting a NaN n to int is undefined, and
 * comes back out as NaN, so that NaN checks downstream still see it. */
static inline float exp_approx(float x)
{
	float in = x;
	int nan = x != x;
	x = select_float(nan, 0.0f, x);
	x = select_float(x > 88.0f, 88.0f, x);
	x = select_float(x < -87.0f, -87.0f, x);
	float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float r = x - n * 0.693359375f + n * 2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	int32_t bits = ((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &bits, sizeof scale);
	return select_float(nan, in, p * scale);
}

/* The largest x[j], j < n (-INFINITY for none). Eight running maxima let
 * GCC and Clang vectorise it without reassociating a reduction. */
static inline float row_max(const float *x, int n)
{
	float lane[8];
	for (int k = 0; k < 8; k++)
		lane[k] = -INFINITY;
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int k = 0; k < 8; k++)
			lane[k] = select_float(x[j + k] > lane[k], x[j + k], lane[k]);
	for (; j < n; j++)
		lane[0] = select_float(x[j] > lane[0], x[j], lane[0]);
	float mx = lane[0];
	for (int k = 1; k < 8; k++)
		mx = select_float(lane[k] > mx, lane[k], mx);
	return mx;
}

static inline float dropout_factor(uint32_t key, uint32_t i, uint32_t threshold, float scale)
{
	return select_float(dropout_hash(key, i) >= threshold, scale, 0.0f);
}

/* Phi(x) and phi(x) for GELU from one exp: Phi(-|x|) = erfc(|x|/sqrt 2)/2 by
 * Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), taken directly for the
 * lower tail so that 1 + erf never cancels there. */
static inline void normal_cdf_pdf(float x, float *cdf, float *pdf)
{
	float z = fabsf(x) * 0.70710678118654752f;
	float t = 1.0f / (1.0f + 0.3275911f * z);
	float poly = t * (0.254829592f +
			  t * (-0.284496736f +
			       t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
	float h = -0.5f * x * x, e = exp_approx(h);
	e = select_float(h >= -87.0f, e, 0.0f);   /* below exp_approx's clamp, where x e would grow */
	float tail = 0.5f * poly * e;
	*cdf = select_float(x >= 0.0f, 1.0f - tail, tail);
	*pdf = 0.39894228040143268f * e;
}

/* dst[n] = src[n] with stores that bypass the cache (x86-64's SSE2), for a
 * result read back only much later: its lines are not first read in. Such
 * stores are weakly ordered: stream_fence() must follow them before other
 * threads may read what they wrote. */
static inline void copy_streaming(float *dst, const float *src, size_t n)
{
#if defined(__x86_64__)
	size_t i = 0;
	for (; i < n && ((uintptr_t)(dst + i) & 15); i++)
		dst[i] = src[i];
	for (; i + 4 <= n; i += 4)
		_mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
	for (; i < n; i++)
		dst[i] = src[i];
#else
	memcpy(dst, src, sizeof *dst * n);
#endif
}

static inline void stream_fence(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

/* f in bf16, rounded to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	return (uint16_t)(nan ? (u >> 16) | 0x40u : r);
}

/* b, a bf16, as a float: exact. */
static inline float from_bf16(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

#endif
