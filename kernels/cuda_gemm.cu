/* The linear layers' GEMMs. fp32 goes through cuBLAS (no TF32: the same
 * products as the CPU's, to rounding). The precisions below fp32 go through
 * cuBLASLt: tf32 multiplies floats on the tensor cores; bf16 (fp16)
 * multiplies bf16 (fp16) acts and weights' copies, accumulating in fp32,
 * into an fp32 output or one in acts. The bias rides the GEMM (cuBLASLt's
 * BIAS epilogue) where cuBLASLt takes it, else an own kernel adds it after
 * (to the product in floats where the output is in acts: one rounding);
 * GELU stays out (cuBLASLt's is tanh's approximation, HF BERT's is erf's).
 * The bias gradient rides the weight gradient's GEMM (BGRADB, which sums
 * dout as it reads it) where cuBLASLt takes it, into a scratch an own kernel
 * adds to the gradient (the epilogue writes, the gradients accumulate); else
 * a GEMV of dout with ones reads dout once more.
 * Where cuBLASLt has no kernel for a product (odd strides, unaligned
 * pointers), cublasGemmEx runs it.
 *
 * Plans: the rows of a batch (its real tokens) change from step to step, so
 * each size is taken up to its size class, eight to an octave (at most 1/8
 * more); a product of a size class (sizes, strides, types, epilogue, the
 * pointers' alignments) gets a plan once: descriptors and the algorithm cuBLASLt's
 * heuristic picks for the class's largest sizes the strides allow, with a
 * 32 MiB workspace; each call sets its own sizes in the plan's layouts. So
 * the algorithm is the class's, whatever call came first, and a resumed
 * run takes the same ones. Plans live in a hash table (lib/backend/plans.h,
 * size_class its classes).
 * Any status but success dies in one line naming the call, but for
 * cuBLASLt's refusal to run a plan's algorithm at a call's sizes
 * (NOT_SUPPORTED, or INVALID_VALUE outside a graph's capture): that
 * product goes to cublasGemmEx from then on, with a note. The algorithms
 * do not change between runs on the same GPU and library, and none adds
 * with atomics in an order that varies, so a run repeats bit for bit. */
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "backend/plans.h"
#include "cuda_types.h"
#include "util/err.h"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <string.h>

/* cuBLAS and cuBLASLt, loaded when the GPU backend opens, so that a process
 * of a GPU build that runs on the CPU does not carry them: loading
 * libcublasLt alone adds 140 MiB to a process's resident memory (its
 * tables), and every ts-train and ts-eval on the CPU paid it. */
/* the cublasGemmEx the library exports (C++ sees another, inline, beside it) */
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
				     const void *, const void *, cudaDataType, int, const void *, cudaDataType,
				     int, const void *, void *, cudaDataType, int, cublasComputeType_t,
				     cublasGemmAlgo_t);
/* X(function, its type, its library: BLAS or BLASLT) for each used here */
#define BLAS_FUNCTIONS(X) \
	X(cublasCreate, decltype(&cublasCreate), BLAS) \
	X(cublasGemmEx, gemm_ex_fn, BLAS) \
	X(cublasGetStatusString, decltype(&cublasGetStatusString), BLAS) \
	X(cublasLtCreate, decltype(&cublasLtCreate), BLASLT) \
	X(cublasLtMatmul, decltype(&cublasLtMatmul), BLASLT) \
	X(cublasLtMatmulAlgoGetHeuristic, decltype(&cublasLtMatmulAlgoGetHeuristic), BLASLT) \
	X(cublasLtMatmulDescCreate, decltype(&cublasLtMatmulDescCreate), BLASLT) \
	X(cublasLtMatmulDescDestroy, decltype(&cublasLtMatmulDescDestroy), BLASLT) \
	X(cublasLtMatmulDescSetAttribute, decltype(&cublasLtMatmulDescSetAttribute), BLASLT) \
	X(cublasLtMatmulPreferenceCreate, decltype(&cublasLtMatmulPreferenceCreate), BLASLT) \
	X(cublasLtMatmulPreferenceDestroy, decltype(&cublasLtMatmulPreferenceDestroy), BLASLT) \
	X(cublasLtMatmulPreferenceSetAttribute, decltype(&cublasLtMatmulPreferenceSetAttribute), BLASLT) \
	X(cublasLtMatrixLayoutCreate, decltype(&cublasLtMatrixLayoutCreate), BLASLT) \
	X(cublasLtMatrixLayoutDestroy, decltype(&cublasLtMatrixLayoutDestroy), BLASLT) \
	X(cublasLtMatrixLayoutSetAttribute, decltype(&cublasLtMatrixLayoutSetAttribute), BLASLT) \
	X(cublasSetMathMode, decltype(&cublasSetMathMode), BLAS) \
	X(cublasSetStream, decltype(&cublasSetStream), BLAS) \
	X(cublasSetWorkspace, decltype(&cublasSetWorkspace), BLAS) \
	X(cublasSgemm, decltype(&cublasSgemm), BLAS) \
	X(cublasSgemv, decltype(&cublasSgemv), BLAS)

#define NAME_TEXT(f) #f
#define NAME_OF(f) NAME_TEXT(f)   /* the symbol f stands for (cublas_v2.h renames some) */
#define BLAS_SONAME "libcublas.so." NAME_OF(CUBLAS_VER_MAJOR)
#define BLASLT_SONAME "libcublasLt.so." NAME_OF(CUBLAS_VER_MAJOR)

#define BLAS_TYPE(f, type, lib) typedef type f##_fn;
BLAS_FUNCTIONS(BLAS_TYPE)

static struct {
#define BLAS_FIELD(f, type, lib) f##_fn f;
	BLAS_FUNCTIONS(BLAS_FIELD)
} blaslib;

/* Finds the library's file, or dies naming it. */
static void *open_blas(const char *name)
{
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		die("the GPU backend needs cuBLAS: %s (LD_LIBRARY_PATH may name its dir)", dlerror());
	return lib;
}

void cuda_blas_load(void)
{
	if (blaslib.cublasLtMatmul)
		return;
	/* named as BLAS_FUNCTIONS names the libraries */
	void *BLAS = open_blas(BLAS_SONAME), *BLASLT = open_blas(BLASLT_SONAME);
#define BLAS_FIND(f, type, lib) \
	if (!(*(void **)&blaslib.f = dlsym(lib, NAME_OF(f)))) \
		die("%s lacks %s: CUDA %d's cuBLAS is needed", lib##_SONAME, NAME_OF(f), CUBLAS_VER_MAJOR);
	BLAS_FUNCTIONS(BLAS_FIND)
}

enum { WORKSPACE = 32 << 20, PLANS_CAP = 8192, THREADS = 256, GRID_MAX = 16384 };

#define BLAS_CHECK(call) do { \
	cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS && !cuda_graph_capture_failed(#call " failed in the capture")) \
		cuda_fail(__FILE__, __LINE__, #call, blaslib.cublasGetStatusString(s_)); \
	} while (0)

/* What rides a product besides: nothing, a bias, the bias's gradient. */
enum vector { NO_VECTOR, BIAS, BIAS_GRAD };

/* A size class of products D = op(A) op(B) (+ beta D) (+ bias per row of D),
 * column-major as cuBLAS has it: D is m x n, op(A) m x k, op(B) k x n, each
 * size its class's; or D with the sums of op(B)'s columns (over k), the
 * bias gradient. */
struct product {
	cublasOperation_t ta, tb;
	int m, n, k, lda, ldb, ldd;
	cudaDataType_t ab, d;          /* A and B's type, D's */
	cublasComputeType_t compute;
	enum vector vec;               /* the bias (fused or after), or its gradient */
	int accumulate;                /* beta 1 */
	unsigned align[4];             /* bytes A, B, D and the vector are aligned to, up to 256 */
};

/* A product's plan, the value of its key in the table. */
struct plan {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algo;
	int fused;                     /* the bias (or its gradient) rides the GEMM */
	int lt;                        /* cuBLASLt has an algorithm; else cublasGemmEx runs it */
};

static cublasHandle_t blas;
static cublasLtHandle_t lt;
static void *workspace;
static struct plans table;   /* struct product -> struct plan */

static unsigned alignment(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	unsigned b = 256;
	while (b > 1 && a % b)
		b /= 2;
	return b;
}

static cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols, int ld)
{
	cublasLtMatrixLayout_t l;
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, ld));
	return l;
}

static void plan_free(struct plan *pl)
{
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutDestroy(pl->a));
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutDestroy(pl->b));
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutDestroy(pl->d));
	BLAS_CHECK(blaslib.cublasLtMatmulDescDestroy(pl->desc));
}

/* pl's descriptors for its product at the sizes m, n, k, its vector v
 * fused or not (the heuristic reads v's alignment); returns whether cuBLASLt
 * has an algorithm for them (then in pl->algo). */
static int plan_try(struct plan *pl, const struct product *p, int fuse, int m, int n, int k,
		    const float *v)
{
	BLAS_CHECK(blaslib.cublasLtMatmulDescCreate(&pl->desc, p->compute, CUDA_R_32F));
	BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, &p->ta,
						sizeof p->ta));
	BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, &p->tb,
						sizeof p->tb));
	if (fuse) {
		cublasLtEpilogue_t e = p->vec == BIAS ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
		int32_t bt = CUDA_R_32F;
		BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e,
							sizeof e));
		BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
							&bt, sizeof bt));
		BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
							&v, sizeof v));
	}
	int an = p->ta == CUBLAS_OP_N, bn = p->tb == CUBLAS_OP_N;
	pl->a = layout(p->ab, an ? m : k, an ? k : m, p->lda);
	pl->b = layout(p->ab, bn ? k : n, bn ? n : k, p->ldb);
	pl->d = layout(p->d, m, n, p->ldd);

	cublasLtMatmulPreference_t pref;
	uint64_t ws = WORKSPACE;
	BLAS_CHECK(blaslib.cublasLtMatmulPreferenceCreate(&pref));
	BLAS_CHECK(blaslib.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						      &ws, sizeof ws));
	const cublasLtMatmulPreferenceAttributes_t which[3] = {
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES };
	for (int i = 0; i < 3; i++) {
		uint32_t a = p->align[i];
		BLAS_CHECK(blaslib.cublasLtMatmulPreferenceSetAttribute(pref, which[i], &a, sizeof a));
	}
	uint32_t c = p->align[2];   /* C is D */
	BLAS_CHECK(blaslib.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
						      &c, sizeof c));
	cublasLtMatmulHeuristicResult_t got;
	int found = 0;
	cublasStatus_t s = blaslib.cublasLtMatmulAlgoGetHeuristic(lt, pl->desc, pl->a, pl->b, pl->d, pl->d,
							  pref, 1, &got, &found);
	BLAS_CHECK(blaslib.cublasLtMatmulPreferenceDestroy(pref));
	if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
		cuda_fail(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", blaslib.cublasGetStatusString(s));
	if (s != CUBLAS_STATUS_SUCCESS || found < 1) {
		plan_free(pl);
		return 0;
	}
	pl->algo = got.algo;
	pl->fused = fuse;
	pl->lt = 1;
	return 1;
}

static int at_most(int x, int limit)
{
	return x < limit ? x : limit;
}

/* The plan of p: found, or made now for p's class sizes, each cut to what
 * the leading dimensions hold (a call's sizes fit them); a vector (v, of the
 * call that makes it) rides only from 16-byte alignment. */
static struct plan *plan_of(const struct product *p, const float *v)
{
	int made;
	struct plan *pl = (struct plan *)plans_get(&table, p, &made, "cuBLAS matrix products");
	if (!made)
		return pl;
	int an = p->ta == CUBLAS_OP_N, bn = p->tb == CUBLAS_OP_N;
	int m = at_most(at_most(p->m, p->ldd), an ? p->lda : p->m);
	int k = at_most(at_most(p->k, an ? p->k : p->lda), bn ? p->ldb : p->k);
	int n = at_most(p->n, bn ? p->n : p->ldb);
	if (!(p->vec && p->align[3] >= 16 && plan_try(pl, p, 1, m, n, k, v)))
		plan_try(pl, p, 0, m, n, k, NULL);   /* or cublasGemmEx, for what cuBLASLt's kernels refuse */
	return pl;
}

/* Runs pl's algorithm on a call; 0 where cuBLASLt will not run it at the
 * call's sizes (the plan then goes to cublasGemmEx, with a note); any other
 * failure gives a capture up, or dies. */
static int lt_run(struct plan *pl, const void *A, const void *B, const float *beta, void *D,
		  const float *v, int m, int n, int k)
{
	const float one = 1.0f;
	if (pl->fused)
		BLAS_CHECK(blaslib.cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &v,
							sizeof v));
	cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
	if (cuda_graph_call_of("cublasLtMatmul", (const void *)pl, A, B, *beta, D, v, m, n, k))
		s = blaslib.cublasLtMatmul(lt, pl->desc, &one, A, pl->a, B, pl->b, beta, D, pl->d, D, pl->d,
				   &pl->algo, workspace, WORKSPACE, cuda_stream());
	if (s == CUBLAS_STATUS_SUCCESS)
		return 1;
	/* an algorithm chosen for the class's largest sizes may refuse a call's
	 * smaller ones (NOT_SUPPORTED, or INVALID_VALUE); INVALID_VALUE in a
	 * capture gives the capture up, and the eager walk after meets it again */
	if (s != CUBLAS_STATUS_NOT_SUPPORTED && cuda_graph_capture_failed("cublasLtMatmul failed in the capture"))
		return 1;
	if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE)
		cuda_fail(__FILE__, __LINE__, "cublasLtMatmul", blaslib.cublasGetStatusString(s));
	warnx("cuBLASLt refused a %d x %d x %d product its heuristic had chosen an algorithm for (%s): "
	      "cublasGemmEx runs that product from now on", m, n, k, blaslib.cublasGetStatusString(s));
	plan_free(pl);
	pl->lt = pl->fused = 0;
	return 0;
}

/* A layout's rows and columns set to a call's own sizes. */
static void layout_size(cublasLtMatrixLayout_t l, int rows, int cols)
{
	uint64_t r = (uint64_t)rows, c = (uint64_t)cols;
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof r));
	BLAS_CHECK(blaslib.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof c));
}

/* ---- the bias where it does not ride the GEMM: D[j, n] = P[j, n] + bias[j],
 * P the product in floats (D itself where D is) ---- */

template <typename D>
static __global__ void add_bias_kernel(D *out, const float *in, const float *__restrict__ bias,
				       size_t total, int rows)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
	     i += (size_t)gridDim.x * blockDim.x)
		store(out + i, in[i] + bias[i % rows]);
}

static unsigned grid_for(size_t n)
{
	size_t b = cuda_blocks(n);
	return b > (size_t)GRID_MAX ? (unsigned)GRID_MAX : (unsigned)b;
}

static void add_bias(void *d, cudaDataType_t t, const float *in, const float *bias, int m, int n)
{
	size_t total = (size_t)m * n;
	if (t == CUDA_R_16BF)
		CUDA_LAUNCH(add_bias_kernel<bf16>, grid_for(total), THREADS, 0, (bf16 *)d, in, bias, total, m);
	else if (t == CUDA_R_16F)
		CUDA_LAUNCH(add_bias_kernel<f16>, grid_for(total), THREADS, 0, (f16 *)d, in, bias, total, m);
	else
		CUDA_LAUNCH(add_bias_kernel<float>, grid_for(total), THREADS, 0, (float *)d, in, bias, total, m);
}

/* ---- products ---- */

void cuda_gemm_open(void)
{
	cuda_blas_load();
	BLAS_CHECK(blaslib.cublasCreate(&blas));
	BLAS_CHECK(blaslib.cublasSetStream(blas, cuda_stream()));
	BLAS_CHECK(blaslib.cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));   /* fp32: no TF32 */
	BLAS_CHECK(blaslib.cublasLtCreate(&lt));
	size_t cap = 0;
	cuda_grow(&workspace, &cap, WORKSPACE);
	/* cuBLAS's own workspace is the same (one stream): none is taken inside a graph's capture */
	BLAS_CHECK(blaslib.cublasSetWorkspace(blas, workspace, WORKSPACE));
	plans_init(&table, sizeof(struct product), sizeof(struct plan), PLANS_CAP);
}

static int matmul(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
		  int lda, const void *B, int ldb, cudaDataType_t ab, void *D, int ldd,
		  cudaDataType_t dt, int accumulate, enum vector vec, const float *v,
		  cublasComputeType_t compute);

/* D (16-bit, ldd m, not accumulated) = op(A) op(B) + bias[j] on row j,
 * rounded once: the product in floats first, where the bias cannot ride the
 * GEMM (adding it to a rounded product would round twice). */
static void biased_once(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
			const void *A, int lda, const void *B, int ldb, cudaDataType_t ab, void *D,
			cudaDataType_t dt, const float *bias, cublasComputeType_t compute)
{
	static void *room;
	static size_t have;
	float *f = (float *)cuda_grow(&room, &have, (size_t)m * n * sizeof(float));
	matmul(ta, tb, m, n, k, A, lda, B, ldb, ab, f, m, CUDA_R_32F, 0, NO_VECTOR, NULL, compute);
	add_bias(D, dt, f, bias, m, n);
}

/* D = op(A) op(B) (+ D when accumulate), and with vector v of vec: BIAS, + v[j] on
 * row j of D; BIAS_GRAD, v[j] = the sum of column j of op(B), where cuBLASLt
 * takes it. Returns whether the vector rode the GEMM (a bias always goes on). */
static int matmul(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
		  int lda, const void *B, int ldb, cudaDataType_t ab, void *D, int ldd,
		  cudaDataType_t dt, int accumulate, enum vector vec, const float *v,
		  cublasComputeType_t compute)
{
	if (m <= 0 || n <= 0 || (k <= 0 && accumulate))
		return 0;
	struct product p;
	memset(&p, 0, sizeof p);   /* hashed and compared bytewise: no stray padding */
	p.ta = ta, p.tb = tb, p.m = size_class(m), p.n = size_class(n), p.k = size_class(k);
	p.lda = lda, p.ldb = ldb, p.ldd = ldd;
	p.ab = ab, p.d = dt, p.compute = compute, p.vec = v ? vec : NO_VECTOR;
	p.accumulate = accumulate;
	p.align[0] = alignment(A), p.align[1] = alignment(B), p.align[2] = alignment(D);
	p.align[3] = v ? alignment(v) : 0;
	struct plan *pl = plan_of(&p, v);
	if (p.vec == BIAS && !pl->fused && dt != CUDA_R_32F) {
		biased_once(ta, tb, m, n, k, A, lda, B, ldb, ab, D, dt, v, compute);
		return 0;
	}
	const float one = 1.0f, zero = 0.0f;
	const float *beta = accumulate ? &one : &zero;
	if (pl->lt) {
		int an = ta == CUBLAS_OP_N, bn = tb == CUBLAS_OP_N;
		layout_size(pl->a, an ? m : k, an ? k : m);
		layout_size(pl->b, bn ? k : n, bn ? n : k);
		layout_size(pl->d, m, n);
		if (!lt_run(pl, A, B, beta, D, v, m, n, k))   /* the plan runs unfused from now on */
			return matmul(ta, tb, m, n, k, A, lda, B, ldb, ab, D, ldd, dt, accumulate, vec, v,
				      compute);
		if (pl->fused)
			return 1;
	} else if (cuda_graph_call_of("cublasGemmEx", ta, tb, m, n, k, A, lda, B, ldb, ab, *beta, D, dt,
				      ldd, compute)) {
		BLAS_CHECK(blaslib.cublasGemmEx(blas, ta, tb, m, n, k, &one, A, ab, lda, B, ab, ldb, beta, D,
					dt, ldd, compute, CUBLAS_GEMM_DEFAULT));
	}
	if (p.vec == BIAS)   /* an fp32 D: the bias after the product, on either path */
		add_bias(D, dt, (const float *)D, v, m, n);
	return 0;
}

/* The types a precision multiplies in: its acts' (the operands', and the
 * output's when it is an act too), and the compute type. */
struct lt_types {
	cudaDataType_t ab;
	cublasComputeType_t compute;
};

static const struct lt_types TF32 = { CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32 };
static const struct lt_types BF16 = { CUDA_R_16BF, CUBLAS_COMPUTE_32F };
static const struct lt_types FP16 = { CUDA_R_16F, CUBLAS_COMPUTE_32F };

/* Row-major [N, C] is column-major [C, N]: out^T [Cout, N] = w^T in^T, w
 * being column-major [Cin, Cout]. */
static void forward(const struct lt_types *t, void *out, cudaDataType_t dt, const void *in,
		    const void *w, const float *bias, int N, int Cin, int Cout)
{
	matmul(CUBLAS_OP_T, CUBLAS_OP_N, Cout, N, Cin, w, Cin, in, Cin, t->ab, out, Cout, dt, 0, BIAS,
	       bias, t->compute);
}

template <typename T>
static __global__ void ones_kernel(T *p, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		store(p + i, 1.0f);
}

/* ones[0..n) in type t (fp32, bf16 or fp16), grown as needed: the bias
 * gradient's GEMV. */
static const void *ones_of(cudaDataType_t t, size_t n)
{
	static void *ones[3];
	static size_t have[3];   /* bytes */
	int i = t == CUDA_R_16BF ? 1 : t == CUDA_R_16F ? 2 : 0;
	size_t size = i ? 2 : sizeof(float);
	if (n * size > have[i]) {
		int held = cuda_graph_eager_begin();
		cuda_grow(&ones[i], &have[i], n * size);
		if (i == 1)
			CUDA_LAUNCH(ones_kernel<bf16>, grid_for(n), THREADS, 0, (bf16 *)ones[i], n);
		else if (i == 2)
			CUDA_LAUNCH(ones_kernel<f16>, grid_for(n), THREADS, 0, (f16 *)ones[i], n);
		else
			CUDA_LAUNCH(ones_kernel<float>, grid_for(n), THREADS, 0, (float *)ones[i], n);
		cuda_graph_eager_end(held);
	}
	return ones[i];
}

static __global__ void add_kernel(float *y, const float *__restrict__ x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += x[i];
}

/* Room for n floats of bias gradient, grown as needed. */
static float *bias_grad_room(int n)
{
	static void *room;
	static size_t have;
	return (float *)cuda_grow(&room, &have, (size_t)n * sizeof(float));
}

static void backward(const struct lt_types *t, float *din, float *dw, float *dbias, const void *dout,
		     const void *in, const void *w, int N, int Cin, int Cout, int accumulate)
{
	if (din)   /* din^T [Cin, N] = w dout^T */
		matmul(CUBLAS_OP_N, CUBLAS_OP_N, Cin, N, Cout, w, Cin, dout, Cout, t->ab, din, Cin,
		       CUDA_R_32F, accumulate, NO_VECTOR, NULL, t->compute);
	/* dw^T [Cin, Cout] += in^T dout, the bias gradient dout's column sums */
	float *part = dbias ? bias_grad_room(Cout) : NULL;
	if (matmul(CUBLAS_OP_N, CUBLAS_OP_T, Cin, Cout, N, in, Cin, dout, Cout, t->ab, dw, Cin,
		   CUDA_R_32F, 1, BIAS_GRAD, part, t->compute)) {
		CUDA_LAUNCH(add_kernel, (unsigned)((Cout + THREADS - 1) / THREADS), THREADS, 0, 
			dbias, part, Cout);
	} else if (dbias) {   /* dbias [Cout] += dout^T ones [N] */
		matmul(CUBLAS_OP_N, CUBLAS_OP_N, Cout, 1, N, dout, Cout, ones_of(t->ab, (size_t)N), N,
		       t->ab, dbias, Cout, CUDA_R_32F, 1, NO_VECTOR, NULL, t->compute);
	}
}

/* fp32 through cuBLAS, as the lt path lays it out */
void cuda_linear_forward(float *out, const struct act *in_acts, const struct act *w_acts,
			 const float *bias, int N, int Cin, int Cout)
{
	const float one = 1.0f, zero = 0.0f;
	const float *in = (const float *)in_acts, *w = (const float *)w_acts;
	if (N <= 0 || Cout <= 0)
		return;
	if (cuda_graph_call_of("cublasSgemm forward", Cout, N, Cin, w, in, out))
		BLAS_CHECK(blaslib.cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, Cout, N, Cin, &one, w, Cin, in,
				       Cin, &zero, out, Cout));
	if (bias)
		add_bias(out, CUDA_R_32F, out, bias, Cout, N);
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
	if (N <= 0)
		return;
	if (din && cuda_graph_call_of("cublasSgemm din", Cin, N, Cout, w, dout, accumulate, din))
		BLAS_CHECK(blaslib.cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, Cin, N, Cout, &one, w, Cin,
				       dout, Cout, accumulate ? &one : &zero, din, Cin));
	if (cuda_graph_call_of("cublasSgemm dw", Cin, Cout, N, in, dout, dw))
		BLAS_CHECK(blaslib.cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, Cin, Cout, N, &one, in, Cin,
				       dout, Cout, &one, dw, Cin));
	if (dbias) {
		const float *ones = (const float *)ones_of(CUDA_R_32F, (size_t)N);
		if (cuda_graph_call_of("cublasSgemv", Cout, N, dout, ones, dbias))
			BLAS_CHECK(blaslib.cublasSgemv(blas, CUBLAS_OP_N, Cout, N, &one, dout, Cout, ones, 1,
					       &one, dbias, 1));
	}
}

void cuda_linear_forward_tf32(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout)
{
	forward(&TF32, out, CUDA_R_32F, in, w, bias, N, Cin, Cout);
}

void cuda_linear_forward_act_tf32(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout)
{
	forward(&TF32, out, TF32.ab, in, w, bias, N, Cin, Cout);
}

void cuda_linear_backward_tf32(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate)
{
	backward(&TF32, din, dw, dbias, dout, in, w, N, Cin, Cout, accumulate);
}

void cuda_linear_forward_bf16(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout)
{
	forward(&BF16, out, CUDA_R_32F, in, w, bias, N, Cin, Cout);
}

void cuda_linear_forward_act_bf16(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout)
{
	forward(&BF16, out, BF16.ab, in, w, bias, N, Cin, Cout);
}

void cuda_linear_backward_bf16(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate)
{
	backward(&BF16, din, dw, dbias, dout, in, w, N, Cin, Cout, accumulate);
}

void cuda_linear_forward_fp16(float *out, const struct act *in, const struct act *w,
			      const float *bias, int N, int Cin, int Cout)
{
	forward(&FP16, out, CUDA_R_32F, in, w, bias, N, Cin, Cout);
}

void cuda_linear_forward_act_fp16(struct act *out, const struct act *in, const struct act *w,
				  const float *bias, int N, int Cin, int Cout)
{
	forward(&FP16, out, FP16.ab, in, w, bias, N, Cin, Cout);
}

void cuda_linear_backward_fp16(float *din, float *dw, float *dbias, const struct act *dout,
			       const struct act *in, const struct act *w, int N, int Cin, int Cout,
			       int accumulate)
{
	backward(&FP16, din, dw, dbias, dout, in, w, N, Cin, Cout, accumulate);
}

int cuda_gemm_plans(void)
{
	return (int)table.n;
}
