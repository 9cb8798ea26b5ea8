/* The encoder families TopSpin trains: one encoder (bert_graph.c), and for
 * each family what its checkpoints call things and the ways it differs, as
 * data. BERT's names are the model's own (bert_tensors); a family renames
 * them by prefix. */
#ifndef TS_FAMILY_H
#define TS_FAMILY_H

enum family_id { FAMILY_BERT, FAMILY_ROBERTA, FAMILY_XLM_ROBERTA, FAMILY_COUNT };

/* A prefix of BERT's tensor names and the family's for it; pooled: only in
 * a model whose head reads the first token (cls, reg, multi). */
struct rename {
	const char *from, *to;
	int pooled;
};

struct family {
	const char *model_type;    /* config.json's */
	const char *classes;       /* what transformers' class names begin with: "Bert" */
	const char *encoder;       /* the encoder's tensors' prefix, "bert." */
	int pad_id;                /* pad_token_id where config.json has none */
	int positions_after_pad;   /* positions count from pad_token_id + 1 (RoBERTa's) */
	int pooled_dropout_first;  /* dropout on the pooled head's input too (RoBERTa's) */
	int type_vocab;            /* a new model's token types */
	float ln_eps;              /* a new model's LayerNorm epsilon */
	int max_pos;               /* a new model's positions (512 tokens' worth) */
	const struct rename *renames;   /* the first that applies renames; {NULL} ends */
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
