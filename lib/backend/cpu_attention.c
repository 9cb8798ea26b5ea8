/* Multi-head self-attention on the CPU: one sequence per task, its heads in
 * turn, single-threaded sgemm inside (OpenBLAS and oneDNN run serially inside
 * an OpenMP region), heads read and written in place through row strides, so
 * the fused [rows, 3C] QKV product needs no reshuffling. Each (sequence, head)
 * pair's result depends on nothing but its own data, so any schedule gives the
 * same bits. Nothing is kept for the backward: it works each head's
 * probabilities out again with the forward's own products and softmax, so
 * they have the forward's bits, in the thread's scratch, which stays in its
 * cache; the gradients of Q, K and V, read only after all heads, are made
 * there too and streamed out. */
#include "backend/cpu_ops.h"
#include "backend/cpu_simd.h"
#include "util/err.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* What every (sequence, head) task needs, worked out once. */
struct heads {
	const struct attention *a;
	const uint8_t *mask;       /* a->mask, or all ones */
	int d;                     /* head width C/H */
	float scale;               /* 1/sqrt(d) */
	uint32_t threshold, key;   /* dropout on the probabilities; threshold 0: none */
	float keep_scale;
	sgemm_fn gemm;
	softmax_row_fn softmax;
	softmax_backward_fn softmax_backward;
};

static struct heads heads_of(const struct attention *a, const uint8_t *mask, sgemm_fn gemm,
			     softmax_row_fn softmax, softmax_backward_fn softmax_backward)
{
	int d = a->C / a->H;
	struct heads s = { a, mask, d, 1.0f / sqrtf((float)d), dropout_threshold(a->p),
			   dropout_key(a->seed), 1.0f / (1.0f - a->p), gemm, softmax, softmax_backward };
	return s;
}

static void openblas_sgemm(char transa, char transb, int M, int N, int K, float alpha,
			   const float *A, int lda, const float *B, int ldb, float beta, float *C,
			   int ldc)
{
	cblas_sgemm(CblasRowMajor, transa == 'T' ? CblasTrans : CblasNoTrans,
		    transb == 'T' ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
		    C, ldc);
}

/* Keys past the last real one have zero weight, so the products stop there.
 * Returns 0 for a sequence with no real key: it attends to all its keys
 * uniformly (as HF's additive mask gives), and its scores get no gradient
 * since that output does not depend on them. */
static int real_keys(const uint8_t *mask, int len)
{
	for (int j = len; j > 0; j--)
		if (mask[j - 1])
			return j;
	return 0;
}

/* n floats for each thread of the coming parallel region, allocated before it:
 * die() must not run inside one (it would exit under the other threads). */
static float *thread_scratch(size_t n)
{
	return xmalloc(sizeof(float) * n * (size_t)omp_get_max_threads());
}

/* An all-ones stand-in when there is no mask; NULL when there is one. */
static uint8_t *ones_for_no_mask(const uint8_t *mask, int n)
{
	if (mask)
		return NULL;
	uint8_t *ones = xmalloc(n);
	memset(ones, 1, n);
	return ones;
}

/* A softmax_row_fn. */
HOT static void masked_softmax_row(float *p, const uint8_t *mask, int n, int len)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		p[j] = select_float(mask[j], p[j], -INFINITY);
	float mx = row_max(p, n);
	if (mx == -INFINITY) {
		for (int j = 0; j < len; j++)
			p[j] = 1.0f / len;
		return;
	}
	float s = 0.0f;
#pragma omp simd reduction(+ : s)
	for (int j = 0; j < n; j++) {
		p[j] = select_float(mask[j], exp_approx(p[j] - mx), 0.0f);
		s += p[j];
	}
	float inv = 1.0f / s;
#pragma omp simd
	for (int j = 0; j < n; j++)
		p[j] *= inv;
	for (int j = n; j < len; j++)
		p[j] = 0.0f;
}

HOT_ELEMENTWISE static void dropout_row(float *out, const float *in, int n, const struct heads *s,
			    uint32_t base)
{
#pragma omp simd
	for (int j = 0; j < n; j++)
		out[j] = in[j] * dropout_factor(s->key, base + (uint32_t)j, s->threshold, s->keep_scale);
}

/* Back through dropout: dp *= mask, and dropped = p * mask for dV. */
HOT_ELEMENTWISE static void dropout_backward_row(float *dp, float *dropped, const float *p, int n,
						 const struct heads *s, uint32_t base)
{
#pragma omp simd
	for (int j = 0; j < n; j++) {
		float f = dropout_factor(s->key, base + (uint32_t)j, s->threshold, s->keep_scale);
		dropped[j] = p[j] * f;
		dp[j] *= f;
	}
}

/* A softmax_backward_fn. */
HOT static void softmax_backward_row(float *dp, const float *p, int n)
{
	float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
	for (int j = 0; j < n; j++)
		dot += p[j] * dp[j];
#pragma omp simd
	for (int j = 0; j < n; j++)
		dp[j] = p[j] * (dp[j] - dot);
}

/* Sequence b, head h: its queries q0.. (nq of them), its keys k0.. (len of
 * them, the first n taking part) and the number of its first probability,
 * p_start[b] + h * nq * len, from which its nq x len block numbers its
 * dropout draws. */
struct head_task {
	int b, h, q0, nq, k0, len, n, real;
	size_t probs;
};

static struct head_task head_task(const struct heads *s, int bh)
{
	const struct attention *a = s->a;
	const int32_t *q = a->q_start ? a->q_start : a->kv_start;
	struct head_task t = { .b = bh / a->H, .h = bh % a->H };
	t.q0 = q[t.b];
	t.nq = q[t.b + 1] - t.q0;
	t.k0 = a->kv_start[t.b];
	t.len = a->kv_start[t.b + 1] - t.k0;
	t.real = real_keys(s->mask + t.k0, t.len);
	t.n = t.real ? t.real : t.len;
	t.probs = (size_t)a->p_start[t.b] + (size_t)t.h * t.nq * t.len;
	return t;
}

/* The floats of the largest probability block of one (sequence, head). */
static size_t largest_block(const struct attention *a)
{
	const int32_t *q = a->q_start ? a->q_start : a->kv_start;
	size_t most = 1;
	for (int b = 0; b < a->B; b++) {
		size_t n = (size_t)(q[b + 1] - q[b]) * (size_t)(a->kv_start[b + 1] - a->kv_start[b]);
		most = n > most ? n : most;
	}
	return most;
}

/* Asks for rows x width floats at x (rows ld apart) to come into the cache. */
static void prefetch_rows(const float *x, int ld, int rows, int width)
{
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < width; j += 16)
			__builtin_prefetch(x + (size_t)i * ld + j);
}

/* The head's probabilities in work (nq rows of len), before dropout: the
 * forward's and, worked out again, the backward's. */
static void head_probs(float *work, const struct heads *s, const struct head_task *t)
{
	const struct attention *a = s->a;
	int len = t->len, d = s->d;
	const float *q = a->q + (size_t)t->q0 * a->ldq + t->h * d;
	const float *k = a->k + (size_t)t->k0 * a->ldkv + t->h * d;
	s->gemm('N', 'T', t->nq, t->n, d, s->scale, q, a->ldq, k, a->ldkv, 0.0f, work, len);
	for (int i = 0; i < t->nq; i++)
		s->softmax(work + (size_t)i * len, s->mask + t->k0, t->n, len);
}

/* The next head's queries, keys and values are asked for while this one's
 * probabilities are worked out in work. */
static void head_forward(float *ctx, float *work, float *dropped, const struct heads *s, int bh)
{
	const struct attention *a = s->a;
	struct head_task t = head_task(s, bh);
	int len = t.len, d = s->d;
	if (!t.nq)
		return;
	const float *v = a->v + (size_t)t.k0 * a->ldkv + t.h * d;
	if (t.h + 1 < a->H) {
		prefetch_rows(a->q + (size_t)t.q0 * a->ldq + t.h * d + d, a->ldq, t.nq, d);
		prefetch_rows(a->k + (size_t)t.k0 * a->ldkv + t.h * d + d, a->ldkv, t.n, d);
		prefetch_rows(v + d, a->ldkv, t.n, d);
	}
	head_probs(work, s, &t);
	const float *pv = work;
	if (s->threshold) {
		for (int i = 0; i < t.nq; i++)
			dropout_row(dropped + (size_t)i * len, work + (size_t)i * len, t.n, s,
				    (uint32_t)(t.probs + (size_t)i * len));
		pv = dropped;
	}
	s->gemm('N', 'N', t.nq, d, t.n, 1.0f, pv, len, v, a->ldkv, 0.0f,
		ctx + (size_t)t.q0 * a->C + t.h * d, a->C);
}

void attention_forward_with(float *ctx, const struct attention *a, sgemm_fn gemm,
			    softmax_row_fn softmax)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, gemm, softmax, NULL);
	size_t block = largest_block(a), per_thread = s.threshold ? 2 * block : block;
	float *scratch = thread_scratch(per_thread);
#pragma omp parallel
	{
		float *work = scratch + (size_t)omp_get_thread_num() * per_thread;
		float *dropped = s.threshold ? work + block : NULL;
#pragma omp for schedule(dynamic)
		for (int b = 0; b < a->B; b++)
			for (int h = 0; h < a->H; h++)
				head_forward(ctx, work, dropped, &s, b * a->H + h);
	}
	free(scratch);
	free(ones);
}

static void zero_rows(float *x, int from, int to, int ld, int width)
{
	for (int j = from; j < to; j++)
		memset(x + (size_t)j * ld, 0, sizeof(float) * width);
}

/* rows x width floats of src, packed, streamed out to dst, rows ld apart. */
static void stream_rows(float *dst, int ld, const float *src, int rows, int width)
{
	for (int i = 0; i < rows; i++)
		copy_streaming(dst + (size_t)i * ld, src + (size_t)i * width, width);
}

/* The thread's scratch of head_backward. */
struct head_scratch {
	float *pr, *dp, *dropped, *out;
};

/* The probabilities are worked out again in pr, the gradients of q, k and
 * v made in out and streamed to their places. */
static void head_backward(float *dq, float *dk, float *dv, const struct head_scratch *w,
			  const float *dctx, const struct heads *s, int bh)
{
	const struct attention *a = s->a;
	struct head_task t = head_task(s, bh);
	int len = t.len, d = s->d;
	size_t kv = (size_t)t.k0 * a->ldkv + t.h * d;
	dk += kv, dv += kv;
	if (!t.nq) {
		/* no queries, so nothing reaches these keys and values */
		zero_rows(dk, 0, len, a->ldkv, d);
		zero_rows(dv, 0, len, a->ldkv, d);
		return;
	}
	const float *q = a->q + (size_t)t.q0 * a->ldq + t.h * d, *k = a->k + kv, *v = a->v + kv;
	const float *dc = dctx + (size_t)t.q0 * a->C + t.h * d, *pr = w->pr;
	float *dp = w->dp, *dropped = w->dropped, *out = w->out;
	dq += (size_t)t.q0 * a->ldq + t.h * d;
	head_probs(w->pr, s, &t);

	/* d(dropped probs) = dctx V^T */
	s->gemm('N', 'T', t.nq, t.n, d, 1.0f, dc, a->C, v, a->ldkv, 0.0f, dp, len);
	for (int i = 0; i < t.nq; i++) {
		float *dpi = dp + (size_t)i * len;
		const float *p = pr + (size_t)i * len;
		if (s->threshold)
			dropout_backward_row(dpi, dropped + (size_t)i * len, p, t.n, s,
					     (uint32_t)(t.probs + (size_t)i * len));
		/* ds, or 0 where no key is real */
		if (t.real)
			s->softmax_backward(dpi, p, t.n);
		else
			memset(dpi, 0, sizeof(float) * t.n);
	}
	const float *pv = s->threshold ? dropped : pr;
	/* dV = dropped^T dctx, dQ = scale dS K, dK = scale dS^T Q */
	s->gemm('T', 'N', t.n, d, t.nq, 1.0f, pv, len, dc, a->C, 0.0f, out, d);
	stream_rows(dv, a->ldkv, out, t.n, d);
	s->gemm('N', 'N', t.nq, d, t.n, s->scale, dp, len, k, a->ldkv, 0.0f, out, d);
	stream_rows(dq, a->ldq, out, t.nq, d);
	s->gemm('T', 'N', t.n, d, t.nq, s->scale, dp, len, q, a->ldq, 0.0f, out, d);
	stream_rows(dk, a->ldkv, out, t.n, d);
	stream_fence();
	zero_rows(dv, t.n, len, a->ldkv, d);
	zero_rows(dk, t.n, len, a->ldkv, d);
}

void attention_backward_with(float *dq, float *dk, float *dv, const float *dctx,
			     const struct attention *a, sgemm_fn gemm, softmax_row_fn softmax,
			     softmax_backward_fn softmax_backward)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, gemm, softmax, softmax_backward);
	size_t block = largest_block(a), rows = (size_t)a->T * (size_t)s.d;
	size_t per_thread = (s.threshold ? 3 * block : 2 * block) + rows;
	float *scratch = thread_scratch(per_thread);
#pragma omp parallel
	{
		struct head_scratch w;
		w.pr = scratch + (size_t)omp_get_thread_num() * per_thread;
		w.dp = w.pr + block;
		w.dropped = s.threshold ? w.dp + block : NULL;
		w.out = w.pr + per_thread - rows;
#pragma omp for schedule(dynamic)
		for (int b = 0; b < a->B; b++)
			for (int h = 0; h < a->H; h++)
				head_backward(dq, dk, dv, &w, dctx, &s, b * a->H + h);
	}
	free(scratch);
	free(ones);
}

void attention_forward(float *ctx, float *state, const struct attention *a)
{
	(void)state;
	attention_forward_with(ctx, a, openblas_sgemm, masked_softmax_row);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *state,
			const struct attention *a)
{
	(void)state;
	attention_backward_with(dq, dk, dv, dctx, a, openblas_sgemm, masked_softmax_row,
				softmax_backward_row);
}
