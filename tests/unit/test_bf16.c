/* The CPU's bf16 backend (cpu_bf16.c), whose acts are bf16: rounding to
 * nearest even, each linear op against a double reference over the same
 * bf16 inputs, a product for each of more row counts than the cache
 * keeps, the ops that make acts against the plain ones, the attention
 * against fp32's over the same rounded inputs, and a whole model's loss
 * and gradients against fp32 within bf16's precision. Where the processor
 * has no bf16 (or ONEDNN_MAX_CPU_ISA hides it), the backend must be refused
 * with a reason instead. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "check.h"
#include "expect_die.h"
#include "model/bert.h"
#include "util/err.h"
#include "util/rng.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Round to bf16 and back, nearest even, written apart from cpu_bf16.c's. */
static float bf16_round(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	uint32_t low = u & 0xffffu, keep = u & 0xffff0000u;
	if (low > 0x8000u || (low == 0x8000u && (keep & 0x10000u)))
		keep += 0x10000u;
	memcpy(&f, &keep, sizeof f);
	return f;
}

static const struct backend *bf;   /* the bf16 backend */

/* x[n] in bf's acts, in space of its own. */
static struct act *low(const float *x, size_t n)
{
	struct act *a = xmalloc(n * bf->act_size);
	bf->as_act(a, x, n);
	return a;
}

/* n acts of bf as floats. */
static float *widened(const struct act *a, size_t n)
{
	const uint16_t *h = (const uint16_t *)a;
	float *x = xmalloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)h[i] << 16;
		memcpy(&x[i], &u, sizeof u);
	}
	return x;
}

static float *randoms(struct rng *r, size_t n)
{
	float *x = xmalloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform(r) * 2 - 1;
	return x;
}

/* The largest |a - ref| over n, relative to the largest |ref|. */
static double rel_err(const float *a, const double *ref, size_t n)
{
	double e = 0, m = 1e-30;
	for (size_t i = 0; i < n; i++) {
		e = fmax(e, fabs(a[i] - ref[i]));
		m = fmax(m, fabs(ref[i]));
	}
	return e / m;
}

static void check_rounding(void)
{
	float in[6] = { 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-9f), 1.0f + 0x1p-7f,
			3.0e38f, NAN };
	struct act *a = low(in, 6);
	float *out = widened(a, 6);
	CHECK(out[0] == 1.0f, "bf16: a tie rounds to the even 1.0 (got %.9g)", out[0]);
	CHECK(out[1] == 1.0f + 0x1p-6f, "bf16: a tie rounds up to the even neighbour (got %.9g)", out[1]);
	CHECK(out[2] == -1.0f, "bf16: below half an ulp rounds toward the value (got %.9g)", out[2]);
	CHECK(out[3] == 1.0f + 0x1p-7f, "bf16: a representable value stays (got %.9g)", out[3]);
	CHECK(out[4] == bf16_round(3.0e38f), "bf16: a large finite value rounds like the reference (got %.9g)", out[4]);
	CHECK(isnan(out[5]), "bf16: a NaN stays NaN");
	free(a), free(out);
}

/* out = in w^T + bias over N rows, against double sums of the rounded
 * inputs; and the same product with its output in acts, which is that
 * result rounded. */
static void check_forward(struct rng *r, int N, int Cin, int Cout, int bias)
{
	float *in = randoms(r, (size_t)N * Cin), *w = randoms(r, (size_t)Cout * Cin),
	      *b = randoms(r, Cout), *out = xmalloc((size_t)N * Cout * sizeof *out);
	double *ref = xmalloc((size_t)N * Cout * sizeof *ref);
	for (int n = 0; n < N; n++)
		for (int o = 0; o < Cout; o++) {
			double s = bias ? b[o] : 0;
			for (int i = 0; i < Cin; i++)
				s += (double)bf16_round(in[n * Cin + i]) * bf16_round(w[o * Cin + i]);
			ref[n * Cout + o] = s;
		}
	struct act *il = low(in, (size_t)N * Cin), *wl = low(w, (size_t)Cout * Cin);
	struct act *ol = xmalloc((size_t)N * Cout * bf->act_size);
	bf->linear_forward(out, il, wl, bias ? b : NULL, N, Cin, Cout);
	double e = rel_err(out, ref, (size_t)N * Cout);
	CHECK(e < 1e-5, "bf16 forward %dx%d->%d%s: the reference's sums of bf16 products (rel err %.2g)",
	      N, Cin, Cout, bias ? " with bias" : "", e);
	bf->linear_forward_act(ol, il, wl, bias ? b : NULL, N, Cin, Cout);
	float *got = widened(ol, (size_t)N * Cout);
	int rounded = 1;
	for (int i = 0; i < N * Cout; i++)
		rounded &= fabs(got[i] - out[i]) <= fabs(out[i]) * 0x1p-8f;
	CHECK(rounded, "bf16 forward %dx%d->%d into acts: that result rounded", N, Cin, Cout);
	free(in), free(w), free(b), free(out), free(ref), free(il), free(wl), free(ol), free(got);
}

/* A product is made for each row count and the cache keeps the last 256
 * used: 300 row counts in turn, each against its reference, then the
 * first again, made anew, which must give the same bits as before. */
static void check_many_row_counts(struct rng *r)
{
	enum { COUNTS = 300, C = 8 };
	float *in = randoms(r, (size_t)COUNTS * C), *w = randoms(r, C * C);
	float *out = xmalloc((size_t)COUNTS * C * sizeof *out), first[C];
	struct act *il = low(in, (size_t)COUNTS * C), *wl = low(w, C * C);
	int right = 1;
	for (int n = 1; n <= COUNTS; n++) {
		bf->linear_forward(out, il, wl, NULL, n, C, C);
		if (n == 1)
			memcpy(first, out, sizeof first);
		for (int o = 0; o < C; o++) {
			double s = 0;
			for (int i = 0; i < C; i++)
				s += (double)bf16_round(in[(n - 1) * C + i]) * bf16_round(w[o * C + i]);
			right &= fabs(out[(n - 1) * C + o] - s) <= 1e-5 * (fabs(s) + 1);
		}
	}
	CHECK(right, "bf16 forward over 1 to %d rows: each row count's last row as the reference", COUNTS);
	bf->linear_forward(out, il, wl, NULL, 1, C, C);
	CHECK(!memcmp(out, first, sizeof first), "bf16 forward over 1 row, its product made again: the same bits");
	free(in), free(w), free(out), free(il), free(wl);
}

/* din (+)= dout w, dw += dout^T in, dbias += column sums: each against double
 * sums over the rounded inputs (dout in acts too), starting from nonzero
 * contents. */
static void check_backward(struct rng *r, int N, int Cin, int Cout, int accumulate, int with_din)
{
	float *dout = randoms(r, (size_t)N * Cout), *in = randoms(r, (size_t)N * Cin),
	      *w = randoms(r, (size_t)Cout * Cin), *din = randoms(r, (size_t)N * Cin),
	      *dw = randoms(r, (size_t)Cout * Cin), *db = randoms(r, Cout);
	double *rdin = xmalloc((size_t)N * Cin * sizeof *rdin), *rdw = xmalloc((size_t)Cout * Cin * sizeof *rdw),
	       *rdb = xmalloc((size_t)Cout * sizeof *rdb);
	for (int n = 0; n < N; n++)
		for (int i = 0; i < Cin; i++) {
			double s = accumulate ? din[n * Cin + i] : 0;
			for (int o = 0; o < Cout; o++)
				s += (double)bf16_round(dout[n * Cout + o]) * bf16_round(w[o * Cin + i]);
			rdin[n * Cin + i] = s;
		}
	for (int o = 0; o < Cout; o++) {
		for (int i = 0; i < Cin; i++) {
			double s = dw[o * Cin + i];
			for (int n = 0; n < N; n++)
				s += (double)bf16_round(dout[n * Cout + o]) * bf16_round(in[n * Cin + i]);
			rdw[o * Cin + i] = s;
		}
		double s = db[o];
		for (int n = 0; n < N; n++)
			s += bf16_round(dout[n * Cout + o]);   /* summed in fp32 */
		rdb[o] = s;
	}
	struct act *il = low(in, (size_t)N * Cin), *wl = low(w, (size_t)Cout * Cin);
	struct act *dl = low(dout, (size_t)N * Cout);
	bf->linear_backward(with_din ? din : NULL, dw, db, dl, il, wl, N, Cin, Cout, accumulate);
	const char *how = !with_din ? "no din" : accumulate ? "din added" : "din written";
	if (with_din)
		CHECK(rel_err(din, rdin, (size_t)N * Cin) < 1e-5, "bf16 backward %dx%d->%d (%s): din",
		      N, Cin, Cout, how);
	CHECK(rel_err(dw, rdw, (size_t)Cout * Cin) < 1e-5, "bf16 backward %dx%d->%d (%s): dw added",
	      N, Cin, Cout, how);
	CHECK(rel_err(db, rdb, Cout) < 1e-6, "bf16 backward %dx%d->%d (%s): dbias in fp32",
	      N, Cin, Cout, how);
	free(dout), free(in), free(w), free(din), free(dw), free(db), free(rdin), free(rdw), free(rdb);
	free(il), free(wl), free(dl);
}

/* The largest |a - b| over n, relative to the largest |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
	double *wide = xmalloc(n * sizeof *wide);
	for (size_t i = 0; i < n; i++)
		wide[i] = b[i];
	double e = rel_err(a, wide, n);
	free(wide);
	return e;
}

enum { FIX_N = 40, FIX_IN = 64, FIX_OUT = 96 };

/* The products over in (FIX_N x FIX_IN) of the weights in space against
 * those of w made by as_act, in fp32 and through GELU into acts. */
static void check_against_plain(const struct act *space, const float *w, const struct act *in, const float *b,
				const char *what)
{
	size_t n = (size_t)FIX_N * FIX_OUT;
	float *got = xmalloc(n * sizeof *got), *want = xmalloc(n * sizeof *want);
	struct act *plain = low(w, (size_t)FIX_OUT * FIX_IN), *gl = xmalloc(n * bf->act_size),
		   *pl = xmalloc(n * bf->act_size);
	bf->linear_forward(want, in, plain, b, FIX_N, FIX_IN, FIX_OUT);
	bf->linear_forward(got, in, space, b, FIX_N, FIX_IN, FIX_OUT);
	bf->linear_gelu_forward_act(pl, in, plain, b, FIX_N, FIX_IN, FIX_OUT);
	bf->linear_gelu_forward_act(gl, in, space, b, FIX_N, FIX_IN, FIX_OUT);
	double e = rel_diff(got, want, n);
	int some = 0;   /* a product there is to compare */
	for (size_t i = 0; i < n; i++)
		some |= want[i] != 0.0f;
	CHECK(some && e < 1e-6 && !memcmp(gl, pl, n * bf->act_size),
	      "bf16 products over weights %s: those over the same weights made by as_act (%.2g)", what, e);
	free(got), free(want), free(plain), free(gl), free(pl);
}

/* Weights made by as_fixed_act (packed for the products once) give the
 * products of the same weights made by as_act; weights written over by
 * as_act, or made fixed again with other values, are the ones the next
 * product reads. */
static void check_fixed_weights(struct rng *r)
{
	size_t nw = (size_t)FIX_OUT * FIX_IN;
	float *in = randoms(r, (size_t)FIX_N * FIX_IN), *w1 = randoms(r, nw), *w2 = randoms(r, nw),
	      *b = randoms(r, FIX_OUT);
	struct act *il = low(in, (size_t)FIX_N * FIX_IN), *space = xmalloc(nw * bf->act_size);
	bf->as_fixed_act(space, w1, nw);
	check_against_plain(space, w1, il, b, "made fixed");
	check_against_plain(space, w1, il, b, "made fixed, their packed copy read again");
	bf->as_act(space, w2, nw);
	check_against_plain(space, w2, il, b, "written over by as_act");
	bf->as_fixed_act(space, w1, nw);
	check_against_plain(space, w1, il, b, "made fixed again");
	bf->as_fixed_act(space, w2, nw);
	check_against_plain(space, w2, il, b, "made fixed again with other values");
	bf->as_act(space, w1, nw);   /* none left fixed for the checks after */
	free(in), free(w1), free(w2), free(b), free(il), free(space);
}

/* Whether each of n acts is the float beside it rounded. */
static int rounds_of(const struct act *a, const float *x, size_t n)
{
	float *w = widened(a, n);
	int same = 1;
	for (size_t i = 0; i < n; i++)
		same &= w[i] == bf16_round(x[i]) || (isnan(w[i]) && isnan(x[i]));
	free(w);
	return same;
}

/* GELU over bf16 pre: the bias added to pre and rounded, GELU of that into
 * fp32 (the plain gelu's within fp32's rounding: the bf16 ops take 1/x
 * from rcp14) or rounded into acts, and its backward (the plain op's over
 * the same pre). */
static void check_gelu(struct rng *r)
{
	enum { N = 70, F = 40 };
	size_t n = N * F;
	float *pre = randoms(r, n), *bias = randoms(r, F), *act = xmalloc(sizeof(float) * n),
	      *ref = xmalloc(sizeof(float) * n), *added = xmalloc(sizeof(float) * n);
	struct act *pl = low(pre, n), *pl2 = low(pre, n), *al = xmalloc(n * bf->act_size);
	float *before = widened(pl, n);
	for (size_t i = 0; i < n; i++)
		added[i] = before[i] + bias[i % F];
	bf->bias_gelu_forward(act, NULL, pl, bias, N, F);
	float *after = widened(pl, n);
	for (size_t i = 0; i < n; i++)
		ref[i] = gelu(after[i]);
	double e = rel_diff(act, ref, n);
	CHECK(rounds_of(pl, added, n) && e < 1e-6,
	      "bf16 GELU: pre plus bias rounded, the plain GELU of that (%.2g)", e);
	bf->bias_gelu_forward(NULL, al, pl2, bias, N, F);
	CHECK(rounds_of(al, act, n), "bf16 GELU into acts: its fp32 outputs rounded");

	float *dact = randoms(r, n), *dpre2 = xmalloc(sizeof(float) * n);
	struct act *dl = xmalloc(n * bf->act_size);
	gelu_backward(dpre2, dact, after, N, F);
	bf->gelu_backward(dl, dact, pl, N, F);
	float *dpre = widened(dl, n);
	int rounded = 1;
	for (size_t i = 0; i < n; i++)
		rounded &= fabs(dpre[i] - dpre2[i]) <= fabs(dpre2[i]) * 0x1p-8f;
	CHECK(rounded, "bf16 GELU backward into acts: the plain op's result over the same pre, "
	      "rounded");
	free(dl);
	free(pre), free(bias), free(act), free(ref), free(added), free(pl), free(pl2), free(al);
	free(before), free(after), free(dact), free(dpre), free(dpre2);
}

/* The GELU tables (gelu_row_bf16, in place, and gelu_backward_row_bf16)
 * over every bf16 input: each finite one's output within bf16's rounding
 * of the exact GELU or its slope (and 1e-6: erf's approximation is
 * absolute in the far tail), a NaN's NaN; and a row whose length is not a
 * multiple of 16 leaves what follows it. */
static void check_gelu_table(void)
{
	enum { ALL = 65536, TAIL = 37 };
	uint16_t *x = xmalloc((ALL + 16) * sizeof *x);
	for (int i = 0; i < ALL + 16; i++)
		x[i] = (uint16_t)i;
	gelu_row_bf16(x, ALL);
	int bad = -1;
	for (int i = 0; i < ALL && bad < 0; i++) {
		uint32_t ui = (uint32_t)i << 16, uo = (uint32_t)x[i] << 16;
		float in, out;
		memcpy(&in, &ui, sizeof in), memcpy(&out, &uo, sizeof out);
		double want = 0.5 * in * (1 + erf(in / sqrt(2)));
		if (isnan(in) ? !isnan(out) : !isinf(in) && !(fabs(out - want) <= fabs(want) * 0x1p-8 + 1e-6))
			bad = i;
	}
	CHECK(bad < 0, "bf16 GELU by its table: every bf16 input's GELU, rounded (first wrong: bits %#x)", bad);
	float *ones = xmalloc(ALL * sizeof *ones);
	for (int i = 0; i < ALL; i++)
		x[i] = (uint16_t)i, ones[i] = 1.0f;
	uint16_t *d = xmalloc(ALL * sizeof *d);
	gelu_backward_row_bf16(d, ones, x, ALL);
	bad = -1;
	for (int i = 0; i < ALL && bad < 0; i++) {
		uint32_t ui = (uint32_t)i << 16, uo = (uint32_t)d[i] << 16;
		float in, out;
		memcpy(&in, &ui, sizeof in), memcpy(&out, &uo, sizeof out);
		double want = 0.5 * (1 + erf(in / sqrt(2))) + in * exp(-0.5 * (double)in * in) / sqrt(2 * M_PI);
		if (isnan(in) ? !isnan(out) : !isinf(in) && !(fabs(out - want) <= fabs(want) * 0x1p-8 + 1e-6))
			bad = i;
	}
	CHECK(bad < 0, "bf16 GELU's slope by its table: every bf16 input's, rounded (first wrong: bits %#x)", bad);
	free(ones), free(d);
	for (int i = 0; i < TAIL + 16; i++)
		x[i] = (uint16_t)(0x3f80 + i);   /* 1 and up */
	gelu_row_bf16(x, TAIL);
	int kept = 1;
	for (int i = TAIL; i < TAIL + 16; i++)
		kept &= x[i] == 0x3f80 + i;
	CHECK(kept && x[0] != 0x3f80, "bf16 GELU by its table over %d values leaves the ones after them", TAIL);
	free(x);
}

/* Whether each of n acts is within one bf16 ulp of the float beside it
 * (the AVX-512 rows' erf is not the plain op's to the last bit). */
static int within_ulp(const struct act *a, const float *x, size_t n)
{
	float *w = widened(a, n);
	int close = 1;
	for (size_t i = 0; i < n; i++)
		close &= fabsf(w[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f;
	free(w);
	return close;
}

/* Rotary embeddings over bf16 acts: the fp32 turn of the same (rounded)
 * inputs, each result rounded once; GeGLU, the fp32 op's within an ulp. */
static void check_rotary_geglu(struct rng *r)
{
	enum { N = 9, C = 32, H = 4, F = 24 };
	int32_t pos[N];
	for (int i = 0; i < N; i++)
		pos[i] = 37 * i;
	size_t n = (size_t)N * 3 * C;
	float *x = randoms(r, n);
	struct act *xl = low(x, n);
	float *ref = widened(xl, n);
	rotary_rows(ref, 0, 3 * C, 2, C, H, pos, N, 160000.0f, 0);
	bf->rotary(xl, 3 * C, 2, C, H, pos, N, 160000.0f, 0);
	CHECK(rounds_of(xl, ref, n), "bf16 rotary in place: the fp32 turn of the same Q and K, rounded");
	free(ref), free(xl), free(x);

	size_t m = (size_t)N * 2 * F;
	float *in = randoms(r, m), *dout = randoms(r, (size_t)N * F), *out = xmalloc(sizeof(float) * N * F),
	      *din = xmalloc(sizeof(float) * m);
	struct act *il = low(in, m), *ol = xmalloc((size_t)N * F * bf->act_size), *dl = xmalloc(m * bf->act_size);
	float *rounded_in = widened(il, m);
	geglu_rows(out, rounded_in, N, F);
	bf->geglu_forward(ol, il, N, F);
	geglu_backward_rows(din, dout, rounded_in, N, F);
	bf->geglu_backward(dl, dout, il, N, F);
	CHECK(within_ulp(ol, out, (size_t)N * F) && within_ulp(dl, din, m),
	      "bf16 GeGLU and its backward: the fp32 ops' results over the same input, within a bf16 ulp");
	free(in), free(dout), free(out), free(din), free(il), free(ol), free(dl), free(rounded_in);
}

/* The residual LayerNorm, with its output in acts beside, and the
 * LayerNorm backward (in place, as the model runs it) match the plain ops
 * within fp32's rounding: the same dropout mask, sums over several spans
 * of rows, rows not a multiple of 16 wide. */
static void check_layernorm(struct rng *r)
{
	enum { N = 200, C = 40 };
	const float p = 0.25f, eps = 1e-12f;
	const uint64_t seed = 17;
	float *res = randoms(r, N * C), *sum = randoms(r, N * C), *sum2 = xmalloc(sizeof(float) * N * C),
	      *bias = randoms(r, C), *w = randoms(r, C), *b = randoms(r, C),
	      *out = xmalloc(sizeof(float) * N * C), *out2 = xmalloc(sizeof(float) * N * C),
	      mean[N], rstd[N], mean2[N], rstd2[N];
	struct act *ol = xmalloc(N * C * bf->act_size);
	memcpy(sum2, sum, sizeof(float) * N * C);
	residual_layernorm_forward(out2, sum2, mean2, rstd2, res, bias, w, b, N, C, eps, p, seed);
	bf->residual_layernorm_forward(out, ol, sum, mean, rstd, res, bias, w, b, N, C, eps, p, seed);
	double e = fmax(fmax(rel_diff(out, out2, N * C), rel_diff(sum, sum2, N * C)),
			fmax(rel_diff(mean, mean2, N), rel_diff(rstd, rstd2, N)));
	int same_mask = 1;
	for (int i = 0; i < N * C; i++)
		same_mask &= (sum[i] == res[i]) == (sum2[i] == res[i]);
	CHECK(e < 1e-5 && same_mask, "bf16 residual LayerNorm: the plain op's outputs (%.2g) and "
	      "dropout mask", e);
	CHECK(rounds_of(ol, out, N * C), "bf16 residual LayerNorm's acts: its fp32 output rounded");

	float *dout = randoms(r, N * C), *din2 = xmalloc(sizeof(float) * N * C),
	      *dw = xcalloc(C, sizeof(float)), *db = xcalloc(C, sizeof(float)),
	      *dw2 = xcalloc(C, sizeof(float)), *db2 = xcalloc(C, sizeof(float));
	layernorm_backward(din2, dw2, db2, dout, sum, mean, rstd, w, N, C);
	bf->layernorm_backward(dout, dw, db, dout, sum, mean, rstd, w, N, C);
	e = fmax(rel_diff(dout, din2, N * C), fmax(rel_diff(dw, dw2, C), rel_diff(db, db2, C)));
	CHECK(e < 1e-5, "bf16 LayerNorm backward in place: the plain op's din, dw and db (%.2g)", e);
	free(res), free(sum), free(sum2), free(bias), free(w), free(b), free(out), free(out2), free(ol);
	free(dout), free(din2), free(dw), free(dw2), free(db), free(db2);
}

/* The attention over bf16 q, k, v into a bf16 context, and its backward,
 * against fp32's over the same values: within bf16's precision, as its
 * products round the probabilities and their gradients too. All keys, or a
 * band of them (ModernBERT's local layers), over sequences of T, T * 13/20
 * and T * 7/20 rows (T = 200: a band's queries in several tiles), heads C/H
 * wide, with dropout p. Without dropout or a band, on AMX, a head runs
 * whole (head_forward_amx), in blocks of 32 queries; there the second
 * sequence has no real key. */
static void check_attention(struct rng *r, int band, int T, float p, int C, int H)
{
	enum { AB = 3 };
	int32_t kv_start[AB + 1] = { 0, T, T + T * 13 / 20, 2 * T };
	int64_t p_start[AB + 1];
	attention_probs(p_start, kv_start, NULL, AB, H);
	size_t N = (size_t)2 * T, n = N * 3 * C;
	float *qkv = randoms(r, n), *dctx = randoms(r, N * C), *ctx = xmalloc(sizeof(float) * N * C),
	      *g = xmalloc(sizeof(float) * n), *g2 = xmalloc(sizeof(float) * n);
	uint8_t *mask = xmalloc(N);
	for (size_t i = 0; i < N; i++)
		mask[i] = i != 7 && i < N - 2 && (p > 0 || band || i < (size_t)kv_start[1] || i >= (size_t)kv_start[2]);
	struct act *ql = low(qkv, n), *cl = xmalloc(N * C * bf->act_size);
	for (size_t i = 0; i < n; i++)
		qkv[i] = bf16_round(qkv[i]);
	struct attention a = { AB, T, C, H, float_acts(qkv), float_acts(qkv + C),
			       float_acts(qkv + 2 * C), 3 * C, 3 * C, kv_start, NULL, p_start, mask,
			       p, 4 };
	a.band = band;
	struct attention al = a;
	al.q = ql, al.k = act_at(bf, ql, C), al.v = act_at(bf, ql, 2 * C);
	attention_forward(ctx, NULL, &a);
	bf->attention_forward(cl, NULL, &al);
	float *got = widened(cl, N * C);
	double e = rel_diff(got, ctx, N * C);
	CHECK(e < 2e-2, "bf16 attention into acts, T %d, band %d, p %g, heads %d wide: fp32's context within "
	      "bf16's precision (%.2g)", T, band, p, C / H, e);
	if (band) {   /* the band takes effect: fp32's context without it differs */
		float *all = xmalloc(sizeof(float) * N * C);
		struct attention unbanded = a;
		unbanded.band = 0;
		attention_forward(all, NULL, &unbanded);
		double d = rel_diff(all, ctx, N * C);
		CHECK(d > 0.1, "bf16 attention, T %d, band %d: a context other than all keys' (rel diff %.2g)", T,
		      band, d);
		free(all);
	}
	attention_backward(g2, g2 + C, g2 + 2 * C, dctx, NULL, &a);
	struct act *gl = xmalloc(n * bf->act_size);
	bf->attention_backward(gl, act_at(bf, gl, C), act_at(bf, gl, 2 * C), dctx, NULL, &al);
	free(g);
	g = widened(gl, n);
	free(gl);
	e = rel_diff(g, g2, n);
	CHECK(e < 3e-2, "bf16 attention backward into acts, T %d, band %d, p %g, heads %d wide: fp32's dq, dk, "
	      "dv within bf16's precision (%.2g)", T, band, p, C / H, e);
	free(mask);
	free(qkv), free(dctx), free(ctx), free(g), free(g2), free(ql), free(cl), free(got);
}

/* The attention heads' GEMM (gemm_bf16, or gemm_amx on AMX's tiles): C =
 * alpha op(A) op(B) + beta C against double sums of the rounded operands,
 * in each transpose, with row strides past the matrices' widths and sizes
 * off every block edge; and on the operands given in bf16, the same bits. */
static void check_gemm(gemm_fn gemm, const char *name, struct rng *r, char ta, char tb, int M, int N,
		       int K, float beta)
{
	int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 5, ldc = N + 2;
	float *A = randoms(r, (size_t)(ta == 'N' ? M : K) * lda),
	      *B = randoms(r, (size_t)(tb == 'N' ? K : N) * ldb), *C = randoms(r, (size_t)M * ldc);
	double *ref = xmalloc((size_t)M * N * sizeof *ref);
	float *out = xmalloc((size_t)M * N * sizeof *out), alpha = 0.375f;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0;
			for (int k = 0; k < K; k++)
				s += (double)bf16_round(ta == 'N' ? A[i * lda + k] : A[k * lda + i]) *
				     bf16_round(tb == 'N' ? B[k * ldb + j] : B[j * ldb + k]);
			ref[i * N + j] = alpha * s + beta * C[i * ldc + j];
		}
	float pad = C[ldc - 1];
	size_t nA = (size_t)(ta == 'N' ? M : K) * lda, nB = (size_t)(tb == 'N' ? K : N) * ldb;
	struct act *Al = low(A, nA), *Bl = low(B, nB);
	float *C2 = xmalloc((size_t)M * ldc * sizeof *C2);
	memcpy(C2, C, (size_t)M * ldc * sizeof *C2);
	gemm_bf16_reserve(M > N ? (M > K ? M : K) : (N > K ? N : K));
	gemm(ta, tb, M, N, K, alpha, (struct operand){ A, lda, 0 }, (struct operand){ B, ldb, 0 }, beta, C, ldc);
	for (int i = 0; i < M; i++)
		memcpy(out + (size_t)i * N, C + (size_t)i * ldc, N * sizeof *out);
	double e = rel_err(out, ref, (size_t)M * N);
	CHECK(e < 1e-5 && C[ldc - 1] == pad,
	      "%s %c%c %dx%dx%d beta %g: the reference's sums (rel err %.2g), nothing past each row", name,
	      ta, tb, M, N, K, beta, e);
	gemm(ta, tb, M, N, K, alpha, (struct operand){ Al, lda, 1 }, (struct operand){ Bl, ldb, 1 }, beta, C2,
	     ldc);
	CHECK(!memcmp(C2, C, (size_t)M * ldc * sizeof *C2), "%s %c%c %dx%dx%d on operands in bf16: the same bits",
	      name, ta, tb, M, N, K);
	free(A), free(B), free(C), free(C2), free(Al), free(Bl), free(ref), free(out);
}

/* The bf16 path's softmax of a row against a double reference: masked keys
 * and keys past n get 0, a row with no real key is uniform over len. */
static void check_softmax(struct rng *r, int n, int len, int holes)
{
	float *p = randoms(r, (size_t)len);
	uint8_t *mask = xmalloc((size_t)len);
	double ref[64], s = 0, m = -INFINITY;
	for (int j = 0; j < len; j++) {
		p[j] *= 8;
		mask[j] = holes < 0 ? 0 : !(holes && j % holes == 1);
		if (j < n && mask[j])
			m = fmax(m, p[j]);
	}
	for (int j = 0; j < len; j++)
		s += ref[j] = j < n && mask[j] ? exp((double)p[j] - m) : 0;
	for (int j = 0; j < len; j++)
		ref[j] = holes < 0 ? 1.0 / len : ref[j] / s;
	softmax_row_bf16(p, mask, n, len);
	double e = 0;
	int exact = 1;
	for (int j = 0; j < len; j++) {
		e = fmax(e, fabs(p[j] - ref[j]));
		exact &= ref[j] != 0 || p[j] == 0;
	}
	CHECK(e < 1e-6 && exact, "bf16 path's softmax, %d of %d keys%s: the reference within 1e-6 "
	      "(%.2g), exact zeros", n, len, holes < 0 ? ", none real" : holes ? ", holes" : "", e);
	free(p), free(mask);
}

/* Its backward: dp = p * (dp - sum(p * dp)) against double sums. */
static void check_softmax_backward(struct rng *r, int n)
{
	float *p = randoms(r, (size_t)n), *dp = randoms(r, (size_t)n + 1);
	double dot = 0, ref[64], e = 0;
	for (int j = 0; j < n; j++)
		dot += (double)p[j] * dp[j];
	for (int j = 0; j < n; j++)
		ref[j] = p[j] * (dp[j] - dot);
	float past = dp[n];
	softmax_backward_row_bf16(dp, p, n);
	for (int j = 0; j < n; j++)
		e = fmax(e, fabs(dp[j] - ref[j]));
	CHECK(e < 1e-5 && dp[n] == past, "bf16 path's softmax backward over %d keys: the reference "
	      "within 1e-5 (%.2g), nothing past n", n, e);
	free(p), free(dp);
}

/* One model's step on fp32 and on bf16: the same loss and gradients within
 * bf16's 8 bits of mantissa. */
enum model_mode { PLAIN, RECOMPUTE, VAT };
static const char *const mode_names[] = { "", " with recompute", " with VAT" };

/* The small classifier the model checks run, and its batch: 4 sequences
 * of 5, 7, 9 and 11 tokens, their ids drawn from seed. */
enum { TINY_B = 4, TINY_T = 12, TINY_LABELS = 3 };
static const struct bert_config tiny = { .vocab = 60, .hidden = 32, .layers = 2, .heads = 2, .ffn = 64,
					 .max_pos = 16, .type_vocab = 2, .ln_eps = 1e-12f, .task = TASK_CLS,
					 .num_labels = TINY_LABELS };
struct tiny_batch {
	int32_t ids[TINY_B * TINY_T], labels[TINY_B];
	uint8_t mask[TINY_B * TINY_T];
	struct bert_batch b;
};

static void tiny_batch(struct tiny_batch *t, uint64_t seed)
{
	struct rng r;
	rng_seed(&r, seed);
	for (int i = 0; i < TINY_B * TINY_T; i++) {
		t->ids[i] = 1 + (int32_t)rng_below(&r, tiny.vocab - 1);
		t->mask[i] = i % TINY_T < 5 + 2 * (i / TINY_T);
	}
	memcpy(t->labels, (int32_t[TINY_B]){ 0, 2, 1, 2 }, sizeof t->labels);
	t->b = (struct bert_batch){ TINY_B, TINY_T, t->ids, NULL, t->mask, t->labels, NULL };
}

/* A rotary family's bases, and a local band of 2 either side in every
 * other layer. */
static void family_shape(struct bert_config *c)
{
	c->rope_global = family_of(c->family)->rope_global;
	c->rope_local = family_of(c->family)->rope_local;
	c->local_window = 4;
	c->global_every = 2;
}

/* mode: plain, or the graph's features that run forwards again over the same
 * buffers (recompute), or on the fp32 twin over buffers carved for it (VAT);
 * the classifier of family. */
static void check_model(const struct backend *bf16, enum model_mode mode, enum family_id family)
{
	struct bert_config c = tiny;
	c.family = family;
	c.pad_id = family_of(family)->pad_id < c.vocab ? family_of(family)->pad_id : 0;
	family_shape(&c);
	c.type_vocab = family_of(family)->type_vocab ? 2 : 0;
	c.emb = family_of(family)->keys->emb ? 16 : 0;   /* projected */
	char name[32] = "";
	if (family != FAMILY_BERT)
		snprintf(name, sizeof name, "%s ", family_of(family)->model_type);
	struct tiny_batch t;
	tiny_batch(&t, 11);
	const struct bert_batch b = t.b;
	struct bert *m[2] = { bert_new(&c, backend_cpu()), bert_new(&c, bf16) };
	double loss[2];
	for (int k = 0; k < 2; k++) {
		bert_init(m[k], 3);
		bert_set_recompute(m[k], mode == RECOMPUTE);
		int64_t count;
		loss[k] = bert_forward(m[k], &b, 1, 5, &count);
		bert_backward(m[k], 1.0f / (float)count);
		if (mode == VAT) {
			/* the adversarial loss and its gradient alone, after a power
			 * iteration at the default probe, which bf16's rounding would
			 * drown (cosine 0.49 here) were it not run in fp32 */
			memset(bert_grads(m[k]), 0, bert_numel(m[k]) * sizeof(float));
			bert_vat(m[k], 5.0f, 1e-3f, 1, 9, 1.0f);
			loss[k] = bert_take_loss(m[k]);
		}
	}
	CHECK(close_enough(loss[1], loss[0], 0, 1e-2), "bf16 %smodel%s: loss %.6f against fp32's %.6f",
	      name, mode_names[mode], loss[1], loss[0]);
	const float *g0 = bert_grads(m[0]), *g1 = bert_grads(m[1]);
	double dot = 0, n0 = 0, n1 = 0;
	for (size_t i = 0; i < bert_numel(m[0]); i++)
		dot += (double)g0[i] * g1[i], n0 += (double)g0[i] * g0[i], n1 += (double)g1[i] * g1[i];
	double cosine = dot / sqrt(n0 * n1), ratio = sqrt(n1 / n0);
	CHECK(cosine > 0.999 && fabs(ratio - 1) < 0.02,
	      "bf16 %smodel%s: gradient direction (cosine %.5f) and norm (ratio %.4f) as fp32's",
	      name, mode_names[mode], cosine, ratio);
	bert_free(m[0]), bert_free(m[1]);
}

/* The feed-forward's GELU in its product (a model that only scores): the
 * exact GELU of the product and bias as rounded into acts, rounded into
 * acts. */
static void check_gelu_product(struct rng *r, int N, int Cin, int Cout)
{
	float *in = randoms(r, (size_t)N * Cin), *w = randoms(r, (size_t)Cout * Cin), *b = randoms(r, Cout);
	struct act *il = low(in, (size_t)N * Cin), *wl = low(w, (size_t)Cout * Cin);
	struct act *sl = xmalloc((size_t)N * Cout * bf->act_size), *ol = xmalloc((size_t)N * Cout * bf->act_size);
	bf->linear_forward_act(sl, il, wl, b, N, Cin, Cout);
	bf->linear_gelu_forward_act(ol, il, wl, b, N, Cin, Cout);
	float *sum = widened(sl, (size_t)N * Cout), *got = widened(ol, (size_t)N * Cout);
	int rounded = 1;
	for (int i = 0; i < N * Cout; i++) {
		double x = sum[i], want = 0.5 * x * (1 + erf(x / sqrt(2)));
		rounded &= fabs(got[i] - want) <= fabs(want) * 0x1p-8 + 1e-6;
	}
	CHECK(rounded, "bf16 GELU in the product %dx%d->%d: GELU of the sum and bias in acts, rounded into acts",
	      N, Cin, Cout);
	free(in), free(w), free(b), free(sum), free(il), free(wl), free(sl), free(ol), free(got);
}

static void backward_of(const void *m)
{
	bert_backward((struct bert *)m, 1.0f);
}

/* A model that only scores gives the logits of one that trains, up to
 * bf16's rounding (its GELU is rounded once, not twice), and refuses a
 * backward. */
static void check_forward_only(const struct backend *be, enum family_id family)
{
	struct bert_config c = tiny;
	c.family = family;
	c.pad_id = family_of(family)->pad_id < c.vocab ? family_of(family)->pad_id : 0;
	c.type_vocab = family_of(family)->type_vocab ? 2 : 0;
	family_shape(&c);
	struct tiny_batch t;
	tiny_batch(&t, 12);
	const struct bert_batch b = t.b;
	struct rng r;
	rng_seed(&r, 12);
	struct bert *m[2] = { bert_new(&c, be), bert_new(&c, be) };
	float logits[2][TINY_B * TINY_LABELS], *w = randoms(&r, bert_numel(m[0]));   /* biases too, where init has zeros */
	bert_set_forward_only(m[1]);
	for (int pass = 0; pass < 2; pass++) {   /* the second with other weights, pushed */
		for (int k = 0; k < 2; k++) {
			for (size_t i = 0; i < bert_numel(m[k]); i++)
				bert_params(m[k])[i] = (pass ? -0.2f : 0.3f) * w[i];
			bert_push(m[k]);
			int64_t count;
			bert_forward(m[k], &b, 0, 5, &count);
			bert_forward(m[k], &b, 0, 5, &count);
			memcpy(logits[k], bert_logits(m[k]), sizeof logits[k]);
		}
		double e = 0, big = 1e-30;
		for (int i = 0; i < TINY_B * TINY_LABELS; i++)
			e = fmax(e, fabs(logits[1][i] - logits[0][i])), big = fmax(big, fabs(logits[0][i]));
		/* bf16's GELU in its product rounds otherwise; fp32's, the same ops */
		CHECK(acts_are_floats(be) ? e == 0 : e <= big * 0.02,
		      "%s %s model that only scores%s: the logits of one that trains (rel diff %.2g)", be->name,
		      family_of(family)->model_type, pass ? ", its weights pushed anew" : "", e / big);
	}
	char what[96];
	snprintf(what, sizeof what, "a backward of a %s %s model that only scores", be->name, family_of(family)->model_type);
	expect_die(what, backward_of, m[1], "only scores");
	bert_free(m[0]), bert_free(m[1]);
	free(w);
}

/* What a model allocated: its largest buffer (its workspace), and the most
 * it held at once. */
static size_t largest;
static double held, held_peak;
static struct { void *p; size_t bytes; } bufs[64];

static void *recording_alloc(size_t bytes)
{
	if (bytes > largest)
		largest = bytes;
	void *p = backend_cpu()->alloc(bytes);
	int i = 0;
	while (bufs[i].p)
		if (++i == 64)
			die("test_bf16: more than 64 buffers");
	bufs[i].p = p, bufs[i].bytes = bytes;
	held += (double)bytes;
	if (held > held_peak)
		held_peak = held;
	return p;
}

static void recording_release(void *p)
{
	for (int i = 0; i < 64; i++)
		if (bufs[i].p == p) {
			held -= (double)bufs[i].bytes;
			bufs[i].p = NULL;
		}
	backend_cpu()->release(p);
}

/* The memory check's estimate of a batch is the workspace the model grows to
 * for it, on fp32 and on bf16 acts (within each buffer's 64-byte rounding),
 * with embeddings as wide as the layers, or (ELECTRA's) of width emb. */
static void check_batch_bytes(const struct backend *be, enum family_id family, int emb)
{
	struct bert_config c = { .vocab = 40, .hidden = 64, .layers = 2, .heads = 2, .ffn = 256,
				 .max_pos = 64, .type_vocab = family_of(family)->type_vocab ? 2 : 0, .ln_eps = 1e-12f,
				 .task = TASK_CLS, .num_labels = 3, .family = family, .emb = emb };
	family_shape(&c);
	enum { B = 4, T = 64 };
	int32_t ids[B * T], labels[B] = { 0, 2, 1, 2 };
	uint8_t mask[B * T];
	for (int i = 0; i < B * T; i++)
		ids[i] = 1 + i % (c.vocab - 1), mask[i] = 1;   /* no padding */
	/* not host memory: bert_fit would grow a host buffer with room to spare
	 * (untouched, so taking no memory), which these counts would take in */
	struct backend rec = *be, twin;
	rec.alloc = recording_alloc;
	rec.release = recording_release;
	rec.host = 0;
	if (be->precise) {   /* VAT's probe allocates through the fp32 twin */
		twin = *be->precise;
		twin.alloc = recording_alloc;
		twin.release = recording_release;
		twin.host = 0;
		rec.precise = &twin;
	}
	largest = 0;
	held_peak = held;
	struct bert *m = bert_new(&c, &rec);
	struct bert_batch b = { B, T, ids, NULL, mask, labels, NULL };
	int64_t count;
	bert_forward(m, &b, 1, 1, &count);
	/* the workspace: the batch's bytes but the attention's threads' own scratch */
	double want = bert_batch_bytes(&c, &rec, B, T, B, 0) - rec.attention_scratch(B, T, c.hidden, c.heads);
	double slack = 64.0 * 100;
	CHECK(fabs((double)largest - want) <= slack,
	      "%s, %s, embeddings %d wide: the memory check counts %.0f bytes for a batch; its workspace is %zu",
	      be->name, family_of(family)->model_type, bert_emb_width(&c), want, largest);
	/* VAT's: at most what its estimate says, less the probe's predictions
	 * where there is no fp32 twin */
	bert_backward(m, 1.0f / (float)count);
	double before = held_peak, vat = bert_vat_bytes(&c, &rec, B, T, B, 0);
	bert_vat(m, 1.0f, 1e-3f, 1, 9, 1.0f);
	double added = held_peak - before, less = be->precise ? 0 : 4.0 * B * bert_logit_width(&c);
	CHECK(added <= vat + slack && added >= vat - less - slack,
	      "%s, %s, embeddings %d wide: the memory check counts %.0f bytes for VAT; it took %.0f more", be->name,
	      family_of(family)->model_type, bert_emb_width(&c), vat, added);
	bert_free(m);
}

int main(void)
{
	const char *why = NULL;
	bf = backend_cpu_bf16(&why);
	const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
	if (!bf) {
		CHECK(why && *why, "no bf16 here (ONEDNN_MAX_CPU_ISA %s): refused with a reason: %s",
		      cap ? cap : "unset", why ? why : "(none)");
		CHECK_DONE();
	}
	CHECK(strcmp(bf->name, "cpu") && bf->act_size == 2 &&
	      bf->linear_forward != backend_cpu()->linear_forward,
	      "the bf16 backend (%s) has bf16 acts and its own linear ops", bf->name);
	check_rounding();
	for (int i = 0; i < 4; i++) {   /* as wide as the layers, narrower, wider; pre-norm */
		enum family_id f = (enum family_id[]){ FAMILY_BERT, FAMILY_ELECTRA, FAMILY_ELECTRA, FAMILY_MODERNBERT }[i];
		check_batch_bytes(backend_cpu(), f, (int[]){ 0, 32, 96, 0 }[i]);
		check_batch_bytes(bf, f, (int[]){ 0, 32, 96, 0 }[i]);
	}
	struct rng r;
	rng_seed(&r, 1);
	check_forward(&r, 37, 19, 23, 1);
	check_forward(&r, 5, 19, 23, 1);      /* the same primitive, another row count */
	check_forward(&r, 64, 48, 96, 0);
	check_many_row_counts(&r);
	check_fixed_weights(&r);
	check_backward(&r, 37, 19, 23, 0, 1);
	check_backward(&r, 37, 19, 23, 1, 1);
	check_backward(&r, 11, 19, 23, 1, 0);
	check_backward(&r, 64, 48, 96, 1, 1);
	check_backward(&r, 200, 19, 23, 1, 1);    /* column sums over spans of 64 rows and a part */
	/* no rows (a head with nothing to predict): nothing written, nothing added */
	float w[6] = { 1, 2, 3, 4, 5, 6 }, dw[6] = { 1, 1, 1, 1, 1, 1 }, db[2] = { 7, 7 };
	struct act *wl = low(w, 6);
	bf->linear_forward(NULL, NULL, wl, db, 0, 3, 2);
	bf->linear_backward(NULL, dw, db, NULL, NULL, wl, 0, 3, 2, 0);
	CHECK(dw[0] == 1 && dw[5] == 1 && db[0] == 7 && db[1] == 7,
	      "bf16 linear over 0 rows leaves the gradients as they were");
	free(wl);
	check_gelu(&r);
	check_gelu_table();
	check_rotary_geglu(&r);
	check_gelu_product(&r, 37, 19, 23);
	check_gelu_product(&r, 64, 48, 96);
	check_layernorm(&r);
	check_attention(&r, 0, 20, 0.1f, 32, 2);
	check_attention(&r, 4, 20, 0.1f, 32, 2);
	check_attention(&r, 40, 200, 0.1f, 32, 2);
	check_attention(&r, 0, 20, 0.0f, 32, 2);
	check_attention(&r, 0, 200, 0.0f, 32, 1);
	check_attention(&r, 0, 77, 0.0f, 128, 2);
	const char *ts = "NT";
	int amx = bf16_amx();
	if (!amx)
		printf("note: no AMX-BF16 here (or ONEDNN_MAX_CPU_ISA caps it): gemm_amx is not run\n");
	for (int k = 0; k < 1 + amx; k++) {
		gemm_fn gemm = k ? gemm_amx : gemm_bf16;
		const char *name = k ? "bf16 heads' GEMM on AMX" : "bf16 heads' GEMM";
		for (int t = 0; t < 4; t++) {
			check_gemm(gemm, name, &r, ts[t / 2], ts[t % 2], 37, 50, 64, 0.0f);
			check_gemm(gemm, name, &r, ts[t / 2], ts[t % 2], 8, 32, 33, 0.0f);
			check_gemm(gemm, name, &r, ts[t / 2], ts[t % 2], 1, 1, 1, 0.5f);
			check_gemm(gemm, name, &r, ts[t / 2], ts[t % 2], 130, 17, 128, 1.0f);
			check_gemm(gemm, name, &r, ts[t / 2], ts[t % 2], 97, 128, 32, 0.0f);
		}
	}
	check_softmax(&r, 40, 40, 0);
	check_softmax(&r, 33, 50, 0);
	check_softmax(&r, 7, 16, 3);
	check_softmax(&r, 20, 20, -1);
	check_softmax_backward(&r, 16);
	check_softmax_backward(&r, 45);
	for (enum model_mode mode = PLAIN; mode <= VAT; mode++)
		check_model(bf, mode, FAMILY_BERT);
	for (enum family_id f = FAMILY_ROBERTA; f < FAMILY_COUNT; f++)
		check_model(bf, PLAIN, f);
	check_forward_only(bf, FAMILY_BERT);
	check_forward_only(bf, FAMILY_MODERNBERT);
	check_forward_only(backend_cpu(), FAMILY_MODERNBERT);
	CHECK_DONE();
}
