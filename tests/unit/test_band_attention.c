/* The CPU's attention over long sequences, where a band (ModernBERT's local
 * layers) makes it work in tiles of queries, each against the keys its
 * rows' bands cover: forward and backward against a double-precision
 * reference written here (the gradients by the chain rule, dropout drawn
 * by the numbers attention_probs lays out), for bands narrower and wider
 * than a tile, all queries or a few scattered ones, padded keys in the
 * middle and at the end, queries whose band holds no key, and no band. */
#include "backend/cpu_ops.h"
#include "check.h"
#include "util/rng.h"
#include <float.h>
#include <stdlib.h>
#include <string.h>

enum { B = 3, C = 16, H = 2, D = C / H, N = 300 + 150 + 77 };
static const int32_t kv_start[B + 1] = { 0, 300, 450, N };

/* The keys' padding: sequence 0 has padded keys in the middle and its last
 * 90 padded (so the bands of its last queries hold none), sequence 1 none,
 * sequence 2 every fifth. */
static uint8_t mask[N];

static void make_mask(void)
{
	for (int r = 0; r < N; r++)
		mask[r] = 1;
	for (int j = 100; j < 104; j++)
		mask[j] = 0;
	for (int j = 210; j < 300; j++)
		mask[j] = 0;
	for (int j = 450; j < N; j += 5)
		mask[j] = 0;
}

/* One case: queries at rows (grouped by sequence, q_start), band, dropout. */
struct band_case {
	const int32_t *rows, *q_start;
	int band;
	float p;
};

static const double SCALE = 0.35355339059327373;   /* 1/sqrt(D) */

/* Sequence b's keys past its last real one are cut, as the kernels cut
 * them; the keys [lo, hi) query at (a row of the sequence) sees. */
static void ref_keys(const struct band_case *k, int b, int at, int *lo, int *hi)
{
	int len = kv_start[b + 1] - kv_start[b], last = 0;
	for (int j = 0; j < len; j++)
		if (mask[kv_start[b] + j])
			last = j + 1;
	int n = last ? last : len;
	*lo = 0, *hi = n;
	if (!k->band)
		return;
	*lo = at - k->band > 0 ? at - k->band : 0;
	*hi = at + k->band + 1 < n ? at + k->band + 1 : n;
	if (*hi <= *lo)
		*lo = *hi = 0;
}

/* Query i (of nq) of sequence b, head h: its probabilities p over the
 * sequence's keys (0 outside [lo, hi)), times dropout's keep factors in
 * keep; returns whether a real key took part. */
static int ref_probs(double *p, double *keep, const double *qkv, const struct band_case *k,
		     const int64_t *p_start, int b, int h, int i, int nq)
{
	int k0 = kv_start[b], len = kv_start[b + 1] - k0, lo, hi, real = 0;
	int row = k->rows[k->q_start[b] + i];
	ref_keys(k, b, row - k0, &lo, &hi);
	double mx = -INFINITY, sum = 0;
	const double *q = qkv + (size_t)row * 3 * C + h * D;
	for (int j = 0; j < len; j++) {
		double s = 0;
		for (int c = 0; c < D; c++)
			s += q[c] * qkv[(size_t)(k0 + j) * 3 * C + C + h * D + c] * SCALE;
		p[j] = mask[k0 + j] ? s : -INFINITY;
		if (j >= lo && j < hi && mask[k0 + j])
			mx = fmax(mx, p[j]), real = 1;
		uint64_t e = (uint64_t)p_start[b] + ((uint64_t)h * nq + i) * len + j;
		keep[j] = k->p ? dropout_keeps(77, e, k->p) / (1.0 - k->p) : 1;
	}
	for (int j = 0; j < len; j++) {   /* no real key: uniform over the band */
		p[j] = j < lo || j >= hi ? 0 : !real ? 1 : mask[k0 + j] ? exp(p[j] - mx) : 0;
		sum += p[j];
	}
	for (int j = 0; j < len; j++)
		p[j] = sum ? p[j] / sum : 0;
	return real;
}

/* ctx for every query row, and from dctx the gradients of q, k, v in g
 * (laid out as qkv). */
static void ref_attention(double *ctx, double *g, const double *qkv, const double *dctx,
			  const struct band_case *k, const int64_t *p_start)
{
	double p[300], keep[300], dp[300];
	memset(g, 0, sizeof(double) * N * 3 * C);
	for (int b = 0; b < B; b++) {
		int k0 = kv_start[b], len = kv_start[b + 1] - k0, nq = k->q_start[b + 1] - k->q_start[b];
		for (int h = 0; h < H; h++)
			for (int i = 0; i < nq; i++) {
				int qi = k->q_start[b] + i, row = k->rows[qi];
				int real = ref_probs(p, keep, qkv, k, p_start, b, h, i, nq);
				const double *dc = dctx + (size_t)qi * C + h * D;
				double dot = 0;
				for (int j = 0; j < len; j++) {
					const double *v = qkv + (size_t)(k0 + j) * 3 * C + 2 * C + h * D;
					double *gv = g + (size_t)(k0 + j) * 3 * C + 2 * C + h * D;
					dp[j] = 0;
					for (int c = 0; c < D; c++) {
						if (j == 0)
							ctx[(size_t)qi * C + h * D + c] = 0;
						ctx[(size_t)qi * C + h * D + c] += p[j] * keep[j] * v[c];
						gv[c] += p[j] * keep[j] * dc[c];
						dp[j] += dc[c] * v[c] * keep[j];
					}
					dot += p[j] * dp[j];
				}
				for (int j = 0; j < len && real; j++) {
					double ds = p[j] * (dp[j] - dot) * SCALE;
					for (int c = 0; c < D; c++) {
						g[(size_t)row * 3 * C + h * D + c] +=
							ds * qkv[(size_t)(k0 + j) * 3 * C + C + h * D + c];
						g[(size_t)(k0 + j) * 3 * C + C + h * D + c] +=
							ds * qkv[(size_t)row * 3 * C + h * D + c];
					}
				}
			}
	}
}

/* The largest |x - y| over n, relative to y's largest magnitude. */
static double rel_error(const float *x, const double *y, size_t n)
{
	double worst = 0, big = 1e-30;
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs(x[i] - y[i])), big = fmax(big, fabs(y[i]));
	return worst / big;
}

static void check_case(struct rng *r, const struct band_case *k, const char *what)
{
	int nq = k->q_start[B];
	size_t n = (size_t)N * 3 * C;
	double *qkv = malloc(sizeof(double) * n), *dctx = malloc(sizeof(double) * nq * C);
	double *ctx = malloc(sizeof(double) * nq * C), *g = malloc(sizeof(double) * n);
	float *t = malloc(sizeof(float) * n), *dc = malloc(sizeof(float) * nq * C);
	float *q = malloc(sizeof(float) * nq * C), *out = malloc(sizeof(float) * nq * C);
	float *grad = malloc(sizeof(float) * n), *dq = malloc(sizeof(float) * nq * C);
	for (size_t i = 0; i < n; i++)
		t[i] = (float)(qkv[i] = 2 * rng_normal(r));
	for (int i = 0; i < nq * C; i++)
		dc[i] = (float)(dctx[i] = rng_normal(r));
	for (int i = 0; i < nq; i++)
		memcpy(q + i * C, t + (size_t)k->rows[i] * 3 * C, sizeof(float) * C);
	int64_t p_start[B + 1];
	attention_probs(p_start, kv_start, k->q_start, B, H);
	struct attention a = { B, 300, C, H, float_acts(q), float_acts(t + C), float_acts(t + 2 * C),
			       C, 3 * C, kv_start, k->q_start, p_start, mask, k->p, 77 };
	a.band = k->band;
	a.q_at = k->rows;
	ref_attention(ctx, g, qkv, dctx, k, p_start);
	attention_forward(out, NULL, &a);
	double e = rel_error(out, ctx, (size_t)nq * C);
	CHECK(e < 1e-5, "%s: the context is the reference's (%.1e)", what, e);
	for (size_t i = 0; i < n; i++)
		grad[i] = 7.0f;   /* every gradient is written, whatever was there */
	attention_backward(dq, grad + C, grad + 2 * C, dc, NULL, &a);
	for (size_t r0 = 0; r0 < N; r0++)
		memset(grad + r0 * 3 * C, 0, sizeof(float) * C);
	for (int i = 0; i < nq; i++)
		memcpy(grad + (size_t)k->rows[i] * 3 * C, dq + i * C, sizeof(float) * C);
	e = rel_error(grad, g, n);
	CHECK(e < 1e-5, "%s: the gradients of q, k and v are the reference's (%.1e)", what, e);
	free(qkv), free(dctx), free(ctx), free(g), free(t), free(dc), free(q), free(out), free(grad), free(dq);
}

int main(void)
{
	struct rng r;
	rng_seed(&r, 45);
	make_mask();
	int32_t all[N], all_start[B + 1], some[N], some_start[B + 1];
	int ns = 0;
	for (int i = 0; i < N; i++)
		all[i] = i;
	for (int b = 0; b <= B; b++)
		all_start[b] = kv_start[b];
	for (int b = 0; b < B; b++) {   /* every seventh row, and sequence 1's first */
		some_start[b] = ns;
		for (int i = kv_start[b]; i < kv_start[b + 1]; i++)
			if (i % 7 == 3 || i == 300)
				some[ns++] = i;
	}
	some_start[B] = ns;
	const struct {
		int band, subset;
		float p;
	} cases[] = { { 0, 0, 0.0f }, { 0, 0, 0.2f }, { 5, 0, 0.0f }, { 5, 0, 0.2f }, { 40, 0, 0.2f },
		      { 70, 0, 0.0f }, { 200, 0, 0.1f }, { 20, 1, 0.2f }, { 0, 1, 0.0f } };
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct band_case k = { cases[i].subset ? some : all, cases[i].subset ? some_start : all_start,
				       cases[i].band, cases[i].p };
		char what[96], band[16] = "no band";
		if (cases[i].band)
			snprintf(band, sizeof band, "band %d", cases[i].band);
		snprintf(what, sizeof what, "attention over 300, 150, 77 keys, %s, %s, dropout %.1f",
			 cases[i].subset ? "every seventh query" : "every query", band, cases[i].p);
		check_case(&r, &k, what);
	}
	CHECK_DONE();
}
