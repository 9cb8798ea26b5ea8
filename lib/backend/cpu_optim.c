/* The optimizer's elementwise ops on the CPU: each update follows PyTorch's
 * (or apex's, for LAMB) order of float operations, so results agree with them
 * to the last bit or two. */
#include "backend/cpu_ops.h"
#include "backend/cpu_simd.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>

/* Loops shorter than PARALLEL_MIN stay on one thread: a bias is not worth the
 * fork. Sums run over SUM_CHUNK-sized chunks whatever the thread count. */
enum { PARALLEL_MIN = 1 << 15, SUM_CHUNK = 1 << 14 };

typedef void chunk_sums_fn(void *ctx, size_t lo, size_t hi, double *sums);

/* out[0..nsum) = the sums fn adds up over [0, n). Chunks have a fixed size and
 * their partial sums are added in chunk order, so no bit depends on threads. */
static void chunked_sums(size_t n, int nsum, chunk_sums_fn *fn, void *ctx, double *out)
{
	size_t nchunk = (n + SUM_CHUNK - 1) / SUM_CHUNK;
	double *part = xcalloc(nchunk * nsum, sizeof *part);
	#pragma omp parallel for schedule(static) if (nchunk > 1)
	for (size_t c = 0; c < nchunk; c++) {
		size_t hi = (c + 1) * SUM_CHUNK < n ? (c + 1) * SUM_CHUNK : n;
		fn(ctx, c * SUM_CHUNK, hi, part + c * nsum);
	}
	for (int s = 0; s < nsum; s++)
		out[s] = 0;
	for (size_t c = 0; c < nchunk; c++)
		for (int s = 0; s < nsum; s++)
			out[s] += part[c * nsum + s];
	free(part);
}

/* Eight running sums, lane k taking every eighth square from lo + k (the
 * rest in lane 0), added in lane order: the same bits on any processor,
 * with or without vectors or fused multiply-adds (a float's square is exact
 * in double), and no longer held to the pace of one chain of additions. */
HOT_ELEMENTWISE static void squares(void *ctx, size_t lo, size_t hi, double *sums)
{
	enum { LANES = 8 };
	const float *x = ctx;
	double lane[LANES] = { 0 };
	size_t i = lo;
	for (; i + LANES <= hi; i += LANES)
#pragma omp simd
		for (int k = 0; k < LANES; k++)
			lane[k] += (double)x[i + k] * x[i + k];
	for (; i < hi; i++)
		lane[0] += (double)x[i] * x[i];
	for (int k = 0; k < LANES; k++)
		sums[0] += lane[k];
}

double sum_squares(const float *x, size_t n)
{
	double ss;
	chunked_sums(n, 1, squares, (void *)x, &ss);
	return ss;
}

void scale_floats(float *x, size_t n, float s)
{
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

void ema_update(float *restrict avg, const float *restrict x, size_t n, float decay)
{
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t i = 0; i < n; i++)
		avg[i] = decay * avg[i] + (1.0f - decay) * x[i];
}

void swap_floats(float *restrict a, float *restrict b, size_t n)
{
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t i = 0; i < n; i++) {
		float t = a[i];
		a[i] = b[i];
		b[i] = t;
	}
}

/* The updates run over spans of SPAN floats, each a vectorised HOT_EXACT
 * loop (sqrt and division round alike in vectors). */
enum { SPAN = 8192 };

static size_t span_len(size_t n, size_t s)
{
	return n - s * SPAN < SPAN ? n - s * SPAN : SPAN;
}

HOT_EXACT static void adam_span(float *restrict p, const float *restrict grad, float *restrict m,
				float *restrict v, size_t n, const struct adam_coef *c)
{
	const struct adam_coef a = *c;
#pragma omp simd
	for (size_t i = 0; i < n; i++) {
		float g = grad[i] * a.gscale + a.l2 * p[i];
		m[i] = m[i] * a.b1 + a.omb1 * g;
		v[i] = v[i] * a.b2 + a.omb2 * g * g;
		float denom = sqrtf(v[i]) / a.bc2_sqrt + a.eps;
		p[i] = p[i] * a.keep - a.step_size * (m[i] / denom);
	}
}

/* torch.optim.Adam/AdamW: m_hat/(sqrt(v_hat) + eps) with eps outside the sqrt. */
void adam_update(float *restrict p, const float *restrict grad, float *restrict m,
		 float *restrict v, size_t n, const struct adam_coef *c)
{
	size_t spans = (n + SPAN - 1) / SPAN;
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t s = 0; s < spans; s++) {
		size_t o = s * SPAN;
		adam_span(p + o, grad + o, m + o, v + o, span_len(n, s), c);
	}
}

void adam_update_tensors(const struct adam_tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		adam_update(t[i].p, t[i].g, t[i].m, t[i].v, t[i].n, &t[i].c);
}

HOT_EXACT static void sgd_span(float *restrict p, const float *restrict grad, float *restrict m,
			       size_t n, float gscale, float lr, float momentum, float wd)
{
	if (m) {
#pragma omp simd
		for (size_t i = 0; i < n; i++) {
			float g = m[i] = m[i] * momentum + (grad[i] * gscale + wd * p[i]);
			p[i] = p[i] - lr * g;
		}
	} else {
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			p[i] = p[i] - lr * (grad[i] * gscale + wd * p[i]);
	}
}

/* torch.optim.SGD without dampening or Nesterov: the zeroed buffer makes the
 * first step's buf = 0*m + g = g, as PyTorch's clone of the gradient. */
void sgd_update(float *p, const float *grad, float *m, size_t n, float gscale, float lr,
		float momentum, float wd)
{
	size_t spans = (n + SPAN - 1) / SPAN;
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t s = 0; s < spans; s++) {
		size_t o = s * SPAN;
		sgd_span(p + o, grad + o, m ? m + o : NULL, span_len(n, s), gscale, lr, momentum, wd);
	}
}

static inline float lamb_direction(const struct lamb_coef *a, float m, float v, float p)
{
	return m / a->bc1 / (sqrtf(v / a->bc2) + a->eps) + a->wd * p;
}

struct lamb_pass {
	const float *p, *g;
	float *m, *v;
	const struct lamb_coef *a;
};

static void lamb_chunk(void *ctx, size_t lo, size_t hi, double *sums)
{
	const struct lamb_pass *l = ctx;
	const struct lamb_coef *a = l->a;
	for (size_t i = lo; i < hi; i++) {
		float g = l->g[i] * a->gscale;
		l->m[i] = l->m[i] * a->b1 + a->omb1 * g;
		l->v[i] = l->v[i] * a->b2 + a->omb2 * g * g;
		float u = lamb_direction(a, l->m[i], l->v[i], l->p[i]);
		sums[0] += (double)l->p[i] * l->p[i];
		sums[1] += (double)u * u;
	}
}

void lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
		  const struct lamb_coef *c, double *sums)
{
	struct lamb_pass pass = {p, g, m, v, c};
	chunked_sums(n, 2, lamb_chunk, &pass, sums);
}

/* The second pass recomputes u, so the update never needs a buffer. */
void lamb_apply(float *p, const float *m, const float *v, size_t n, const struct lamb_coef *c,
		float step)
{
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t i = 0; i < n; i++)
		p[i] -= step * lamb_direction(c, m[i], v[i], p[i]);
}
