/* The CUDA backend: one GPU, one stream. Memory is cudaMalloc'd; host copies
 * go through the stream. A download waits for it, so the host never reads a
 * buffer a kernel is still writing; an upload does not, so the host runs on
 * ahead of the GPU. Four tables share the memory and every op but
 * the linear layers' and those that touch acts: fp32; tf32 (fp32, its
 * products on TF32 tensor cores); bf16 and fp16 (acts in those). The ops live in
 * cuda_gemm.cu, cuda_rows.cu, cuda_layernorm.cu, cuda_elementwise.cu,
 * cuda_losses.cu, cuda_attention.cu and cuda_optim.cu. */
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_grid.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int device = -1;
static cudaStream_t stream;
static char name[32];
static double held, peak;   /* bytes of GPU memory the backend holds; the most it held */
static int pools;           /* the GPU has stream-ordered memory pools (cudaMallocAsync) */

void cuda_fail(const char *file, int line, const char *call, const char *what)
{
	const char *hint = "; CUDA_LAUNCH_BLOCKING=1 names the kernel that failed";
	if (strstr(what, "out of memory") || strstr(what, "ALLOC_FAILED"))
		hint = "; a smaller --batch or --max-len needs less";
	else if (strstr(what, "driver") || strstr(what, "no CUDA-capable device"))
		hint = "; nvidia-smi shows whether the driver sees a GPU";
	die("%s:%d: %s: %s%s", file, line, call, what, hint);
}

cudaStream_t cuda_stream(void)
{
	return stream;
}

int cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();    /* no driver or no GPU: not an error here */
		return 0;
	}
	return n;
}

void cuda_pci_bus_id(int dev, char *id, int len)
{
	CUDA_CHECK(cudaDeviceGetPCIBusId(id, len, dev));
}

/* ---- memory ---- */

static void count(double bytes)
{
	held += bytes;
	if (held > peak)
		peak = held;
}

void *cuda_grow(void **p, size_t *cap, size_t bytes)
{
	if (bytes > *cap) {
		cuda_graph_grew();
		if (*p) {
			/* cudaFree waits for the work that may still read it */
			CUDA_CHECK(pools ? cudaFreeAsync(*p, stream) : cudaFree(*p));
			count(-(double)*cap);
		}
		*p = NULL;
		*cap = 0;
		CUDA_CHECK(pools ? cudaMallocAsync(p, bytes, stream) : cudaMalloc(p, bytes));
		*cap = bytes;
		count((double)bytes);
	}
	return *p;
}

/* The op kernels' scratch (cuda_grid.h): one buffer, grown by a quarter
 * more than asked so that a few larger asks do not each move it. */
static void *op_scratch;
static size_t op_scratch_cap;

void *cuda_op_scratch(size_t bytes)
{
	return cuda_grow(&op_scratch, &op_scratch_cap, bytes > op_scratch_cap ? align_up(bytes + bytes / 4) : bytes);
}

/* The buffers cuda_alloc gave and their sizes, for cuda_release's count. */
static struct buffer {
	void *p;
	size_t bytes;
} *buffers;
static size_t nbuffers, buffers_cap;

static void *cuda_alloc(size_t bytes)
{
	void *p = NULL;
	cuda_graph_spoil("an allocation");
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError();
		size_t free_b = 0, total = 0;
		cudaMemGetInfo(&free_b, &total);
		die("%s: out of GPU memory: %.1f MiB asked, %.1f of %.1f MiB free; a smaller "
		    "--batch or --max-len needs less", name, bytes / 1048576.0, free_b / 1048576.0,
		    total / 1048576.0);
	}
	CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
	grow(&buffers, &buffers_cap, nbuffers + 1, sizeof *buffers);
	buffers[nbuffers++] = (struct buffer){ p, bytes };
	count((double)bytes);
	return p;
}

static void cuda_release(void *p)
{
	cuda_graph_spoil("a buffer freed");
	for (size_t i = 0; i < nbuffers; i++)
		if (buffers[i].p == p) {
			count(-(double)buffers[i].bytes);
			buffers[i] = buffers[--nbuffers];
			break;
		}
	CUDA_CHECK(cudaStreamSynchronize(stream));
	CUDA_CHECK(cudaFree(p));
}

static void cuda_upload(void *dst, const void *src, size_t bytes)
{
	/* src is pageable (no host buffer here is pinned): CUDA stages it
	 * before the call returns, so it may change once we return */
	cuda_graph_spoil("an upload");
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

static void cuda_download(void *dst, const void *src, size_t bytes)
{
	cuda_graph_spoil("a download");
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
	CUDA_CHECK(cudaStreamSynchronize(stream));
}

static void cuda_zero(void *p, size_t bytes)
{
	void *call[2] = { p, (void *)bytes };
	if (cuda_graph_call("memset", call, sizeof call))
		CUDA_CHECK_WALK(cudaMemsetAsync(p, 0, bytes, stream));
}

static double cuda_memory(void)
{
	size_t free_b = 0, total = 0;
	CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
	return (double)free_b;
}

static double cuda_peak_memory(void)
{
	return peak;
}

/* ---- the backend ---- */

static struct backend cuda, cuda_tf32, cuda_bf16, cuda_fp16;
static char name_tf32[40], name_bf16[40], name_fp16[40];

static const struct act *same_floats(struct act *space, const float *x, size_t n)
{
	(void)space, (void)n;
	return float_acts(x);
}

static void fill_fp32(void)
{
	cuda.name = name;
	cuda.host = 0;
	cuda.attention_state = CUDA_ATTENTION_STATE;
	cuda.attention_scratch = cuda_attention_scratch;
	cuda.alloc = cuda_alloc;
	cuda.release = cuda_release;
	cuda.upload = cuda_upload;
	cuda.download = cuda_download;
	cuda.zero = cuda_zero;
	cuda.memory = cuda_memory;
	cuda.peak_memory = cuda_peak_memory;
	cuda.graph_begin = cuda_graph_begin;
	cuda.graph_end = cuda_graph_end;
	cuda.attention_runs = cuda_attention_runs;
	cuda.act_size = sizeof(float);
	cuda.as_act = same_floats;
	cuda.linear_forward = cuda_linear_forward;
	cuda.linear_forward_act = cuda_linear_forward_act;
	cuda.linear_backward = cuda_linear_backward;
	cuda.embedding_backward = cuda_embedding_backward;
	cuda.layernorm_forward = cuda_layernorm_forward;
	cuda.residual_layernorm_forward = cuda_residual_layernorm_forward;
	cuda.layernorm_backward = cuda_layernorm_backward;
	cuda.embedding_layernorm_forward = cuda_embedding_layernorm_forward;
	cuda.residual_layernorm_backward = cuda_residual_layernorm_backward;
	cuda.bias_gelu_forward = cuda_bias_gelu_forward;
	cuda.gelu_backward = cuda_gelu_backward;
	cuda.tanh_forward = cuda_tanh_forward;
	cuda.tanh_backward = cuda_tanh_backward;
	cuda.rotary = cuda_rotary;
	cuda.geglu_forward = cuda_geglu_forward;
	cuda.geglu_backward = cuda_geglu_backward;
	cuda.relu_forward = cuda_relu_forward;
	cuda.relu_backward = cuda_relu_backward;
	cuda.attention_forward = cuda_attention_forward;
	cuda.attention_backward = cuda_attention_backward;
	cuda.crossentropy_forward = cuda_crossentropy_forward;
	cuda.crossentropy_backward = cuda_crossentropy_backward;
	cuda.softmax_rows = cuda_softmax_rows;
	cuda.kl_forward = cuda_kl_forward;
	cuda.kl_backward = cuda_kl_backward;
	cuda.symkl_forward = cuda_symkl_forward;
	cuda.symkl_backward = cuda_symkl_backward;
	cuda.axpy = cuda_axpy;
	cuda.mse_forward = cuda_mse_forward;
	cuda.mse_backward = cuda_mse_backward;
	cuda.bce_forward = cuda_bce_forward;
	cuda.bce_backward = cuda_bce_backward;
	cuda.dropout_apply = cuda_dropout_apply;
	cuda.gather_rows = cuda_gather_rows;
	cuda.scatter_add_rows = cuda_scatter_add_rows;
	cuda.mean_rows = cuda_mean_rows;
	cuda.mean_rows_backward = cuda_mean_rows_backward;
	cuda.sum_squares = cuda_sum_squares;
	cuda.scale = cuda_scale;
	cuda.ema_update = cuda_ema_update;
	cuda.swap = cuda_swap;
	cuda.adam_update = cuda_adam_update;
	cuda.sgd_update = cuda_sgd_update;
	cuda.lamb_moments = cuda_lamb_moments;
	cuda.lamb_apply = cuda_lamb_apply;
}

/* fp32's table, named "cuda:N what", as t: the precision below fp32 that
 * changes the ops the caller sets next; VAT's probe in fp32 */
static void derive(struct backend *t, char *tname, size_t len, const char *what, size_t act_size)
{
	*t = cuda;
	snprintf(tname, len, "%s %s", name, what);
	t->name = tname;
	t->precise = &cuda;
	t->act_size = act_size;
}

/* fp32's table with its products on TF32 tensor cores */
static void fill_tf32(void)
{
	derive(&cuda_tf32, name_tf32, sizeof name_tf32, "tf32", sizeof(float));
	cuda_tf32.linear_forward = cuda_linear_forward_tf32;
	cuda_tf32.linear_forward_act = cuda_linear_forward_act_tf32;
	cuda_tf32.linear_backward = cuda_linear_backward_tf32;
}

/* fp32's table with bf16 acts: every op that reads or writes them */
static void fill_bf16(void)
{
	derive(&cuda_bf16, name_bf16, sizeof name_bf16, "bf16", 2);
	cuda_bf16.as_act = cuda_as_bf16;
	cuda_bf16.linear_forward = cuda_linear_forward_bf16;
	cuda_bf16.linear_forward_act = cuda_linear_forward_act_bf16;
	cuda_bf16.linear_backward = cuda_linear_backward_bf16;
	cuda_bf16.residual_layernorm_forward = cuda_residual_layernorm_forward_bf16;
	cuda_bf16.embedding_layernorm_forward = cuda_embedding_layernorm_forward_bf16;
	cuda_bf16.residual_layernorm_backward = cuda_residual_layernorm_backward_bf16;
	cuda_bf16.bias_gelu_forward = cuda_bias_gelu_forward_bf16;
	cuda_bf16.gelu_backward = cuda_gelu_backward_bf16;
	cuda_bf16.rotary = cuda_rotary_bf16;
	cuda_bf16.geglu_forward = cuda_geglu_forward_bf16;
	cuda_bf16.geglu_backward = cuda_geglu_backward_bf16;
	cuda_bf16.attention_forward = cuda_attention_forward_bf16;
	cuda_bf16.attention_backward = cuda_attention_backward_bf16;
}

/* fp32's table with fp16 acts: bf16's, in the other half-width type */
static void fill_fp16(void)
{
	derive(&cuda_fp16, name_fp16, sizeof name_fp16, "fp16", 2);
	cuda_fp16.as_act = cuda_as_fp16;
	cuda_fp16.linear_forward = cuda_linear_forward_fp16;
	cuda_fp16.linear_forward_act = cuda_linear_forward_act_fp16;
	cuda_fp16.linear_backward = cuda_linear_backward_fp16;
	cuda_fp16.residual_layernorm_forward = cuda_residual_layernorm_forward_fp16;
	cuda_fp16.embedding_layernorm_forward = cuda_embedding_layernorm_forward_fp16;
	cuda_fp16.residual_layernorm_backward = cuda_residual_layernorm_backward_fp16;
	cuda_fp16.bias_gelu_forward = cuda_bias_gelu_forward_fp16;
	cuda_fp16.gelu_backward = cuda_gelu_backward_fp16;
	cuda_fp16.rotary = cuda_rotary_fp16;
	cuda_fp16.geglu_forward = cuda_geglu_forward_fp16;
	cuda_fp16.geglu_backward = cuda_geglu_backward_fp16;
	cuda_fp16.attention_forward = cuda_attention_forward_fp16;
	cuda_fp16.attention_backward = cuda_attention_backward_fp16;
}

int cuda_device_sm(int dev)
{
	int major = 0, minor = 0;
	CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
	return 10 * major + minor;
}

static const struct backend *table_of(enum precision p)
{
	if (p == PREC_TF32)
		return &cuda_tf32;
	if (p == PREC_BF16)
		return &cuda_bf16;
	if (p == PREC_FP16)
		return &cuda_fp16;
	return &cuda;
}

const struct backend *cuda_backend_open(int dev, enum precision p)
{
	if (device >= 0) {
		if (dev != device)
			die("cuda:%d: this process already uses cuda:%d", dev, device);
		return table_of(p);
	}
	CUDA_CHECK(cudaSetDevice(dev));
	CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	/* where there are none (some virtual GPUs), cudaMallocAsync fails: 801 */
	CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev));
	cuda_gemm_open();
	snprintf(name, sizeof name, "cuda:%d", dev);
	device = dev;
	fill_fp32();
	fill_tf32();
	fill_bf16();
	fill_fp16();
	return table_of(p);
}
