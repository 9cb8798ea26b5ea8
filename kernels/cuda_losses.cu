/* The losses on the GPU, as lib/backend/cpu_ops.c's of the same names:
 * softmax cross-entropy, the divergences between distributions
 * (distillation, VAT, R-Drop), squared error and binary cross-entropy;
 * each adds its loss on the GPU into the step's. A row's log-sum-exp is
 * one warp's or one block's, in a fixed order; the per-row losses are
 * doubles, which one block then adds in a fixed order: the same bits on
 * every run. */
#include "cuda_grid.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "cuda_warp.h"
#include "util/err.h"
#include <limits.h>
#include <math.h>

enum {
	CE_THREADS_MAX = 512,   /* threads of a cross-entropy row */
	LOSS_THREADS = 512,
};

/* ---- reductions ---- */

/* Merges a running (max m, sum s of exp(x - m)) with another. The terms are
 * symmetric, so the result does not depend on the order of the two. */
static __device__ void lse_merge(float *m, float *s, float m2, float s2)
{
	float mx = fmaxf(*m, m2);
	float a = *m == mx ? *s : *s * expf(*m - mx);
	float b = m2 == mx ? s2 : s2 * expf(m2 - mx);
	*m = mx;
	*s = a + b;
}

/* Adds x to a running (max, sum): one exp per element. A NaN leaves m alone
 * and makes s NaN, so the log-sum-exp comes out NaN. */
static __device__ void lse_add(float *m, float *s, float x)
{
	if (x > *m) {
		*s = *s * expf(*m - x) + 1.0f;
		*m = x;
	} else if (x != -INFINITY) {
		*s += expf(x - *m);
	}
}

static __device__ void warp_lse(float *m, float *s)
{
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(FULL, *m, o);
		float s2 = __shfl_xor_sync(FULL, *s, o);
		lse_merge(m, s, m2, s2);
	}
}

/* ---- softmax cross-entropy ---- */

/* One block per row: the log-sum-exp in one pass (a running max and sum per
 * thread, then a fixed tree), lse[r] and loss[r] = lse - (1 - e) logit[label]
 * - e mean(logits) in double; rows without a label get 0 in both. */
static __global__ void crossentropy_rows_kernel(float *__restrict__ lse, double *__restrict__ loss,
						const float *__restrict__ logits,
						const int32_t *__restrict__ labels, int V, float e)
{
	__shared__ float sm[32], ss[32];
	__shared__ double sx[32];
	int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
	int y = labels[r];
	if (y < 0) {   /* the whole block */
		if (tid == 0) {
			lse[r] = 0.0f;
			loss[r] = 0.0;
		}
		return;
	}
	const float *x = logits + (size_t)r * V;
	float m = -INFINITY, s = 0.0f;
	double sum = 0.0;
	for (int j = tid; j < V; j += blockDim.x) {
		lse_add(&m, &s, x[j]);
		sum += x[j];
	}
	warp_lse(&m, &s);
	sum = warp_sum_double(sum);
	if (lane == 0) {
		sm[wid] = m;
		ss[wid] = s;
		sx[wid] = sum;
	}
	__syncthreads();
	if (wid)
		return;
	int nw = blockDim.x >> 5;
	m = lane < nw ? sm[lane] : -INFINITY;
	s = lane < nw ? ss[lane] : 0.0f;
	sum = warp_sum_double(lane < nw ? sx[lane] : 0.0);
	warp_lse(&m, &s);
	if (lane == 0) {
		float l = m + logf(s);
		lse[r] = l;
		loss[r] = (double)l - (1.0 - e) * (double)x[y] - e * sum / V;
	}
}

/* One block: out += weight times the sum of loss[0..n), each thread's share
 * in order, then a fixed tree. */
static __global__ void sum_losses_kernel(double *__restrict__ out, double weight,
					 const double *__restrict__ loss, int n)
{
	__shared__ double part[32];
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
	double s = 0.0;
	for (int i = tid; i < n; i += blockDim.x)
		s += loss[i];
	s = warp_sum_double(s);
	if (lane == 0)
		part[wid] = s;
	__syncthreads();
	if (wid)
		return;
	s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
	s = warp_sum_double(s);
	if (lane == 0)
		*out += weight * s;
}

/* *out += weight times the sum of loss[0..n), on the GPU. */
static void add_losses(double *out, double weight, const double *loss, int n)
{
	CUDA_LAUNCH(sum_losses_kernel, 1, LOSS_THREADS, 0, out, weight, loss, n);
}

void cuda_crossentropy_forward(double *out, double weight, float *lse, const float *logits,
			       const int32_t *labels, int N, int V, float e)
{
	if (N <= 0)
		return;
	double *loss = (double *)cuda_op_scratch((size_t)N * sizeof(double));
	int threads = (V + 31) / 32 * 32;
	if (threads > CE_THREADS_MAX)
		threads = CE_THREADS_MAX;
	if (threads < 32)
		threads = 32;
	CUDA_LAUNCH(crossentropy_rows_kernel, N, threads, 0, lse, loss, logits, labels, V, e);
	add_losses(out, weight, loss, N);
}

/* dlogits = scale * (softmax - smoothed onehot(label)) on labelled rows, 0
 * on others: columns across the grid's x, rows strided over its y. */
static __global__ void crossentropy_backward_kernel(float *dlogits, const float *logits,
						    const float *__restrict__ lse,
						    const int32_t *__restrict__ labels, int N,
						    int V, float e, float scale)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= V)
		return;
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t o = (size_t)r * V + j;
		int y = labels[r];
		if (y < 0) {
			dlogits[o] = 0.0f;
			continue;
		}
		float d = scale * expf(logits[o] - lse[r]) - scale * e / V;
		if (j == y)
			d -= scale * (1.0f - e);
		dlogits[o] = d;
	}
}

void cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
				const int32_t *labels, int N, int V, float e, float scale)
{
	if (N <= 0 || V <= 0)
		return;
	CUDA_LAUNCH(crossentropy_backward_kernel, grid_rows(V, N), THREADS, 0,
		dlogits, logits, lse, labels, N, V, e, scale);
}

/* ---- divergences between distributions (distillation, VAT, R-Drop) ---- */

enum { ROW_THREADS = 256 };   /* a block per row */

/* The block's sum (or max) of v in every thread; red holds 32 doubles. */
static __device__ double block_reduce(double v, double *red, int max)
{
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) {
		double w = __shfl_xor_sync(FULL, v, o);
		v = max ? fmax(v, w) : v + w;
	}
	__syncthreads();   /* red may still be read by an earlier reduction */
	if (lane == 0)
		red[wid] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : max ? -INFINITY : 0.0;
	for (int o = 16; o > 0; o >>= 1) {
		double w = __shfl_xor_sync(FULL, v, o);
		v = max ? fmax(v, w) : v + w;
	}
	return v;
}

/* The log-sum-exp of x[0..V) / temp, in every thread of the block. */
static __device__ double block_lse(const float *x, int V, float temp, double *red)
{
	double mx = -INFINITY, s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmax(mx, (double)x[j] / temp);
	mx = block_reduce(mx, red, 1);
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += exp((double)x[j] / temp - mx);
	return mx + log(block_reduce(s, red, 0));
}

static __global__ void softmax_rows_kernel(float *out, const float *__restrict__ logits, int V, float temp)
{
	__shared__ double red[32];
	const float *x = logits + (size_t)blockIdx.x * V;
	double l = block_lse(x, V, temp, red);
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		out[(size_t)blockIdx.x * V + j] = (float)exp((double)x[j] / temp - l);
}

void cuda_softmax_rows(float *out, const float *logits, int N, int V, float temp)
{
	if (N <= 0)
		return;
	CUDA_LAUNCH(softmax_rows_kernel, N, ROW_THREADS, 0, out, logits, V, temp);
}

static __global__ void kl_rows_kernel(float *lse, double *loss, const float *__restrict__ logits,
				      const float *__restrict__ target, int V, float temp)
{
	__shared__ double red[32];
	size_t r = blockIdx.x;
	const float *x = logits + r * V, *t = target + r * V;
	double l = block_lse(x, V, temp, red), s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		if (t[j] > 0)
			s += t[j] * (log((double)t[j]) - ((double)x[j] / temp - l));
	s = block_reduce(s, red, 0);
	if (threadIdx.x == 0) {
		lse[r] = (float)l;
		loss[r] = s;
	}
}

void cuda_kl_forward(double *out, double weight, float *lse, const float *logits,
		     const float *target, int N, int V, float temp)
{
	if (N <= 0)
		return;
	double *loss = (double *)cuda_op_scratch((size_t)N * sizeof(double));
	CUDA_LAUNCH(kl_rows_kernel, N, ROW_THREADS, 0, lse, loss, logits, target, V, temp);
	add_losses(out, weight, loss, N);
}

static __global__ void kl_backward_kernel(float *dlogits, const float *logits, const float *__restrict__ lse,
					  const float *__restrict__ target, int N, int V, float temp, float scale)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= V)
		return;
	for (int r = blockIdx.y; r < N; r += gridDim.y) {
		size_t i = (size_t)r * V + j;
		dlogits[i] += scale / temp * (expf(logits[i] / temp - lse[r]) - target[i]);
	}
}

void cuda_kl_backward(float *dlogits, const float *logits, const float *lse, const float *target, int N, int V,
		      float temp, float scale)
{
	if (N <= 0 || V <= 0)
		return;
	CUDA_LAUNCH(kl_backward_kernel, grid_rows(V, N), THREADS, 0, dlogits, logits, lse, target, N, V,
		temp, scale);
}

/* KL(p ‖ q) of rows a and b, in every thread of the block. */
static __device__ double block_kl(const float *a, double la, const float *b, double lb, int V, double *red)
{
	double s = 0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += exp(a[j] - la) * ((a[j] - la) - (b[j] - lb));
	return block_reduce(s, red, 0);
}

/* A block per pair: with grad, adds scale times the gradient; else loss[r]. */
static __global__ void symkl_kernel(double *loss, float *dlogits, const float *__restrict__ logits, int P, int V,
				    float scale)
{
	__shared__ double red[32];
	size_t r = blockIdx.x;
	const float *a = logits + r * V, *b = logits + (P + r) * V;
	double la = block_lse(a, V, 1, red), lb = block_lse(b, V, 1, red);
	double pq = block_kl(a, la, b, lb, V, red), qp = block_kl(b, lb, a, la, V, red);
	if (!dlogits) {
		if (threadIdx.x == 0)
			loss[r] = pq + qp;
		return;
	}
	float *da = dlogits + r * V, *db = dlogits + (P + r) * V;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		double lp = a[j] - la, lq = b[j] - lb, p = exp(lp), q = exp(lq);
		da[j] += (float)(scale * (p * (lp - lq - pq) + p - q));
		db[j] += (float)(scale * (q * (lq - lp - qp) + q - p));
	}
}

void cuda_symkl_forward(double *out, double weight, const float *logits, int P, int V)
{
	if (P <= 0)
		return;
	double *loss = (double *)cuda_op_scratch((size_t)P * sizeof(double));
	CUDA_LAUNCH(symkl_kernel, P, ROW_THREADS, 0, loss, nullptr, logits, P, V, 0);
	add_losses(out, weight, loss, P);
}

void cuda_symkl_backward(float *dlogits, const float *logits, int P, int V, float scale)
{
	if (P <= 0)
		return;
	CUDA_LAUNCH(symkl_kernel, P, ROW_THREADS, 0, nullptr, dlogits, logits, P, V, scale);
}

/* ---- squared error and binary cross-entropy (regression, multi-label) ---- */

/* loss[i] per element, in double: (pred - target)^2, or for bce the stable
 * max(x, 0) - x y + log(1 + e^-|x|). */
static __global__ void elementwise_loss_kernel(double *__restrict__ loss, const float *__restrict__ x,
					       const float *__restrict__ y, size_t n, int bce)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		double xi = x[i], yi = y[i];
		loss[i] = bce ? fmax(xi, 0.0) - xi * yi + log1p(exp(-fabs(xi))) : (xi - yi) * (xi - yi);
	}
}

/* *out += weight times the sum of the per-element losses, in a fixed order. */
static void elementwise_loss(double *out, double weight, const float *x, const float *y, size_t n,
			     int bce)
{
	if (!n)
		return;
	if (n > INT_MAX)
		die("a loss over %zu values: more than one sum takes", n);
	double *loss = (double *)cuda_op_scratch(n * sizeof(double));
	CUDA_LAUNCH(elementwise_loss_kernel, grid_1d(n), THREADS, 0, loss, x, y, n, bce);
	add_losses(out, weight, loss, (int)n);
}

/* dx = scale * 2 (x - y), or for bce scale * (sigmoid(x) - y). */
static __global__ void elementwise_loss_backward_kernel(float *dx, const float *x,
							const float *__restrict__ y, size_t n,
							float scale, int bce)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dx[i] = bce ? scale * (1.0f / (1.0f + expf(-x[i])) - y[i]) : scale * 2.0f * (x[i] - y[i]);
}

static void elementwise_loss_backward(float *dx, const float *x, const float *y, size_t n, float scale,
				      int bce)
{
	if (!n)
		return;
	CUDA_LAUNCH(elementwise_loss_backward_kernel, grid_1d(n), THREADS, 0, dx, x, y, n, scale, bce);
}

void cuda_mse_forward(double *out, double weight, const float *pred, const float *target, int N)
{
	elementwise_loss(out, weight, pred, target, (size_t)(N > 0 ? N : 0), 0);
}

void cuda_mse_backward(float *dpred, const float *pred, const float *target, int N, float scale)
{
	elementwise_loss_backward(dpred, pred, target, (size_t)(N > 0 ? N : 0), scale, 0);
}

void cuda_bce_forward(double *out, double weight, const float *logits, const float *targets,
		      size_t n)
{
	elementwise_loss(out, weight, logits, targets, n, 1);
}

void cuda_bce_backward(float *dlogits, const float *logits, const float *targets, size_t n, float scale)
{
	elementwise_loss_backward(dlogits, logits, targets, n, scale, 1);
}
