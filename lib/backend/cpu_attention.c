/* Multi-head self-attention on the CPU: one sequence per task, its heads in
 * turn, single-threaded sgemm inside (OpenBLAS and oneDNN run serially inside
 * an OpenMP region), heads read and written in place through row strides, so
 * the fused [rows, 3C] QKV product needs no reshuffling. Each (sequence, head)
 * pair's result depends on nothing but its own data, so any schedule gives the
 * same bits. Q, K, V and the context, and the gradients of Q, K and V, are
 * the backend's acts: floats, or bf16 for the bf16 backend's kernels.
 * A head goes in tiles of queries, each against the keys it sees (with
 * ModernBERT's local band, only those). Nothing is kept for the backward:
 * it works each tile's probabilities out again with the forward's own
 * products and softmax, so they have the forward's bits, in the thread's
 * scratch, which stays in its cache; the gradients of Q, K and V, read only
 * after all heads, are made there too and streamed out. Without dropout or
 * a band, where the kernels have one (AMX's), the forward takes a head
 * whole: its own packing, its softmax's weights rounded into the values'
 * product before their division (cpu_ops.h: head_forward_amx). */
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
	gemm_fn gemm;
	softmax_row_fn softmax;
	softmax_backward_fn softmax_backward;
	int bf16;                  /* q, k, v and ctx are bf16, else floats */
	void (*whole)(const struct head_view *h);   /* a head at once: no dropout, no band */
};

static struct heads heads_of(const struct attention *a, const uint8_t *mask,
			     const struct attention_kernels *kn)
{
	int d = a->C / a->H;
	struct heads s = { a, mask, d, 1.0f / sqrtf((float)d), dropout_threshold(a->p),
			   dropout_key(a->seed), 1.0f / (1.0f - a->p), kn->gemm, kn->softmax,
			   kn->softmax_backward, kn->bf16,
			   a->band || a->p > 0 || d % 2 || a->ldkv % 2 ? NULL : kn->head_forward };
	return s;
}

/* A gemm_fn over floats. */
static void openblas_gemm(char transa, char transb, int M, int N, int K, float alpha,
			  struct operand A, struct operand B, float beta, float *C, int ldc)
{
	cblas_sgemm(CblasRowMajor, transa == 'T' ? CblasTrans : CblasNoTrans,
		    transb == 'T' ? CblasTrans : CblasNoTrans, M, N, K, alpha, A.p, A.ld, B.p, B.ld,
		    beta, C, ldc);
}

/* Floats as an operand. */
static struct operand fl(const float *p, int ld)
{
	return (struct operand){ p, ld, 0 };
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

/* A head's queries go in tiles, each against the keys they see: with a
 * band, tiles of BAND_ROWS, against the keys their rows' bands cover
 * together, so that a local layer costs O(T band), not O(T^2); without,
 * tiles of ALL_ROWS against all keys, so that a thread's scratch grows as
 * T, not T^2. */
enum { BAND_ROWS = 64, ALL_ROWS = 256 };

static int tile_rows(const struct attention *a)
{
	return a->band ? BAND_ROWS : ALL_ROWS;
}

/* The floats of the largest probability block of one tile. */
static size_t largest_block(const struct attention *a)
{
	const int32_t *q = a->q_start ? a->q_start : a->kv_start;
	size_t most = 1;
	for (int b = 0; b < a->B; b++) {
		int nq = q[b + 1] - q[b], rows = tile_rows(a);
		size_t n = (size_t)(nq < rows ? nq : rows) * (size_t)(a->kv_start[b + 1] - a->kv_start[b]);
		most = n > most ? n : most;
	}
	return most;
}

/* A thread's scratch: a tile's probabilities, in the backward their
 * gradient, with dropout their dropped copy; a tile's rows of output; and
 * in the backward, the sums over the tiles of the keys' and values'
 * gradients. */
struct head_scratch {
	float *pr, *dp, *dropped, *out, *dk, *dv;
};

/* The floats of one thread's scratch, its probability blocks block floats
 * each, for heads d wide of sequences up to T. */
static size_t scratch_floats(size_t block, int T, int d, int backward, int dropout)
{
	return block * (size_t)(1 + backward + dropout) + (size_t)T * d * (backward ? 3 : 1);
}

static struct head_scratch carve_scratch(float *base, const struct heads *s, int backward,
					 size_t block)
{
	struct head_scratch w = { .pr = base };
	size_t rows = (size_t)s->a->T * s->d;
	base += block;
	if (backward)
		w.dp = base, base += block;
	if (s->threshold)
		w.dropped = base, base += block;
	w.out = base;
	if (backward)
		w.dk = base + rows, w.dv = base + 2 * rows;
	return w;
}

double attention_scratch_bytes(int T, int C, int H)
{
	size_t block = (size_t)(T < ALL_ROWS ? T : ALL_ROWS) * (size_t)T;
	return (double)sizeof(float) * (double)scratch_floats(block, T, C / H, 1, 1) * omp_get_max_threads();
}

/* Asks for rows x width floats at x (rows ld apart) to come into the cache. */
static void prefetch_rows(const float *x, int ld, int rows, int width)
{
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < width; j += 16)
			__builtin_prefetch(x + (size_t)i * ld + j);
}

/* A head's queries, keys and values, in place. */
struct head_in {
	struct operand q, k, v;
};

/* x's element at, x in acts. */
static const void *element(const struct heads *s, const struct act *x, size_t at)
{
	return (const char *)x + at * (s->bf16 ? sizeof(uint16_t) : sizeof(float));
}

/* The head's queries, keys and values; where they are floats, the next
 * head's are asked for meanwhile. */
static struct head_in head_in(const struct heads *s, const struct head_task *t)
{
	const struct attention *a = s->a;
	int d = s->d;
	size_t q = (size_t)t->q0 * a->ldq + t->h * d, kv = (size_t)t->k0 * a->ldkv + t->h * d;
	struct head_in in = { { element(s, a->q, q), a->ldq, s->bf16 },
			      { element(s, a->k, kv), a->ldkv, s->bf16 },
			      { element(s, a->v, kv), a->ldkv, s->bf16 } };
	if (!s->bf16 && t->h + 1 < a->H) {
		prefetch_rows((const float *)in.q.p + d, a->ldq, t->nq, d);
		prefetch_rows((const float *)in.k.p + d, a->ldkv, t->n, d);
		prefetch_rows((const float *)in.v.p + d, a->ldkv, t->n, d);
	}
	return in;
}

/* x's rows from r on. */
static struct operand rows_from(struct operand x, int r)
{
	x.p = (const char *)x.p + (size_t)r * (size_t)x.ld * (x.bf16 ? sizeof(uint16_t) : sizeof(float));
	return x;
}

/* Query i's keys [lo, hi) of the band around its own row, 0 and 0 where
 * none is left. */
static void band_range(const struct heads *s, const struct head_task *t, int i, int *lo, int *hi)
{
	const struct attention *a = s->a;
	int at = (a->q_at ? a->q_at[t->q0 + i] : t->q0 + i) - t->k0;
	*lo = at - a->band > 0 ? at - a->band : 0;
	*hi = at + a->band + 1 < t->n ? at + a->band + 1 : t->n;
	if (*hi <= *lo)
		*hi = *lo = 0;
}

/* Whether one of query i's keys in its band is real (else, like a sequence
 * with no real key, it attends to them uniformly and its scores get no
 * gradient). */
static int band_has_real(const struct heads *s, const struct head_task *t, int i)
{
	int lo, hi;
	band_range(s, t, i, &lo, &hi);
	for (int j = lo; j < hi; j++)
		if (s->mask[t->k0 + j])
			return 1;
	return 0;
}

/* A tile: queries i0.. (nq of them) and the keys [k0, k0 + kw) they see
 * (with a band, those their bands cover together). */
struct tile {
	int i0, nq, k0, kw;
};

static struct tile band_tile(const struct heads *s, const struct head_task *t, int i0)
{
	struct tile g = { i0, t->nq - i0 < BAND_ROWS ? t->nq - i0 : BAND_ROWS, t->n, 0 };
	int hi = 0;
	for (int i = i0; i < i0 + g.nq; i++) {
		int l, h;
		band_range(s, t, i, &l, &h);
		if (h > l) {
			g.k0 = l < g.k0 ? l : g.k0;
			hi = h > hi ? h : hi;
		}
	}
	g.k0 = hi ? g.k0 : 0;
	g.kw = hi - g.k0;
	return g;
}

/* The tile's probabilities in work (nq rows of kw), before dropout: the
 * forward's and, worked out again, the backward's. Keys outside a query's
 * band get 0. */
static void tile_probs(float *work, const struct heads *s, const struct head_task *t,
		       const struct head_in *in, const struct tile *g)
{
	const uint8_t *mask = s->mask + t->k0 + g->k0;
	s->gemm('N', 'T', g->nq, g->kw, s->d, s->scale, rows_from(in->q, g->i0), rows_from(in->k, g->k0),
		0.0f, work, g->kw);
	for (int i = 0; i < g->nq; i++) {
		float *p = work + (size_t)i * g->kw;
		int lo = 0, hi = g->kw;
		if (s->a->band) {
			band_range(s, t, g->i0 + i, &lo, &hi);
			lo = hi ? lo - g->k0 : 0;
			hi = hi ? hi - g->k0 : 0;
		}
		memset(p, 0, sizeof *p * (size_t)lo);
		s->softmax(p + lo, mask + lo, hi - lo, hi - lo);
		memset(p + hi, 0, sizeof *p * (size_t)(g->kw - hi));
	}
}

/* The number of the dropout draw of the tile's row i, its first key. */
static uint32_t tile_draw(const struct head_task *t, const struct tile *g, int i)
{
	return (uint32_t)(t->probs + (size_t)(g->i0 + i) * t->len + (size_t)g->k0);
}

/* rows x width floats of src, packed, to dst's rows at at, ld apart, in
 * acts: streamed out as floats, or rounded to bf16. */
static void put_rows(const struct heads *s, struct act *dst, size_t at, int ld, const float *src,
		     int rows, int width)
{
	for (int i = 0; i < rows; i++) {
		size_t o = at + (size_t)i * ld;
		if (s->bf16)
			round_bf16((uint16_t *)dst + o, src + (size_t)i * width, (size_t)width);
		else
			copy_streaming((float *)dst + o, src + (size_t)i * width, width);
	}
}

/* Rows from..to of x, width wide at at, rows ld apart, in acts: zeros. */
static void zero_rows(const struct heads *s, struct act *x, size_t at, int from, int to, int ld,
		      int width)
{
	size_t e = s->bf16 ? sizeof(uint16_t) : sizeof(float);
	for (int j = from; j < to; j++)
		memset((char *)x + (at + (size_t)j * ld) * e, 0, e * (size_t)width);
}

/* The tile's context: its probabilities (dropped) times its values, into
 * ctx, or where acts are bf16 into out and rounded into ctx. */
static void tile_context(struct act *ctx, const float *pv, float *out, const struct heads *s,
			 const struct head_task *t, const struct head_in *in, const struct tile *g)
{
	const struct attention *a = s->a;
	int d = s->d;
	size_t at = (size_t)(t->q0 + g->i0) * a->C + t->h * d;
	if (!g->kw) {   /* no key in any band of its rows: a zero context */
		zero_rows(s, ctx, at, 0, g->nq, a->C, d);
		return;
	}
	struct operand v = rows_from(in->v, g->k0);
	if (!s->bf16) {
		s->gemm('N', 'N', g->nq, d, g->kw, 1.0f, fl(pv, g->kw), v, 0.0f, (float *)ctx + at, a->C);
		return;
	}
	s->gemm('N', 'N', g->nq, d, g->kw, 1.0f, fl(pv, g->kw), v, 0.0f, out, d);
	put_rows(s, ctx, at, a->C, out, g->nq, d);
}

/* The head's tile after g (NULL: its first); none (nq 0) after the last. */
static struct tile next_tile(const struct heads *s, const struct head_task *t, const struct tile *g)
{
	int i0 = g ? g->i0 + g->nq : 0;
	if (i0 >= t->nq)
		return (struct tile){ 0 };
	if (s->a->band)
		return band_tile(s, t, i0);
	return (struct tile){ i0, t->nq - i0 < ALL_ROWS ? t->nq - i0 : ALL_ROWS, 0, t->n };
}

static void head_forward(struct act *ctx, const struct head_scratch *w, const struct heads *s,
			 int bh)
{
	struct head_task t = head_task(s, bh);
	if (!t.nq)
		return;
	struct head_in in = head_in(s, &t);
	if (s->whole) {
		const struct attention *a = s->a;
		struct head_view h = { in.q.p, in.k.p, in.v.p,
				       (uint16_t *)ctx + (size_t)t.q0 * a->C + (size_t)t.h * s->d, s->mask + t.k0,
				       a->ldq, a->ldkv, a->C, t.nq, t.n, s->d, s->scale };
		s->whole(&h);
		return;
	}
	for (struct tile g = next_tile(s, &t, NULL); g.nq; g = next_tile(s, &t, &g)) {
		const float *pv = w->pr;
		if (g.kw)
			tile_probs(w->pr, s, &t, &in, &g);
		if (g.kw && s->threshold) {
			for (int i = 0; i < g.nq; i++)
				dropout_row(w->dropped + (size_t)i * g.kw, w->pr + (size_t)i * g.kw, g.kw, s,
					    tile_draw(&t, &g, i));
			pv = w->dropped;
		}
		tile_context(ctx, pv, w->out, s, &t, &in, &g);
	}
}

void attention_forward_with(struct act *ctx, const struct attention *a,
			    const struct attention_kernels *kn)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, kn);
	size_t block = largest_block(a), per_thread = scratch_floats(block, a->T, s.d, 0, s.threshold != 0);
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

/* The tile's scores' gradient ds in w->dp, from dctx's rows dc (C apart):
 * and in w->dropped the dropped probabilities where there is dropout. */
static void tile_scores_backward(const struct head_scratch *w, const float *dc, const struct heads *s,
				 const struct head_task *t, const struct head_in *in,
				 const struct tile *g)
{
	int kw = g->kw;
	/* d(dropped probs) = dctx V^T */
	s->gemm('N', 'T', g->nq, kw, s->d, 1.0f, fl(dc, s->a->C), rows_from(in->v, g->k0), 0.0f, w->dp,
		kw);
	for (int i = 0; i < g->nq; i++) {
		float *dpi = w->dp + (size_t)i * kw;
		const float *p = w->pr + (size_t)i * kw;
		if (s->threshold)
			dropout_backward_row(dpi, w->dropped + (size_t)i * kw, p, kw, s, tile_draw(t, g, i));
		/* ds, or 0 where no key (in the band) is real */
		if (t->real && (!s->a->band || band_has_real(s, t, g->i0 + i)))
			s->softmax_backward(dpi, p, kw);
		else
			memset(dpi, 0, sizeof(float) * kw);
	}
}

/* The probabilities are worked out again in pr, tile by tile; the
 * gradients of q are made in out and put in their places, those of k and v
 * summed over the tiles in dk and dv and put in their places after the
 * last. */
static void head_backward(struct act *dq, struct act *dk, struct act *dv,
			  const struct head_scratch *w, const float *dctx, const struct heads *s,
			  int bh)
{
	const struct attention *a = s->a;
	struct head_task t = head_task(s, bh);
	int len = t.len, d = s->d;
	size_t kv = (size_t)t.k0 * a->ldkv + t.h * d, q = (size_t)t.q0 * a->ldq + t.h * d;
	if (!t.nq) {
		/* no queries, so nothing reaches these keys and values */
		zero_rows(s, dk, kv, 0, len, a->ldkv, d);
		zero_rows(s, dv, kv, 0, len, a->ldkv, d);
		return;
	}
	struct head_in in = head_in(s, &t);
	memset(w->dk, 0, sizeof(float) * (size_t)t.n * d);
	memset(w->dv, 0, sizeof(float) * (size_t)t.n * d);
	for (struct tile g = next_tile(s, &t, NULL); g.nq; g = next_tile(s, &t, &g)) {
		size_t qi = q + (size_t)g.i0 * a->ldq;
		if (!g.kw) {
			zero_rows(s, dq, qi, 0, g.nq, a->ldq, d);
			continue;
		}
		const float *dc = dctx + (size_t)(t.q0 + g.i0) * a->C + t.h * d;
		tile_probs(w->pr, s, &t, &in, &g);
		tile_scores_backward(w, dc, s, &t, &in, &g);
		const float *pv = s->threshold ? w->dropped : w->pr;
		/* dV = dropped^T dctx, dQ = scale dS K, dK = scale dS^T Q */
		s->gemm('T', 'N', g.kw, d, g.nq, 1.0f, fl(pv, g.kw), fl(dc, a->C), 1.0f, w->dv + (size_t)g.k0 * d, d);
		s->gemm('N', 'N', g.nq, d, g.kw, s->scale, fl(w->dp, g.kw), rows_from(in.k, g.k0), 0.0f,
			w->out, d);
		put_rows(s, dq, qi, a->ldq, w->out, g.nq, d);
		s->gemm('T', 'N', g.kw, d, g.nq, s->scale, fl(w->dp, g.kw), rows_from(in.q, g.i0), 1.0f,
			w->dk + (size_t)g.k0 * d, d);
	}
	put_rows(s, dv, kv, a->ldkv, w->dv, t.n, d);
	put_rows(s, dk, kv, a->ldkv, w->dk, t.n, d);
	stream_fence();
	zero_rows(s, dv, kv, t.n, len, a->ldkv, d);
	zero_rows(s, dk, kv, t.n, len, a->ldkv, d);
}

void attention_backward_with(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			     const struct attention *a, const struct attention_kernels *kn)
{
	uint8_t *ones = ones_for_no_mask(a->mask, a->kv_start[a->B]);
	struct heads s = heads_of(a, ones ? ones : a->mask, kn);
	size_t block = largest_block(a), per_thread = scratch_floats(block, a->T, s.d, 1, s.threshold != 0);
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
static const struct attention_kernels fp32 = { openblas_gemm, masked_softmax_row,
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
	attention_backward_with((struct act *)dq, (struct act *)dk, (struct act *)dv, dctx, a,
				&fp32);
}
