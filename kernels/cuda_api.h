/* The CUDA backend's ops, one per entry of struct backend (lib/backend/backend.h):
 * each means exactly what lib/backend/cpu_ops.h says of the CPU function of the same
 * name without the cuda_ prefix, on buffers in GPU memory, and runs on the
 * backend's stream (cuda_stream()). A _bf16 (_fp16) op is the same op with
 * its acts in bf16 (fp16), a _tf32 op the same with its products on TF32
 * tensor cores; the others are fp32. Sums run in a fixed order, so a
 * result does not change from run to run. Dropout draws the CPU's masks
 * (dropout.h), so the backends agree with dropout on. */
#ifndef TS_CUDA_API_H
#define TS_CUDA_API_H
#include "backend/backend.h"
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
#include <cuda_runtime.h>
extern "C" {
#endif

/* "cuda:N" (device N < cuda_device_count(), after CUDA_VISIBLE_DEVICES):
 * makes it current and returns its backend at precision p, one the device
 * has (precision_lacking in lib/backend/precision.h). */
const struct backend *cuda_backend_open(int device, enum precision p);
/* The compute capability of device N: 75 for sm_75, 90 for sm_90. */
int cuda_device_sm(int device);
/* How many GPUs CUDA can use here: 0 without a driver or a GPU. */
int cuda_device_count(void);

/* The PCI bus id of device N ("0000:3b:00.0"), which NVML knows it by. */
void cuda_pci_bus_id(int device, char *id, int len);

#ifdef __cplusplus   /* the kernels' files and cuda_sdpa.cpp */
/* The stream every op runs on. */
cudaStream_t cuda_stream(void);
#endif
/* *p, of *cap bytes, grown to hold bytes: the old buffer freed and the new
 * one taken on the stream (after the work queued that uses the old), and
 * counted in the backend's peak_memory. */
void *cuda_grow(void **p, size_t *cap, size_t bytes);

/* kernels/cuda_graph.cu: struct backend's graph_begin and graph_end */
void cuda_graph_begin(uint64_t key);
enum graph_done cuda_graph_end(const char **note);

/* kernels/cuda_comm.cu: the collectives of several processes' GPUs, over
 * NCCL (libnccl.so.2, loaded when first needed; a missing one dies in one
 * line). Each returns 0 when the processes did not all take part within the
 * timeout, or NCCL failed: the collectives are then over for this process. */
enum { CUDA_COMM_ID_BYTES = 128 };
/* Process 0 makes the id every process joins with. */
void cuda_comm_id(unsigned char id[CUDA_COMM_ID_BYTES]);
/* Joins process rank of size on the current device, waiting at most
 * timeout_s for each collective from now on. */
int cuda_comm_join(const unsigned char id[CUDA_COMM_ID_BYTES], int rank, int size, double timeout_s);
void cuda_comm_close(void);
/* x[0..n) in GPU memory becomes the sum over all processes. */
int cuda_comm_sum(float *x, size_t n);
/* Process r's shard x[start[r]..start[r+1]) becomes the sum over all
 * processes at r (gather 0), or is copied from r to all (gather 1). */
int cuda_comm_sharded(float *x, const size_t *start, int size, int gather);
/* Starts summing x[0..n) once the work queued so far has made it, alongside
 * the work queued later. */
int cuda_comm_start_sum(float *x, size_t n);
/* Returns when the started sums are done: *span_s from the first one's
 * start to the last one's end on the GPU, *exposed_s the wait for them once
 * the computation queued before was done. */
int cuda_comm_wait_sums(double *span_s, double *exposed_s);

/* kernels/cuda_gemm.cu: GEMMs, fp32 through cuBLAS, tf32 and bf16 through
 * cuBLASLt, each distinct product planned once; cuda_gemm_open makes the
 * handles on the backend's stream. */
void cuda_gemm_open(void);
/* Loads cuBLAS and cuBLASLt (cuda_gemm_open does first), or dies naming
 * what is missing; needs no GPU. */
void cuda_blas_load(void);
/* the products planned so far */
int cuda_gemm_plans(void);
void cuda_linear_forward(float *out, const struct act *in, const struct act *w, const float *bias,
			 int N, int Cin, int Cout);
void cuda_linear_forward_act(struct act *out, const struct act *in, const struct act *w,
			     const float *bias, int N, int Cin, int Cout);
void cuda_linear_backward(float *din, float *dw, float *dbias, const struct act *dout,
			  const struct act *in, const struct act *w, int N, int Cin, int Cout,
			  int accumulate);

void cuda_linear_forward_tf32(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout);
void cuda_linear_forward_act_tf32(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout);
void cuda_linear_backward_tf32(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate);
void cuda_linear_forward_bf16(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout);
void cuda_linear_forward_act_bf16(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout);
void cuda_linear_backward_bf16(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate);
void cuda_linear_forward_fp16(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout);
void cuda_linear_forward_act_fp16(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout);
void cuda_linear_backward_fp16(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate);

/* kernels/cuda_rows.cu */
void cuda_embedding_backward(float *dword, float *dpos, float *dtype, const float *dout,
			     const int32_t *ids, const int32_t *types, const int32_t *positions,
			     int N, int C, int pad_id);
void cuda_gather_rows(float *out, const float *in, const int32_t *rows, int M, int C);
void cuda_scatter_add_rows(float *out, const float *in, const int32_t *rows, int M, int C);
void cuda_mean_rows(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask, int B, int C);
void cuda_mean_rows_backward(float *dx, const float *dout, const int32_t *kv_start, const uint8_t *mask, int B,
			     int C);

/* kernels/cuda_layernorm.cu */
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *in,
			    const float *w, const float *b, int N, int C, float eps);
/* low: out itself */
void cuda_residual_layernorm_forward(float *out, struct act *low, float *sum, float *mean,
				     float *rstd, const float *res, const float *bias,
				     const float *w, const float *b, int N, int C, float eps, float p,
				     uint64_t seed);
void cuda_residual_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					  float *rstd, const float *res, const float *bias,
					  const float *w, const float *b, int N, int C, float eps,
					  float p, uint64_t seed);
void cuda_residual_layernorm_forward_fp16(float *out, struct act *low, float *sum, float *mean,
					  float *rstd, const float *res, const float *bias,
					  const float *w, const float *b, int N, int C, float eps,
					  float p, uint64_t seed);
void cuda_embedding_layernorm_forward(float *out, struct act *low, float *sum, float *mean,
				      float *rstd, const struct embedding *e, const float *w,
				      const float *b, float eps, float p, uint64_t seed);
void cuda_embedding_layernorm_forward_bf16(float *out, struct act *low, float *sum, float *mean,
					   float *rstd, const struct embedding *e, const float *w,
					   const float *b, float eps, float p, uint64_t seed);
void cuda_embedding_layernorm_forward_fp16(float *out, struct act *low, float *sum, float *mean,
					   float *rstd, const struct embedding *e, const float *w,
					   const float *b, float eps, float p, uint64_t seed);
void cuda_layernorm_backward(float *din, float *dw, float *db, const float *dout,
			     const float *in, const float *mean, const float *rstd, const float *w,
			     int N, int C);
void cuda_residual_layernorm_backward(float *din, struct act *dbranch, float *dw, float *db,
				      const float *dout, const float *in, const float *mean,
				      const float *rstd, const float *w, int N, int C, float p,
				      uint64_t seed);
void cuda_residual_layernorm_backward_bf16(float *din, struct act *dbranch, float *dw, float *db,
					   const float *dout, const float *in, const float *mean,
					   const float *rstd, const float *w, int N, int C, float p,
					   uint64_t seed);
void cuda_residual_layernorm_backward_fp16(float *din, struct act *dbranch, float *dw, float *db,
					   const float *dout, const float *in, const float *mean,
					   const float *rstd, const float *w, int N, int C, float p,
					   uint64_t seed);

/* kernels/cuda_elementwise.cu */
/* x[n] rounded into space as bf16 (fp16) */
const struct act *cuda_as_bf16(struct act *space, const float *x, size_t n);
const struct act *cuda_as_fp16(struct act *space, const float *x, size_t n);
void cuda_bias_gelu_forward(float *out, struct act *low, struct act *pre, const float *bias,
			    int N, int F);
void cuda_gelu_backward(struct act *dpre, const float *dout, const struct act *pre, int N, int F);
void cuda_bias_gelu_forward_bf16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F);
void cuda_gelu_backward_bf16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F);
void cuda_bias_gelu_forward_fp16(float *out, struct act *low, struct act *pre, const float *bias,
				 int N, int F);
void cuda_gelu_backward_fp16(struct act *dpre, const float *dout, const struct act *pre, int N,
			     int F);
void cuda_tanh_forward(float *out, const float *in, size_t n);
void cuda_tanh_backward(float *din, const float *dout, const float *out, size_t n);
#define ROTARY_GEGLU_API(suffix)                                                                         \
	void cuda_rotary##suffix(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, \
				 int rows, float theta, int inverse);                                    \
	void cuda_geglu_forward##suffix(struct act *out, const struct act *in, int N, int F);           \
	void cuda_geglu_backward##suffix(struct act *din, const float *dout, const struct act *in, int N, \
					 int F);
ROTARY_GEGLU_API()
ROTARY_GEGLU_API(_bf16)
ROTARY_GEGLU_API(_fp16)
#undef ROTARY_GEGLU_API
void cuda_relu_forward(float *out, const float *in, size_t n);
void cuda_relu_backward(float *din, const float *dout, const float *out, size_t n);
void cuda_axpy(float *y, const float *x, size_t n, float a);
void cuda_dropout_apply(float *out, const float *in, size_t n, float p, uint64_t seed);

/* kernels/cuda_losses.cu */
void cuda_crossentropy_forward(double *loss, double weight, float *lse, const float *logits,
			       const int32_t *labels, int N, int V, float e);
void cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
				const int32_t *labels, int N, int V, float e, float scale);
void cuda_softmax_rows(float *out, const float *logits, int N, int V, float temp);
void cuda_kl_forward(double *loss, double weight, float *lse, const float *logits,
		     const float *target, int N, int V, float temp);
void cuda_kl_backward(float *dlogits, const float *logits, const float *lse, const float *target, int N,
		      int V, float temp, float scale);
void cuda_symkl_forward(double *loss, double weight, const float *logits, int P, int V);
void cuda_symkl_backward(float *dlogits, const float *logits, int P, int V, float scale);
void cuda_mse_forward(double *loss, double weight, const float *pred, const float *target, int N);
void cuda_mse_backward(float *dpred, const float *pred, const float *target, int N, float scale);
void cuda_bce_forward(double *loss, double weight, const float *logits, const float *targets,
		      size_t n);
void cuda_bce_backward(float *dlogits, const float *logits, const float *targets, size_t n,
		       float scale);

/* kernels/cuda_attention.cu: its state, per query row and head, the
 * softmax's maximum and 1/sum */
enum { CUDA_ATTENTION_STATE = 2 };
void cuda_attention_forward(struct act *ctx, float *state, const struct attention *a);
void cuda_attention_backward(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
			     const float *state, const struct attention *a);
void cuda_attention_forward_bf16(struct act *ctx, float *state, const struct attention *a);
void cuda_attention_backward_bf16(struct act *dq, struct act *dk, struct act *dv,
				  const float *dctx, const float *state, const struct attention *a);
void cuda_attention_forward_fp16(struct act *ctx, float *state, const struct attention *a);
void cuda_attention_backward_fp16(struct act *dq, struct act *dk, struct act *dv,
				  const float *dctx, const float *state, const struct attention *a);
double cuda_attention_scratch(int B, int T, int C, int H);
/* the widest head (at most 256) the own kernels take on this GPU, as much
 * as a block's shared memory holds (223 on sm_75) */
int cuda_attention_widest(void);
/* the attention's calls, forward and backward, by the kernel that ran them */
long cuda_attention_runs(enum attention_kernel k);

/* kernels/cuda_sdpa.cpp: cuDNN's fused attention for bf16 (half 0) or fp16
 * (half 1) acts, with the own kernel's state; returns the implementation
 * that ran it, or ATT_OWN where it did nothing (no cuDNN, a shape it
 * refuses, a call without rows or, in the backward, out): the own kernel
 * runs then, and cuda_sdpa_declined says why (*cudnn: cuDNN's own refusal,
 * not one decided here). cuda_sdpa_use(0) keeps to the own kernel (the
 * tests compare the two). */
enum attention_kernel cuda_sdpa_forward(struct act *ctx, float *state, const struct attention *a, int half);
enum attention_kernel cuda_sdpa_backward(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
					 const float *state, const struct attention *a, int half);
void cuda_sdpa_use(int on);
const char *cuda_sdpa_declined(int *cudnn);
/* kernels/cuda_attention.cu, for cuda_sdpa.cpp: the index tensors of a call
 * padded to Bp sequences, each at out + i * stride: seq_q, seq_kv [Bp], then
 * the ragged offsets of Q, K|V, O and the statistics [Bp + 1]; the own state
 * (maximum, 1/sum) = (lse, 1) from n log-sum-exps, and the log-sum-exps
 * back from either's state; zeroes on the dk and dv rows cuDNN's backward
 * leaves alone (keys past the last real one, sequences with no query rows). */
void cuda_sdpa_indices(int32_t *out, size_t stride, const struct attention *a, int Bp);
void cuda_state_from_lse(float *state, const float *lse, size_t n);
/* rng[0..2) = cuDNN's dropout seed (seed's low 63 bits) and offset (0) */
void cuda_sdpa_seed(int64_t *rng, uint64_t seed);
void cuda_lse_from_state(float *lse, const float *state, size_t n);
void cuda_sdpa_zero_skipped(struct act *dk, struct act *dv, const int32_t *seq_q,
			    const int32_t *seq_kv, const struct attention *a);

/* kernels/cuda_optim.cu */
double cuda_sum_squares(const float *x, size_t n);
void cuda_scale(float *x, size_t n, float s);
void cuda_ema_update(float *avg, const float *x, size_t n, float decay);
void cuda_swap(float *a, float *b, size_t n);
void cuda_adam_update(const struct adam_tensor *t, int n);
void cuda_sgd_update(float *p, const float *g, float *m, size_t n, float gscale, float lr,
		     float momentum, float wd);
void cuda_lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
		       const struct lamb_coef *c, double *sums);
void cuda_lamb_apply(float *p, const float *m, const float *v, size_t n,
		     const struct lamb_coef *c, float step);

/* kernels/cuda_check.h's failure report: file, line, the call, CUDA's words
 * and a hint; never returns. */
__attribute__((noreturn)) void cuda_fail(const char *file, int line, const char *call, const char *what);
#ifdef __cplusplus
}
#endif
#endif
