#include "model/family.h"
#include <stddef.h>
#include <string.h>

static const struct rename bert_names[] = { { NULL, NULL, 0 } };

/* RoBERTa's heads: the classification head (dense, tanh, out_proj, no
 * pooler) and lm_head; its encoder under "roberta." */
static const struct rename roberta_names[] = {
	{ "bert.pooler.dense.", "classifier.dense.", 1 },
	{ "classifier.", "classifier.out_proj.", 1 },
	{ "cls.predictions.transform.dense.", "lm_head.dense.", 0 },
	{ "cls.predictions.transform.LayerNorm.", "lm_head.layer_norm.", 0 },
	{ "cls.predictions.bias", "lm_head.bias", 0 },
	{ "bert.", "roberta.", 0 },
	{ NULL, NULL, 0 },
};

/* DistilBERT's heads (pre_classifier, ReLU, classifier; vocab_transform,
 * vocab_layer_norm, vocab_projector) and layers (q_lin ... output_layer_norm);
 * its encoder under "distilbert.", the layers under "transformer.". */
static const struct rename distilbert_names[] = {
	{ "bert.pooler.dense.", "pre_classifier.", 1 },
	{ "cls.predictions.transform.dense.", "vocab_transform.", 0 },
	{ "cls.predictions.transform.LayerNorm.", "vocab_layer_norm.", 0 },
	{ "cls.predictions.bias", "vocab_projector.bias", 0 },
	{ "bert.encoder.layer.", "distilbert.transformer.layer.", 0 },
	{ "bert.", "distilbert.", 0 },
	{ NULL, NULL, 0 },
};

static const struct layer_rename distilbert_layer_names[] = {
	{ "attention.self.query.", "attention.q_lin.", 0 },
	{ "attention.self.key.", "attention.k_lin.", 0 },
	{ "attention.self.value.", "attention.v_lin.", 0 },
	{ "attention.output.dense.", "attention.out_lin.", 0 },
	{ "attention.output.LayerNorm.", "sa_layer_norm.", 0 },
	{ "intermediate.dense.", "ffn.lin1.", 0 },
	{ "output.dense.", "ffn.lin2.", 0 },
	{ "output.LayerNorm.", "output_layer_norm.", 0 },
	{ NULL, NULL, 0 },
};

/* ELECTRA's heads: the classification head (dropout, dense, GELU, dropout,
 * out_proj) and the generator's (dense to the embedding size, GELU,
 * LayerNorm, generator_lm_head tied); its encoder under "electra.", with
 * embeddings_project where the embeddings are narrower than the layers. */
static const struct rename electra_names[] = {
	{ "bert.pooler.dense.", "classifier.dense.", 1 },
	{ "classifier.", "classifier.out_proj.", 1 },
	{ "cls.predictions.transform.dense.", "generator_predictions.dense.", 0 },
	{ "cls.predictions.transform.LayerNorm.", "generator_predictions.LayerNorm.", 0 },
	{ "cls.predictions.bias", "generator_lm_head.bias", 0 },
	{ "bert.", "electra.", 0 },
	{ NULL, NULL, 0 },
};

/* ModernBERT's: its encoder under "model.", the head (dense, GELU, norm)
 * of every task under "head.", the MLM decoder's bias "decoder.bias". */
static const struct rename modernbert_names[] = {
	{ "cls.predictions.transform.dense.", "head.dense.", 0 },
	{ "cls.predictions.transform.LayerNorm.", "head.norm.", 0 },
	{ "cls.predictions.bias", "decoder.bias", 0 },
	{ "bert.embeddings.word_embeddings.", "model.embeddings.tok_embeddings.", 0 },
	{ "bert.embeddings.LayerNorm.", "model.embeddings.norm.", 0 },
	{ "bert.encoder.layer.", "model.layers.", 0 },
	{ NULL, NULL, 0 },
};

static const struct layer_rename modernbert_layer_names[] = {
	{ "attention.self.qkv.", "attn.Wqkv.", 0 },
	{ "attention.output.dense.", "attn.Wo.", 0 },
	{ "attention.output.LayerNorm.", "mlp_norm.", 0 },
	{ "intermediate.dense.", "mlp.Wi.", 0 },
	{ "output.dense.", "mlp.Wo.", 0 },
	{ "output.LayerNorm.", "attn_norm.", 1 },
	{ NULL, NULL, 0 },
};

#define BERT_KEYS "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", \
	"type_vocab_size", "layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob", \
	"hidden_act", NULL
static const struct config_keys bert_keys = { BERT_KEYS, NULL, "classifier_dropout", 1e-12 };
static const struct config_keys electra_keys = { BERT_KEYS, "embedding_size", "classifier_dropout", 1e-12 };

/* ModernBERT's embedding_dropout is its mlp_dropout to TopSpin (written by
 * hfconfig.c) */
static const struct config_keys modernbert_keys = {
	"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", NULL, "norm_eps",
	"mlp_dropout", "attention_dropout", "hidden_activation", NULL, NULL, "classifier_dropout", 1e-5,
};

static const struct config_keys distilbert_keys = {
	"dim", "n_layers", "n_heads", "hidden_dim", NULL, NULL, "dropout", "attention_dropout",
	"activation", "sinusoidal_pos_embds", NULL, "seq_classif_dropout", 0,
};

static const struct family families[FAMILY_COUNT] = {
	[FAMILY_BERT] = { "bert", "Bert", "bert.", .type_vocab = 2, .ln_eps = 1e-12f, .max_pos = 512, .dropout = 0.1,
			  .attn_out_dropout = 1, .biases = 1,
			  .pooled_act = POOLED_TANH, .keys = &bert_keys, .renames = bert_names },
	[FAMILY_ROBERTA] = { "roberta", "Roberta", "roberta.", .pad_id = 1, .positions_after_pad = 1,
			     .pooled_dropout_first = 1, .type_vocab = 1, .ln_eps = 1e-5f, .max_pos = 514, .dropout = 0.1,
			     .attn_out_dropout = 1, .biases = 1, .pooled_act = POOLED_TANH, .keys = &bert_keys,
			     .renames = roberta_names },
	[FAMILY_XLM_ROBERTA] = { "xlm-roberta", "XLMRoberta", "roberta.", .pad_id = 1, .positions_after_pad = 1,
				 .pooled_dropout_first = 1, .type_vocab = 1, .ln_eps = 1e-5f, .max_pos = 514, .dropout = 0.1,
				 .attn_out_dropout = 1, .biases = 1, .pooled_act = POOLED_TANH, .keys = &bert_keys,
				 .renames = roberta_names },
	[FAMILY_DISTILBERT] = { "distilbert", "DistilBert", "distilbert.", .ln_eps = 1e-12f, .max_pos = 512, .dropout = 0.1,
				.biases = 1, .pooled_act = POOLED_RELU, .keys = &distilbert_keys,
				.renames = distilbert_names, .layer_renames = distilbert_layer_names },
	[FAMILY_ELECTRA] = { "electra", "Electra", "electra.", .pooled_dropout_first = 1, .type_vocab = 2,
			     .ln_eps = 1e-12f, .max_pos = 512, .dropout = 0.1, .attn_out_dropout = 1, .biases = 1,
			     .pooled_act = POOLED_GELU, .keys = &electra_keys,
			     .renames = electra_names },
	[FAMILY_MODERNBERT] = { "modernbert", "ModernBert", "model.", .pad_id = 50283, .ln_eps = 1e-5f,
				.max_pos = 8192, .dropout = 0.0, .attn_out_dropout = 1, .prenorm = 1, .rotary = 1, .geglu = 1,
				.qkv_one = 1, .head_transform = 1, .final_norm = "model.final_norm.",
				.rope_global = 160000.0f, .rope_local = 10000.0f, .local_window = 128,
				.global_every = 3,
				.keys = &modernbert_keys, .renames = modernbert_names,
				.layer_renames = modernbert_layer_names },
};

const struct family *family_of(enum family_id id)
{
	return &families[id];
}

int family_by_type(const char *type)
{
	for (int i = 0; i < FAMILY_COUNT; i++)
		if (!strcmp(families[i].model_type, type))
			return i;
	return -1;
}

const char *family_types(void)
{
	static char all[FAMILY_COUNT * 16];
	if (!all[0])
		for (int i = 0; i < FAMILY_COUNT; i++) {
			if (i)
				strcat(all, ", ");
			strcat(all, families[i].model_type);
		}
	return all;
}

int family_first_position(enum family_id id, int pad_id)
{
	return families[id].positions_after_pad ? pad_id + 1 : 0;
}
