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
	{ "attention.self.query.", "attention.q_lin." },
	{ "attention.self.key.", "attention.k_lin." },
	{ "attention.self.value.", "attention.v_lin." },
	{ "attention.output.dense.", "attention.out_lin." },
	{ "attention.output.LayerNorm.", "sa_layer_norm." },
	{ "intermediate.dense.", "ffn.lin1." },
	{ "output.dense.", "ffn.lin2." },
	{ "output.LayerNorm.", "output_layer_norm." },
	{ NULL, NULL },
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

#define BERT_KEYS "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", \
	"type_vocab_size", "layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob", \
	"hidden_act", NULL
static const struct config_keys bert_keys = { BERT_KEYS, NULL };
static const struct config_keys electra_keys = { BERT_KEYS, "embedding_size" };

static const struct config_keys distilbert_keys = {
	"dim", "n_layers", "n_heads", "hidden_dim", NULL, NULL, "dropout", "attention_dropout",
	"activation", "sinusoidal_pos_embds", NULL,
};

static const struct family families[FAMILY_COUNT] = {
	[FAMILY_BERT] = { "bert", "Bert", "bert.", 0, 0, 0, 2, 1e-12f, 512, 1, POOLED_TANH,
			  &bert_keys, bert_names, NULL },
	[FAMILY_ROBERTA] = { "roberta", "Roberta", "roberta.", 1, 1, 1, 1, 1e-5f, 514, 1, POOLED_TANH,
			     &bert_keys, roberta_names, NULL },
	[FAMILY_XLM_ROBERTA] = { "xlm-roberta", "XLMRoberta", "roberta.", 1, 1, 1, 1, 1e-5f, 514, 1,
				 POOLED_TANH, &bert_keys, roberta_names, NULL },
	[FAMILY_DISTILBERT] = { "distilbert", "DistilBert", "distilbert.", 0, 0, 0, 0, 1e-12f, 512, 0,
				POOLED_RELU, &distilbert_keys, distilbert_names, distilbert_layer_names },
	[FAMILY_ELECTRA] = { "electra", "Electra", "electra.", 0, 0, 1, 2, 1e-12f, 512, 1, POOLED_GELU,
			     &electra_keys, electra_names, NULL },
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
