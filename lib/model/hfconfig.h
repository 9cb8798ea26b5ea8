/* config.json of a Hugging Face model dir of a family TopSpin trains, to and from struct bert_config. */
#ifndef TS_HFCONFIG_H
#define TS_HFCONFIG_H
#include "model/bert.h"

/* Reads model_type (the family, family.h; bert where absent), and the HF
 * keys, under the family's names (DistilBERT's dim, n_layers, ...: its
 * struct config_keys) where BERT's differ: vocab_size, hidden_size, num_hidden_layers,
 * num_attention_heads, intermediate_size, max_position_embeddings (required),
 * type_vocab_size, layer_norm_eps, hidden_dropout_prob,
 * attention_probs_dropout_prob (HF's defaults when absent), hidden_act (must be
 * "gelu"), architectures and problem_type (set c->task: BertForMaskedLM and
 * BertForPreTraining mlm, BertForTokenClassification tokcls, problem_type
 * regression (or num_labels 1 of a BertForSequenceClassification) reg,
 * multi_label_classification multi, else cls), id2label/label2id and
 * num_labels (c->num_labels; HF's default 2).
 * If labels is not NULL, *labels gets the id2label names ordered by id (each
 * and the array malloc'd) and *nlabels their count, 0 without id2label.
 * Dies "PATH: why" naming the key on anything missing, mistyped, unsupported
 * or out of range (the sizes of a model bert.h's BERT_MAX_* allow). */
void hfconfig_read(const char *path, struct bert_config *c, char ***labels, int *nlabels);

/* Writes config.json atomically, with every key transformers needs to load the
 * model unchanged as the family's ForSequenceClassification (cls, reg and
 * multi, each with its problem_type), ForTokenClassification (tokcls) or
 * ForMaskedLM (mlm): BertForMaskedLM, DistilBertForTokenClassification, ... labels names the classes (nlabels must equal
 * c->num_labels but for mlm); with nlabels 0 the classes are named
 * LABEL_0... as transformers does. */
void hfconfig_write(const char *path, const struct bert_config *c, char *const *labels, int nlabels);

/* Frees what hfconfig_read returned in *labels. */
void hfconfig_free_labels(char **labels, int nlabels);
#endif
