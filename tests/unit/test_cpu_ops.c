/* Every CPU op against a naive double-precision reference written here:
 * forward outputs directly, backward against central differences of the
 * reference (loss = sum of w * output for fixed random w). */
#include "backend/cpu_ops.h"
#include "check.h"
#include "util/rng.h"
#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static struct rng gen;

static double *rand_doubles(int n, double scale)
{
	double *x = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++)
		x[i] = scale * rng_normal(&gen);
	return x;
}

static float *to_floats(const double *x, int n)
{
	float *f = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
		f[i] = (float)x[i];
	return f;
}

static double max_abs_diff(const float *a, const double *b, int n)
{
	double worst = 0;
	for (int i = 0; i < n; i++)
		worst = fmax(worst, fabs(a[i] - b[i]));
	return worst;
}

/* The loss every gradient check uses: sum of w[i] * out[i]. */
static double weighted_sum(const double *w, const double *out, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += w[i] * out[i];
	return s;
}

typedef double (*loss_fn)(const double *theta, const void *ctx);

/* Largest |analytic - numeric| over the largest |numeric|, central
 * differences of the double reference at every coordinate of theta. */
static double grad_error(loss_fn f, const void *ctx, const double *theta,
			 const float *analytic, int n)
{
	double *t = malloc(sizeof(double) * n), worst = 0, scale = 1e-12;
	memcpy(t, theta, sizeof(double) * n);
	for (int i = 0; i < n; i++) {
		double h = 1e-5 * fmax(1, fabs(theta[i]));
		t[i] = theta[i] + h;
		double up = f(t, ctx);
		t[i] = theta[i] - h;
		double down = f(t, ctx);
		t[i] = theta[i];
		double numeric = (up - down) / (2 * h);
		worst = fmax(worst, fabs(analytic[i] - numeric));
		scale = fmax(scale, fabs(numeric));
	}
	free(t);
	return worst / scale;
}

#define GRAD_TOL 1e-4

static double ref_layernorm_row(double *out, const double *x, const double *g,
				const double *b, int C)
{
	double mean = 0, var = 0;
	for (int j = 0; j < C; j++)
		mean += x[j] / C;
	for (int j = 0; j < C; j++)
		var += (x[j] - mean) * (x[j] - mean) / C;
	double rstd = 1 / sqrt(var + 1e-5);
	for (int j = 0; j < C; j++)
		out[j] = (x[j] - mean) * rstd * g[j] + b[j];
	return rstd;
}

static double ref_gelu(double x)
{
	return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

/* ---- linear ---- */

struct linear_case {
	int N, Cin, Cout;
	const double *w;
};

static void ref_linear(double *out, const double *theta, const struct linear_case *k)
{
	const double *x = theta, *W = x + k->N * k->Cin, *b = W + k->Cout * k->Cin;
	for (int r = 0; r < k->N; r++)
		for (int o = 0; o < k->Cout; o++) {
			double s = b[o];
			for (int i = 0; i < k->Cin; i++)
				s += x[r * k->Cin + i] * W[o * k->Cin + i];
			out[r * k->Cout + o] = s;
		}
}

static double linear_loss(const double *theta, const void *ctx)
{
	const struct linear_case *k = ctx;
	double out[64];
	ref_linear(out, theta, k);
	return weighted_sum(k->w, out, k->N * k->Cout);
}

static void test_linear(void)
{
	struct linear_case k = { 5, 7, 3, NULL };
	int nx = k.N * k.Cin, nw = k.Cout * k.Cin, n = nx + nw + k.Cout, nout = k.N * k.Cout;
	double *theta = rand_doubles(n, 1), *w = rand_doubles(nout, 1), ref[64];
	k.w = w;
	float *t = to_floats(theta, n), *dout = to_floats(w, nout), out[64];
	linear_forward(out, t, t + nx, t + nx + nw, k.N, k.Cin, k.Cout);
	ref_linear(ref, theta, &k);
	CHECK(max_abs_diff(out, ref, nout) < 1e-5, "linear forward matches the reference");

	float *grad = calloc(n, sizeof(float));
	linear_backward(grad, grad + nx, grad + nx + nw, dout, t, t + nx, k.N, k.Cin, k.Cout, 0);
	double err = grad_error(linear_loss, &k, theta, grad, n);
	CHECK(err < GRAD_TOL, "linear gradients (input, weight, bias) match finite differences (%.1e)",
	      err);

	/* a second backward adds to the parameter grads and, when asked, to din */
	float *again = malloc(sizeof(float) * n);
	memcpy(again, grad, sizeof(float) * n);
	linear_backward(again, again + nx, again + nx + nw, dout, t, t + nx, k.N, k.Cin, k.Cout, 1);
	int doubled = 1;
	for (int i = 0; i < n; i++)
		doubled &= close_enough(again[i], 2 * grad[i], 1e-6, 1e-5);
	CHECK(doubled, "linear backward accumulates into grads");
	free(theta), free(w), free(t), free(dout), free(grad), free(again);
}

/* ---- embeddings ---- */

enum { EV = 6, ET = 4, EC = 3, EB = 2, ETYPES = 2 };
static const int32_t emb_ids[EB * ET] = { 2, 5, 0, 0, 2, 1, 3, 0 };
static const int32_t emb_types[EB * ET] = { 0, 0, 1, 1, 0, 1, 1, 0 };
static const int32_t emb_pos[EB * ET] = { 0, 1, 2, 3, 2, 0, 3, 1 };

static void ref_embedding(double *out, const double *theta)
{
	const double *word = theta, *pos = word + EV * EC, *type = pos + ET * EC;
	for (int r = 0; r < EB * ET; r++)
		for (int c = 0; c < EC; c++)
			out[r * EC + c] = word[emb_ids[r] * EC + c] + pos[emb_pos[r] * EC + c] +
					  type[emb_types[r] * EC + c];
}

static double embedding_loss(const double *theta, const void *ctx)
{
	double out[EB * ET * EC];
	ref_embedding(out, theta);
	return weighted_sum(ctx, out, EB * ET * EC);
}

static void test_embedding(void)
{
	int n = (EV + ET + ETYPES) * EC, nout = EB * ET * EC;
	double *theta = rand_doubles(n, 1), *w = rand_doubles(nout, 1), ref[EB * ET * EC];
	float *t = to_floats(theta, n), *dout = to_floats(w, nout), out[EB * ET * EC];
	embedding_forward(out, emb_ids, emb_types, emb_pos, t, t + EV * EC, t + (EV + ET) * EC,
			  EB * ET, EC);
	ref_embedding(ref, theta);
	CHECK(max_abs_diff(out, ref, nout) < 1e-6, "embedding forward matches the reference");

	float *grad = calloc(n, sizeof(float));
	embedding_backward(grad, grad + EV * EC, grad + (EV + ET) * EC, dout, emb_ids, emb_types,
			   emb_pos, EB * ET, EC, -1);
	double err = grad_error(embedding_loss, w, theta, grad, n);
	CHECK(err < GRAD_TOL, "embedding scatter-add matches finite differences (%.1e)", err);

	/* with pad_id 0 the [PAD] row gets nothing and every other row the same */
	float *padded = calloc(n, sizeof(float));
	embedding_backward(padded, padded + EV * EC, padded + (EV + ET) * EC, dout, emb_ids,
			   emb_types, emb_pos, EB * ET, EC, 0);
	int pad_zero = 1, rest_same = 1;
	for (int i = 0; i < n; i++) {
		if (i < EC)
			pad_zero &= padded[i] == 0;
		else
			rest_same &= padded[i] == grad[i];
	}
	CHECK(pad_zero && rest_same, "the padding id's word row gets no gradient, as padding_idx");
	free(theta), free(w), free(t), free(dout), free(grad), free(padded);
}

/* ---- layernorm, plain and as a residual block's tail ---- */

enum { LN = 4, LC = 16 };

static double layernorm_loss(const double *theta, const void *ctx)
{
	const double *x = theta, *g = x + LN * LC, *b = g + LC;
	double out[LN * LC];
	for (int r = 0; r < LN; r++)
		ref_layernorm_row(out + r * LC, x + r * LC, g, b, LC);
	return weighted_sum(ctx, out, LN * LC);
}

static void test_layernorm(void)
{
	int n = LN * LC + 2 * LC, nout = LN * LC;
	double *theta = rand_doubles(n, 1), *w = rand_doubles(nout, 1), ref[LN * LC];
	for (int j = 0; j < LN * LC; j++)
		theta[j] += 3;  /* an offset the mean must remove */
	float *t = to_floats(theta, n), *dout = to_floats(w, nout), out[LN * LC], mean[LN], rstd[LN];
	layernorm_forward(out, mean, rstd, t, t + LN * LC, t + LN * LC + LC, LN, LC, 1e-5f);
	for (int r = 0; r < LN; r++)
		ref_layernorm_row(ref + r * LC, theta + r * LC, theta + LN * LC, theta + LN * LC + LC, LC);
	CHECK(max_abs_diff(out, ref, nout) < 1e-5, "layernorm forward matches the reference");

	float *grad = calloc(n, sizeof(float));
	layernorm_backward(grad, grad + LN * LC, grad + LN * LC + LC, dout, t, mean, rstd,
			   t + LN * LC, LN, LC);
	double err = grad_error(layernorm_loss, w, theta, grad, n);
	CHECK(err < GRAD_TOL, "layernorm gradients match finite differences (%.1e)", err);

	/* in place, as the model calls it */
	float *inplace = malloc(sizeof(float) * nout), dw[LC] = { 0 }, db[LC] = { 0 };
	memcpy(inplace, dout, sizeof(float) * nout);
	layernorm_backward(inplace, dw, db, inplace, t, mean, rstd, t + LN * LC, LN, LC);
	CHECK(!memcmp(inplace, grad, sizeof(float) * nout) && !memcmp(dw, grad + LN * LC, sizeof dw),
	      "layernorm backward in place gives the same bits");
	free(theta), free(w), free(t), free(dout), free(grad), free(inplace);
}

struct residual_case {
	const double *w;
	float p;
	uint64_t seed;
};

/* theta = res, branch, bias, gamma, beta: sum = res + dropout(branch + bias) */
static void ref_residual_layernorm(double *out, const double *theta, const struct residual_case *k)
{
	const double *res = theta, *x = res + LN * LC, *bias = x + LN * LC, *g = bias + LC,
		     *b = g + LC;
	double sum[LN * LC];
	for (int i = 0; i < LN * LC; i++) {
		double keep = k->p ? dropout_keeps(k->seed, i, k->p) / (1.0 - k->p) : 1;
		sum[i] = res[i] + (x[i] + bias[i % LC]) * keep;
	}
	for (int r = 0; r < LN; r++)
		ref_layernorm_row(out + r * LC, sum + r * LC, g, b, LC);
}

static double residual_loss(const double *theta, const void *ctx)
{
	const struct residual_case *k = ctx;
	double out[LN * LC];
	ref_residual_layernorm(out, theta, k);
	return weighted_sum(k->w, out, LN * LC);
}

static void test_residual_layernorm(float p)
{
	int nx = LN * LC, n = 2 * nx + 3 * LC;
	double *theta = rand_doubles(n, 1), *w = rand_doubles(nx, 1), ref[LN * LC];
	struct residual_case k = { w, p, 99 };
	float *t = to_floats(theta, n), *dout = to_floats(w, nx), out[LN * LC], mean[LN], rstd[LN];
	float *sum = malloc(sizeof(float) * nx);
	memcpy(sum, t + nx, sizeof(float) * nx);
	residual_layernorm_forward(out, sum, mean, rstd, t, t + 2 * nx, t + 2 * nx + LC,
				   t + 2 * nx + 2 * LC, LN, LC, 1e-5f, p, k.seed);
	ref_residual_layernorm(ref, theta, &k);
	CHECK(max_abs_diff(out, ref, nx) < 1e-5, "residual+dropout(%.1f)+layernorm forward matches",
	      p);

	/* the backward the model composes: LN back, then through dropout */
	float *grad = calloc(n, sizeof(float));
	layernorm_backward(grad, grad + 2 * nx + LC, grad + 2 * nx + 2 * LC, dout, sum, mean, rstd,
			   t + 2 * nx + LC, LN, LC);
	dropout_apply(grad + nx, grad, nx, p, k.seed);
	colsum_add(grad + 2 * nx, grad + nx, LN, LC);
	double err = grad_error(residual_loss, &k, theta, grad, n);
	CHECK(err < GRAD_TOL, "residual+dropout(%.1f)+layernorm gradients match (%.1e)", p, err);
	free(theta), free(w), free(t), free(dout), free(sum), free(grad);
}

/* ---- GELU and tanh ---- */

static void test_gelu_accuracy(void)
{
	double worst = 0, worst_grad = 0;
	for (double x = -12; x <= 12; x += 1e-3) {
		float g = gelu((float)x);
		worst = fmax(worst, fabs(g - ref_gelu(x)) / fmax(1, fabs(x)));
		float one = 1, d;
		float pre = (float)x;
		gelu_backward(&d, &one, &pre, 1, 1);
		double exact = 0.5 * (1 + erf(pre / sqrt(2.0))) + pre * exp(-0.5 * pre * pre) / sqrt(2 * M_PI);
		worst_grad = fmax(worst_grad, fabs(d - exact));
	}
	CHECK(worst < 3e-7, "gelu matches the erf form to %.1e over [-12, 12]", worst);
	CHECK(worst_grad < 1e-6, "gelu's derivative matches to %.1e", worst_grad);
	/* far out, where e^(-x^2/2) is below exp's range: slope 1 above, 0 below */
	static const float far[] = { 20, 1e19f, 1e36f, 3e38f, FLT_MAX };
	double far_worst = 0;
	for (size_t i = 0; i < sizeof far / sizeof *far; i++)
		for (int sign = -1; sign <= 1; sign += 2) {
			float one = 1, d, pre = (float)sign * far[i];
			gelu_backward(&d, &one, &pre, 1, 1);
			far_worst = fmax(far_worst, fabs(d - (sign > 0)));
		}
	CHECK(far_worst < 1e-6, "gelu's derivative from |x| 20 to FLT_MAX: 1 above, 0 below (off by %.1e)",
	      far_worst);
}

enum { GN = 3, GF = 10 };

static double gelu_loss(const double *theta, const void *ctx)
{
	double out[GN * GF];
	for (int i = 0; i < GN * GF; i++)
		out[i] = ref_gelu(theta[i] + theta[GN * GF + i % GF]);
	return weighted_sum(ctx, out, GN * GF);
}

static void test_bias_gelu(void)
{
	int nx = GN * GF, n = nx + GF;
	double *theta = rand_doubles(n, 2), *w = rand_doubles(nx, 1), ref[GN * GF];
	float *t = to_floats(theta, n), *dout = to_floats(w, nx), out[GN * GF];
	for (int i = 0; i < nx; i++)
		ref[i] = ref_gelu(theta[i] + theta[nx + i % GF]);
	bias_gelu_forward(out, t, t + nx, GN, GF);
	CHECK(max_abs_diff(out, ref, nx) < 1e-5, "bias+gelu forward matches the reference");

	float *grad = calloc(n, sizeof(float));
	gelu_backward(grad, dout, t, GN, GF);   /* t now holds pre + bias */
	colsum_add(grad + nx, grad, GN, GF);
	double err = grad_error(gelu_loss, w, theta, grad, n);
	CHECK(err < GRAD_TOL, "bias+gelu gradients match finite differences (%.1e)", err);
	free(theta), free(w), free(t), free(dout), free(grad);
}

/* ---- the pooler: [CLS] rows, dense, tanh ---- */

enum { PB = 3, PT = 4, PC = 5 };
static const int32_t cls_rows[PB] = { 0, PT, 2 * PT };

static void ref_pooler(double *out, const double *theta)
{
	const double *hidden = theta, *W = hidden + PB * PT * PC, *b = W + PC * PC;
	for (int i = 0; i < PB; i++)
		for (int o = 0; o < PC; o++) {
			double s = b[o];
			for (int c = 0; c < PC; c++)
				s += W[o * PC + c] * hidden[cls_rows[i] * PC + c];
			out[i * PC + o] = tanh(s);
		}
}

static double pooler_loss(const double *theta, const void *ctx)
{
	double out[PB * PC];
	ref_pooler(out, theta);
	return weighted_sum(ctx, out, PB * PC);
}

static void test_pooler(void)
{
	int nh = PB * PT * PC, n = nh + PC * PC + PC;
	double *theta = rand_doubles(n, 0.7), *w = rand_doubles(PB * PC, 1), ref[PB * PC];
	float *t = to_floats(theta, n), *dout = to_floats(w, PB * PC), in[PB * PC], out[PB * PC];
	gather_rows(in, t, cls_rows, PB, PC);
	linear_forward(out, in, t + nh, t + nh + PC * PC, PB, PC, PC);
	tanh_forward(out, out, PB * PC);
	ref_pooler(ref, theta);
	CHECK(max_abs_diff(out, ref, PB * PC) < 1e-6, "tanh pooler forward matches the reference");

	float *grad = calloc(n, sizeof(float)), dpre[PB * PC], din[PB * PC];
	tanh_backward(dpre, dout, out, PB * PC);
	linear_backward(din, grad + nh, grad + nh + PC * PC, dpre, in, t + nh, PB, PC, PC, 0);
	scatter_add_rows(grad, din, cls_rows, PB, PC);
	double err = grad_error(pooler_loss, w, theta, grad, n);
	CHECK(err < GRAD_TOL, "tanh pooler gradients match finite differences (%.1e)", err);
	free(theta), free(w), free(t), free(dout), free(grad);
}

/* ---- rotary position embeddings and GeGLU (ModernBERT's) ---- */

enum { RR = 4, RC = 8, RH = 2, RLD = 3 * RC };
static const int32_t rot_pos[RR] = { 0, 3, 17, 100 };

/* Q and K of rows of [Q|K|V] turned as HF's apply_rotary_pos_emb turns
 * them, in doubles: the halves (x1, x2) of each head become
 * (x1 cos - x2 sin, x2 cos + x1 sin). */
static void ref_rotary(double *out, const float *x, double theta)
{
	int d = RC / RH, half = d / 2;
	for (int i = 0; i < RR * RLD; i++)
		out[i] = x[i];
	for (int r = 0; r < RR; r++)
		for (int k = 0; k < 2 * RH; k++)
			for (int j = 0; j < half; j++) {
				double a = rot_pos[r] / pow(theta, 2.0 * j / d), c = cos(a), sn = sin(a);
				size_t o = (size_t)r * RLD + (size_t)k * d;
				out[o + j] = x[o + j] * c - x[o + half + j] * sn;
				out[o + half + j] = x[o + half + j] * c + x[o + j] * sn;
			}
}

static void test_rotary(void)
{
	double *theta = rand_doubles(RR * RLD, 1), ref[RR * RLD];
	float *x = to_floats(theta, RR * RLD), *y = to_floats(theta, RR * RLD);
	ref_rotary(ref, x, 10000.0);
	rotary_rows(y, 0, RLD, 2, RC, RH, rot_pos, RR, 10000.0f, 0);
	int v_same = 1;
	for (int r = 0; r < RR; r++)
		v_same &= !memcmp(y + r * RLD + 2 * RC, x + r * RLD + 2 * RC, sizeof(float) * RC);
	CHECK(max_abs_diff(y, ref, RR * RLD) < 2e-6 && v_same,
	      "rotary turns Q and K as HF's apply_rotary_pos_emb, at positions to 100 (%.1e), V untouched",
	      max_abs_diff(y, ref, RR * RLD));
	rotary_rows(y, 0, RLD, 2, RC, RH, rot_pos, RR, 10000.0f, 1);
	double back = 0;
	for (int i = 0; i < RR * RLD; i++)
		back = fmax(back, fabs(y[i] - x[i]));
	CHECK(back < 1e-6, "rotary's inverse (its backward: a turn's transpose) turns them back (%.1e)", back);
	free(theta), free(x), free(y);
}

enum { GN2 = 3, GF2 = 6 };

static double geglu_loss(const double *theta, const void *ctx)
{
	double out[GN2 * GF2];
	for (int r = 0; r < GN2; r++)
		for (int j = 0; j < GF2; j++)
			out[r * GF2 + j] = ref_gelu(theta[r * 2 * GF2 + j]) * theta[r * 2 * GF2 + GF2 + j];
	return weighted_sum(ctx, out, GN2 * GF2);
}

static void test_geglu(void)
{
	int n = GN2 * 2 * GF2, nout = GN2 * GF2;
	double *theta = rand_doubles(n, 2), *w = rand_doubles(nout, 1), ref[GN2 * GF2];
	float *t = to_floats(theta, n), *dout = to_floats(w, nout), out[GN2 * GF2], grad[GN2 * 2 * GF2];
	for (int r = 0; r < GN2; r++)
		for (int j = 0; j < GF2; j++)
			ref[r * GF2 + j] = ref_gelu(theta[r * 2 * GF2 + j]) * theta[r * 2 * GF2 + GF2 + j];
	geglu_rows(out, t, GN2, GF2);
	CHECK(max_abs_diff(out, ref, nout) < 1e-5, "GeGLU: gelu of the first half times the second (%.1e)",
	      max_abs_diff(out, ref, nout));
	geglu_backward_rows(grad, dout, t, GN2, GF2);
	double err = grad_error(geglu_loss, w, theta, grad, n);
	CHECK(err < GRAD_TOL, "GeGLU gradients of both halves match finite differences (%.1e)", err);
	free(theta), free(w), free(t), free(dout);
}

/* ReLU and its gradient, exactly: x where x > 0, else 0. */
static void test_relu(void)
{
	enum { RN = 64 };
	float x[RN], y[RN], dy[RN], dx[RN];
	int wrong = 0, negatives = 0;
	for (int i = 0; i < RN; i++)
		x[i] = (float)(i - RN / 2) / 7.0f, dy[i] = 1.0f + (float)i;
	relu_forward(y, x, RN);
	relu_backward(dx, dy, y, RN);
	for (int i = 0; i < RN; i++) {
		negatives += x[i] <= 0;
		wrong += y[i] != (x[i] > 0 ? x[i] : 0.0f) || dx[i] != (x[i] > 0 ? dy[i] : 0.0f);
	}
	CHECK(negatives > 0 && !wrong, "relu and its gradient at %d points (%d not above 0): %d wrong",
	      RN, negatives, wrong);
	relu_backward(dy, dy, y, RN);   /* in place */
	CHECK(!memcmp(dy, dx, sizeof dx), "relu's gradient in place is the same");
}

/* ---- attention ---- */

enum { AB = 3, AT = 5, AC = 8, AH = 2, AD = AC / AH, AN = AB * AT };
/* sequence 0 is full, 1 has a padded middle key and two padded at the end,
 * 2 has no real token at all (HF: uniform weights) */
static const uint8_t att_mask[AN] = { 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0 };
/* queries at every row, or (as the last layer asks) at a few */
static const int32_t all_rows[AN] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };
static const int32_t all_start[AB + 1] = { 0, AT, 2 * AT, 3 * AT };
static const int32_t some_rows[3] = { 0, 3, AT + 2 };   /* none in sequence 2 */
static const int32_t some_start[AB + 1] = { 0, 2, 3, 3 };

struct attention_case {
	const double *w;
	float p;
	uint64_t seed;
	const int32_t *rows, *start;   /* query rows, grouped by sequence */
	int band;                      /* keys at most band rows from the query's; 0: all */
};

/* The keys [lo, hi) query row at of sequence b sees: all, or those of its
 * band up to the last real key (none where that leaves none). */
static void ref_band(const struct attention_case *k, int b, int at, int *lo, int *hi)
{
	int last = 0;
	for (int j = 0; j < AT; j++)
		if (att_mask[b * AT + j])
			last = j + 1;
	*lo = 0, *hi = AT;
	if (!k->band)
		return;
	*lo = at - k->band > 0 ? at - k->band : 0;
	*hi = at + k->band + 1 < (last ? last : AT) ? at + k->band + 1 : (last ? last : AT);
	if (*hi < *lo)
		*hi = *lo;
}

/* HF's way: scores/sqrt(d) + (1 - mask) * (most negative float), softmax,
 * dropout, over theta = qkv [AN, 3C]; ctx has one row per query row. With
 * a band, the keys outside it take no part. */
static void ref_attention(double *ctx, const double *qkv, const struct attention_case *k)
{
	for (int b = 0; b < AB; b++) {
		int q0 = k->start[b], nq = k->start[b + 1] - q0;
		for (int h = 0; h < AH; h++)
			for (int i = 0; i < nq; i++) {
				double s[AT], mx = -INFINITY, sum = 0;
				const double *q = qkv + k->rows[q0 + i] * 3 * AC + h * AD;
				int lo, hi;
				ref_band(k, b, k->rows[q0 + i] - b * AT, &lo, &hi);
				for (int j = 0; j < AT; j++) {
					const double *kk = qkv + (b * AT + j) * 3 * AC + AC + h * AD;
					s[j] = 0;
					for (int c = 0; c < AD; c++)
						s[j] += q[c] * kk[c] / sqrt(AD);
					if (!att_mask[b * AT + j])
						s[j] += -FLT_MAX;
					if (j >= lo && j < hi)
						mx = fmax(mx, s[j]);
				}
				for (int j = 0; j < AT; j++)
					sum += s[j] = j >= lo && j < hi ? exp(s[j] - mx) : 0;
				if (hi == lo)
					sum = 1;   /* no key: a zero context */
				double *out = ctx + (q0 + i) * AC + h * AD;
				for (int c = 0; c < AD; c++)
					out[c] = 0;
				for (int j = 0; j < AT; j++) {
					uint64_t e = ((uint64_t)q0 * AH + h * nq + i) * AT + j;
					double keep = k->p ? dropout_keeps(k->seed, e, k->p) / (1.0 - k->p) : 1;
					const double *v = qkv + (b * AT + j) * 3 * AC + 2 * AC + h * AD;
					for (int c = 0; c < AD; c++)
						out[c] += s[j] / sum * keep * v[c];
				}
			}
	}
}

static double attention_loss(const double *theta, const void *ctx)
{
	const struct attention_case *k = ctx;
	double out[AN * AC];
	ref_attention(out, theta, k);
	return weighted_sum(k->w, out, k->start[AB] * AC);
}

/* Queries read in place from qkv, or gathered into their own matrix; all
 * keys, or a band of them. */
static void test_attention(float p, int subset, int band)
{
	int n = AN * 3 * AC, nq = subset ? 3 : AN, nout = nq * AC;
	double *theta = rand_doubles(n, 1), *w = rand_doubles(nout, 1), ref[AN * AC];
	struct attention_case k = { w, p, 1234, subset ? some_rows : all_rows,
				    subset ? some_start : all_start, band };
	float *t = to_floats(theta, n), *dout = to_floats(w, nout), out[AN * AC], q[AN * AC];
	float again[AN * AC];
	int64_t p_start[AB + 1];
	struct attention a = { AB, AT, AC, AH, float_acts(t), float_acts(t + AC),
			       float_acts(t + 2 * AC), 3 * AC, 3 * AC, all_start, NULL, p_start,
			       att_mask, p, k.seed };
	a.band = band;
	if (subset) {
		for (int i = 0; i < nq; i++)
			memcpy(q + i * AC, t + some_rows[i] * 3 * AC, sizeof(float) * AC);
		a.q = float_acts(q), a.ldq = AC, a.q_start = some_start, a.q_at = some_rows;
	}
	attention_probs(p_start, all_start, a.q_start, AB, AH);
	char what[64], in_band[32] = "";
	if (band)
		snprintf(in_band, sizeof in_band, " in a band of %d", band);
	snprintf(what, sizeof what, "attention%s%s", subset ? " for some queries" : "", in_band);
	attention_forward(out, NULL, &a);
	ref_attention(ref, theta, &k);
	CHECK(max_abs_diff(out, ref, nout) < 1e-5,
	      "%s, with padding and dropout %.1f, matches the reference", what, p);
	/* sequence 1's padded keys with huge values leave its output's bits */
	for (int j = 0; j < AT; j++)
		for (int c = 0; c < AC && !att_mask[AT + j]; c++)
			t[(AT + j) * 3 * AC + 2 * AC + c] = 1e30f;
	attention_forward(again, NULL, &a);
	CHECK(!memcmp(again, out, sizeof(float) * nout), "%s: padded keys get exactly zero weight",
	      what);
	for (int i = 0; i < n; i++)
		t[i] = (float)theta[i];

	/* backward writes every gradient it owns, whatever was there */
	float *grad = malloc(sizeof(float) * n), dq[AN * AC];
	for (int i = 0; i < n; i++)
		grad[i] = subset && i % (3 * AC) < AC ? 0.0f : 7.0f;
	attention_backward(subset ? dq : grad, grad + AC, grad + 2 * AC, dout, NULL, &a);
	if (subset)
		for (int i = 0; i < nq; i++)
			memcpy(grad + some_rows[i] * 3 * AC, dq + i * AC, sizeof(float) * AC);
	double err = grad_error(attention_loss, &k, theta, grad, n);
	CHECK(err < GRAD_TOL, "%s gradients (dropout %.1f) match finite differences (%.1e)", what,
	      p, err);
	free(theta), free(w), free(t), free(dout), free(grad);
}

/* Sequences of lengths 5, 2 and 4 packed into 11 rows give what the same
 * sequences give padded to 5 and masked: ctx at the real rows, the
 * gradients of the real rows, and zero gradient for the padded ones. */
static void test_attention_packed(void)
{
	enum { PN = 11 };
	static const int32_t len[AB] = { 5, 2, 4 }, packed_start[AB + 1] = { 0, 5, 7, 11 };
	uint8_t mask[AN];
	int32_t real[PN];   /* the padded row of each packed row */
	for (int b = 0, r = 0; b < AB; b++)
		for (int j = 0; j < AT; j++) {
			mask[b * AT + j] = j < len[b];
			if (j < len[b])
				real[r++] = b * AT + j;
		}
	float *pad = malloc(sizeof(float) * AN * 3 * AC), *packed = malloc(sizeof(float) * PN * 3 * AC);
	for (int i = 0; i < AN * 3 * AC; i++)
		pad[i] = rng_normal(&gen);
	for (int r = 0; r < PN; r++)
		memcpy(packed + r * 3 * AC, pad + real[r] * 3 * AC, sizeof(float) * 3 * AC);
	float dctx_pad[AN * AC], dctx[PN * AC], ctx_pad[AN * AC], ctx[PN * AC];
	for (int i = 0; i < AN * AC; i++)   /* in a model no gradient reaches padding */
		dctx_pad[i] = mask[i / AC] ? rng_normal(&gen) : 0.0f;
	for (int r = 0; r < PN; r++)
		memcpy(dctx + r * AC, dctx_pad + real[r] * AC, sizeof(float) * AC);
	int64_t p_pad[AB + 1], p_packed[AB + 1];
	attention_probs(p_pad, all_start, NULL, AB, AH);
	int64_t np = attention_probs(p_packed, packed_start, NULL, AB, AH);
	struct attention a = { AB, AT, AC, AH, float_acts(pad), float_acts(pad + AC),
			       float_acts(pad + 2 * AC), 3 * AC, 3 * AC, all_start, NULL, p_pad, mask,
			       0.0f, 9 };
	struct attention b = { AB, AT, AC, AH, float_acts(packed), float_acts(packed + AC),
			       float_acts(packed + 2 * AC), 3 * AC, 3 * AC, packed_start, NULL,
			       p_packed, NULL, 0.0f, 9 };
	attention_forward(ctx_pad, NULL, &a);
	attention_forward(ctx, NULL, &b);
	double ctx_err = 0, grad_err = 0, pad_grad = 0;
	for (int r = 0; r < PN; r++)
		for (int c = 0; c < AC; c++)
			ctx_err = fmax(ctx_err, fabs(ctx[r * AC + c] - ctx_pad[real[r] * AC + c]));
	CHECK(np == AH * (25 + 4 + 16) && ctx_err < 1e-6,
	      "packed attention over lengths 5, 2, 4 equals padded and masked (%.1e)", ctx_err);

	float *g_pad = malloc(sizeof(float) * AN * 3 * AC), *g = malloc(sizeof(float) * PN * 3 * AC);
	attention_backward(g_pad, g_pad + AC, g_pad + 2 * AC, dctx_pad, NULL, &a);
	attention_backward(g, g + AC, g + 2 * AC, dctx, NULL, &b);
	for (int r = 0; r < PN; r++)
		for (int c = 0; c < 3 * AC; c++)
			grad_err = fmax(grad_err, fabs(g[r * 3 * AC + c] - g_pad[real[r] * 3 * AC + c]));
	for (int i = 0; i < AN; i++)
		for (int c = AC; c < 3 * AC; c++)   /* keys and values of padded rows */
			if (!mask[i])
				pad_grad = fmax(pad_grad, fabs(g_pad[i * 3 * AC + c]));
	CHECK(grad_err < 1e-6 && pad_grad == 0,
	      "packed attention gradients equal padded ones (%.1e), padded keys get none", grad_err);
	free(pad), free(packed), free(g_pad), free(g);
}

/* ---- softmax cross-entropy ---- */

enum { CN = 4, CV = 7 };
static const int32_t ce_labels[CN] = { 3, -100, 0, 6 };

/* ctx: the label smoothing, or NULL for none. */
static double ce_loss(const double *logits, const void *ctx)
{
	double e = ctx ? *(const double *)ctx : 0, loss = 0;
	for (int r = 0; r < CN; r++) {
		if (ce_labels[r] < 0)
			continue;
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < CV; j++)
			mx = fmax(mx, logits[r * CV + j]);
		for (int j = 0; j < CV; j++)
			s += exp(logits[r * CV + j] - mx);
		double mean = 0;
		for (int j = 0; j < CV; j++)
			mean += logits[r * CV + j] / CV;
		loss += mx + log(s) - (1 - e) * logits[r * CV + ce_labels[r]] - e * mean;
	}
	return loss;
}

static void test_crossentropy(void)
{
	int n = CN * CV;
	double *theta = rand_doubles(n, 3);
	float *t = to_floats(theta, n), lse[CN], *grad = calloc(n, sizeof(float));
	double loss = crossentropy_forward(lse, t, ce_labels, CN, CV, 0);
	CHECK(close_enough(loss, ce_loss(theta, NULL), 1e-5, 1e-6),
	      "cross-entropy sums the loss of labelled rows (%.6f vs %.6f)", loss, ce_loss(theta, NULL));
	float scale = 0.25f;
	crossentropy_backward(grad, t, lse, ce_labels, CN, CV, 0, scale);
	for (int i = 0; i < n; i++)
		grad[i] /= scale;
	double err = grad_error(ce_loss, NULL, theta, grad, n);
	CHECK(err < GRAD_TOL, "cross-entropy gradient matches finite differences (%.1e)", err);
	int ignored = 1;
	for (int j = 0; j < CV; j++)
		ignored &= grad[CV + j] == 0;
	CHECK(ignored, "rows labelled -100 get no gradient");

	float big[2] = { 1000.0f, -1000.0f }, blse;
	int32_t first = 0;
	CHECK(crossentropy_forward(&blse, big, &first, 1, 2, 0) == 0.0,
	      "cross-entropy is stable for logits of +-1000");

	double e = 0.1;
	loss = crossentropy_forward(lse, t, ce_labels, CN, CV, (float)e);
	CHECK(close_enough(loss, ce_loss(theta, &e), 1e-5, 1e-6),
	      "label smoothing 0.1: (1 - e) of the label's loss and e of the mean over classes (%.6f vs %.6f)", loss,
	      ce_loss(theta, &e));
	crossentropy_backward(grad, t, lse, ce_labels, CN, CV, (float)e, scale);
	for (int i = 0; i < n; i++)
		grad[i] /= scale;
	err = grad_error(ce_loss, &e, theta, grad, n);
	CHECK(err < GRAD_TOL, "label smoothing: gradient matches finite differences (%.1e)", err);
	free(theta), free(t), free(grad);
}

/* ---- divergences: distillation, VAT, R-Drop ---- */

enum { KN = 4, KV = 5 };
static float kl_target[KN * KV];
static const float kl_temp = 2.0f;

/* KL(target ‖ softmax(x / T)) summed over rows, in double. */
static double kl_loss(const double *x, const void *ctx)
{
	(void)ctx;
	double loss = 0;
	for (int r = 0; r < KN; r++) {
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < KV; j++)
			mx = fmax(mx, x[r * KV + j] / kl_temp);
		for (int j = 0; j < KV; j++)
			s += exp(x[r * KV + j] / kl_temp - mx);
		for (int j = 0; j < KV; j++) {
			double t = kl_target[r * KV + j];
			loss += t > 0 ? t * (log(t) - (x[r * KV + j] / kl_temp - mx - log(s))) : 0;
		}
	}
	return loss;
}

/* KL(p ‖ q) + KL(q ‖ p) of rows r and KN/2 + r, summed. */
static double symkl_loss(const double *x, const void *ctx)
{
	(void)ctx;
	double loss = 0, lp[KV], lq[KV];
	for (int r = 0; r < KN / 2; r++) {
		const double *a = x + r * KV, *b = x + (KN / 2 + r) * KV;
		double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0;
		for (int j = 0; j < KV; j++)
			ma = fmax(ma, a[j]), mb = fmax(mb, b[j]);
		for (int j = 0; j < KV; j++)
			sa += exp(a[j] - ma), sb += exp(b[j] - mb);
		for (int j = 0; j < KV; j++)
			lp[j] = a[j] - ma - log(sa), lq[j] = b[j] - mb - log(sb);
		for (int j = 0; j < KV; j++)
			loss += (exp(lp[j]) - exp(lq[j])) * (lp[j] - lq[j]);
	}
	return loss;
}

static void test_divergences(void)
{
	int n = KN * KV;
	double *theta = rand_doubles(n, 2), *other = rand_doubles(n, 2);
	float *t = to_floats(theta, n), *o = to_floats(other, n), lse[KN], *grad = calloc(n, sizeof(float));
	softmax_rows(kl_target, o, KN, KV, 1.5f);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += kl_target[i];
	CHECK(close_enough(sum, KN, 1e-5, 0), "softmax_rows: each row sums to 1 (%.7f over %d rows)", sum, KN);
	double loss = kl_forward(lse, t, kl_target, KN, KV, kl_temp);
	CHECK(close_enough(loss, kl_loss(theta, NULL), 1e-5, 1e-5), "kl_forward at temperature 2: %.6f vs %.6f", loss,
	      kl_loss(theta, NULL));
	for (int i = 0; i < n; i++)
		grad[i] = 1.0f;   /* the backward adds */
	kl_backward(grad, t, lse, kl_target, KN, KV, kl_temp, 0.5f);
	for (int i = 0; i < n; i++)
		grad[i] = (grad[i] - 1.0f) / 0.5f;
	double err = grad_error(kl_loss, NULL, theta, grad, n);
	CHECK(err < GRAD_TOL, "kl_backward adds the gradient (finite differences %.1e)", err);
	softmax_rows(kl_target, t, KN, KV, kl_temp);
	CHECK(fabs(kl_forward(lse, t, kl_target, KN, KV, kl_temp)) < 1e-6, "KL of a distribution from itself: 0");

	loss = symkl_forward(t, KN / 2, KV);
	CHECK(close_enough(loss, symkl_loss(theta, NULL), 1e-5, 1e-5), "symkl_forward: %.6f vs %.6f", loss,
	      symkl_loss(theta, NULL));
	memset(grad, 0, n * sizeof *grad);
	symkl_backward(grad, t, KN / 2, KV, 0.25f);
	for (int i = 0; i < n; i++)
		grad[i] /= 0.25f;
	err = grad_error(symkl_loss, NULL, theta, grad, n);
	CHECK(err < GRAD_TOL, "symkl_backward: both rows of each pair (finite differences %.1e)", err);
	float y[3] = {1, 2, 3}, x[3] = {1, -1, 0.5f};
	axpy(y, x, 3, 2);
	CHECK(y[0] == 3 && y[1] == 0 && y[2] == 4, "axpy: y += a x");
	free(theta), free(other), free(t), free(o), free(grad);
}

/* ---- dropout ---- */

static void test_dropout(void)
{
	enum { n = 200000 };
	float *x = malloc(sizeof(float) * n), *one = malloc(sizeof(float) * n),
	      *two = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
		x[i] = 1.0f + (float)(i % 7);
	float p = 0.1f;
	int saved = omp_get_max_threads();
	omp_set_num_threads(1);
	dropout_apply(one, x, n, p, 77);
	omp_set_num_threads(2);
	dropout_apply(two, x, n, p, 77);
	omp_set_num_threads(saved);
	CHECK(!memcmp(one, two, sizeof(float) * n), "dropout masks are the same on 1 and 2 threads");

	int kept = 0, consistent = 1;
	for (int i = 0; i < n; i++) {
		int k = one[i] != 0;
		kept += k;
		consistent &= k == dropout_keeps(77, i, p) &&
			      (!k || close_enough(one[i], x[i] / (1 - p), 1e-6, 1e-6));
	}
	double rate = 1.0 - (double)kept / n;
	CHECK(fabs(rate - p) < 6 * sqrt(p * (1 - p) / n), "dropout drops %.4f of elements (p %.1f)",
	      rate, p);
	CHECK(consistent, "kept elements are scaled by 1/(1-p) and match dropout_keeps");

	dropout_apply(two, x, n, p, 78);
	CHECK(memcmp(one, two, sizeof(float) * n), "another seed gives another mask");
	dropout_apply(two, x, n, 0.0f, 77);
	CHECK(!memcmp(two, x, sizeof(float) * n), "dropout 0 copies its input");

	/* attention dropout too: same bits on 1 and 2 threads */
	enum { B = 4, T = 16, C = 16, H = 2 };
	float *qkv = malloc(sizeof(float) * B * T * 3 * C), *ctx1 = malloc(sizeof(float) * B * T * C),
	      *ctx2 = malloc(sizeof(float) * B * T * C);
	for (int i = 0; i < B * T * 3 * C; i++)
		qkv[i] = rng_normal(&gen);
	int32_t kv_start[B + 1];
	int64_t p_start[B + 1];
	for (int b = 0; b <= B; b++)
		kv_start[b] = b * T;
	attention_probs(p_start, kv_start, NULL, B, H);
	struct attention a = { B, T, C, H, float_acts(qkv), float_acts(qkv + C),
			       float_acts(qkv + 2 * C), 3 * C, 3 * C, kv_start, NULL, p_start, NULL,
			       0.3f, 5 };
	omp_set_num_threads(1);
	attention_forward(ctx1, NULL, &a);
	omp_set_num_threads(2);
	attention_forward(ctx2, NULL, &a);
	omp_set_num_threads(saved);
	CHECK(!memcmp(ctx1, ctx2, sizeof(float) * B * T * C),
	      "attention with dropout gives the same bits on 1 and 2 threads");
	free(x), free(one), free(two), free(qkv), free(ctx1), free(ctx2);
}

int main(void)
{
	rng_seed(&gen, 2024);
	test_linear();
	test_embedding();
	test_layernorm();
	test_residual_layernorm(0.0f);
	test_residual_layernorm(0.3f);
	test_gelu_accuracy();
	test_bias_gelu();
	test_pooler();
	test_relu();
	test_rotary();
	test_geglu();
	test_attention(0.0f, 0, 0);
	test_attention(0.2f, 0, 0);
	test_attention(0.0f, 1, 0);
	test_attention(0.2f, 1, 0);
	test_attention(0.0f, 0, 1);
	test_attention(0.2f, 0, 1);
	test_attention(0.2f, 1, 1);
	test_attention(0.0f, 0, 3);
	test_attention_packed();
	test_crossentropy();
	test_divergences();
	test_dropout();
	CHECK_DONE();
}
