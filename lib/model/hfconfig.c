#include "model/hfconfig.h"
#include "format/jsonwide.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* transformers' BertConfig defaults for the keys a config may leave out */
#define HF_TYPE_VOCAB 2
#define HF_NUM_LABELS 2
#define HF_ELECTRA_EMB 128   /* ElectraConfig's embedding_size */

/* Dies naming key's value as the file gives it (cut short if long) and what
 * it must be. */
static _Noreturn void bad_value(const char *path, const char *key, json_t *v, const char *must)
{
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
	die("%s: %s %.40s is not %s", path, key, text ? text : "", must);
}

/* A size from 1 to max; a required one must be there, else dflt. */
static int size_in(const char *path, json_t *cfg, const char *key, int required, int dflt, int max)
{
	json_t *v = json_object_get(cfg, key);
	if (!v) {
		if (required)
			die("%s: missing key %s", path, key);
		return dflt;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
		char must[64];
		snprintf(must, sizeof must, "an integer from 1 to %d", max);
		bad_value(path, key, v, must);
	}
	return (int)json_integer_value(v);
}

/* An index from 0 to below n, dflt where the key is absent or null. */
static int index_in(const char *path, json_t *cfg, const char *key, int dflt, int n)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v))
		return dflt;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n) {
		char must[64];
		snprintf(must, sizeof must, "an integer from 0 to %d", n - 1);
		bad_value(path, key, v, must);
	}
	return (int)json_integer_value(v);
}

static float number_in(const char *path, json_t *cfg, const char *key, double dflt,
		       double lo, double hi)
{
	json_t *v = json_object_get(cfg, key);
	if (!v)
		return (float)dflt;
	/* the float the model uses must be in range too: 0.99999999 is 1.0f */
	double d = json_number_value(v);
	if (!json_is_number(v) || d < lo || d >= hi || (float)d < lo || (float)d >= hi) {
		char must[64];
		snprintf(must, sizeof must, "a number in [%g, %g)", lo, hi);
		bad_value(path, key, v, must);
	}
	return (float)d;
}

/* Refuses a string key whose value is not the one this model implements. */
static void require_string(const char *path, json_t *cfg, const char *key, const char *want,
			   const char *why)
{
	json_t *v = json_object_get(cfg, key);
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), want)))
		die("%s: %s %s is not supported (only \"%s\"%s)", path, key,
		    json_is_string(v) ? json_string_value(v) : "(not a string)", want, why);
}

/* Whether a, an architecture, is the class of family f named so after its
 * prefix ("ForMaskedLM"). */
static int is_class(const char *a, const struct family *f, const char *head)
{
	size_t n = strlen(f->classes);
	return a && !strncmp(a, f->classes, n) && !strcmp(a + n, head);
}

/* The head of the architecture, and for sequence classification its
 * problem_type, or as transformers infers it: regression for one label. */
static enum bert_task task_of(const char *path, json_t *cfg, const struct family *f, int num_labels)
{
	json_t *arch = json_array_get(json_object_get(cfg, "architectures"), 0);
	const char *a = json_string_value(arch);
	/* ELECTRA's ForPreTraining is its discriminator, a head TopSpin does not train */
	if (is_class(a, f, "ForMaskedLM") || (is_class(a, f, "ForPreTraining") && f != family_of(FAMILY_ELECTRA)))
		return TASK_MLM;
	if (is_class(a, f, "ForTokenClassification"))
		return TASK_TOKCLS;
	json_t *pt = json_object_get(cfg, "problem_type");
	const char *p = json_string_value(pt);
	if (pt && !json_is_null(pt) && (!p || (strcmp(p, "regression") && strcmp(p, "single_label_classification") &&
					     strcmp(p, "multi_label_classification"))))
		die("%s: problem_type %s is not one of regression, single_label_classification and "
		    "multi_label_classification", path, p ? p : "(not a string)");
	if (p && !strcmp(p, "multi_label_classification"))
		return TASK_MULTI;
	if ((p && !strcmp(p, "regression")) || (!p && is_class(a, f, "ForSequenceClassification") && num_labels == 1))
		return TASK_REG;
	return TASK_CLS;
}

/* id2label as names ordered by id; checks ids 0..n-1 and agreement with label2id. */
static char **read_labels(const char *path, json_t *cfg, int *n)
{
	json_t *id2label = json_object_get(cfg, "id2label"), *label2id = json_object_get(cfg, "label2id");
	if (json_is_null(label2id))   /* as transformers writes it where id2label alone was given */
		label2id = NULL;
	if (label2id && !json_is_object(label2id))
		die("%s: label2id must be an object", path);
	if (json_is_null(id2label))
		id2label = NULL;
	if (!id2label) {
		*n = 0;
		return NULL;
	}
	if (!json_is_object(id2label))
		die("%s: id2label must be an object", path);
	*n = (int)json_object_size(id2label);
	char **names = xcalloc((size_t)*n + 1, sizeof *names);
	json_t *seen = json_object();
	const char *key;
	json_t *v;
	json_object_foreach(id2label, key, v) {
		char *end;
		errno = 0;
		long id = strtol(key, &end, 10);
		if (!*key || *end || errno || id < 0 || id >= *n || !json_is_string(v) || names[id])
			die("%s: id2label must map the ids 0..%d once each to names (at \"%s\")",
			    path, *n - 1, key);
		names[id] = xstrdup(json_string_value(v));
		if (json_object_get(seen, names[id]))
			die("%s: id2label names \"%s\" twice", path, names[id]);
		json_object_set_new(seen, names[id], json_true());
	}
	json_decref(seen);
	for (int id = 0; label2id && id < *n; id++) {
		json_t *back = json_object_get(label2id, names[id]);
		if (!json_is_integer(back) || json_integer_value(back) != id)
			die("%s: label2id disagrees with id2label on \"%s\"", path, names[id]);
	}
	return names;
}

/* The family config.json's model_type names (BERT's where it names none). */
static enum family_id family_in(const char *path, json_t *cfg)
{
	json_t *v = json_object_get(cfg, "model_type");
	if (!v)
		return FAMILY_BERT;
	int f = json_is_string(v) ? family_by_type(json_string_value(v)) : -1;
	if (f < 0)
		die("%s: model_type %s is not supported (only %s)", path,
		    json_is_string(v) ? json_string_value(v) : "(not a string)", family_types());
	return (enum family_id)f;
}

/* Refuses a boolean key that is not want where present. */
static void require_bool(const char *path, json_t *cfg, const char *key, int want)
{
	json_t *v = json_object_get(cfg, key);
	if (v && (!json_is_boolean(v) || json_is_true(v) != want))
		die("%s: %s must be %s", path, key, want ? "true" : "false");
}

/* A rotary base: rope_parameters' of the layer kind (transformers 5's
 * config.json), or the older key old, or dflt; old's null is if_null where
 * that is above 0 (transformers reads a null local_rope_theta as the
 * global base). */
static float rope_theta(const char *path, json_t *cfg, const char *kind, const char *old, double dflt,
			double if_null)
{
	json_t *p = json_object_get(json_object_get(cfg, "rope_parameters"), kind);
	if (!p && if_null > 0 && json_is_null(json_object_get(cfg, old)))
		return (float)if_null;
	if (!p)
		return number_in(path, cfg, old, dflt, 1, 1e30);
	require_string(path, p, "rope_type", "default", ", plain rotary positions");
	return number_in(path, p, "rope_theta", dflt, 1, 1e30);
}

/* Every how many layers one attends globally: global_attn_every_n_layers, or
 * the pattern of transformers 5's layer_types (full_attention at the
 * layers that number divides, sliding_attention at the others). */
static int global_every(const char *path, json_t *cfg, int layers, int dflt)
{
	json_t *types = json_object_get(cfg, "layer_types");
	if (!types)
		return size_in(path, cfg, "global_attn_every_n_layers", 0, dflt, INT32_MAX);
	int n = 0;
	if (json_is_array(types) && (int)json_array_size(types) == layers)
		for (n = 1; n <= layers; n++) {
			int fits = 1;
			for (int l = 0; l < layers && fits; l++) {
				const char *t = json_string_value(json_array_get(types, l));
				fits = t && !strcmp(t, l % n ? "sliding_attention" : "full_attention");
			}
			if (fits)
				break;
		}
	if (n < 1 || n > layers)
		die("%s: layer_types must list %d layers, full_attention every n-th from the first and "
		    "sliding_attention between", path, layers);
	return n;
}

/* ModernBERT's keys beyond the sizes: its rotary bases, local attention,
 * pooling, and the biases it has none of. */
static void read_modernbert(const char *path, json_t *cfg, struct bert_config *c)
{
	const char *no_bias[] = { "attention_bias", "mlp_bias", "norm_bias", "classifier_bias" };
	for (size_t i = 0; i < sizeof no_bias / sizeof *no_bias; i++)
		require_bool(path, cfg, no_bias[i], 0);
	require_bool(path, cfg, "decoder_bias", 1);
	require_string(path, cfg, "classifier_activation", "gelu", ", the exact erf GELU");
	json_t *pool = json_object_get(cfg, "classifier_pooling");
	const char *how = pool ? json_string_value(pool) : "cls";
	if (!how || (strcmp(how, "cls") && strcmp(how, "mean")))
		die("%s: classifier_pooling must be \"cls\" or \"mean\"", path);
	c->mean_pool = !strcmp(how, "mean");
	const struct family *f = family_of(c->family);
	c->rope_global = rope_theta(path, cfg, "full_attention", "global_rope_theta", f->rope_global, 0);
	c->rope_local = rope_theta(path, cfg, "sliding_attention", "local_rope_theta", f->rope_local,
				   c->rope_global);
	c->local_window = size_in(path, cfg, "local_attention", 0, f->local_window, INT32_MAX);
	if (c->local_window < 2)
		die("%s: local_attention must be 2 or more: a window of 1 is the token alone", path);
	c->global_every = global_every(path, cfg, c->layers, f->global_every);
	if ((c->hidden / c->heads) % 2)
		die("%s: rotary positions need an even head size, not %s %d / %s %d", path, "hidden_size",
		    c->hidden, "num_attention_heads", c->heads);
}

static void read_keys(const char *path, json_t *cfg, struct bert_config *c)
{
	c->family = family_in(path, cfg);
	const struct family *f = family_of(c->family);
	const struct config_keys *k = f->keys;
	require_string(path, cfg, k->act, "gelu", ", the exact erf GELU");
	require_string(path, cfg, "position_embedding_type", "absolute", "");
	if (k->off)
		require_bool(path, cfg, k->off, 0);
	c->vocab = size_in(path, cfg, "vocab_size", 1, 0, INT32_MAX);
	c->hidden = size_in(path, cfg, k->hidden, 1, 0, BERT_MAX_HIDDEN);
	c->layers = size_in(path, cfg, k->layers, 1, 0, BERT_MAX_LAYERS);
	c->heads = size_in(path, cfg, k->heads, 1, 0, BERT_MAX_HEADS);
	c->ffn = size_in(path, cfg, k->ffn, 1, 0, BERT_MAX_FFN);
	c->max_pos = size_in(path, cfg, "max_position_embeddings", 1, 0, BERT_MAX_POS);
	c->type_vocab = k->types ? size_in(path, cfg, k->types, 0, HF_TYPE_VOCAB, INT32_MAX) : 0;
	c->emb = k->emb ? size_in(path, cfg, k->emb, 0, HF_ELECTRA_EMB, BERT_MAX_HIDDEN) : 0;
	c->pad_id = index_in(path, cfg, "pad_token_id", f->pad_id, c->vocab);
	json_t *tie = json_object_get(cfg, "tie_word_embeddings");
	if (tie && !json_is_boolean(tie))
		die("%s: tie_word_embeddings must be true or false", path);
	c->untied = tie && !json_is_true(tie);
	c->ln_eps = k->ln_eps ? number_in(path, cfg, k->ln_eps, k->ln_eps_default, 1e-30, 1) : f->ln_eps;
	c->hidden_dropout = number_in(path, cfg, k->hidden_dropout, f->dropout, 0, 1);
	c->attn_dropout = number_in(path, cfg, k->attn_dropout, f->dropout, 0, 1);
	json_t *cls = json_object_get(cfg, k->cls_dropout);
	c->cls_dropout = cls && !json_is_null(cls) ? number_in(path, cfg, k->cls_dropout, 0, 0, 1) : c->hidden_dropout;
	if (c->hidden % c->heads)
		die("%s: %s %d is not a multiple of %s %d", path, k->hidden, c->hidden, k->heads, c->heads);
	if (f->rotary)
		read_modernbert(path, cfg, c);
}

void hfconfig_read(const char *path, struct bert_config *c, char ***labels, int *nlabels)
{
	off_t size;
	int fd = open_regular(path, &size);
	json_error_t jerr;
	json_t *cfg = json_loadfd_wide(fd, path, 0, &jerr);
	close(fd);
	if (!cfg)
		die("%s:%d: %s", path, jerr.line, jerr.text);
	if (!json_is_object(cfg))
		die("%s: not a JSON object", path);
	memset(c, 0, sizeof *c);
	read_keys(path, cfg, c);
	int n;
	char **names = read_labels(path, cfg, &n);
	c->num_labels = size_in(path, cfg, "num_labels", 0, n ? n : HF_NUM_LABELS, INT32_MAX);
	if (n && c->num_labels != n)
		die("%s: num_labels %d disagrees with the %d names in id2label", path, c->num_labels, n);
	c->task = task_of(path, cfg, family_of(c->family), c->num_labels);
	if (c->task == TASK_REG && c->num_labels != 1)
		die("%s: a regression model has num_labels 1, not %d", path, c->num_labels);
	json_decref(cfg);
	if (labels) {
		*labels = names;
		*nlabels = n;
	} else {
		hfconfig_free_labels(names, n);
	}
}

void hfconfig_free_labels(char **labels, int nlabels)
{
	for (int i = 0; i < nlabels; i++)
		free(labels[i]);
	free(labels);
}

/* The shortest decimal that reads back as x, so 1e-12f is written "1e-12". */
static json_t *json_float(float x)
{
	char buf[32];
	for (int digits = 1; digits < 10; digits++) {
		snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
		if (strtof(buf, NULL) == x)
			break;
	}
	return json_real(strtod(buf, NULL));
}

static void add_labels(const char *path, json_t *cfg, const struct bert_config *c,
		       char *const *labels, int nlabels)
{
	int n = nlabels ? nlabels : c->num_labels;
	json_t *id2label = json_object(), *label2id = json_object();
	for (int i = 0; i < n; i++) {
		char id[16], name[32];
		snprintf(id, sizeof id, "%d", i);
		snprintf(name, sizeof name, "LABEL_%d", i);
		const char *label = nlabels ? labels[i] : name;
		if (json_object_get(label2id, label))
			die("%s: label %s given twice", path, label);
		json_object_set_new(id2label, id, json_string(label));
		json_object_set_new(label2id, label, json_integer(i));
	}
	json_object_set_new(cfg, "id2label", id2label);
	json_object_set_new(cfg, "label2id", label2id);
}

/* ModernBERT's keys beyond the sizes, as transformers 4.48 on reads them
 * (global_rope_theta, ...); its dropouts but the attention's the hidden
 * one, as TopSpin trains it. */
static void write_modernbert(json_t *cfg, const struct bert_config *c)
{
	const char *no_bias[] = { "attention_bias", "mlp_bias", "norm_bias", "classifier_bias" };
	for (size_t i = 0; i < sizeof no_bias / sizeof *no_bias; i++)
		json_object_set_new(cfg, no_bias[i], json_false());
	json_object_set_new(cfg, "decoder_bias", json_true());
	json_object_set_new(cfg, "classifier_activation", json_string("gelu"));
	json_object_set_new(cfg, "classifier_pooling", json_string(c->mean_pool ? "mean" : "cls"));
	json_object_set_new(cfg, "global_rope_theta", json_float(c->rope_global));
	json_object_set_new(cfg, "local_rope_theta", json_float(c->rope_local));
	json_object_set_new(cfg, "local_attention", json_integer(c->local_window));
	json_object_set_new(cfg, "global_attn_every_n_layers", json_integer(c->global_every));
	json_object_set_new(cfg, "embedding_dropout", json_float(c->hidden_dropout));
}

void hfconfig_write(const char *path, const struct bert_config *c, char *const *labels, int nlabels)
{
	if (c->task != TASK_MLM && nlabels && nlabels != c->num_labels)
		die("%s: %d label names for %d classes", path, nlabels, c->num_labels);
	const struct family *f = family_of(c->family);
	char arch[64];
	snprintf(arch, sizeof arch, "%s%s", f->classes,
		 c->task == TASK_MLM ? "ForMaskedLM" : c->task == TASK_TOKCLS ? "ForTokenClassification"
									 : "ForSequenceClassification");
	const struct config_keys *k = f->keys;
	json_t *cfg = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:b, s:s}",
		"architectures", arch, "model_type", f->model_type,
		"vocab_size", c->vocab, k->hidden, c->hidden, k->layers, c->layers,
		k->heads, c->heads, k->ffn, c->ffn, "max_position_embeddings", c->max_pos,
		k->act, "gelu", "pad_token_id", c->pad_id, "tie_word_embeddings", 1,
		"torch_dtype", "float32");
	if (!cfg)
		die("%s: cannot build the config", path);
	if (c->family == FAMILY_DISTILBERT) {
		json_object_set_new(cfg, k->off, json_false());
		json_object_set_new(cfg, "qa_dropout", json_float(c->hidden_dropout));
	} else if (f->rotary) {
		write_modernbert(cfg, c);
	} else {   /* BERT's keys */
		json_object_set_new(cfg, k->types, json_integer(c->type_vocab));
		json_object_set_new(cfg, "position_embedding_type", json_string("absolute"));
		json_object_set_new(cfg, "use_cache", json_true());
	}
	if (k->ln_eps)
		json_object_set_new(cfg, k->ln_eps, json_float(c->ln_eps));
	if (k->emb)
		json_object_set_new(cfg, k->emb, json_integer(bert_emb_width(c)));
	json_object_set_new(cfg, k->hidden_dropout, json_float(c->hidden_dropout));
	json_object_set_new(cfg, k->attn_dropout, json_float(c->attn_dropout));
	json_object_set_new(cfg, k->cls_dropout, json_float(c->cls_dropout));
	json_object_set_new(cfg, "initializer_range", json_float(0.02f));
	if (c->task != TASK_MLM || nlabels)
		add_labels(path, cfg, c, labels, nlabels);
	if (bert_task_pooled(c->task))   /* said outright: one label alone would read as regression */
		json_object_set_new(cfg, "problem_type",
				    json_string(c->task == TASK_REG     ? "regression"
						: c->task == TASK_MULTI ? "multi_label_classification"
									: "single_label_classification"));
	char *text = json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
	json_decref(cfg);
	if (!text)
		die("%s: cannot encode the config", path);
	afile_put_text(path, text);
	free(text);
}
