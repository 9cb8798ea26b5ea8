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
	int bf16;                  /* q, k, v and ctx are bf16, else floats */
};

static struct heads heads_of(const struct attention *a, const uint8_t *mask,
			     const struct attention_kernels *kn)
{
	int d = a->C / a->H;
	struct heads s = { a, mask, d, 1.0f / sqrtf((float)d), dropout_threshold(a->p),
			   dropout_key(a->seed), 1.0f / (1.0f - a->p), kn->gemm, kn->softmax,
			   kn->softmax_backward, kn->bf16 };
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

/* A thread's scratch: a head's probabilities, in the backward their
 * gradient, with dropout their dropped copy; a head's rows of output; and
 * where acts are bf16, its queries, keys and values widened to floats. */
struct head_scratch {
	float *pr, *dp, *dropped, *out, *wide;
};

/* The floats of one thread's scratch, and its pieces at base. */
static size_t scratch_floats(const struct heads *s, int backward, size_t block)
{
	size_t rows = (size_t)s->a->T * s->d;
	return block * (size_t)(1 + backward + (s->threshold != 0)) + rows * (s->bf16 ? 4 : 1);
}

static struct head_scratch carve_scratch(float *base, const struct heads *s, int backward,
					 size_t block)
{
	struct head_scratch w = { .pr = base };
	base += block;
	if (backward)
		w.dp = base, base += block;
	if (s->threshold)
		w.dropped = base, base += block;
	w.out = base;
	w.wide = s->bf16 ? base + (size_t)s->a->T * s->d : NULL;
	return w;
}

/* Asks for rows x width floats at x (rows ld apart) to come into the cache. */
static void prefetch_rows(const float *x, int ld, int rows, int width)
{
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < width; j += 16)
			__builtin_prefetch(x + (size_t)i * ld + j);
}

/* A head's queries, keys and values as floats, rows ldq and ldkv apart. */
struct head_in {
	const float *q, *k, *v;
	int ldq, ldkv;
};

/* rows x d bf16s of src (rows ld apart) as floats, packed, into dst. */
static void widen_rows(float *dst, const struct act *src, size_t at, int ld, int rows, int d)
{
	const uint16_t *x = (const uint16_t *)src + at;
	for (int i = 0; i < rows; i++)
		for (int c = 0; c < d; c++)
			dst[(size_t)i * d + c] = from_bf16(x[(size_t)i * ld + c]);
}

/* The head's rows in place where acts are floats, else widened into wide:
 * its queries, and the keys and values that take part. The next head's
 * are asked for meanwhile. */
static struct head_in head_in(const struct heads *s, const struct head_task *t, float *wide)
{
	const struct attention *a = s->a;
	int d = s->d;
	size_t q = (size_t)t->q0 * a->ldq + t->h * d, kv = (size_t)t->k0 * a->ldkv + t->h * d;
	if (!s->bf16) {
		struct head_in in = { (const float *)a->q + q, (const float *)a->k + kv,
				      (const float *)a->v + kv, a->ldq, a->ldkv };
		if (t->h + 1 < a->H) {
			prefetch_rows(in.q + d, a->ldq, t->nq, d);
			prefetch_rows(in.k + d, a->ldkv, t->n, d);
			prefetch_rows(in.v + d, a->ldkv, t->n, d);
		}
		return in;
	}
	size_t most = (size_t)a->T * d;
	float *wq = wide, *wk = wq + most, *wv = wk + most;
	widen_rows(wq, a->q, q, a->ldq, t->nq, d);
	widen_rows(wk, a->k, kv, a->ldkv, t->n, d);
	widen_rows(wv, a->v, kv, a->ldkv, t->n, d);
	return (struct head_in){ wq, wk, wv, d, d };
}

/* The head's probabilities in work (nq rows of len), before dropout: the
 * forward's and, worked out again, the backward's. */
static void head_probs(float *work, const struct heads *s, const struct head_task *t,
		       const struct head_in *in)
{
	int len = t->len;
	s->gemm('N', 'T', t->nq, t->n, s->d, s->scale, in->q, in->ldq, in->k, in->ldkv, 0.0f, work,
		len);
	for (int i = 0; i < t->nq; i++)
		s->softmax(work + (size_t)i * len, s->mask + t->k0, t->n, len);
}

/* The head's context: the probabilities (dropped) times its values, into
 * ctx, or where acts are bf16 into out and rounded into ctx. */
static void head_context(struct act *ctx, const float *pv, float *out, const struct heads *s,
			 const struct head_task *t, const struct head_in *in)
{
	const struct attention *a = s->a;
	int d = s->d;
	size_t at = (size_t)t->q0 * a->C + t->h * d;
	if (!s->bf16) {
		s->gemm('N', 'N', t->nq, d, t->n, 1.0f, pv, t->len, in->v, in->ldkv, 0.0f,
			(float *)ctx + at, a->C);
		return;
	}
	s->gemm('N', 'N', t->nq, d, t->n, 1.0f, pv, t->len, in->v, in->ldkv, 0.0f, out, d);
	uint16_t *c = (uint16_t *)ctx + at;
	for (int i = 0; i < t->nq; i++)
		for (int j = 0; j < d; j++)
			c[(size_t)i * a->C + j] = to_bf16(out[(size_t)i * d + j]);
}

static void head_forward(struct act *ctx, const struct head_scratch *w, const struct heads *s,
			 int bh)
{
	struct head_task t = head_task(s, bh);
	int len = t.len;
	if (!t.nq)
		return;
	struct head_in in = head_in(s, &t, w->wide);
	head_probs(w->pr, s, &t, &in);
	const float *pv = w->pr;
	if (s->threshold) {
		for (int i = 0; i < t.nq; i++)
			dropout_row(w->dropped + (size_t)i * len, w->pr + (size_t)i * len, t.n, s,
				    (uint32_t)(t.probs + (size_t)i * len));
		pv = w->dropped;
	}
	head_context(ctx, pv, w->out, s, &t, &in);
}

void attention_forward_with(struct act *ctx, const struct attention *a,
			    const struct attention_kernels *kn)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, kn);
	size_t block = largest_block(a), per_thread = scratch_floats(&s, 0, block);
	float *scratch = thread_scratch(per_thread);
#pragma omp parallel
	{
		struct head_scratch w = carve_scratch(scratch + (size_t)omp_get_thread_num() * per_thread,
						      &s, 0, block);
#pragma omp for schedule(dynamic)
		for (int b = 0; b < a->B; b++)
			for (int h = 0; h < a->H; h++)
				head_forward(ctx, &w, &s, b * a->H + h);
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
	struct head_in in = head_in(s, &t, w->wide);
	const float *q = in.q, *k = in.k, *v = in.v;
	const float *dc = dctx + (size_t)t.q0 * a->C + t.h * d, *pr = w->pr;
	float *dp = w->dp, *dropped = w->dropped, *out = w->out;
	dq += (size_t)t.q0 * a->ldq + t.h * d;
	head_probs(w->pr, s, &t, &in);

	/* d(dropped probs) = dctx V^T */
	s->gemm('N', 'T', t.nq, t.n, d, 1.0f, dc, a->C, v, in.ldkv, 0.0f, dp, len);
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
	s->gemm('N', 'N', t.nq, d, t.n, s->scale, dp, len, k, in.ldkv, 0.0f, out, d);
	stream_rows(dq, a->ldq, out, t.nq, d);
	s->gemm('T', 'N', t.n, d, t.nq, s->scale, dp, len, q, in.ldq, 0.0f, out, d);
	stream_rows(dk, a->ldkv, out, t.n, d);
	stream_fence();
	zero_rows(dv, t.n, len, a->ldkv, d);
	zero_rows(dk, t.n, len, a->ldkv, d);
}

void attention_backward_with(float *dq, float *dk, float *dv, const float *dctx,
			     const struct attention *a, const struct attention_kernels *kn)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, kn);
	size_t block = largest_block(a), per_thread = scratch_floats(&s, 1, block);
	float *scratch = thread_scratch(per_thread);
#pragma omp parallel
	{
		struct head_scratch w = carve_scratch(scratch + (size_t)omp_get_thread_num() * per_thread,
						      &s, 1, block);
#pragma omp for schedule(dynamic)
		for (int b = 0; b < a->B; b++)
			for (int h = 0; h < a->H; h++)
				head_backward(dq, dk, dv, &w, dctx, &s, b * a->H + h);
	}
	free(scratch);
	free(ones);
}

/* OpenBLAS and the softmax with fp32's bits, over floats. */
static const struct attention_kernels fp32 = { openblas_sgemm, masked_softmax_row,
					       softmax_backward_row, 0 };

void attention_forward(float *ctx, float *state, const struct attention *a)
{
	(void)state;
	attention_forward_with((struct act *)ctx, a, &fp32);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *state,
			const struct attention *a)
{
	(void)state;
	attention_backward_with(dq, dk, dv, dctx, a, &fp32);
}
