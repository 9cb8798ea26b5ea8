/* The CPU backend in fp32: host memory (cpu_mem.c) and the ops of
 * cpu_ops.h, whose acts are floats; cpu_bf16.c makes its bf16 variant from
 * this table. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void copy(void *dst, const void *src, size_t bytes)
{
	if (dst != src)
		memcpy(dst, src, bytes);
}

static void zero(void *p, size_t bytes)
{
	memset(p, 0, bytes);
}

static double physical_memory(void)
{
	return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* The CPU does not count its buffers: the process's RSS says it. */
static double not_counted(void)
{
	return 0;
}

/* The attention's scratch is each thread's, whatever the batch. */
static double threads_scratch(int B, int T, int C, int H)
{
	(void)B;
	return attention_scratch_bytes(T, C, H);
}

/* The ops that read or write acts, over cpu_ops.h's on floats. */
static const float *floats(const struct act *x)
{
	return (const float *)x;
}

static const struct act *same_floats(struct act *space, const float *x, size_t n)
{
	(void)space, (void)n;
	return float_acts(x);
}

static void linear_fwd(float *out, const struct act *in, const struct act *w, const float *bias,
		       int N, int Cin, int Cout)
{
	linear_forward(out, floats(in), floats(w), bias, N, Cin, Cout);
}

static void linear_fwd_act(struct act *out, const struct act *in, const struct act *w,
			   const float *bias, int N, int Cin, int Cout)
{
	linear_forward((float *)out, floats(in), floats(w), bias, N, Cin, Cout);
}

static void linear_bwd(float *din, float *dw, float *dbias, const struct act *dout,
		       const struct act *in, const struct act *w, int N, int Cin, int Cout,
		       int accumulate)
{
	linear_backward(din, dw, dbias, floats(dout), floats(in), floats(w), N, Cin, Cout,
			accumulate);
}

/* low is out itself */
static void residual_ln(float *out, struct act *low, float *sum, float *mean, float *rstd,
			const float *res, const float *bias, const float *w, const float *b, int N,
			int C, float eps, float p, uint64_t seed)
{
	(void)low;
	residual_layernorm_forward(out, sum, mean, rstd, res, bias, w, b, N, C, eps, p, seed);
}

/* low is out itself */
static void embedding_ln(float *out, struct act *low, float *sum, float *mean, float *rstd,
			 const struct embedding *e, const float *w, const float *b, float eps,
			 float p, uint64_t seed)
{
	(void)low;
	embedding_forward(sum, e->ids, e->types, e->positions, e->word, e->pos, e->type, e->N,
			  e->C);
	layernorm_forward(out, mean, rstd, sum, w, b, e->N, e->C, eps);
	dropout_apply(out, out, (size_t)e->N * e->C, p, seed);
}

static void residual_ln_bwd(float *din, struct act *dbranch, float *dw, float *db,
			    const float *dout, const float *in, const float *mean,
			    const float *rstd, const float *w, int N, int C, float p, uint64_t seed)
{
	layernorm_backward(din, dw, db, dout, in, mean, rstd, w, N, C);
	if (dbranch)
		dropout_apply((float *)dbranch, din, (size_t)N * C, p, seed);
}

static void bias_gelu(float *out, struct act *low, struct act *pre, const float *bias, int N,
		      int F)
{
	bias_gelu_forward(out ? out : (float *)low, (float *)pre, bias, N, F);
}

static void gelu_bwd(struct act *dpre, const float *dout, const struct act *pre, int N, int F)
{
	gelu_backward((float *)dpre, dout, floats(pre), N, F);
}

static void rotary(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, int rows, float theta,
		   int inverse)
{
	rotary_rows(x, 0, ld, parts, C, heads, pos, rows, theta, inverse);
}

static void geglu(struct act *out, const struct act *in, int N, int F)
{
	geglu_rows((float *)out, floats(in), N, F);
}

static void geglu_bwd(struct act *din, const float *dout, const struct act *in, int N, int F)
{
	geglu_backward_rows((float *)din, dout, floats(in), N, F);
}

static void attention_fwd(struct act *ctx, float *state, const struct attention *a)
{
	attention_forward((float *)ctx, state, a);
}

static void attention_bwd(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			  const float *state, const struct attention *a)
{
	attention_backward((float *)dq, (float *)dk, (float *)dv, dctx, state, a);
}

/* The losses, added into their sum (host memory here). */
static void ce_add(double *loss, double weight, float *lse, const float *logits,
		   const int32_t *labels, int N, int V, float e)
{
	*loss += weight * crossentropy_forward(lse, logits, labels, N, V, e);
}

static void kl_add(double *loss, double weight, float *lse, const float *logits,
		   const float *target, int N, int V, float temp)
{
	*loss += weight * kl_forward(lse, logits, target, N, V, temp);
}

static void symkl_add(double *loss, double weight, const float *logits, int P, int V)
{
	*loss += weight * symkl_forward(logits, P, V);
}

static void mse_add(double *loss, double weight, const float *pred, const float *target, int N)
{
	*loss += weight * mse_forward(pred, target, N);
}

static void bce_add(double *loss, double weight, const float *logits, const float *targets,
		    size_t n)
{
	*loss += weight * bce_forward(logits, targets, n);
}

static const struct backend cpu = {
	.name = "cpu",
	.host = 1,
	.alloc = cpu_alloc,
	.release = cpu_release,
	.upload = copy,
	.download = copy,
	.zero = zero,
	.memory = physical_memory,
	.peak_memory = not_counted,
	.act_size = sizeof(float),
	.attention_scratch = threads_scratch,
	.eval_tokens = 2048,
	.as_act = same_floats,
	.linear_forward = linear_fwd,
	.linear_forward_act = linear_fwd_act,
	.linear_backward = linear_bwd,
	.embedding_backward = embedding_backward,
	.layernorm_forward = layernorm_forward,
	.residual_layernorm_forward = residual_ln,
	.embedding_layernorm_forward = embedding_ln,
	.layernorm_backward = layernorm_backward,
	.residual_layernorm_backward = residual_ln_bwd,
	.bias_gelu_forward = bias_gelu,
	.gelu_backward = gelu_bwd,
	.tanh_forward = tanh_forward,
	.tanh_backward = tanh_backward,
	.rotary = rotary,
	.geglu_forward = geglu,
	.geglu_backward = geglu_bwd,
	.relu_forward = relu_forward,
	.relu_backward = relu_backward,
	.attention_forward = attention_fwd,
	.attention_backward = attention_bwd,
	.crossentropy_forward = ce_add,
	.crossentropy_backward = crossentropy_backward,
	.softmax_rows = softmax_rows,
	.kl_forward = kl_add,
	.kl_backward = kl_backward,
	.symkl_forward = symkl_add,
	.symkl_backward = symkl_backward,
	.axpy = axpy,
	.mse_forward = mse_add,
	.mse_backward = mse_backward,
	.bce_forward = bce_add,
	.bce_backward = bce_backward,
	.dropout_apply = dropout_apply,
	.gather_rows = gather_rows,
	.scatter_add_rows = scatter_add_rows,
	.mean_rows = mean_rows,
	.mean_rows_backward = mean_rows_backward,
	.sum_squares = sum_squares,
	.scale = scale_floats,
	.ema_update = ema_update,
	.swap = swap_floats,
	.adam_update = adam_update_tensors,
	.sgd_update = sgd_update,
	.lamb_moments = lamb_moments,
	.lamb_apply = lamb_apply,
};

const struct backend *backend_cpu(void)
{
	backend_cpu_blas();
	return &cpu;
}
