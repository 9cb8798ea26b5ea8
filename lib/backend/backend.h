/* The seam between what is computed and where: the model graph (bert_graph.c) and
 * the optimizer (optim.c) call the ops of a backend on buffers in that
 * backend's memory; the CPU (cpu_backend.c, over cpu_ops.h) is one backend,
 * the CUDA kernels of kernels/ another. Every op means what cpu_ops.h says of
 * the CPU function of the same name; each backward ADDS into parameter
 * gradients. Host code touches the backend's memory only through upload and
 * download, so a backend whose memory is the host's (host set) needs neither.
 *
 * The backend owns the type of what its matrix products read: the
 * activations and the activation gradients that feed them, and the
 * weights' copies they multiply by, are struct act, act_size bytes an
 * element: 4, a float, on an fp32 backend; 2, a bf16, on the CPU's bf16
 * one. Parameters, their gradients, optimizer state, the residual stream
 * and its gradient, normalisation statistics and logits stay fp32. */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H
#include <stddef.h>
#include <stdint.h>

/* An element of the backend's own type; opaque to the graph. */
struct act;

/* What a backend's matrix work computes in (--precision): fp32; fp32 acts
 * with products on TF32 tensor cores; bf16 or fp16 acts with fp32
 * accumulation. */
enum precision { PREC_FP32, PREC_TF32, PREC_BF16, PREC_FP16 };

/* Multi-head self-attention over a batch of sequences of any lengths
 * (cpu_ops.h: attention_forward). */
struct attention {
	int B, T, C, H;            /* T: the longest sequence */
	const struct act *q, *k, *v;
	int ldq, ldkv;             /* row strides of q and of k, v */
	const int32_t *kv_start;   /* B+1 offsets of each sequence's rows in k and v */
	const int32_t *q_start;    /* B+1 offsets into the rows of q; NULL: kv_start */
	const int64_t *p_start;    /* B+1: the number of each sequence's first
				    * probability, numbering the dropout draws */
	const uint8_t *mask;       /* per row of k: 0 a padding key; NULL: none */
	float p;                   /* dropout on the probabilities */
	uint64_t seed;
	/* for a backend that wants them (cuDNN's): the rows of q (and of ctx);
	 * and in the backward, the forward's ctx. 0 and NULL: not given */
	int rows;
	const struct act *out;
	/* what lengths alone cannot say: some sequence has a padding key before
	 * its last real one (holes), or no query rows (empty) */
	int holes, empty;
	/* a local band (ModernBERT's local layers): a query sees the keys at
	 * most band rows from its own, 0 all keys; q_at: for each row of q,
	 * its row in k (NULL: the rows of q are those of k) */
	int band;
	const int32_t *q_at;
};

/* The embeddings' lookup: row r of N is word[ids[r]] + pos[positions[r]] +
 * type[types[r]] (types NULL: type 0), rows of C floats. */
struct embedding {
	const int32_t *ids, *types, *positions;
	const float *word, *pos, *type;
	int N, C;
};

/* One Adam or AdamW update of a tensor, in PyTorch's order of float
 * operations: AdamW shrinks p by keep = 1 - lr*wd (decoupled), Adam adds
 * l2*p to the gradient. Every update reads the gradient times gscale (fp16's
 * unscaling and --clip's), the same bits as scaling it first. */
struct adam_coef {
	float gscale, keep, l2, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};

/* One tensor's Adam or AdamW update: where it lies and its coefficients. */
struct adam_tensor {
	float *p;
	const float *g;
	float *m, *v;
	size_t n;
	struct adam_coef c;
};

/* LAMB's bias-corrected Adam direction plus decay, u = m/bc1/(sqrt(v/bc2) +
 * eps) + wd*p, as NVIDIA apex's FusedLAMB. */
struct lamb_coef {
	float gscale, b1, omb1, b2, omb2, bc1, bc2, eps, wd;
};

/* How the work between a backend's graph_begin and graph_end went:
 * GRAPH_AGAIN, none of it ran, and the caller runs the same ops again (they
 * then run eagerly). */
enum graph_done { GRAPH_AGAIN, GRAPH_EAGER, GRAPH_CAPTURED, GRAPH_REPLAYED };

/* The kernels an attention call may run on: cuDNN's unified engine or its
 * composite graph, or the backend's own. */
enum attention_kernel { ATT_CUDNN_UNIFIED, ATT_CUDNN_COMPOSITE, ATT_OWN, ATTENTION_KERNELS };

struct backend {
	const char *name;          /* "cpu", "cuda:0" */
	int host;                  /* its memory is the host's */
	size_t act_size;           /* bytes of a struct act */
	/* floats its attention forward keeps for the backward per query row
	 * and head, in state (rows of q x H x this), and the bytes of scratch its
	 * attention takes for B sequences of H heads (C wide together) up to T
	 * long, shared by every layer */
	int attention_state;
	double (*attention_scratch)(int B, int T, int C, int H);
	/* the real tokens an evaluation's forward takes at once: the CPU's
	 * take a slice of a batch that keeps a layer's activations in its
	 * caches; 0, the whole batch */
	int64_t eval_tokens;
	/* the same memory with every op in fp32, for work that a lower
	 * precision would blur (VAT's small probe); NULL: this one is fp32 */
	const struct backend *precise;

	/* memory: alloc'd bytes are zero; dies in one line when out of memory */
	void *(*alloc)(size_t bytes);
	void (*release)(void *p);
	void (*upload)(void *dst, const void *host_src, size_t bytes);
	void (*download)(void *host_dst, const void *src, size_t bytes);
	void (*zero)(void *p, size_t bytes);
	/* bytes its buffers may take: the machine's RAM, the GPU's free memory;
	 * 0 when unknown */
	double (*memory)(void);
	/* the most bytes its buffers and its ops' scratch held at once (a GPU's,
	 * as a framework counts its tensors); 0 when it does not count (the CPU) */
	double (*peak_memory)(void);

	/* CUDA graphs, NULL where the backend has none: the ops between
	 * graph_begin(key) and graph_end, a walk, run as one graph where an
	 * earlier walk under the same key made the same calls in the same order
	 * (their arguments may differ: a dropout seed, a loss weight). A key's
	 * second walk is captured, its later ones replayed. The ops of a walk
	 * may not upload, download or allocate. *note: a line for the log where
	 * a capture failed, else NULL */
	void (*graph_begin)(uint64_t key);
	enum graph_done (*graph_end)(const char **note);
	/* the attention's calls (forwards and backwards) this process made, by
	 * the kernel that ran them; NULL where the backend has one kernel */
	long (*attention_runs)(enum attention_kernel k);

	/* x[n] as acts: x itself where an act is a float, else x rounded into
	 * space[n] */
	const struct act *(*as_act)(struct act *space, const float *x, size_t n);
	/* as_act, for weights that then stay as they are until space is written
	 * again (a model that only scores): the backend may keep them besides
	 * in the layout its products read fastest. NULL: as_act does. */
	const struct act *(*as_fixed_act)(struct act *space, const float *x, size_t n);

	/* the BERT graph: w the weight's act copy */
	void (*linear_forward)(float *out, const struct act *in, const struct act *w,
			       const float *bias, int N, int Cin, int Cout);
	/* the same with its output in acts */
	void (*linear_forward_act)(struct act *out, const struct act *in, const struct act *w,
				   const float *bias, int N, int Cin, int Cout);
	/* GELU(in w^T + bias) into out, in acts, with nothing kept for a
	 * backward: the forward of a model that has none (bert_set_forward_only)
	 * in one op; NULL where the backend has no such op */
	void (*linear_gelu_forward_act)(struct act *out, const struct act *in, const struct act *w,
					const float *bias, int N, int Cin, int Cout);
	void (*linear_backward)(float *din, float *dw, float *dbias, const struct act *dout,
				const struct act *in, const struct act *w, int N, int Cin,
				int Cout, int accumulate);
	void (*embedding_backward)(float *dword, float *dpos, float *dtype, const float *dout,
				   const int32_t *ids, const int32_t *types,
				   const int32_t *positions, int N, int C, int pad_id);
	void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *in,
				  const float *w, const float *b, int N, int C, float eps);
	/* the lookup's sum into sum, its LayerNorm through dropout p into out,
	 * and that in acts into low where an act is not a float: embedding_forward,
	 * layernorm_forward and dropout_apply in one */
	void (*embedding_layernorm_forward)(float *out, struct act *low, float *sum, float *mean,
					    float *rstd, const struct embedding *e, const float *w,
					    const float *b, float eps, float p, uint64_t seed);
	/* low: out in acts too (out itself where an act is a float) */
	void (*residual_layernorm_forward)(float *out, struct act *low, float *sum, float *mean,
					   float *rstd, const float *res, const float *bias,
					   const float *w, const float *b, int N, int C, float eps,
					   float p, uint64_t seed);
	void (*layernorm_backward)(float *din, float *dw, float *db, const float *dout,
				   const float *in, const float *mean, const float *rstd,
				   const float *w, int N, int C);
	/* layernorm_backward at a residual sum, and the gradient of the branch
	 * that fed the sum: din through the branch's dropout p, in acts, into
	 * dbranch (NULL: none wanted) */
	void (*residual_layernorm_backward)(float *din, struct act *dbranch, float *dw, float *db,
					    const float *dout, const float *in, const float *mean,
					    const float *rstd, const float *w, int N, int C, float p,
					    uint64_t seed);
	/* pre, in acts, gets its bias added (kept for the backward); its GELU
	 * goes into out, or into low in acts: one of them NULL */
	void (*bias_gelu_forward)(float *out, struct act *low, struct act *pre, const float *bias,
				  int N, int F);
	/* dpre in acts, apart from dout */
	void (*gelu_backward)(struct act *dpre, const float *dout, const struct act *pre, int N,
			      int F);
	void (*tanh_forward)(float *out, const float *in, size_t n);
	void (*tanh_backward)(float *din, const float *dout, const float *out, size_t n);
	/* rotary position embeddings in place (ModernBERT's): in each of rows
	 * rows of x (ld apart), parts blocks of C (Q, or Q and K side by side),
	 * each head's d = C/heads values as d/2 pairs (j, j + d/2) turned by
	 * pos[row] / theta^(2j/d) (that frequency rounded once into a float,
	 * the angle a float product, as torch's); inverse turns them back (the
	 * backward of the same turn) */
	void (*rotary)(struct act *x, int ld, int parts, int C, int heads, const int32_t *pos, int rows,
		       float theta, int inverse);
	/* GeGLU (ModernBERT's MLP): out[r, j] = gelu(in[r, j]) * in[r, F + j]
	 * over N rows of in [N, 2F]; the backward's din [N, 2F] from dout */
	void (*geglu_forward)(struct act *out, const struct act *in, int N, int F);
	void (*geglu_backward)(struct act *din, const float *dout, const struct act *in, int N, int F);
	void (*relu_forward)(float *out, const float *in, size_t n);
	/* din = dout where out > 0, else 0; din may be dout */
	void (*relu_backward)(float *din, const float *dout, const float *out, size_t n);
	void (*attention_forward)(struct act *ctx, float *state, const struct attention *a);
	/* dq, dk, dv in acts */
	void (*attention_backward)(struct act *dq, struct act *dk, struct act *dv,
				   const float *dctx, const float *state,
				   const struct attention *a);
	/* the losses ADD weight times their sum over the rows into *loss, a
	 * double in the backend's memory: a step's loss stays there until the
	 * step reads it, at its end */
	void (*crossentropy_forward)(double *loss, double weight, float *lse, const float *logits,
				     const int32_t *labels, int N, int V, float e);
	void (*crossentropy_backward)(float *dlogits, const float *logits, const float *lse,
				      const int32_t *labels, int N, int V, float e, float scale);
	void (*softmax_rows)(float *out, const float *logits, int N, int V, float temp);
	void (*kl_forward)(double *loss, double weight, float *lse, const float *logits,
			   const float *target, int N, int V, float temp);
	void (*kl_backward)(float *dlogits, const float *logits, const float *lse,
			    const float *target, int N, int V, float temp, float scale);
	void (*symkl_forward)(double *loss, double weight, const float *logits, int P, int V);
	void (*symkl_backward)(float *dlogits, const float *logits, int P, int V, float scale);
	void (*axpy)(float *y, const float *x, size_t n, float a);
	void (*mse_forward)(double *loss, double weight, const float *pred, const float *target,
			    int N);
	void (*mse_backward)(float *dpred, const float *pred, const float *target, int N,
			     float scale);
	void (*bce_forward)(double *loss, double weight, const float *logits,
			    const float *targets, size_t n);
	void (*bce_backward)(float *dlogits, const float *logits, const float *targets, size_t n,
			     float scale);
	void (*dropout_apply)(float *out, const float *in, size_t n, float p, uint64_t seed);
	void (*gather_rows)(float *out, const float *in, const int32_t *rows, int M, int C);
	void (*scatter_add_rows)(float *out, const float *in, const int32_t *rows, int M, int C);
	/* mean pooling (ModernBERT's): out[b] the mean of sequence b's real rows
	 * (kv_start, mask; 0 where it has none) of x, b < B; the backward puts
	 * dout[b] over their count in those rows of dx, leaving the others */
	void (*mean_rows)(float *out, const float *x, const int32_t *kv_start, const uint8_t *mask, int B, int C);
	void (*mean_rows_backward)(float *dx, const float *dout, const int32_t *kv_start, const uint8_t *mask,
				   int B, int C);

	/* the optimizer: the sum of squares in a fixed order (the same bits for
	 * any thread count), scaling, and one tensor's update */
	double (*sum_squares)(const float *x, size_t n);
	void (*scale)(float *x, size_t n, float s);
	/* avg = decay avg + (1 - decay) x: an exponential moving average */
	void (*ema_update)(float *avg, const float *x, size_t n, float decay);
	void (*swap)(float *a, float *b, size_t n);
	/* the updates of n tensors, on a GPU in one launch */
	void (*adam_update)(const struct adam_tensor *t, int n);
	/* m NULL: no momentum */
	void (*sgd_update)(float *p, const float *g, float *m, size_t n, float gscale, float lr,
			   float momentum, float wd);
	/* moves the moments and returns |p|^2 and |u|^2 in sums[2] */
	void (*lamb_moments)(const float *p, const float *g, float *m, float *v, size_t n,
			     const struct lamb_coef *c, double *sums);
	/* p -= step * u */
	void (*lamb_apply)(float *p, const float *m, const float *v, size_t n,
			   const struct lamb_coef *c, float step);
};

/* Whether be's acts are floats (then as_act hands floats back as they are). */
static inline int acts_are_floats(const struct backend *be)
{
	return be->act_size == sizeof(float);
}

/* x as acts where an act is a float: an fp32 backend's, or a test's. */
static inline const struct act *float_acts(const float *x)
{
	return (const struct act *)x;
}

/* The act i elements past p, for be. */
static inline struct act *act_at(const struct backend *be, const struct act *p, size_t i)
{
	return (struct act *)((const char *)p + i * be->act_size);
}

/* Fills p_start[B+1] for struct attention from kv_start and q_start (NULL:
 * kv_start): sequence b has H * nq * n probabilities. Returns the total. */
int64_t attention_probs(int64_t *p_start, const int32_t *kv_start, const int32_t *q_start,
			int B, int H);

/* The CPU: fp32, OpenBLAS and OpenMP. */
const struct backend *backend_cpu(void);
/* The name of the set of OpenBLAS kernels the CPU's fp32 products run on
 * ("SkylakeX"), fitted to the processor the first time (cpu_blas.c). */
const char *backend_cpu_blas(void);
/* The CPU with bf16 acts: the linear layers' and attention's products in
 * bf16 with fp32 accumulation, every other op fp32 (cpu_bf16.c); or NULL
 * where this build or processor cannot, with the reason in why. */
const struct backend *backend_cpu_bf16(const char **why);

#endif
