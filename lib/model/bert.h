/* The BERT encoder with Hugging Face semantics and its heads, on a
 * backend (backend.h): its parameters, gradients and activations live in the
 * backend's memory.
 * Dimension letters: B batch, T sequence length, C hidden size, H heads,
 * F feed-forward size, V vocab size, L labels. */
#ifndef TS_BERT_H
#define TS_BERT_H
#include "backend/backend.h"
#include "format/tensor.h"
#include "model/family.h"
#include <stddef.h>
#include <stdint.h>

/* The head and its loss: sequence classification (softmax cross-entropy),
 * masked LM, regression (one output, squared error), multi-label
 * classification (a sigmoid per label, binary cross-entropy), and token
 * classification (softmax cross-entropy at labelled tokens). */
enum bert_task { TASK_CLS, TASK_MLM, TASK_REG, TASK_MULTI, TASK_TOKCLS };

/* The largest model: the ranges of ts-train's options and of a config.json's
 * sizes. Within them (and vocab, type_vocab and num_labels below 2^31) a
 * model has fewer than 2^50 parameters, so no count of them or of their
 * bytes overflows. */
enum {
	BERT_MAX_LAYERS = 1000, BERT_MAX_HIDDEN = 65536, BERT_MAX_HEADS = 65536,
	BERT_MAX_FFN = 262144, BERT_MAX_POS = 32768,
};

struct bert_config {
	int vocab, hidden, layers, heads, ffn, max_pos, type_vocab;
	int emb;                   /* the embeddings' width, projected to hidden where
				    * other (ELECTRA's embedding_size); 0: hidden */
	float ln_eps;
	float hidden_dropout, attn_dropout;
	float cls_dropout;         /* on the head's input: the classifier's, and the pooled
				    * head's where its family drops that too */
	enum bert_task task;
	int num_labels;            /* classes of cls, multi and tokcls; 1 for reg */
	enum family_id family;        /* the checkpoints' names and positions (family.h) */
	/* a rotary family's (ModernBERT's): the bases of its global and local
	 * layers, the keys a local layer's query sees (HF's local_attention:
	 * those at most half of it away), every how many layers one is global
	 * (layer l when l % global_every == 0); mean_pool: the pooled head reads
	 * the mean of each sequence's real rows, not its first */
	float rope_global, rope_local;
	int local_window, global_every, mean_pool;
	int pad_id;                /* the pad token: no gradient reaches its embedding */
	int untied;                /* read from a config.json whose tie_word_embeddings is
				    * false: its MLM decoder is not the word embeddings,
				    * which TopSpin's is */
};

struct bert_batch {
	int B, T;
	const int32_t *ids;        /* B*T token ids, padded with [PAD] */
	const int32_t *types;      /* B*T token type ids, or NULL for all 0; a family
				    * without token types ignores them */
	const uint8_t *mask;       /* B*T: 1 real token, 0 padding */
	const int32_t *labels;     /* cls: B class ids; mlm, tokcls: B*T, -100 = not
				    * predicted; reg, multi: unused */
	const float *targets;      /* reg: B values; multi: B*L, each in [0, 1] */
};

struct bert;

/* Dies (exit 1) on a config out of range, or when the parameters and their
 * gradients would not fit in be's memory, before allocating them. */
struct bert *bert_new(const struct bert_config *c, const struct backend *be);
void bert_free(struct bert *m);
const struct bert_config *bert_config_of(const struct bert *m);

/* Parameters and gradients are each one flat fp32 buffer with the same
 * layout, in the backend's memory. bert_params and bert_grads are their host
 * copies, for files and tests: bert_pull brings both up to date, bert_push
 * gives the parameters back to the backend. On the CPU the copies are the
 * buffers themselves and both calls do nothing. */
float *bert_params(struct bert *m);
float *bert_grads(struct bert *m);
void bert_pull(struct bert *m);
void bert_push(struct bert *m);
const struct backend *bert_backend(const struct bert *m);
/* The buffers in the backend's memory, for the optimizer and for summing
 * gradients over processes. */
float *bert_backend_params(struct bert *m);
float *bert_backend_grads(struct bert *m);
void bert_zero_grads(struct bert *m);
/* The L2 norm of all gradients, summed in double in a fixed order. */
double bert_grad_norm(const struct bert *m);
/* The sum of squares of gradients [lo, hi) of the flat buffer. */
double bert_grad_sum_squares(const struct bert *m, size_t lo, size_t hi);
void bert_scale_grads(struct bert *m, float s);
size_t bert_numel(const struct bert *m);
/* Whether the task's head reads the [CLS] row (cls, reg, multi) rather
 * than labelled tokens (mlm, tokcls). */
static inline int bert_task_pooled(enum bert_task t)
{
	return t == TASK_CLS || t == TASK_REG || t == TASK_MULTI;
}
/* The task's name on the command line: cls, mlm, reg, multi, tokcls. */
const char *task_name(enum bert_task task);

/* The width of the embeddings (and of the MLM head's transform, whose
 * decoder they are). */
static inline int bert_emb_width(const struct bert_config *c)
{
	return c->emb ? c->emb : c->hidden;
}

/* The longest sequence the model takes: its positions, less those its
 * family keeps before the first (RoBERTa's, up to its pad id). */
static inline int bert_positions(const struct bert_config *c)
{
	return c->max_pos - family_first_position(c->family, c->pad_id);
}

/* Logits a predicted row has: the classes, 1 for reg, the vocab for mlm. */
static inline int bert_logit_width(const struct bert_config *c)
{
	return c->task == TASK_MLM ? c->vocab : c->task == TASK_REG ? 1 : c->num_labels;
}
/* The parameters a model of config c would have, without making it (dies
 * on a config out of range). */
size_t bert_config_numel(const struct bert_config *c);
/* Bytes of the activations, their gradients and the ops' scratch on backend
 * be for a batch of B sequences of T tokens with M rows predicted (and
 * recompute as bert_set_recompute's), counted in double so that nothing
 * overflows: at most what such a batch takes. */
double bert_batch_bytes(const struct bert_config *c, const struct backend *be, int B, int T,
			int M, int recompute);
/* Fills out[] (if not NULL) with every parameter under its HF name
 * (e.g. "bert.encoder.layer.0.attention.self.query.weight", "classifier.weight",
 * "cls.predictions.bias"), in a fixed order, pointing into the host copy bert_params();
 * returns the count. Tied weights (the MLM decoder) are listed once, as the embedding. */
int bert_tensors(struct bert *m, struct tensor_ref *out);
/* Whether a parameter takes weight decay (not biases, not LayerNorm). */
int bert_decays(const char *name);

/* Activation recomputation: on, a forward keeps only each layer's output
 * and the backward runs each layer's forward again before its backward
 * (about a third more work for a layer's worth of activations instead of
 * all layers'); the gradients are the same bits, dropout included. Takes
 * effect at the next forward. */
void bert_set_recompute(struct bert *m, int on);
/* A model that only scores (ts-eval's, a teacher's): its forwards keep
 * nothing for a backward, which it then refuses, so ops fused past what a
 * backward reads run where the backend has them (bf16 on the CPU: the
 * feed-forward's GELU in its product); its layers share one set of
 * activations, and its weights' copy in acts is made once, until the next
 * bert_push. */
void bert_set_forward_only(struct bert *m);

/* Freezing: the lowest layers of the encoder (and the embeddings, when
 * embeddings is set) get zero gradients, and the backward stops where
 * nothing below needs one. With mlm, the decoder tied to frozen word
 * embeddings takes no gradient either. */
void bert_set_frozen(struct bert *m, int layers, int embeddings);

/* Label smoothing e of the cross-entropy of cls, tokcls and mlm in
 * training (1 - e on the label, e spread over all classes); 0 for none. */
void bert_set_label_smoothing(struct bert *m, float e);

/* Learning from a distribution as well as from the labels (cls, tokcls,
 * mlm): a training forward's loss becomes hard times the cross-entropy plus
 * soft T^2 KL(targets ‖ softmax(logits / T)) for temperature T, the
 * targets given by bert_targets_from before the forward. soft 0: none. */
void bert_set_soft_loss(struct bert *m, float hard, float soft, float temp);
/* The targets: softmax(logits / temp) of teacher's last forward, a model
 * of the same task and outputs (distillation); on m's backend. */
void bert_targets_from(struct bert *m, const struct bert *teacher, float temp);

/* R-Drop (cls, tokcls): a training forward runs every sequence twice, with
 * different dropout, and its loss is half the summed cross-entropy of both
 * plus alpha times KL(p ‖ q) + KL(q ‖ p) of each pair: per item, the mean
 * cross-entropy and alpha times the mean symmetric divergence. 0: none. */
void bert_set_rdrop(struct bert *m, float alpha);

/* Virtual adversarial training, after the forward and backward of a
 * training batch: from a random direction (from seed), iters power
 * iterations of step xi find the perturbation of the embeddings' output, of
 * norm eps for each sequence, that most changes the model's predictions;
 * the model then learns to keep them: ADDS the gradient of scale times
 * KL(p ‖ p_perturbed), p the batch's own predictions, and adds that KL
 * summed over the predicted rows into the loss sum (bert_forward_sum).
 * Softmax heads (cls, tokcls, mlm). On a backend coarser than fp32 (bf16)
 * the power iteration runs in fp32, from an fp32 forward of its own. */
void bert_vat(struct bert *m, float eps, float xi, int iters, uint64_t seed, float scale);
/* The bytes bert_vat adds to a batch's (bert_batch_bytes, same arguments):
 * its fp32 twin's activations where they take more than be's, a scratch
 * for the parameters' gradients, the perturbation and its gradient, the
 * probe's predictions and the targets. */
double bert_vat_bytes(const struct bert_config *c, const struct backend *be, int B, int T, int M,
		      int recompute);

/* Changes the dropout of hidden states (and of the head's input) and of
 * attention probabilities. */
void bert_set_dropout(struct bert *m, float hidden, float attn);

/* HF initialisation: normal(0, 0.02) weights, zero biases, LayerNorm 1/0;
 * pushed to the backend. */
void bert_init(struct bert *m, uint64_t seed);
/* The same values for the tensors whose names begin with prefix alone. */
void bert_init_tensors(struct bert *m, uint64_t seed, const char *prefix);

/* Forward pass; keeps what backward needs. Dropout is on when train is set,
 * drawn from dropout_seed alone (the same seed gives the same masks whatever
 * the thread count). Adds the summed loss over predicted items into the
 * model's loss sum, which stays in the backend's memory until
 * bert_take_loss, and sets *count to their number (cls, reg: B; multi: B*L;
 * mlm, tokcls: labels != -100). */
void bert_forward_sum(struct bert *m, const struct bert_batch *b, int train,
		      uint64_t dropout_seed, int64_t *count);
/* bert_forward_sum of a training batch and, when backward is set,
 * bert_backward(m, scale): on a backend with CUDA graphs, unless they are
 * off (bert_set_graphs), a pass whose shapes came before is replayed as one
 * graph; the results are the same bits. Returns a line for the log where the
 * backend gave up a graph, else NULL. */
const char *bert_train_pass(struct bert *m, const struct bert_batch *b, uint64_t dropout_seed,
			    int backward, float scale, int64_t *count);
/* CUDA graphs for bert_train_pass: on (as a model starts) or off. */
void bert_set_graphs(struct bert *m, int on);
/* The shapes of training passes made to come back, so that CUDA graphs
 * replay them. Head slots (cls, mlm, tokcls): the rows the head predicts
 * padded up to bert_head_slots with rows whose loss and gradient are zero.
 * Pad rows (n > 0): a batch's rows padded up to n (--batch-tokens) with
 * rows in no sequence, whose activations are finite and gradients zero.
 * The loss is the same up to the products' order of sums, but for the
 * dropout of the head rows (the last layer's attention, the classifier's),
 * whose draws the slots renumber. Both off as a model starts; not with
 * VAT, R-Drop or a teacher, whose losses cover every head row. */
void bert_set_head_slots(struct bert *m, int on);
void bert_set_pad_rows(struct bert *m, int n);
/* The rows a padded head has for rows predicted: a multiple of 64, and from
 * 1024 rows on their size class (size_class: at most an eighth more). */
int bert_head_slots(int rows);
/* bert_train_pass's passes so far that ran how (GRAPH_EAGER, GRAPH_CAPTURED,
 * GRAPH_REPLAYED). */
long bert_graph_runs(const struct bert *m, enum graph_done how);
/* The loss sum since the last take (a GPU's wait for its work); starts the
 * next at 0. */
double bert_take_loss(struct bert *m);
/* bert_forward_sum returning the forward's own summed loss, and leaving the
 * loss sum as it was. */
double bert_forward(struct bert *m, const struct bert_batch *b, int train,
		    uint64_t dropout_seed, int64_t *count);
/* Backward of scale * (summed loss) for the last forward; ADDS into the grads
 * so that micro-batches accumulate. */
void bert_backward(struct bert *m, float scale);
/* The gradient buffer in buckets, in the order a backward completes them:
 * the head's parameters, each encoder layer's from the last to the first,
 * the embeddings' (the MLM decoder's gradient goes to the word embeddings).
 * Fills bucket[i] with [lo, hi) of the flat buffer (when not NULL) and
 * returns the count, layers + 2. */
int bert_grad_buckets(const struct bert *m, size_t (*bucket)[2]);
/* done(ctx, i), when not NULL, hears from bert_backward as bucket i of the
 * grads is complete (never, in a backward with nothing predicted). */
void bert_set_bucket_hook(struct bert *m, void (*done)(void *ctx, int bucket), void *ctx);
/* Logits of the last forward, on the host, bert_logit_width a row: a row
 * per sequence (cls, reg, multi) or per labelled position in row-major
 * order (mlm, tokcls). */
const float *bert_logits(struct bert *m);
#endif
