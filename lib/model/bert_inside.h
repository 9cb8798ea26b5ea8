/* The inside of struct bert (bert.h), for the files that make up the
 * model and none else: bert_graph.c, the parameters and the graph forward
 * and backward; bert_batch.c, the batch packed and uploaded; bert_reg.c,
 * the regularisers beyond dropout. */
#ifndef TS_BERT_INSIDE_H
#define TS_BERT_INSIDE_H
#include "backend/backend.h"
#include "model/bert.h"
#include <stddef.h>
#include <stdint.h>

/* BERT's [PAD]: HF's padding_idx, whose word embedding starts at zero and
 * gets no gradient from the embedding lookup. */
enum { IGNORE_LABEL = -100 };

struct layer_weights {
	float *qkv_w, *qkv_b;      /* query, key, value stacked: [3C, C], [3C] */
	float *attn_out_w, *attn_out_b, *attn_ln_w, *attn_ln_b;
	float *ffn_in_w, *ffn_in_b, *ffn_out_w, *ffn_out_b, *ffn_ln_w, *ffn_ln_b;
	float *end;                /* past the layer's last tensor */
};

/* Pointers into the backend's flat parameter buffer, or the same places in
 * its grads. */
struct weights {
	float *word, *pos, *type, *emb_ln_w, *emb_ln_b;
	float *proj_w, *proj_b;    /* embeddings narrower than hidden: [C, E], [C]; else NULL */
	float *emb_end;            /* past the embeddings' last tensor */
	struct layer_weights *layer;
	float *pool_w, *pool_b;                             /* pooled tasks */
	float *cls_w, *cls_b;                               /* all but mlm */
	float *tr_w, *tr_b, *tr_ln_w, *tr_ln_b, *decoder_b; /* mlm */
};

/* What a layer's backward needs from its forward. R rows are computed after
 * the attention: all N, or in the last layer only the M the head reads.
 * What feeds a product is in the backend's acts (backend.h): in them only,
 * or (the LayerNorms' outputs, which the residual stream carries on) beside
 * its fp32, as *_low, the fp32 itself where an act is a float. */
struct layer_acts {
	struct act *qkv;                     /* [N, 3C]; last layer: K|V [N, 2C], Q [M, C] */
	float *att_state;                    /* what the attention keeps for backward */
	struct act *ctx;                     /* [R, C] attention output per head */
	float *attn_sum, *attn_mean, *attn_rstd, *attn_ln; /* residual sum, LN */
	struct act *attn_low;
	struct act *ffn_pre, *ffn_act;       /* [R, F] before and after GELU */
	float *ffn_sum, *ffn_mean, *ffn_rstd, *out;        /* out: next layer's input */
	struct act *out_low;
};

/* The rows a layer computes after attention: all, or the head's. */
struct layer_rows {
	int R;
	const int32_t *rows;       /* NULL: all N */
	const int32_t *q_start;    /* B+1 offsets of each sequence's rows in rows */
	const int64_t *p_start;    /* B+1 numbers of each sequence's first probability */
};

/* The head over M gathered rows: pooled tasks M = B ([CLS] rows), the
 * others M = labelled. */
struct head_acts {
	const float *in;       /* [M, C] final hidden states of the rows */
	const struct act *in_low;   /* the same in acts */
	struct act *space;     /* [M, C] acts: the last product's input when made here */
	const struct act *last_in;  /* that input: act, or mlm's norm, in acts */
	float *dropped_in;     /* [M, C] pooled, RoBERTa's: dropout of in */
	struct act *dropped_space;  /* [M, C] acts: that in acts, where made here */
	const struct act *dense_in; /* the pooler's input: in, or dropped_in, in acts */
	float *dense;          /* [M, C] pooled: tanh(pooler) */
	struct act *pre;       /* [M, C] mlm: the transform before GELU ([M, E]);
				* pooled, ELECTRA's: the dense before GELU */
	float *act;            /* [M, C] pooled: dropout of it; tokcls: dropout of in;
				* mlm: GELU of pre */
	float *norm, *mean, *rstd; /* mlm: the transform's LayerNorm */
	float *logits, *dlogits;   /* [M, bert_logit_width] */
	float *lse;            /* [M] */
	float *kl_lse;         /* [M] of the soft loss */
};

struct acts {
	/* the embeddings' sum and LayerNorm, [N, E]; emb_out, the encoder's
	 * input [N, C]: that LayerNorm's output after dropout, or its
	 * projection (proj_in, in acts proj_low, and the backward's dproj) */
	float *emb_sum, *emb_mean, *emb_rstd, *emb_out;
	float *proj_in, *dproj;
	struct act *proj_space;
	const struct act *proj_low;
	struct act *emb_space;      /* [N, C] acts of emb_out where they are not floats */
	const struct act *emb_low;  /* emb_out in acts, after dropout and perturbation */
	struct layer_acts *layer;
	float *rows_in;        /* [M, C] the last layer's input at the head's rows;
				* with mean pooling, the pooled rows */
	float *rows_stream;    /* [M, C] pre-norm: the residual stream at those rows */
	struct act *rows_space;     /* [M, C] acts */
	const struct act *rows_low; /* rows_in in acts */
	struct head_acts head;
	/* F zeros where the backward makes GELU's output again (struct
	 * shared_acts), else NULL */
	float *gelu_zero_bias;
	/* activation gradients, shared by all layers */
	float *dh, *dctx, *dffn, *dhead, *dhead_in;
	float *ds, *dtmp;      /* pre-norm: the residual stream's gradient, and a scratch */
	struct act *dqkv;           /* [N, 3C] acts */
	/* in acts: dffn's gradient through GELU (dffn itself where an act is
	 * a float); a residual branch's; space for the head's logits' and
	 * dhead's */
	struct act *dffn_low, *dbranch, *dlogits_space, *dhead_low;
};

/* A buffer in the backend's memory that grows to fit. */
struct on_backend {
	void *p;
	size_t cap;
};

/* The packed batch as the ops read it: the host arrays themselves on a host
 * backend. */
struct batch_arrays {
	const int32_t *ids, *types, *positions, *rows, *labels, *kv_start, *q_start;
	const int32_t *head_pos;   /* the positions of the head's rows */
	const int64_t *p_all, *p_head;
	const uint8_t *mask;
	const float *targets;
};

struct bert {
	struct bert_config c;
	const struct backend *be;
	size_t numel;
	float *dparams, *dgrads;   /* in the backend's memory */
	float *params, *grads;     /* their host copies: the same buffers on a host backend */
	/* in the backend's memory: [0] the summed loss of the forwards since
	 * bert_take_loss, [1] where the loss of a forward nobody reads goes
	 * (VAT's probes); loss_to points at one of them */
	double *loss, *loss_to;
	struct weights w, g;       /* into dparams and dgrads */
	/* stand_in floats of zeros, and after them as many of sink: the
	 * weights and gradients of what the family lacks (bert_graph.c) */
	float *zeros;
	size_t stand_in;
	struct tensor_ref *tensors; /* into params */
	int ntensors;

	int recompute;             /* keep only the layers' outputs (bert_set_recompute) */
	int forward_only;          /* no backward (bert_set_forward_only) */
	float smoothing;           /* bert_set_label_smoothing */
	int frozen_layers, frozen_embeddings;   /* bert_set_frozen */
	float hard, soft, temp;    /* bert_set_soft_loss */
	struct on_backend targets_soft;   /* [targets_rows, width]: the distribution to learn */
	int targets_rows;
	float rdrop;               /* bert_set_rdrop */
	int doubled;               /* the last forward ran its batch twice (R-Drop) */
	int32_t *twice_ids, *twice_types, *twice_labels;
	uint8_t *twice_mask;
	size_t twice_ids_cap, twice_types_cap, twice_labels_cap, twice_mask_cap;
	const float *perturbation; /* VAT: [N, C] added to the embeddings' output, or NULL */
	float *input_grad;         /* VAT: a backward's gradient of that output goes here */
	struct on_backend vat_r, vat_g, vat_grads;   /* the perturbation, its gradient, scratch grads */
	struct on_backend vat_p;   /* the probe's own predictions, made in fp32 */
	struct layer_weights *vat_layers;
	int graphs;                /* bert_set_graphs */
	long graph_runs[GRAPH_REPLAYED + 1];   /* bert_train_pass's passes by how they ran */
	void (*bucket_done)(void *ctx, int bucket);   /* bert_set_bucket_hook */
	void *bucket_ctx;

	/* the last forward's batch, packed: B sequences in N rows, the longest
	 * T */
	int B, T, N, M, train;
	int predicted;             /* of the M head rows, those with a label (not a slot's padding) */
	int packed;                /* of the N rows, the sequences' (kv_start[B]); padding after */
	int head_slots;            /* bert_set_head_slots */
	int pad_rows;              /* bert_set_pad_rows */
	int holes, empty;          /* struct attention's: in all rows; in the head's */
	int shared;                /* its layers share their activations */
	uint64_t dropout_seed;
	int32_t *ids, *types, *positions, *rows, *labels, *kv_start, *q_start, *head_pos;
	int64_t *p_all, *p_head;
	uint8_t *mask;
	float *targets;            /* reg: M values; multi: M*L */
	size_t ids_cap, types_cap, positions_cap, rows_cap, labels_cap, kv_start_cap,
		q_start_cap, head_pos_cap, p_all_cap, p_head_cap, mask_cap, targets_cap;
	struct batch_arrays d;
	struct on_backend d_ids, d_types, d_positions, d_rows, d_labels, d_kv_start, d_q_start,
		d_head_pos, d_p_all, d_p_head, d_mask, d_targets;

	struct acts a;
	struct on_backend work;    /* every activation, carved into a */
	/* the parameters that products take, in acts, made at the start of
	 * each forward (bert_graph.c: first_weight_in_acts): the parameters themselves
	 * where an act is a float */
	const struct act *weight_acts;
	struct on_backend weight_acts_space;
	int weight_acts_kept;      /* a forward-only model's, made once (bert_push unsets) */
	float *logits;             /* a host copy of the last logits (not on a host backend) */
	size_t logits_cap;
};

/* Walks the parameters in their fixed order, placing each at the next free
 * float of base; with a list, also names them. Listing order is memory order,
 * so the tensors tile bert_params() exactly. */
struct layout {
	float *base;
	size_t used;
	struct tensor_ref *list;
	int count;
};

/* Places (and with a list, names) the parameters of c from l->base on, in
 * their fixed order, pointing w at them. */
void bert_lay_out(struct layout *l, const struct bert_config *c, struct weights *w);
/* Points every weight x lacks (no token types, no biases in the family)
 * at with: m's row of zeros for its weights, its sink for its gradients. */
void bert_stand_in(const struct bert *m, struct weights *x, float *with);
/* b's memory on the backend, grown to bytes (on the host, to twice what it
 * was at least); never shrinks. */
void *bert_fit(const struct backend *be, struct on_backend *b, size_t bytes);
/* Grows the workspace to the kept batch's size on the model's backend and
 * carves the activations from it. */
void bert_reserve(struct bert *m);
/* Checks the batch, packs it into m and puts it where the ops read it. */
void bert_take_batch(struct bert *m, const struct bert_batch *b);
/* The forward of the kept batch from its embeddings (plus a perturbation)
 * through the head; adds its summed loss into *m->loss_to. */
void bert_run_forward(struct bert *m);
/* b with each sequence twice: the B of b, then the same B again (R-Drop). */
struct bert_batch bert_twice(struct bert *m, const struct bert_batch *b);
#endif
