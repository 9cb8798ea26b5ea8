/* The elementwise ops on the GPU, as lib/backend/cpu_ops.c's of the same
 * names: bias+GELU and its backward (on float, bf16 or fp16 acts, rounding
 * once when they store), rotary embeddings, GeGLU, tanh, ReLU, dropout (the CPU's masks to the bit:
 * element i of a call with (p, seed) is kept iff dropout_hash(dropout_key(
 * seed), (uint32_t)i) reaches dropout_threshold(p)), axpy, and floats
 * rounded into acts. */
#include "cuda_grid.h"
#include "backend/dropout.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_types.h"
#include <math.h>

/* ---- GELU, tanh and ReLU ---- */

/* Exact GELU's Phi(x) and phi(x). */
static __device__ float normal_pdf(float x)
{
	return 0.39894228040143268f * expf(-0.5f * x * x);
}

/* pre += bias (kept, in pre's type), out = GELU of pre as kept; out may be
 * pre. */
template <typename P, typename O>
static __global__ void bias_gelu_kernel(O *out, P *pre, const float *__restrict__ bias, int N, int F)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= F)
		return;
	float bc = bias[c];
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t o = (size_t)r * F + c;
		float x = rounded<P>(as_float(pre[o]) + bc);
		store(pre + o, x);
		store(out + o, x * normcdff(x));
	}
}

template <typename P, typename O>
static void bias_gelu(O *out, P *pre, const float *bias, int N, int F)
{
	if (N <= 0 || F <= 0)
		return;
	CUDA_LAUNCH((bias_gelu_kernel<P, O>), grid_rows(F, N), THREADS, 0, out, pre, bias, N, F);
}

void cuda_bias_gelu_forward(float *out, struct act *low, struct act *pre, const float *bias,
			    int N, int F)
{
	bias_gelu(out ? out : (float *)low, (float *)pre, bias, N, F);
}

/* pre and low in acts of type A */
template <typename A>
static void bias_gelu_acts(float *out, struct act *low, struct act *pre, const float *bias, int N, int F)
{
	if (out)
		bias_gelu(out, (A *)pre, bias, N, F);
	else
		bias_gelu((A *)low, (A *)pre, bias, N, F);
}

void cuda_bias_gelu_forward_bf16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F)
{
	bias_gelu_acts<bf16>(out, low, pre, bias, N, F);
}

void cuda_bias_gelu_forward_fp16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F)
{
	bias_gelu_acts<f16>(out, low, pre, bias, N, F);
}

/* dpre = dout * (Phi(x) + x phi(x)); dpre may be dout. */
template <typename P>
static __global__ void gelu_backward_kernel(P *dpre, const float *dout, const P *pre, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float x = as_float(pre[i]);
		store(dpre + i, dout[i] * (normcdff(x) + x * normal_pdf(x)));
	}
}

template <typename P>
static void gelu_backward(P *dpre, const float *dout, const P *pre, int N, int F)
{
	size_t n = N > 0 && F > 0 ? (size_t)N * F : 0;
	if (!n)
		return;
	CUDA_LAUNCH(gelu_backward_kernel<P>, grid_1d(n), THREADS, 0, dpre, dout, pre, n);
}

void cuda_gelu_backward(struct act *dpre, const float *dout, const struct act *pre, int N, int F)
{
	gelu_backward((float *)dpre, dout, (const float *)pre, N, F);
}

void cuda_gelu_backward_bf16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F)
{
	gelu_backward((bf16 *)dpre, dout, (const bf16 *)pre, N, F);
}

void cuda_gelu_backward_fp16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F)
{
	gelu_backward((f16 *)dpre, dout, (const f16 *)pre, N, F);
}

/* ---- acts ---- */

template <typename A>
static __global__ void to_acts_kernel(A *out, const float *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		store(out + i, in[i]);
}

template <typename A>
static const struct act *to_acts(struct act *space, const float *x, size_t n)
{
	if (n) {
		CUDA_LAUNCH(to_acts_kernel<A>, grid_1d(n), THREADS, 0, (A *)space, x, n);
	}
	return space;
}

const struct act *cuda_as_bf16(struct act *space, const float *x, size_t n)
{
	return to_acts<bf16>(space, x, n);
}

const struct act *cuda_as_fp16(struct act *space, const float *x, size_t n)
{
	return to_acts<f16>(space, x, n);
}

static __global__ void tanh_forward_kernel(float *out, const float *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = tanhf(in[i]);
}

void cuda_tanh_forward(float *out, const float *in, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(tanh_forward_kernel, grid_1d(n), THREADS, 0, out, in, n);
}

/* din = dout * (1 - out^2); din may be dout. */
static __global__ void tanh_backward_kernel(float *din, const float *dout, const float *out,
					    size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float y = out[i];
		din[i] = dout[i] * (1.0f - y * y);
	}
}

void cuda_tanh_backward(float *din, const float *dout, const float *out, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(tanh_backward_kernel, grid_1d(n), THREADS, 0, din, dout, out, n);
}

/* ---- rotary position embeddings and GeGLU (ModernBERT's) ---- */

/* One pair (j, j + d/2) of a head's values in each of rows rows, turned by
 * pos[row] / theta^(2j/d) (inverse: turned back), the angle in floats as the
 * CPU's rotary_rows works it out. Each block works out the d/2 frequencies
 * first, in shared memory. */
template <typename A>
static __global__ void rotary_kernel(A *x, int ld, int blocks, int d, const int32_t *pos, int rows,
				     float theta, int inverse)
{
	extern __shared__ float freq[];
	int half = d / 2;
	for (int j = threadIdx.x; j < half; j += blockDim.x)
		freq[j] = (float)(1.0 / pow((double)theta, 2.0 * j / d));
	__syncthreads();
	size_t per_row = (size_t)blocks * half, n = per_row * rows;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int r = (int)(i / per_row), k = (int)(i % per_row / half), j = (int)(i % half);
		float a = (float)pos[r] * freq[j], c = cosf(a), s = inverse ? -sinf(a) : sinf(a);
		A *p = x + (size_t)r * ld + (size_t)k * d;
		float x1 = as_float(p[j]), x2 = as_float(p[half + j]);
		store(p + j, x1 * c - x2 * s);
		store(p + half + j, x2 * c + x1 * s);
	}
}

template <typename A>
static void rotary(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, int rows,
		   float theta, int inverse)
{
	size_t n = (size_t)rows * parts * (C / 2);
	if (!n)
		return;
	CUDA_LAUNCH(rotary_kernel<A>, grid_1d(n), THREADS, sizeof(float) * (C / heads / 2), (A *)x, ld,
		    parts * heads, C / heads, pos, rows, theta, inverse);
}

/* out[r, j] = gelu(in[r, j]) * in[r, F + j] */
template <typename A>
static __global__ void geglu_kernel(A *out, const A *in, int N, int F)
{
	size_t n = (size_t)N * F;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t o = i / F * 2 * F + i % F;
		float x = as_float(in[o]);
		store(out + i, x * normcdff(x) * as_float(in[o + F]));
	}
}

template <typename A>
static void geglu(struct act *out, const struct act *in, int N, int F)
{
	size_t n = (size_t)N * F;
	if (!n)
		return;
	CUDA_LAUNCH(geglu_kernel<A>, grid_1d(n), THREADS, 0, (A *)out, (const A *)in, N, F);
}

template <typename A>
static __global__ void geglu_backward_kernel(A *din, const float *dout, const A *in, int N, int F)
{
	size_t n = (size_t)N * F;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t o = i / F * 2 * F + i % F;
		float x = as_float(in[o]), g = as_float(in[o + F]), dy = dout[i], cdf = normcdff(x);
		store(din + o, dy * g * (cdf + x * normal_pdf(x)));
		store(din + o + F, dy * x * cdf);
	}
}

template <typename A>
static void geglu_backward(struct act *din, const float *dout, const struct act *in, int N, int F)
{
	size_t n = (size_t)N * F;
	if (!n)
		return;
	CUDA_LAUNCH(geglu_backward_kernel<A>, grid_1d(n), THREADS, 0, (A *)din, dout, (const A *)in, N, F);
}

#define ROTARY_GEGLU(suffix, A)                                                                          \
	void cuda_rotary##suffix(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, \
				 int rows, float theta, int inverse)                                     \
	{                                                                                                \
		rotary<A>(x, ld, parts, C, heads, pos, rows, theta, inverse);                            \
	}                                                                                                \
	void cuda_geglu_forward##suffix(struct act *out, const struct act *in, int N, int F)            \
	{                                                                                                \
		geglu<A>(out, in, N, F);                                                                 \
	}                                                                                                \
	void cuda_geglu_backward##suffix(struct act *din, const float *dout, const struct act *in, int N, \
					 int F)                                                          \
	{                                                                                                \
		geglu_backward<A>(din, dout, in, N, F);                                                  \
	}
ROTARY_GEGLU(, float)
ROTARY_GEGLU(_bf16, bf16)
ROTARY_GEGLU(_fp16, f16)

static __global__ void relu_forward_kernel(float *out, const float *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void cuda_relu_forward(float *out, const float *in, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(relu_forward_kernel, grid_1d(n), THREADS, 0, out, in, n);
}

/* din = dout where out > 0; din may be dout. */
static __global__ void relu_backward_kernel(float *din, const float *dout, const float *out,
					    size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

void cuda_relu_backward(float *din, const float *dout, const float *out, size_t n)
{
	if (!n)
		return;
	CUDA_LAUNCH(relu_backward_kernel, grid_1d(n), THREADS, 0, din, dout, out, n);
}

static __global__ void axpy_kernel(float *y, const float *__restrict__ x, size_t n, float a)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		y[i] += a * x[i];
}

void cuda_axpy(float *y, const float *x, size_t n, float a)
{
	if (!n)
		return;
	CUDA_LAUNCH(axpy_kernel, grid_1d(n), THREADS, 0, y, x, n, a);
}

/* ---- dropout ---- */

/* out[i] = in[i] * (kept ? scale : 0); out may be in. */
static __global__ void dropout_kernel(float *out, const float *in, size_t n, uint32_t key,
				      uint32_t threshold, float scale)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = in[i] * (dropout_hash(key, (uint32_t)i) >= threshold ? scale : 0.0f);
}

void cuda_dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed)
{
	if (!n)
		return;
	if (p <= 0.0f) {
		if (out != in && cuda_graph_call_of("copy", out, in, n))
			CUDA_CHECK_WALK(cudaMemcpyAsync(out, in, n * sizeof(float),
							cudaMemcpyDeviceToDevice, cuda_stream()));
		return;
	}
	CUDA_LAUNCH(dropout_kernel, grid_1d(n), THREADS, 0,
		out, in, n, dropout_key(seed), dropout_threshold(p), 1.0f / (1.0f - p));
}
