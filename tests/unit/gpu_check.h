/* What the CUDA tests share: random inputs, moving buffers to and from the
 * GPU, and comparing a GPU buffer with the CPU's result. The including test
 * sets gpu before any of them runs. */
#ifndef TS_GPU_CHECK_H
#define TS_GPU_CHECK_H
#include "backend/backend.h"
#include "check.h"
#include "util/err.h"
#include "util/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct backend *gpu;
static struct rng gen;

/* ---- moving data ---- */

static inline float *randoms(size_t n, float scale)
{
	float *x = xmalloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = scale * rng_normal(&gen);
	return x;
}

static inline void *on_gpu(const void *host, size_t bytes)
{
	void *d = gpu->alloc(bytes);
	gpu->upload(d, host, bytes);
	return d;
}

static inline float *back(const float *d, size_t n)
{
	float *h = xmalloc(n * sizeof *h);
	gpu->download(h, d, n * sizeof *h);
	return h;
}

/* got against the CPU's result want: |got - want| <= atol + rtol|want|. */
static inline void compare(const char *what, const float *got, const float *want, size_t n, double atol,
		    double rtol)
{
	size_t bad = 0, worst_i = 0;
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);
		if (!(e <= atol + rtol * fabs(want[i])))
			bad++;
		if (e > worst || e != e)
			worst = e, worst_i = i;
	}
	CHECK(bad == 0, "%s: %zu values within %g + %g|x| of the CPU's (worst %.3g at %zu)", what, n,
	      atol, rtol, worst, worst_i);
}

/* The GPU buffer d against the CPU's result want. */
static inline void expect_close(const char *what, const float *d, const float *want, size_t n,
			 double atol, double rtol)
{
	float *got = back(d, n);
	compare(what, got, want, n, atol, rtol);
	free(got);
}

static inline void expect_same(const char *what, const float *d, const float *want, size_t n)
{
	float *got = back(d, n);
	CHECK(!memcmp(got, want, n * sizeof *got), "%s: %zu values, the CPU's bits", what, n);
	free(got);
}
#endif
