/* The CUDA backend: one GPU, one stream, one cuBLAS handle. Memory is
 * cudaMalloc'd; host copies go through the stream and wait for it, so the
 * host never reads a buffer a kernel is still writing. The linear layers'
 * GEMMs are cuBLAS's (fp32, no TF32, deterministic: no atomics); the other
 * ops live in cuda_ops.cu, cuda_attention.cu and cuda_optim.cu. */
#include "cuda_api.h"
#include "cuda_check.h"
#include "util/err.h"
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int device = -1;
static cudaStream_t stream;
static cublasHandle_t blas;
static char name[32];
static float *ones;            /* N ones for the bias gradient's GEMV */
static size_t ones_n;

void cuda_fail(const char *file, int line, const char *call, const char *what)
{
	const char *hint = "; CUDA_LAUNCH_BLOCKING=1 names the kernel that failed";
	if (strstr(what, "out of memory") || strstr(what, "ALLOC_FAILED"))
		hint = "; a smaller --batch or --max-len needs less";
	else if (strstr(what, "driver") || strstr(what, "no CUDA-capable device"))
		hint = "; nvidia-smi shows whether the driver sees a GPU";
	die("%s:%d: %s: %s%s", file, line, call, what, hint);
}

#define BLAS_CHECK(call) do { \
	cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS) \
		cuda_fail(__FILE__, __LINE__, #call, cublasGetStatusString(s_)); \
	} while (0)

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

static void *cuda_alloc(size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError();
		size_t free_b = 0, total = 0;
		cudaMemGetInfo(&free_b, &total);
		die("%s: out of GPU memory: %.1f MiB asked, %.1f of %.1f MiB free; a smaller "
		    "--batch or --max-len needs less", name, bytes / 1048576.0, free_b / 1048576.0,
		    total / 1048576.0);
	}
	CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
	return p;
}

static void cuda_release(void *p)
{
	CUDA_CHECK(cudaStreamSynchronize(stream));
	CUDA_CHECK(cudaFree(p));
}

static void cuda_upload(void *dst, const void *src, size_t bytes)
{
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
	CUDA_CHECK(cudaStreamSynchronize(stream));   /* src may change once we return */
}

static void cuda_download(void *dst, const void *src, size_t bytes)
{
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
	CUDA_CHECK(cudaStreamSynchronize(stream));
}

static void cuda_zero(void *p, size_t bytes)
{
	CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
}

static double cuda_memory(void)
{
	size_t free_b = 0, total = 0;
	CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
	return (double)free_b;
}

/* ---- linear layers: row-major [N, C] is column-major [C, N] ---- */

/* out[n, j] += bias[j] */
__global__ void add_bias_rows(float *out, const float *bias, size_t total, int cols)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] += bias[i % cols];
}

static unsigned grid_for(size_t n)
{
	size_t b = cuda_blocks(n);
	return b > 65535 ? 65535 : (unsigned)b;
}

void cuda_linear_forward(float *out, const struct act *in_acts, const struct act *w_acts,
			 const float *bias, int N, int Cin, int Cout)
{
	const float one = 1.0f, zero = 0.0f;
	const float *in = (const float *)in_acts, *w = (const float *)w_acts;
	/* out^T [Cout, N] = w [Cout, Cin] in^T: w is column-major [Cin, Cout], transposed */
	BLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, Cout, N, Cin, &one, w, Cin, in, Cin,
			       &zero, out, Cout));
	if (bias) {
		size_t total = (size_t)N * Cout;
		add_bias_rows<<<grid_for(total), 256, 0, stream>>>(out, bias, total, Cout);
		CUDA_LAUNCHED();
	}
}

/* ones[0..n) on the GPU, grown as needed. */
static const float *ones_of(size_t n)
{
	if (n > ones_n) {
		float *host = (float *)xmalloc(n * sizeof *host);
		for (size_t i = 0; i < n; i++)
			host[i] = 1.0f;
		if (ones)
			cuda_release(ones);
		ones = (float *)cuda_alloc(n * sizeof *ones);
		cuda_upload(ones, host, n * sizeof *ones);
		free(host);
		ones_n = n;
	}
	return ones;
}

void cuda_linear_forward_act(struct act *out, const struct act *in, const struct act *w,
			     const float *bias, int N, int Cin, int Cout)
{
	cuda_linear_forward((float *)out, in, w, bias, N, Cin, Cout);
}

void cuda_linear_backward(float *din, float *dw, float *dbias, const struct act *dout_acts,
			  const struct act *in_acts, const struct act *w_acts, int N, int Cin,
			  int Cout, int accumulate)
{
	const float one = 1.0f, zero = 0.0f;
	const float *in = (const float *)in_acts, *w = (const float *)w_acts;
	const float *dout = (const float *)dout_acts;
	if (din)   /* din^T [Cin, N] = w^T dout^T: w column-major [Cin, Cout] as it is */
		BLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, Cin, N, Cout, &one, w, Cin,
				       dout, Cout, accumulate ? &one : &zero, din, Cin));
	/* dw^T [Cin, Cout] += in^T dout: in column-major [Cin, N], dout [Cout, N] transposed */
	BLAS_CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, Cin, Cout, N, &one, in, Cin, dout,
			       Cout, &one, dw, Cin));
	if (dbias)   /* dbias [Cout] += dout^T [Cout, N] ones [N] */
		BLAS_CHECK(cublasSgemv(blas, CUBLAS_OP_N, Cout, N, &one, dout, Cout, ones_of(N), 1,
				       &one, dbias, 1));
}

/* ---- the backend ---- */

static struct backend cuda;

static const struct act *same_floats(struct act *space, const float *x, size_t n)
{
	(void)space, (void)n;
	return float_acts(x);
}

static void fill_table(void)
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
	cuda.act_size = sizeof(float);
	cuda.as_act = same_floats;
	cuda.linear_forward = cuda_linear_forward;
	cuda.linear_forward_act = cuda_linear_forward_act;
	cuda.linear_backward = cuda_linear_backward;
	cuda.embedding_forward = cuda_embedding_forward;
	cuda.embedding_backward = cuda_embedding_backward;
	cuda.layernorm_forward = cuda_layernorm_forward;
	cuda.residual_layernorm_forward = cuda_residual_layernorm_forward;
	cuda.layernorm_backward = cuda_layernorm_backward;
	cuda.bias_gelu_forward = cuda_bias_gelu_forward;
	cuda.gelu_backward = cuda_gelu_backward;
	cuda.tanh_forward = cuda_tanh_forward;
	cuda.tanh_backward = cuda_tanh_backward;
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
	cuda.sum_squares = cuda_sum_squares;
	cuda.scale = cuda_scale;
	cuda.ema_update = cuda_ema_update;
	cuda.swap = cuda_swap;
	cuda.adam_update = cuda_adam_update;
	cuda.sgd_update = cuda_sgd_update;
	cuda.lamb_moments = cuda_lamb_moments;
	cuda.lamb_apply = cuda_lamb_apply;
}

const struct backend *cuda_backend_open(int dev)
{
	if (device >= 0) {
		if (dev != device)
			die("cuda:%d: this process already uses cuda:%d", dev, device);
		return &cuda;
	}
	CUDA_CHECK(cudaSetDevice(dev));
	CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	BLAS_CHECK(cublasCreate(&blas));
	BLAS_CHECK(cublasSetStream(blas, stream));
	BLAS_CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));   /* fp32: no TF32 */
	snprintf(name, sizeof name, "cuda:%d", dev);
	device = dev;
	fill_table();
	return &cuda;
}
