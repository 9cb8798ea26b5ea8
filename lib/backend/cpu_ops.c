/* Elementwise, row and table ops of the BERT graph (attention lives in
 * cpu_attention.c). Parallel loops hand whole rows or spans to HOT kernels;
 * sums over rows run per column block, rows in order, so every result is
 * the same whatever the thread count. */
#include "backend/cpu_ops.h"
#include "backend/cpu_simd.h"
#include "util/err.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

HOT_ELEMENTWISE void round_bf16(uint16_t *dst, const float *src, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		dst[i] = to_bf16(src[i]);
}

enum { COL_BLOCK = 512, SPAN = 8192 };

static inline void add_to(float *y, const float *x, int n)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		y[j] += x[j];
}

static inline int min_int(int a, int b)
{
	return a < b ? a : b;
}

/* Sums over rows run per block of columns, rows in order, so the bits do not
 * depend on the blocks: as wide as one thread's share, for long contiguous
 * reads, up to COL_BLOCK accumulators. */
static int col_block(int cols)
{
	int threads = omp_get_max_threads();
	int w = ((cols + threads - 1) / threads + 15) / 16 * 16;
	return w < COL_BLOCK ? w : COL_BLOCK;
}

/* ---- linear ---- */

HOT static void add_bias_row(float *y, const float *bias, int n)
{
	add_to(y, bias, n);
}

void linear_forward(float *out, const float *in, const float *w, const float *bias,
		    int N, int Cin, int Cout)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, w,
		    Cin, 0.0f, out, Cout);
	if (!bias)
		return;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		add_bias_row(out + (size_t)r * Cout, bias, Cout);
}

void linear_backward(float *din, float *dw, float *dbias, const float *dout,
		     const float *in, const float *w, int N, int Cin, int Cout, int accumulate)
{
	if (din)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout,
			    Cout, w, Cin, accumulate ? 1.0f : 0.0f, din, Cin);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in,
		    Cin, 1.0f, dw, Cin);
	if (dbias)
		colsum_add(dbias, dout, N, Cout);
}

HOT static void colsum_block(float *acc, const float *x, int N, int Cout, int nc)
{
	float s[COL_BLOCK] = { 0 };
	for (int r = 0; r < N; r++)
		add_to(s, x + (size_t)r * Cout, nc);
	add_to(acc, s, nc);
}

void colsum_add(float *acc, const float *x, int N, int Cout)
{
	int w = col_block(Cout), nblocks = (Cout + w - 1) / w;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblocks; k++) {
		int c0 = k * w;
		colsum_block(acc + c0, x + c0, N, Cout, min_int(w, Cout - c0));
	}
}

/* ---- embeddings ---- */

HOT_ELEMENTWISE static void sum3_row(float *out, const float *a, const float *b, const float *c,
				     int n)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		out[j] = a[j] + b[j] + c[j];
}

void embedding_forward(float *out, const int32_t *ids, const int32_t *types,
		       const int32_t *positions, const float *word, const float *pos,
		       const float *type, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		int ty = types ? types[r] : 0;
		sum3_row(out + (size_t)r * C, word + (size_t)ids[r] * C,
			 pos + (size_t)positions[r] * C, type + (size_t)ty * C, C);
	}
}

/* One column block of the scatter-add, tokens in order: no two threads
 * ever touch the same float, and each sum has a fixed order. */
HOT_ELEMENTWISE static void embedding_backward_block(float *dword, float *dpos, float *dtype,
						     const float *dout, const int32_t *ids,
						     const int32_t *types, const int32_t *positions,
						     int N, int C, int pad_id, int nc)
{
	for (int r = 0; r < N; r++) {
		const float *g = dout + (size_t)r * C;
		if (ids[r] != pad_id)
			add_to(dword + (size_t)ids[r] * C, g, nc);
		add_to(dpos + (size_t)positions[r] * C, g, nc);
		add_to(dtype + (size_t)(types ? types[r] : 0) * C, g, nc);
	}
}

void embedding_backward(float *dword, float *dpos, float *dtype, const float *dout,
			const int32_t *ids, const int32_t *types, const int32_t *positions,
			int N, int C, int pad_id)
{
	int w = col_block(C), nblocks = (C + w - 1) / w;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblocks; k++) {
		int c0 = k * w;
		embedding_backward_block(dword + c0, dpos + c0, dtype + c0, dout + c0, ids,
					 types, positions, N, C, pad_id, min_int(w, C - c0));
	}
}

/* ---- layernorm ---- */

static inline void layernorm_row(float *out, float *mean, float *rstd, const float *x,
				 const float *w, const float *b, int C, float eps)
{
	float s = 0.0f;
#pragma omp simd reduction(+ : s)
	for (int j = 0; j < C; j++)
		s += x[j];
	float m = s / C;
	float v = 0.0f;
#pragma omp simd reduction(+ : v)
	for (int j = 0; j < C; j++)
		v += (x[j] - m) * (x[j] - m);
	float rs = 1.0f / sqrtf(v / C + eps);
#pragma omp simd
	for (int j = 0; j < C; j++)
		out[j] = (x[j] - m) * rs * w[j] + b[j];
	*mean = m;
	*rstd = rs;
}

HOT static void layernorm_one(float *out, float *mean, float *rstd, const float *x,
			      const float *w, const float *b, int C, float eps)
{
	layernorm_row(out, mean, rstd, x, w, b, C, eps);
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *in,
		       const float *w, const float *b, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		layernorm_one(out + (size_t)r * C, mean + r, rstd + r, in + (size_t)r * C, w,
			      b, C, eps);
}

HOT static void residual_layernorm_one(float *out, float *sum, float *mean, float *rstd,
				       const float *res, const float *bias, const float *w,
				       const float *b, int C, float eps, uint32_t key,
				       uint32_t base, uint32_t threshold, float scale)
{
	if (threshold) {
#pragma omp simd
		for (int j = 0; j < C; j++)
			sum[j] = res[j] + (sum[j] + bias[j]) *
					  dropout_factor(key, base + (uint32_t)j, threshold, scale);
	} else {
#pragma omp simd
		for (int j = 0; j < C; j++)
			sum[j] = res[j] + (sum[j] + bias[j]);
	}
	layernorm_row(out, mean, rstd, sum, w, b, C, eps);
}

void residual_layernorm_forward(float *out, float *sum, float *mean, float *rstd,
				const float *res, const float *bias, const float *w,
				const float *b, int N, int C, float eps, float p,
				uint64_t seed)
{
	uint32_t threshold = dropout_threshold(p), key = dropout_key(seed);
	float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		residual_layernorm_one(out + o, sum + o, mean + r, rstd + r, res + o, bias, w,
				       b, C, eps, key, (uint32_t)o, threshold, scale);
	}
}

HOT static void layernorm_param_grads_block(float *dw, float *db, const float *dout,
					    const float *in, const float *mean,
					    const float *rstd, int N, int C, int nc)
{
	float sw[COL_BLOCK] = { 0 }, sb[COL_BLOCK] = { 0 };
	for (int r = 0; r < N; r++) {
		const float *g = dout + (size_t)r * C, *x = in + (size_t)r * C;
		float m = mean[r], rs = rstd[r];
#pragma omp simd
		for (int j = 0; j < nc; j++) {
			sw[j] += g[j] * (x[j] - m) * rs;
			sb[j] += g[j];
		}
	}
	add_to(dw, sw, nc);
	add_to(db, sb, nc);
}

HOT static void layernorm_backward_row(float *din, const float *dout, const float *x,
				       float m, float rs, const float *w, int C)
{
	float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
	for (int j = 0; j < C; j++) {
		float g = dout[j] * w[j];
		sg += g;
		sgx += g * (x[j] - m) * rs;
	}
	float mg = sg / C, mgx = sgx / C;
#pragma omp simd
	for (int j = 0; j < C; j++)
		din[j] = rs * (dout[j] * w[j] - mg - (x[j] - m) * rs * mgx);
}

void layernorm_backward(float *din, float *dw, float *db, const float *dout,
			const float *in, const float *mean, const float *rstd,
			const float *w, int N, int C)
{
	/* Parameter grads first: din may overwrite dout. */
	int width = col_block(C), nblocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nblocks; k++) {
		int c0 = k * width;
		layernorm_param_grads_block(dw + c0, db + c0, dout + c0, in + c0, mean, rstd,
					    N, C, min_int(width, C - c0));
	}
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * C;
		layernorm_backward_row(din + o, dout + o, in + o, mean[r], rstd[r], w, C);
	}
}

/* ---- GELU ---- */

float gelu(float x)
{
	float cdf, pdf;
	normal_cdf_pdf(x, &cdf, &pdf);
	return x * cdf;
}

HOT_ELEMENTWISE static void bias_gelu_row(float *out, float *pre, const float *bias, int n)
{
#pragma omp simd
	for (int j = 0; j < n; j++) {
		float x = pre[j] + bias[j], cdf, pdf;
		normal_cdf_pdf(x, &cdf, &pdf);
		pre[j] = x;
		out[j] = x * cdf;
	}
}

void bias_gelu_forward(float *out, float *pre, const float *bias, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		bias_gelu_row(out + (size_t)r * F, pre + (size_t)r * F, bias, F);
}

HOT_ELEMENTWISE static void gelu_backward_span(float *dpre, const float *dout, const float *pre,
					       size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++) {
		float x = pre[i], cdf, pdf;
		normal_cdf_pdf(x, &cdf, &pdf);
		dpre[i] = dout[i] * (cdf + x * pdf);
	}
}

void gelu_backward(float *dpre, const float *dout, const float *pre, int N, int F)
{
	size_t n = (size_t)N * F;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i += SPAN)
		gelu_backward_span(dpre + i, dout + i, pre + i, n - i < SPAN ? n - i : SPAN);
}

/* ---- tanh (the pooler's activation: small, so libm is fine) ---- */

void tanh_forward(float *out, const float *in, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = tanhf(in[i]);
}

void tanh_backward(float *din, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		din[i] = dout[i] * (1.0f - out[i] * out[i]);
}

/* ---- rotary position embeddings and GeGLU (ModernBERT's) ---- */

/* The turns of positions 0..npos of pairs j < half: cs[p * d + j] the
 * cosine of p / theta^(2j/d), cs[p * d + half + j] its sine (negated: the
 * inverse turn). */
static float *rotary_table(int npos, int d, float theta, int inverse)
{
	int half = d / 2;
	float *cs = xmalloc(sizeof(float) * (size_t)npos * (size_t)(d ? d : 1));
#pragma omp parallel for schedule(static)
	for (int p = 0; p < npos; p++)
		for (int j = 0; j < half; j++) {
			float inv = (float)(1.0 / pow((double)theta, 2.0 * j / d));   /* rounded once */
			float a = (float)p * inv;
			cs[(size_t)p * d + j] = cosf(a);
			cs[(size_t)p * d + half + j] = inverse ? -sinf(a) : sinf(a);
		}
	return cs;
}

/* One head's pairs (x[j], x[half + j]) turned by the cosines cs[j] and
 * sines cs[half + j], in floats and in bf16. */
HOT_ELEMENTWISE static void turn_floats(float *x, const float *cs, int half)
{
	float *y = x + half;
	const float *sn = cs + half;
#pragma omp simd
	for (int j = 0; j < half; j++) {
		float a = x[j], b = y[j];
		x[j] = a * cs[j] - b * sn[j];
		y[j] = b * cs[j] + a * sn[j];
	}
}

HOT_ELEMENTWISE static void turn_bf16(uint16_t *x, const float *cs, int half)
{
	uint16_t *y = x + half;
	const float *sn = cs + half;
#pragma omp simd
	for (int j = 0; j < half; j++) {
		float a = from_bf16(x[j]), b = from_bf16(y[j]);
		x[j] = to_bf16(a * cs[j] - b * sn[j]);
		y[j] = to_bf16(b * cs[j] + a * sn[j]);
	}
}

void rotary_rows(void *x, int bf16, int ld, int parts, int C, int heads, const int32_t *pos, int rows,
		 float theta, int inverse)
{
	int d = C / heads, half = d / 2, npos = 0;
	for (int r = 0; r < rows; r++)
		npos = pos[r] + 1 > npos ? pos[r] + 1 : npos;
	float *table = rotary_table(npos, d, theta, inverse);
#pragma omp parallel for schedule(static)
	for (int r = 0; r < rows; r++) {
		const float *cs = table + (size_t)pos[r] * d;
		for (int k = 0; k < parts * heads; k++) {
			size_t o = (size_t)r * ld + (size_t)k * d;
			if (bf16)
				turn_bf16((uint16_t *)x + o, cs, half);
			else
				turn_floats((float *)x + o, cs, half);
		}
	}
	free(table);
}

HOT_ELEMENTWISE static void geglu_row(float *out, const float *x, const float *g, int F)
{
#pragma omp simd
	for (int j = 0; j < F; j++) {
		float cdf, pdf;
		normal_cdf_pdf(x[j], &cdf, &pdf);
		out[j] = x[j] * cdf * g[j];
	}
}

void geglu_rows(float *out, const float *in, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		geglu_row(out + (size_t)r * F, in + (size_t)r * 2 * F, in + (size_t)r * 2 * F + F, F);
}

HOT_ELEMENTWISE static void geglu_backward_row(float *dx, float *dg, const float *dout, const float *x,
					       const float *g, int F)
{
#pragma omp simd
	for (int j = 0; j < F; j++) {
		float cdf, pdf;
		normal_cdf_pdf(x[j], &cdf, &pdf);
		dx[j] = dout[j] * g[j] * (cdf + x[j] * pdf);
		dg[j] = dout[j] * x[j] * cdf;
	}
}

void geglu_backward_rows(float *din, const float *dout, const float *in, int N, int F)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		size_t o = (size_t)r * 2 * F;
		geglu_backward_row(din + o, din + o + F, dout + (size_t)r * F, in + o, in + o + F, F);
	}
}

/* ---- ReLU (DistilBERT's pre_classifier) ---- */

void relu_forward(float *out, const float *in, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void relu_backward(float *din, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

/* ---- softmax cross-entropy ---- */

HOT static float logsumexp_row(const float *x, int n)
{
	float mx = row_max(x, n);
	float s = 0.0f;
#pragma omp simd reduction(+ : s)
	for (int j = 0; j < n; j++)
		s += exp_approx(x[j] - mx);
	return mx + logf(s);
}

/* The mean of a row, for label smoothing. */
static double row_mean(const float *x, int n)
{
	double s = 0.0;
	for (int j = 0; j < n; j++)
		s += x[j];
	return s / n;
}

double crossentropy_forward(float *lse, const float *logits, const int32_t *labels,
			    int N, int V, float e)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		lse[r] = labels[r] >= 0 ? logsumexp_row(logits + (size_t)r * V, V) : 0.0f;
	double loss = 0.0;
	for (int r = 0; r < N; r++) {
		if (labels[r] < 0)
			continue;
		const float *x = logits + (size_t)r * V;
		loss += (double)lse[r] - (1.0 - e) * x[labels[r]] - (e ? e * row_mean(x, V) : 0.0);
	}
	return loss;
}

HOT static void crossentropy_backward_row(float *d, const float *x, float lse, int n,
					  float scale, float floor)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		d[j] = scale * exp_approx(x[j] - lse) - floor;
}

void crossentropy_backward(float *dlogits, const float *logits, const float *lse,
			   const int32_t *labels, int N, int V, float e, float scale)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		float *d = dlogits + (size_t)r * V;
		if (labels[r] < 0) {
			memset(d, 0, sizeof(float) * V);
			continue;
		}
		crossentropy_backward_row(d, logits + (size_t)r * V, lse[r], V, scale, scale * e / V);
		d[labels[r]] -= scale * (1.0f - e);
	}
}

/* ---- divergences between distributions (distillation, VAT, R-Drop) ---- */

/* The log-sum-exp of x / temp, in double. */
static double lse_scaled(const float *x, int n, float temp)
{
	double mx = -INFINITY, s = 0;
	for (int j = 0; j < n; j++)
		mx = fmax(mx, x[j] / temp);
	for (int j = 0; j < n; j++)
		s += exp(x[j] / temp - mx);
	return mx + log(s);
}

void softmax_rows(float *out, const float *logits, int N, int V, float temp)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = logits + (size_t)r * V;
		double l = lse_scaled(x, V, temp);
		for (int j = 0; j < V; j++)
			out[(size_t)r * V + j] = (float)exp(x[j] / temp - l);
	}
}

double kl_forward(float *lse, const float *logits, const float *target, int N, int V, float temp)
{
	double loss = 0;
	for (int r = 0; r < N; r++) {
		const float *x = logits + (size_t)r * V, *t = target + (size_t)r * V;
		double l = lse_scaled(x, V, temp);
		lse[r] = (float)l;
		for (int j = 0; j < V; j++)
			if (t[j] > 0)
				loss += t[j] * (log(t[j]) - (x[j] / temp - l));
	}
	return loss;
}

void kl_backward(float *dlogits, const float *logits, const float *lse, const float *target, int N, int V,
		 float temp, float scale)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++)
		for (int j = 0; j < V; j++) {
			size_t i = (size_t)r * V + j;
			dlogits[i] += scale / temp * (expf(logits[i] / temp - lse[r]) - target[i]);
		}
}

/* KL(p ‖ q) of rows a and b, from their log-sum-exps. */
static double kl_rows(const float *a, double la, const float *b, double lb, int V)
{
	double kl = 0;
	for (int j = 0; j < V; j++)
		kl += exp(a[j] - la) * ((a[j] - la) - (b[j] - lb));
	return kl;
}

double symkl_forward(const float *logits, int P, int V)
{
	double loss = 0;
	for (int r = 0; r < P; r++) {
		const float *a = logits + (size_t)r * V, *b = logits + (size_t)(P + r) * V;
		double la = lse_scaled(a, V, 1), lb = lse_scaled(b, V, 1);
		loss += kl_rows(a, la, b, lb, V) + kl_rows(b, lb, a, la, V);
	}
	return loss;
}

void symkl_backward(float *dlogits, const float *logits, int P, int V, float scale)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < P; r++) {
		const float *a = logits + (size_t)r * V, *b = logits + (size_t)(P + r) * V;
		float *da = dlogits + (size_t)r * V, *db = dlogits + (size_t)(P + r) * V;
		double la = lse_scaled(a, V, 1), lb = lse_scaled(b, V, 1);
		double pq = kl_rows(a, la, b, lb, V), qp = kl_rows(b, lb, a, la, V);
		for (int j = 0; j < V; j++) {
			double lp = a[j] - la, lq = b[j] - lb, p = exp(lp), q = exp(lq);
			da[j] += (float)(scale * (p * (lp - lq - pq) + p - q));
			db[j] += (float)(scale * (q * (lq - lp - qp) + q - p));
		}
	}
}

void axpy(float *y, const float *x, size_t n, float a)
{
#pragma omp parallel for schedule(static) if (n >= 65536)
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* ---- squared error and binary cross-entropy (regression, multi-label) ---- */

double mse_forward(const float *pred, const float *target, int N)
{
	double loss = 0.0;
	for (int i = 0; i < N; i++) {
		double d = (double)pred[i] - target[i];
		loss += d * d;
	}
	return loss;
}

void mse_backward(float *dpred, const float *pred, const float *target, int N, float scale)
{
	for (int i = 0; i < N; i++)
		dpred[i] = scale * 2.0f * (pred[i] - target[i]);
}

double bce_forward(const float *logits, const float *targets, size_t n)
{
	double loss = 0.0;
	for (size_t i = 0; i < n; i++) {
		double x = logits[i];
		loss += fmax(x, 0.0) - x * targets[i] + log1p(exp(-fabs(x)));
	}
	return loss;
}

void bce_backward(float *dlogits, const float *logits, const float *targets, size_t n,
		  float scale)
{
	for (size_t i = 0; i < n; i++)
		dlogits[i] = scale * (1.0f / (1.0f + expf(-logits[i])) - targets[i]);
}

/* ---- dropout ---- */

HOT_ELEMENTWISE static void dropout_span(float *out, const float *in, int n, uint32_t key,
			     uint32_t base, uint32_t threshold, float scale)
{
#pragma omp simd
	for (int i = 0; i < n; i++)
		out[i] = in[i] * dropout_factor(key, base + (uint32_t)i, threshold, scale);
}

void dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed)
{
	if (p <= 0.0f) {
		if (out != in)
			memmove(out, in, sizeof(float) * n);
		return;
	}
	uint32_t threshold = dropout_threshold(p), key = dropout_key(seed);
	float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i += SPAN)
		dropout_span(out + i, in + i, n - i < SPAN ? (int)(n - i) : SPAN, key,
			     (uint32_t)i, threshold, scale);
}

int dropout_keeps(uint64_t seed, uint64_t i, float p)
{
	return dropout_factor(dropout_key(seed), (uint32_t)i, dropout_threshold(p), 1.0f) != 0.0f;
}

/* ---- row gather and scatter-add (the rows a head reads) ---- */

void gather_rows(float *out, const float *in, const int32_t *rows, int M, int C)
{
	for (int m = 0; m < M; m++)
		memcpy(out + (size_t)m * C, in + (size_t)rows[m] * C, sizeof(float) * C);
}

/* The real rows of sequence b. */
static int real_rows(const int32_t *kv_start, const uint8_t *mask, int b)
{
	int n = 0;
	for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
		n += mask[r] != 0;
	return n;
}

void mean_rows(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask, int B, int C)
{
#pragma omp parallel for schedule(static)
	for (int b = 0; b < B; b++) {
		float *o = out + (size_t)b * C;
		memset(o, 0, sizeof(float) * C);
		for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
			if (mask[r])
				add_to(o, x + (size_t)r * C, C);
		int n = real_rows(kv_start, mask, b);
		for (int c = 0; c < C && n; c++)
			o[c] /= (float)n;
	}
}

void mean_rows_backward(float *dx, const float *dout, const int32_t *kv_start, const uint8_t *mask, int B,
			int C)
{
#pragma omp parallel for schedule(static)
	for (int b = 0; b < B; b++) {
		int n = real_rows(kv_start, mask, b);
		for (int r = kv_start[b]; r < kv_start[b + 1]; r++)
			for (int c = 0; c < C && mask[r]; c++)
				dx[(size_t)r * C + c] = dout[(size_t)b * C + c] / (float)n;
	}
}

void scatter_add_rows(float *out, const float *in, const int32_t *rows, int M, int C)
{
	for (int m = 0; m < M; m++)
		add_to(out + (size_t)rows[m] * C, in + (size_t)m * C, C);
}
