/* The encoder families TopSpin trains: one encoder (bert_graph.c), and for
 * each family what its checkpoints call things and the ways it differs, as
 * data. BERT's names are the model's own (bert_tensors); a family renames
 * them by prefix. */
#ifndef TS_FAMILY_H
#define TS_FAMILY_H

enum family_id {
	FAMILY_BERT, FAMILY_ROBERTA, FAMILY_XLM_ROBERTA, FAMILY_DISTILBERT, FAMILY_ELECTRA, FAMILY_MODERNBERT,
	FAMILY_COUNT
};

/* The activation of the pooled head's dense layer: BERT's pooler tanh,
 * DistilBERT's pre_classifier ReLU, ELECTRA's classifier GELU. */
enum pooled_act { POOLED_TANH, POOLED_RELU, POOLED_GELU };

/* A prefix of BERT's tensor names and the family's for it; pooled: only in
 * a model whose head reads the first token (cls, reg, multi). */
struct rename {
	const char *from, *to;
	int pooled;
};

/* A prefix of a layer's tensor names after "bert.encoder.layer.N." and
 * the family's for it; next: the family's name is layer N + 1's (its
 * last layer's: the family's final_norm). */
struct layer_rename {
	const char *from, *to;
	int next;
};

/* config.json's keys for the sizes and rates BERT calls hidden_size,
 * num_hidden_layers, ...; types and ln_eps NULL where the family has no
 * token types or a fixed epsilon (its ln_eps); off: a key that must be
 * false where present, NULL for none; emb: the embeddings' width where it
 * may differ from the hidden size (ELECTRA's embedding_size), else NULL. */
struct config_keys {
	const char *hidden, *layers, *heads, *ffn, *types, *ln_eps, *hidden_dropout, *attn_dropout,
		*act, *off, *emb;
	const char *cls_dropout;   /* the head's input's; null or absent: the hidden one's */
	double ln_eps_default;     /* where ln_eps is absent: its config class's */
};

struct family {
	const char *model_type;    /* config.json's */
	const char *classes;       /* what transformers' class names begin with: "Bert" */
	const char *encoder;       /* the encoder's tensors' prefix, "bert." */
	int pad_id;                /* pad_token_id where config.json has none */
	int positions_after_pad;   /* positions count from pad_token_id + 1 (RoBERTa's) */
	int pooled_dropout_first;  /* dropout on the pooled head's input too (RoBERTa's, ELECTRA's) */
	int type_vocab;            /* a new model's token types; 0: the family has none */
	float ln_eps;              /* a new model's LayerNorm epsilon */
	int max_pos;               /* a new model's positions (512 tokens' worth) */
	double dropout;            /* a new model's, and where config.json gives none */
	int attn_out_dropout;      /* dropout on the attention's output (all but DistilBERT) */
	/* ModernBERT's: each layer's LayerNorms before its blocks, the residual
	 * stream their sums (a layer's last LayerNorm is the next one's first,
	 * the last layer's the final norm), the first layer's attention on the
	 * embeddings as they are; rotary positions (no position table); the
	 * MLP a GeGLU; no biases but the classifier's and the decoder's; Q, K
	 * and V one tensor; the heads of every task through the MLM's
	 * transform (dense, GELU, LayerNorm) */
	int prenorm, rotary, geglu, biases, qkv_one, head_transform;
	const char *final_norm;    /* prenorm: the last LayerNorm's name */
	/* rotary: a new model's (and config.json's defaults) rotary bases,
	 * local window and global layers' spacing (bert.h) */
	float rope_global, rope_local;
	int local_window, global_every;
	enum pooled_act pooled_act;
	const struct config_keys *keys;
	const struct rename *renames;   /* the first that applies renames; {NULL} ends */
	const struct layer_rename *layer_renames;   /* the same in a layer; NULL: none */
};

const struct family *family_of(enum family_id id);
/* The family whose config.json model_type is type: its id, or -1 where
 * TopSpin trains none such. */
int family_by_type(const char *type);
/* The model_types TopSpin trains, for messages: "bert, roberta, ...". */
const char *family_types(void);
/* The position of a sequence's first token in family id with pad_id. */
int family_first_position(enum family_id id, int pad_id);
#endif
