/* The CPU ops of the BERT graph: fp32, OpenBLAS sgemm for matrix work,
 * OpenMP for the rest. Row-major throughout: N rows of activations; a linear
 * layer's weight is [out, in] as in PyTorch. Each backward ADDS into
 * parameter gradients and WRITES activation gradients (unless told to add).
 * Results are deterministic for a fixed thread count: reductions run in a
 * fixed order, and dropout masks come from a hash of (seed, element index). */
#ifndef TS_CPU_OPS_H
#define TS_CPU_OPS_H
#include "backend/backend.h"
#include <stddef.h>
#include <stdint.h>

/* Zeroed host memory, on transparent huge pages when it spans one or more
 * (cpu_mem.c), and its release. cpu_grow makes room for need items of
 * size bytes at *pp from it, not keeping the old contents. */
void *cpu_alloc(size_t bytes);
void cpu_release(void *p);
void cpu_grow(void *pp, size_t *cap, size_t need, size_t size);

/* out[N,Cout] = in[N,Cin] w[Cout,Cin]^T + bias (bias may be NULL). */
void linear_forward(float *out, const float *in, const float *w, const float *bias,
		    int N, int Cin, int Cout);
/* din[N,Cin] = dout w (added to din when accumulate; skipped when din is
 * NULL), dw += dout^T in, dbias += column sums of dout (skipped when NULL). */
void linear_backward(float *din, float *dw, float *dbias, const float *dout,
		     const float *in, const float *w, int N, int Cin, int Cout,
		     int accumulate);
/* acc[Cout] += column sums of x[N,Cout], rows summed in order. */
void colsum_add(float *acc, const float *x, int N, int Cout);

/* dst[n] = src[n] in bf16, rounded to nearest even (cpu_simd.h's to_bf16). */
void round_bf16(uint16_t *dst, const float *src, size_t n);

/* Whether this build and processor can run backend_cpu_bf16 (cpu_bf16.c);
 * where not, why says why. */
int bf16_available(const char **why);
/* Whether bf16 products may run on AMX-BF16: oneDNN finds it (and no
 * ONEDNN_MAX_CPU_ISA caps it), and Linux lets this process use its tiles
 * (asked for here). */
int bf16_amx(void);

/* out[r] = word[ids[r]] + pos[positions[r]] + type[types[r]] over N rows
 * (types NULL: type 0). */
void embedding_forward(float *out, const int32_t *ids, const int32_t *types,
		       const int32_t *positions, const float *word, const float *pos,
		       const float *type, int N, int C);
/* Scatter-add of dout into the three tables, rows in order; tokens equal to
 * pad_id add nothing to dword (PyTorch's padding_idx); pad_id < 0 for none. */
void embedding_backward(float *dword, float *dpos, float *dtype, const float *dout,
			const int32_t *ids, const int32_t *types, const int32_t *positions,
			int N, int C, int pad_id);

/* Biased variance, eps inside the square root, as torch.nn.LayerNorm. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *in,
		       const float *w, const float *b, int N, int C, float eps);
/* Post-LN residual block tail: on entry sum holds the branch output without
 * its bias; on return sum = res + dropout(sum + bias) (kept for backward)
 * and out = LayerNorm(sum). */
void residual_layernorm_forward(float *out, float *sum, float *mean, float *rstd,
				const float *res, const float *bias, const float *w,
				const float *b, int N, int C, float eps, float p,
				uint64_t seed);
/* din may be dout (computed in place). */
void layernorm_backward(float *din, float *dw, float *db, const float *dout,
			const float *in, const float *mean, const float *rstd,
			const float *w, int N, int C);

/* Exact (erf) GELU, x * Phi(x), accurate to about 1e-7 relative. */
float gelu(float x);
/* pre += bias (kept for backward), out = gelu(pre), over N rows of F. */
void bias_gelu_forward(float *out, float *pre, const float *bias, int N, int F);
/* dpre = dout * gelu'(pre), over N rows of F; dpre may be dout. */
void gelu_backward(float *dpre, const float *dout, const float *pre, int N, int F);

void tanh_forward(float *out, const float *in, size_t n);
/* din = dout * (1 - out^2); din may be dout. */
void tanh_backward(float *din, const float *dout, const float *out, size_t n);
/* backend.h's rotary over floats, or (bf16 set) over bf16 acts, worked in
 * floats and each result rounded once; its geglu_forward and
 * geglu_backward over floats. */
void rotary_rows(void *x, int bf16, int ld, int parts, int C, int heads, const int32_t *pos, int rows,
		 float theta, int inverse);
void geglu_rows(float *out, const float *in, int N, int F);
void geglu_backward_rows(float *din, const float *dout, const float *in, int N, int F);
void relu_forward(float *out, const float *in, size_t n);
/* din = dout where out > 0, else 0; din may be dout. */
void relu_backward(float *din, const float *dout, const float *out, size_t n);

/* Multi-head self-attention core over sequences of any lengths. Sequence
 * b's n keys and values are rows kv_start[b] .. kv_start[b+1]-1 of k and v;
 * its nq queries are rows q_start[b] .. q_start[b+1]-1 of q, or the same
 * rows as its keys when q_start is NULL (the last layer asks only for the
 * rows its head reads). Heads are C/H columns wide.
 * ctx (rows as q, stride C) = dropout(softmax(QK^T/sqrt(d) + mask)) V.
 * mask (per key row, NULL: all real): keys with 0 get exactly zero weight; a
 * row with no real key is uniform, as with Hugging Face's additive dtype-min
 * mask (and its scores, which then do not matter, get zero gradient).
 * The dropout draw of each probability is numbered: sequence b's from
 * p_start[b] on, one nq x n block per head, head after head, cut to 32
 * bits (attention_probs in backend.h lays the numbers out). The CPU keeps
 * no state for the backward (attention_state 0): the backward works the
 * probabilities out again, with the forward's bits. */
void attention_forward(float *ctx, float *state, const struct attention *a);
/* Writes dq (stride ldq), dk and dv (stride ldkv) from dctx. */
void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *state,
			const struct attention *a);
/* A GEMM's operand: row-major, rows ld elements apart, floats or bf16s. */
struct operand {
	const void *p;
	int ld;
	int bf16;
};
/* A row-major GEMM run on one thread, C = alpha op(A) op(B) + beta C, op(X)
 * X or its transpose as trans is 'N' or 'T'. */
typedef void (*gemm_fn)(char transa, char transb, int M, int N, int K, float alpha,
			struct operand A, struct operand B, float beta, float *C, int ldc);
/* A gemm_fn with its products in bf16 (float operands rounded to nearest
 * even, denormals as zero; bf16 ones as they are) and fp32 sums, on
 * AVX512-BF16: only where bf16_available. Each thread packs its operands in
 * space that gemm_bf16_reserve(dim), called outside any parallel region,
 * makes for all of OpenMP's threads and for M, N, K up to dim. */
void gemm_bf16(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	       struct operand B, float beta, float *C, int ldc);
void gemm_bf16_reserve(int dim);
/* gemm_bf16 on AMX-BF16's tiles, with the same results up to the order of
 * the sums: only where bf16_amx. */
void gemm_amx(char transa, char transb, int M, int N, int K, float alpha, struct operand A,
	      struct operand B, float beta, float *C, int ldc);
/* One head of one sequence, for a kernel that takes it whole: its nq
 * queries (rows ldq apart), its keys and values (rows ldkv apart), of which
 * the first n take part, their mask, and its context's rows (ldc apart);
 * all bf16, d wide; scale the scores' factor. d and ldkv are even (the
 * keys are read a pair of values at a time). */
struct head_view {
	const uint16_t *q, *k, *v;
	uint16_t *ctx;
	const uint8_t *mask;
	int ldq, ldkv, ldc, nq, n, d;
	float scale;
};
/* The forward of a head whole without dropout or a band: its context as
 * attention_forward's, the softmax's weights rounded to bf16 before they are
 * divided by their sum (so its bits are not those of the probabilities the
 * backward works out again, which a model that only scores never asks
 * for). On AMX-BF16, with the space of gemm_bf16_reserve: only where
 * bf16_amx. */
void head_forward_amx(const struct head_view *h);
/* Scores p[0..n) in, probabilities p[0..len) out: the softmax over the keys
 * whose mask is set, zero for the others and past n; uniform over all len
 * when no key is real. */
typedef void (*softmax_row_fn)(float *p, const uint8_t *mask, int n, int len);
/* Back through the softmax of a row with a real key, p its n probabilities:
 * dp = p * (dp - sum(p * dp)). */
typedef void (*softmax_backward_fn)(float *dp, const float *p, int n);
/* Those two with AVX-512, only where bf16_available. */
void softmax_row_bf16(float *p, const uint8_t *mask, int n, int len);
void softmax_backward_row_bf16(float *dp, const float *p, int n);
/* cpu_rows_bf16.c's AVX-512 rows, only where bf16_available: one row of
 * residual_layernorm_forward, its dropout key, threshold and scale from
 * dropout.h and its element index base, with its output rounded into copy
 * too; one of bias_gelu_forward over bf16 pre, with its output into out, or
 * rounded into low when out is NULL; one of gelu_backward over bf16 pre into
 * bf16; one of layernorm_backward with
 * dout * xhat added into sums[0..C) and dout into sums[C..2C) (din may be
 * dout). */
void residual_layernorm_row_bf16(float *out, uint16_t *copy, float *sum, float *mean,
				 float *rstd, const float *res, const float *bias,
				 const float *w, const float *b, int C, float eps,
				 uint32_t key, uint32_t base, uint32_t threshold, float scale);
void bias_gelu_row_bf16(float *out, uint16_t *low, uint16_t *pre, const float *bias, int n);
/* GELU of n bf16s in place, as bias_gelu_row_bf16 rounds it; that,
 * bias_gelu_row_bf16 into low and gelu_backward_row_bf16 look GELU and its
 * slope up in tables that gelu_table_bf16 fills, once, before any runs. */
void gelu_row_bf16(uint16_t *x, int n);
void gelu_table_bf16(void);
void gelu_backward_row_bf16(uint16_t *dpre, const float *dout, const uint16_t *pre, int n);
/* One row of geglu_rows and of geglu_backward_rows over bf16 acts. */
void geglu_row_bf16(uint16_t *out, const uint16_t *in, int F);
void geglu_backward_row_bf16(uint16_t *din, const float *dout, const uint16_t *in, int F);
void layernorm_backward_row_bf16(float *din, float *sums, const float *dout, const float *x,
				 float mean, float rstd, const float *w, int C);
/* What the two above compute with: the heads' products, the softmax of
 * a row (the backward's must be the forward's) and its backward; and
 * whether q, k, v and ctx are bf16 (else floats). The plain ones: OpenBLAS,
 * the softmax with fp32's bits, floats. */
struct attention_kernels {
	gemm_fn gemm;
	softmax_row_fn softmax;
	softmax_backward_fn softmax_backward;
	int bf16;
	void (*head_forward)(const struct head_view *h);   /* NULL: none */
};
void attention_forward_with(struct act *ctx, const struct attention *a,
			    const struct attention_kernels *kn);
void attention_backward_with(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			     const struct attention *a, const struct attention_kernels *kn);
/* The bytes of scratch the attention's threads take at most, for heads of
 * C/H wide over sequences up to T: a tile's probabilities and their
 * gradient, and a head's rows. */
double attention_scratch_bytes(int T, int C, int H);

/* Softmax cross-entropy per row of logits[N,V] against the label smoothed
 * by e (PyTorch's label_smoothing: 1 - e on the label, e/V on every class):
 * returns the summed loss over rows whose label is >= 0 (e.g. -100 is
 * ignored) and keeps each row's log-sum-exp in lse[N] for backward. */
double crossentropy_forward(float *lse, const float *logits, const int32_t *labels,
			    int N, int V, float e);
/* dlogits = scale * (softmax - smoothed onehot) on labelled rows, 0 on the others. */
void crossentropy_backward(float *dlogits, const float *logits, const float *lse,
			   const int32_t *labels, int N, int V, float e, float scale);

/* out[r] = softmax(logits[r] / temp), N rows of V: a distribution to learn from. */
void softmax_rows(float *out, const float *logits, int N, int V, float temp);
/* Returns the sum over N rows of KL(target ‖ softmax(logits / temp)), in
 * double, target holding probabilities; keeps each row's log-sum-exp of
 * logits / temp in lse[N]. */
double kl_forward(float *lse, const float *logits, const float *target, int N, int V, float temp);
/* ADDS the gradient of scale times it: dlogits += scale / temp (softmax(logits / temp) - target). */
void kl_backward(float *dlogits, const float *logits, const float *lse, const float *target, int N, int V,
		 float temp, float scale);
/* R-Drop: rows r and P + r of logits[2P, V] are two passes of one item,
 * p and q their softmax: returns the sum over r of KL(p ‖ q) + KL(q ‖ p), in
 * double. */
double symkl_forward(const float *logits, int P, int V);
/* ADDS the gradient of scale times it into both rows of each pair. */
void symkl_backward(float *dlogits, const float *logits, int P, int V, float scale);
/* y += a x */
void axpy(float *y, const float *x, size_t n, float a);

/* Squared error of N predictions: returns the sum of (pred - target)^2, in
 * double in a fixed order. */
double mse_forward(const float *pred, const float *target, int N);
/* dpred = scale * 2 (pred - target). */
void mse_backward(float *dpred, const float *pred, const float *target, int N, float scale);

/* Binary cross-entropy of n logits against targets in [0, 1], as PyTorch's
 * BCEWithLogitsLoss: returns the sum of max(x, 0) - x y + log(1 + e^-|x|),
 * in double in a fixed order. */
double bce_forward(const float *logits, const float *targets, size_t n);
/* dlogits = scale * (sigmoid(x) - y). */
void bce_backward(float *dlogits, const float *logits, const float *targets, size_t n,
		  float scale);

/* out[i] = in[i] * keep(seed, i) / (1 - p), each element kept with
 * probability 1 - p; the same call is its own backward. out may be in. */
void dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed);
/* Whether element i survives dropout p under seed: the mask, for tests. */
int dropout_keeps(uint64_t seed, uint64_t i, float p);

/* out[m] = in[rows[m]], and its backward out[rows[m]] += in[m], for rows of
 * C floats. */
void gather_rows(float *out, const float *in, const int32_t *rows, int M, int C);
void scatter_add_rows(float *out, const float *in, const int32_t *rows, int M, int C);
/* backend.h's mean_rows and mean_rows_backward. */
void mean_rows(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask, int B, int C);
void mean_rows_backward(float *dx, const float *dout, const int32_t *kv_start, const uint8_t *mask, int B,
			int C);

/* The optimizer's ops (cpu_optim.c), whose meaning backend.h gives. Sums run
 * over fixed chunks added in order: the same bits for any thread count. */
double sum_squares(const float *x, size_t n);
void scale_floats(float *x, size_t n, float s);
void ema_update(float *avg, const float *x, size_t n, float decay);
void swap_floats(float *a, float *b, size_t n);
void adam_update(float *p, const float *g, float *m, float *v, size_t n,
		 const struct adam_coef *c);
/* adam_update of each of n tensors: the backend's op */
void adam_update_tensors(const struct adam_tensor *t, int n);
void sgd_update(float *p, const float *g, float *m, size_t n, float gscale, float lr, float momentum,
		float wd);
void lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
		  const struct lamb_coef *c, double *sums);
void lamb_apply(float *p, const float *m, const float *v, size_t n, const struct lamb_coef *c,
		float step);
#endif
