/* Benchmark driver for tests/bench/train_cpu: times training steps
 * (forward, backward, plain SGD) of lib/bert on random full-length batches,
 * or measures the machine's sgemm and bf16 GEMM peaks and, where the CPU has
 * AVX512-BF16, the rate at which its cores issue bf16 dot products (the most
 * any bf16 GEMM could reach). Prints "key value" lines.
 *   bert_step [--layers N] [--hidden C] [--heads H] [--ffn F] [--vocab V]
 *             [--seq T] [--batch B] [--labels L] [--task cls|mlm]
 *             [--steps S] [--warmup W] [--precision fp32|bf16] [--arch FAMILY]
 *             [--no-dropout]
 *   bert_step --gemm-peak [--size N]
 * FAMILY: a model_type of family.h (default bert), in its shape of a new
 * model (ts-train --arch's); --no-dropout: every dropout 0, whatever the
 * family's are. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "device/device.h"
#include "model/bert.h"
#include "util/err.h"
#include "util/rng.h"
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: bert_step [--layers N] [--hidden C] [--heads H] [--ffn F] [--vocab V]\n"
	"                 [--seq T] [--batch B] [--labels L] [--task cls|mlm]\n"
	"                 [--steps S] [--warmup W] [--precision fp32|bf16] [--arch FAMILY]\n"
	"                 [--no-dropout]\n"
	"       bert_step --gemm-peak [--size N]";

struct options {
	struct bert_config c;
	int B, T, steps, warmup, gemm_peak, size, no_dropout;
	enum precision precision;
};

/* text as an int of at least min, or a one-line error. */
static int int_arg(const char *name, const char *text, int min)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < min || v > INT_MAX)
		die_usage("%s wants a whole number from %d to %d, not '%s'", name, min, INT_MAX, text);
	return (int)v;
}

static struct options parse(int argc, char **argv)
{
	struct options o = { .c = { .vocab = 30522, .hidden = 256, .layers = 4, .heads = 4,
				    .ffn = 1024, .max_pos = 512, .type_vocab = 2,
				    .ln_eps = 1e-12f, .hidden_dropout = 0.1f,
				    .attn_dropout = 0.1f, .cls_dropout = 0.1f, .task = TASK_CLS, .num_labels = 2 },
			     .B = 32, .T = 128, .steps = 10, .warmup = 2, .size = 3072 };
	struct { const char *name; int *value, min; } ints[] = {
		{ "--layers", &o.c.layers, 1 }, { "--hidden", &o.c.hidden, 1 },
		{ "--heads", &o.c.heads, 1 }, { "--ffn", &o.c.ffn, 1 }, { "--vocab", &o.c.vocab, 2 },
		{ "--labels", &o.c.num_labels, 2 }, { "--seq", &o.T, 1 }, { "--batch", &o.B, 1 },
		{ "--steps", &o.steps, 1 }, { "--warmup", &o.warmup, 0 }, { "--size", &o.size, 1 },
	};
	for (int i = 1; i < argc; i++) {
		int known = 0;
		for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
			if (!strcmp(argv[i], ints[k].name) && i + 1 < argc) {
				*ints[k].value = int_arg(ints[k].name, argv[++i], ints[k].min);
				known = 1;
			}
		if (!strcmp(argv[i], "--task") && i + 1 < argc) {
			o.c.task = !strcmp(argv[++i], "mlm") ? TASK_MLM : TASK_CLS;
			known = 1;
		} else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
			int f = family_by_type(argv[++i]);
			if (f < 0)
				die_usage("--arch %s: not one of %s", argv[i], family_types());
			o.c.family = (enum family_id)f;
			known = 1;
		} else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
			o.precision = precision_parse(argv[++i]);
			known = 1;
		} else if (!strcmp(argv[i], "--no-dropout")) {
			o.no_dropout = known = 1;
		} else if (!strcmp(argv[i], "--gemm-peak")) {
			o.gemm_peak = known = 1;
		} else if (!strcmp(argv[i], "--help")) {
			puts(usage);
			exit(0);
		}
		if (!known)
			die_usage("unknown or incomplete option '%s'", argv[i]);
	}
	const struct family *f = family_of(o.c.family);   /* the family's shape, as ts-train --arch's */
	o.c.type_vocab = f->type_vocab;
	o.c.ln_eps = f->ln_eps;
	o.c.hidden_dropout = o.c.attn_dropout = o.c.cls_dropout = o.no_dropout ? 0.0f : (float)f->dropout;
	o.c.max_pos = o.T + family_first_position(o.c.family, 1) > f->max_pos ? o.T + 2 : f->max_pos;
	o.c.pad_id = f->pad_id < o.c.vocab ? f->pad_id : 0;
	o.c.rope_global = f->rope_global, o.c.rope_local = f->rope_local;
	o.c.local_window = f->local_window, o.c.global_every = f->global_every;
	return o;
}

/* The best of 6 n x n x n products, in GFLOP/s: sgemm's, or the bf16
 * backend's linear op on a and b in its acts (rounded before the clock
 * starts, as the model keeps its inputs). */
static double gemm_rate(int n, const float *a, const float *b, float *c, int bf16)
{
	const char *why;
	const struct backend *be = bf16 ? backend_cpu_bf16(&why) : NULL;
	size_t nn = (size_t)n * n;
	struct act *al = be ? xmalloc(nn * be->act_size) : NULL;
	struct act *bl = be ? xmalloc(nn * be->act_size) : NULL;
	if (be)
		be->as_act(al, a, nn), be->as_act(bl, b, nn);
	double best = 1e30;
	for (int rep = 0; rep < 6; rep++) {
		double t = omp_get_wtime();
		if (be)
			be->linear_forward(c, al, bl, NULL, n, n, n);
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b,
				    n, 0.0f, c, n);
		t = omp_get_wtime() - t;
		best = t < best ? t : best;
	}
	free(al), free(bl);
	return 2.0 * n * n * n / best / 1e9;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "backend/cpu_avx512.h"

enum { CHAINS = 12 };           /* independent sums: more than latency x ports */

/* vdpbf16ps instructions issued back to back on 12 sums kept in registers,
 * n rounds; returns their total so that none is optimised away. */
BF16 static float dot_chains(long n)
{
	__m512 acc[CHAINS];
	for (int i = 0; i < CHAINS; i++)
		acc[i] = _mm512_setzero_ps();
	__m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
	for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
		for (int i = 0; i < CHAINS; i++)
			acc[i] = _mm512_dpbf16_ps(acc[i], x, x);
		__asm__ volatile("" : "+v"(x));
	}
	for (int i = 1; i < CHAINS; i++)
		acc[0] = _mm512_add_ps(acc[0], acc[i]);
	return _mm512_reduce_add_ps(acc[0]);
}

/* All threads issuing bf16 dot products at once, in GFLOP/s (64 a vdpbf16ps:
 * 16 lanes of two multiply-adds). The best of 3 tries of about 10 ms. */
static double bf16_dot_rate(void)
{
	const long n = 3000000;
	double best = 1e30;
	float sink = 0.0f;
	for (int rep = 0; rep < 3; rep++) {
		double t = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
		sink += dot_chains(n);
		t = omp_get_wtime() - t;
		best = t < best ? t : best;
	}
	if (sink == 1.0f)       /* never: keeps the sums alive */
		puts("");
	return 64.0 * CHAINS * (double)n * omp_get_max_threads() / best / 1e9;
}
#endif

/* OpenBLAS's sgemm and, where the CPU has bf16, the bf16 linear op (oneDNN,
 * on inputs in bf16) on n x n x n, and the cores' bf16 dot product rate. */
static void gemm_peaks(int n)
{
	float *a = xmalloc(sizeof(float) * n * n), *b = xmalloc(sizeof(float) * n * n),
	      *c = xmalloc(sizeof(float) * n * n);
	for (size_t i = 0; i < (size_t)n * n; i++)
		a[i] = b[i] = 1e-3f * (float)(i % 1000);
	printf("sgemm_size %d\nsgemm_gflops %.1f\n", n, gemm_rate(n, a, b, c, 0));
	const char *why;
	if (bf16_available(&why)) {
		printf("bf16_gemm_gflops %.1f\n", gemm_rate(n, a, b, c, 1));
#if defined(__x86_64__) && defined(__GNUC__)
		printf("bf16_dot_gflops %.1f\n", bf16_dot_rate());
#endif
	}
	free(a), free(b), free(c);
}

/* Matmul FLOPs of one step, 2 per multiply-add forward and twice that
 * backward, for a layer whose queries and everything after the attention
 * run on R of its N rows. */
static double layer_flops(const struct options *o, double R)
{
	double C = o->c.hidden, F = o->c.ffn, T = o->T, N = (double)o->B * o->T;
	return 6 * 2 * C * C * N + 6 * (2 * C * C + 2 * C * F) * R + 12 * T * C * R;
}

/* model: what Hugging Face computes; done: what lib/bert computes, whose
 * last layer works only on the rows its head reads. */
static void step_flops(const struct options *o, int64_t predicted, double *model, double *done)
{
	double C = o->c.hidden, N = (double)o->B * o->T;
	double head = o->c.task == TASK_CLS ? 6 * (C * C + C * o->c.num_labels) * o->B
					    : 6 * (C * C + C * o->c.vocab) * predicted;
	*model = o->c.layers * layer_flops(o, N) + head;
	*done = o->c.layers ? (o->c.layers - 1) * layer_flops(o, N) +
				      layer_flops(o, (double)predicted) + head
			    : head;
}

/* Random full-length sequences; mlm labels 15% of positions. */
static void fill_batch(const struct options *o, struct rng *r, int32_t *ids, int32_t *labels)
{
	int N = o->B * o->T;
	for (int i = 0; i < N; i++)
		ids[i] = 1 + (int32_t)rng_below(r, o->c.vocab - 1);
	if (o->c.task == TASK_CLS)
		for (int i = 0; i < o->B; i++)
			labels[i] = (int32_t)rng_below(r, o->c.num_labels);
	else
		for (int i = 0; i < N; i++)
			labels[i] = rng_uniform(r) < 0.15f ? ids[i] : -100;
}

static void sgd(struct bert *m, float lr)
{
	float *p = bert_params(m), *g = bert_grads(m);
	size_t n = bert_numel(m);
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		p[i] -= lr * g[i];
		g[i] = 0.0f;
	}
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void train(const struct options *o)
{
	struct bert *m = bert_new(&o->c, backend_open("cpu", o->precision));
	bert_init(m, 1);
	int N = o->B * o->T;
	int32_t *ids = xmalloc(sizeof(int32_t) * N), *labels = xmalloc(sizeof(int32_t) * N);
	struct bert_batch b = { o->B, o->T, ids, NULL, NULL, labels };
	struct rng r;
	rng_seed(&r, 7);
	double fwd = 0, bwd = 0, upd = 0, model_flops = 0, done_flops = 0, loss = 0;
	double *times = xmalloc(sizeof *times * (size_t)o->steps);
	for (int step = 0; step < o->warmup + o->steps; step++) {
		fill_batch(o, &r, ids, labels);
		int64_t count;
		double t0 = omp_get_wtime();
		loss = bert_forward(m, &b, 1, (uint64_t)step, &count);
		double t1 = omp_get_wtime();
		bert_backward(m, 1.0f / (float)(count ? count : 1));
		double t2 = omp_get_wtime();
		sgd(m, 1e-3f);
		double t3 = omp_get_wtime();
		if (step < o->warmup)
			continue;
		fwd += t1 - t0, bwd += t2 - t1, upd += t3 - t2;
		times[step - o->warmup] = t3 - t0;
		double model, done;
		step_flops(o, count, &model, &done);
		model_flops += model, done_flops += done;
		loss /= count ? count : 1;
	}
	double total = fwd + bwd + upd;
	printf("threads %d\nbatch %d\nparams %zu\nsamples_per_s %.2f\nstep_ms %.1f\n",
	       omp_get_max_threads(), o->B, bert_numel(m), o->steps * o->B / total,
	       1e3 * total / o->steps);
	printf("forward_ms %.1f\nbackward_ms %.1f\nupdate_ms %.1f\n", 1e3 * fwd / o->steps,
	       1e3 * bwd / o->steps, 1e3 * upd / o->steps);
	/* steadier than the mean where other work comes and goes: to compare builds */
	qsort(times, (size_t)o->steps, sizeof *times, by_value);
	printf("step_ms_p20 %.1f\nstep_ms_median %.1f\n", 1e3 * times[o->steps / 5],
	       1e3 * times[o->steps / 2]);
	printf("model_gflop_per_step %.2f\nmodel_gflops %.1f\n", model_flops / o->steps / 1e9,
	       model_flops / total / 1e9);
	printf("matmul_gflop_per_step %.2f\nmatmul_gflops %.1f\nlast_loss %.4f\n",
	       done_flops / o->steps / 1e9, done_flops / total / 1e9, loss);
	free(ids), free(labels), free(times);
	bert_free(m);
}

int main(int argc, char **argv)
{
	ts_prog = "bert_step";
	struct options o = parse(argc, argv);
	if (o.gemm_peak)
		gemm_peaks(o.size);
	else
		train(&o);
	return 0;
}
