/* Benchmark driver for tests/bench/gemm_bf16: the GEMMs of BERT's linear
 * layers (rows x in -> out, row-major, weights [out, in] as the ops take
 * them) by OpenBLAS's sgemm, by TopSpin's bf16 linear op (oneDNN, on its
 * acts: inputs already in bf16, as the model keeps them), and by
 * OpenBLAS's cblas_sbgemm on the same bf16 inputs, loaded from the
 * library named by $SBGEMM_LIB (an OpenBLAS built with BUILD_BFLOAT16=1;
 * Debian's has no sbgemm). Prints one line of GFLOP/s per shape.
 *   gemm_bf16 [--reps N] */
#include "backend/cpu_ops.h"
#include "util/err.h"
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*sbgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
			  const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
			  float *C, int ldc);

static sbgemm_fn load_sbgemm(void)
{
	const char *path = getenv("SBGEMM_LIB");
	if (!path || !*path)
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	if (!h)
		die("%s: %s", path, dlerror());
	sbgemm_fn f = (sbgemm_fn)(uintptr_t)dlsym(h, "cblas_sbgemm");
	void (*threads)(int) = (void (*)(int))(uintptr_t)dlsym(h, "openblas_set_num_threads");
	if (!f || !threads)
		die("%s: no cblas_sbgemm or openblas_set_num_threads (not an OpenBLAS built with BUILD_BFLOAT16=1)", path);
	threads(omp_get_max_threads());
	return f;
}

static uint16_t bf16_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The best of reps runs of one product, in GFLOP/s. */
static double rate(int kind, int N, int Cin, int Cout, int reps, const float *x, const float *w,
		   const uint16_t *xb, const uint16_t *wb, float *out, sbgemm_fn sb)
{
	const char *why;
	const struct backend *bf16 = backend_cpu_bf16(&why);
	double best = 1e30;
	for (int r = 0; r <= reps; r++) {
		double t = omp_get_wtime();
		if (kind == 0)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, x, Cin,
				    w, Cin, 0.0f, out, Cout);
		else if (kind == 1)
			bf16->linear_forward(out, (const struct act *)xb, (const struct act *)wb, NULL,
					     N, Cin, Cout);
		else
			sb(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, xb, Cin, wb, Cin,
			   0.0f, out, Cout);
		t = omp_get_wtime() - t;
		if (r)   /* the first run warms up */
			best = t < best ? t : best;
	}
	return 2.0 * N * Cin * Cout / best / 1e9;
}

int main(int argc, char **argv)
{
	ts_prog = "gemm_bf16";
	int reps = argc == 3 && !strcmp(argv[1], "--reps") ? atoi(argv[2]) : 10;
	const char *why;
	if (!bf16_available(&why))
		die("no bf16 here: %s", why);
	sbgemm_fn sb = load_sbgemm();
	static const int shapes[][3] = {
		{ 4096, 256, 768 }, { 4096, 256, 256 }, { 4096, 256, 1024 }, { 4096, 1024, 256 },
		{ 4096, 384, 1152 }, { 4096, 384, 1536 }, { 4096, 1536, 384 },
	};
	printf("threads %d, best of %d\n", omp_get_max_threads(), reps);
	printf("%-20s %10s %12s %14s\n", "rows x in -> out", "sgemm", "bf16 oneDNN", "bf16 sbgemm");
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int N = shapes[s][0], Cin = shapes[s][1], Cout = shapes[s][2];
		size_t nx = (size_t)N * Cin, nw = (size_t)Cout * Cin;
		float *x = xmalloc(nx * sizeof *x), *w = xmalloc(nw * sizeof *w);
		float *out = xmalloc((size_t)N * Cout * sizeof *out);
		uint16_t *xb = xmalloc(nx * sizeof *xb), *wb = xmalloc(nw * sizeof *wb);
		for (size_t i = 0; i < nx; i++)
			xb[i] = bf16_bits(x[i] = 1e-3f * (float)(i % 1000));
		for (size_t i = 0; i < nw; i++)
			wb[i] = bf16_bits(w[i] = 1e-3f * (float)(i % 777));
		char name[32];
		snprintf(name, sizeof name, "%d x %d -> %d", N, Cin, Cout);
		printf("%-20s %10.1f %12.1f", name, rate(0, N, Cin, Cout, reps, x, w, xb, wb, out, sb),
		       rate(1, N, Cin, Cout, reps, x, w, xb, wb, out, sb));
		if (sb)
			printf(" %14.1f\n", rate(2, N, Cin, Cout, reps, x, w, xb, wb, out, sb));
		else
			printf(" %14s\n", "-");
		free(x), free(w), free(out), free(xb), free(wb);
	}
	return 0;
}
