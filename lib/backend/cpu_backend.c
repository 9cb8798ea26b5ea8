/* The CPU backend in fp32: host memory (cpu_mem.c) and the ops of
 * cpu_ops.h; cpu_bf16.c makes its bf16 variant from this table. */
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

/* The attention's scratch is each thread's, a head's probabilities at most. */
static double no_shared_scratch(int B, int T, int H)
{
	(void)B, (void)T, (void)H;
	return 0;
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
	.attention_scratch = no_shared_scratch,
	.linear_forward = linear_forward,
	.linear_backward = linear_backward,
	.embedding_forward = embedding_forward,
	.embedding_backward = embedding_backward,
	.layernorm_forward = layernorm_forward,
	.residual_layernorm_forward = residual_layernorm_forward,
	.layernorm_backward = layernorm_backward,
	.bias_gelu_forward = bias_gelu_forward,
	.gelu_backward = gelu_backward,
	.tanh_forward = tanh_forward,
	.tanh_backward = tanh_backward,
	.attention_forward = attention_forward,
	.attention_backward = attention_backward,
	.crossentropy_forward = crossentropy_forward,
	.crossentropy_backward = crossentropy_backward,
	.softmax_rows = softmax_rows,
	.kl_forward = kl_forward,
	.kl_backward = kl_backward,
	.symkl_forward = symkl_forward,
	.symkl_backward = symkl_backward,
	.axpy = axpy,
	.mse_forward = mse_forward,
	.mse_backward = mse_backward,
	.bce_forward = bce_forward,
	.bce_backward = bce_backward,
	.dropout_apply = dropout_apply,
	.gather_rows = gather_rows,
	.scatter_add_rows = scatter_add_rows,
	.sum_squares = sum_squares,
	.scale = scale_floats,
	.ema_update = ema_update,
	.swap = swap_floats,
	.adam_update = adam_update,
	.sgd_update = sgd_update,
	.lamb_moments = lamb_moments,
	.lamb_apply = lamb_apply,
};

const struct backend *backend_cpu(void)
{
	return &cpu;
}
