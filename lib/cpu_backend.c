/* The CPU backend: host memory and the ops of cpu_ops.h, in fp32 or with
 * the linear layers' and attention's products in bf16. */
#include "backend.h"
#include "cpu_ops.h"
#include "err.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { HUGE_PAGE = 2 << 20, HEAD = 64 };

/* What cpu_release needs, just before each buffer: the start and length of
 * its mapping, or its calloc block when the length is 0. */
struct head {
	void *base;
	size_t mapped;
};

/* A buffer of a huge page or more is mapped on huge-page boundaries and asks
 * for transparent huge pages: the scattered rows of the embedding gradient
 * and the GEMMs' panels then miss the TLB far less often. Its pages are
 * taken, zeroed, as they are first touched. */
void *cpu_alloc(size_t bytes)
{
	if (bytes < HUGE_PAGE) {
		char *block = xcalloc(1, bytes + HEAD);
		((struct head *)(block + HEAD))[-1] = (struct head){ block, 0 };
		return block + HEAD;
	}
	size_t len = bytes + HEAD + HUGE_PAGE;
	char *map = len < bytes ? MAP_FAILED
				: mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
	if (map == MAP_FAILED)
		die("out of memory allocating %zu bytes", bytes);
	char *p = (char *)(((uintptr_t)map + HEAD + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	madvise(p, bytes, MADV_HUGEPAGE);
	((struct head *)p)[-1] = (struct head){ map, len };
	return p;
}

void cpu_release(void *p)
{
	if (!p)
		return;
	struct head h = ((struct head *)p)[-1];
	if (h.mapped)
		munmap(h.base, h.mapped);
	else
		free(h.base);
}

void cpu_grow(void *pp, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	*cap = grown(*cap, need);
	cpu_release(*(void **)pp);
	*(void **)pp = cpu_alloc(*cap * size);
}

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

static const struct backend cpu = {
	.name = "cpu",
	.host = 1,
	.alloc = cpu_alloc,
	.release = cpu_release,
	.upload = copy,
	.download = copy,
	.zero = zero,
	.memory = physical_memory,
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

const struct backend *backend_cpu_bf16(const char **why)
{
	static struct backend bf16;
	if (!bf16_available(why))
		return NULL;
	bf16 = cpu;
	bf16.name = "cpu bf16";
	bf16.precise = &cpu;
	bf16.linear_forward = linear_forward_bf16;
	bf16.linear_backward = linear_backward_bf16;
	bf16.bias_gelu_forward = bias_gelu_forward_bf16;
	bf16.gelu_backward = gelu_backward_bf16;
	bf16.layernorm_backward = layernorm_backward_bf16;
	bf16.residual_layernorm_forward = residual_layernorm_forward_bf16;
	bf16.attention_forward = attention_forward_bf16;
	bf16.attention_backward = attention_backward_bf16;
	return &bf16;
}
