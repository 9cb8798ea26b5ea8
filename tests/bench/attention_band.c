/* Benchmark driver for tests/bench/attention_band: one ModernBERT-base
 * attention layer (768 wide, 12 heads) over one sequence of T tokens, its
 * forward and backward, as a global layer (every key) and as a local one
 * (a band of W/2 keys each side, ModernBERT's local_attention W), on the
 * CPU backend in fp32 and, where the CPU has it, in bf16. Prints one line
 * per precision: the seconds of each (the best of reps) and the ratio.
 *   attention_band [T [W [reps]]]   (default 8192 128 2) */
#include "backend/backend.h"
#include "util/err.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

enum { C = 768, H = 12 };

/* The best of reps runs of the forward and the backward, in seconds. */
static double best_of(const struct backend *be, struct attention *a, int reps, const float *dctx,
		      void *ctx, void *dq, void *dk, void *dv)
{
	double best = 1e30;
	for (int r = 0; r < reps; r++) {
		double t = omp_get_wtime();
		be->attention_forward(ctx, NULL, a);
		be->attention_backward(dq, dk, dv, dctx, NULL, a);
		t = omp_get_wtime() - t;
		best = t < best ? t : best;
	}
	return best;
}

static void run(const struct backend *be, const char *name, int T, int W, int reps)
{
	size_t n = (size_t)T * 3 * C;
	float *qkv = xmalloc(sizeof(float) * n), *dctx = xmalloc(sizeof(float) * (size_t)T * C);
	for (size_t i = 0; i < n; i++)
		qkv[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	for (size_t i = 0; i < (size_t)T * C; i++)
		dctx[i] = (float)((i * 40503u) % 1000) / 500.0f - 1.0f;
	struct act *x = xmalloc(n * be->act_size), *g = xmalloc(n * be->act_size);
	struct act *ctx = xmalloc((size_t)T * C * be->act_size);
	be->as_act(x, qkv, n);
	int32_t kv_start[2] = { 0, T };
	int64_t p_start[2];
	attention_probs(p_start, kv_start, NULL, 1, H);
	struct attention a = { 1, T, C, H, x, act_at(be, x, C), act_at(be, x, 2 * C), 3 * C, 3 * C,
			       kv_start, NULL, p_start, NULL, 0.0f, 1 };
	double global = best_of(be, &a, reps, dctx, ctx, g, act_at(be, g, C), act_at(be, g, 2 * C));
	a.band = W / 2;
	double local = best_of(be, &a, reps, dctx, ctx, g, act_at(be, g, C), act_at(be, g, 2 * C));
	printf("%s: T %d, forward and backward: global %.3f s, local (window %d) %.3f s: %.1fx cheaper\n",
	       name, T, global, W, local, global / local);
	free(qkv), free(dctx), free(x), free(g), free(ctx);
}

/* Argument i as a whole number in [lo, hi], or fallback where not given. */
static int arg(int argc, char **argv, int i, int fallback, int lo, int hi)
{
	if (i >= argc)
		return fallback;
	char *end;
	long v = strtol(argv[i], &end, 10);
	if (end == argv[i] || *end || v < lo || v > hi)
		die("argument %d: '%s' is not a whole number from %d to %d", i, argv[i], lo, hi);
	return (int)v;
}

int main(int argc, char **argv)
{
	int T = arg(argc, argv, 1, 8192, 2, 1 << 16), W = arg(argc, argv, 2, 128, 2, 1 << 16);
	int reps = arg(argc, argv, 3, 2, 1, 100);
	printf("%d threads\n", omp_get_max_threads());
	run(backend_cpu(), "fp32", T, W, reps);
	const char *why;
	const struct backend *bf = backend_cpu_bf16(&why);
	if (bf)
		run(bf, "bf16", T, W, reps);
	else
		printf("bf16: not measured (%s)\n", why);
	return 0;
}
