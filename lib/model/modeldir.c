#include "model/modeldir.h"
#include "data/labelmap.h"
#include "data/vocab.h"
#include "format/dirdigest.h"
#include "format/safetensors.h"
#include "model/hfconfig.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NAME_MAX_LEN = 256 };

static int starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

void modeldir_hf_name(enum family_id family, const char *name, char *out, size_t size)
{
	int bare = starts_with(name, "embeddings.") || starts_with(name, "encoder.") ||
		   starts_with(name, "transformer.") || starts_with(name, "pooler.") ||
		   starts_with(name, "layers.") || starts_with(name, "final_norm.") ||
		   starts_with(name, "embeddings_project.");
	size_t len = strlen(name);
	const char *suffix = "";
	if (ends_with(name, ".decoder.bias")) {   /* the MLM decoder's bias is its head's */
		len -= strlen("decoder.bias");
		suffix = "bias";
	} else if (ends_with(name, ".LayerNorm.gamma")) {
		len -= strlen("gamma");
		suffix = "weight";
	} else if (ends_with(name, ".LayerNorm.beta")) {
		len -= strlen("beta");
		suffix = "bias";
	}
	if (snprintf(out, size, "%s%.*s%s", bare ? family_of(family)->encoder : "", (int)len, name, suffix) >=
	    (int)size)
		die("tensor name too long: %s", name);
}

/* name with its part after "bert.encoder.layer.N." renamed as family f
 * names it there (as layer N + 1's, or the final norm), into out; c's
 * layers. */
static const char *layer_renamed(const struct bert_config *c, const char *name, char *out, size_t size)
{
	const struct family *f = family_of(c->family);
	const char *layer = "bert.encoder.layer.";
	if (!f->layer_renames || !starts_with(name, layer))
		return name;
	char *rest;
	long i = strtol(name + strlen(layer), &rest, 10);
	rest++;   /* past the index's dot */
	for (const struct layer_rename *r = f->layer_renames; r->from; r++) {
		if (!starts_with(rest, r->from))
			continue;
		const char *tail = rest + strlen(r->from);
		int n = !r->next ? snprintf(out, size, "%s%ld.%s%s", layer, i, r->to, tail)
			: i + 1 < c->layers ? snprintf(out, size, "%s%ld.%s%s", layer, i + 1, r->to, tail)
					    : snprintf(out, size, "%s%s", f->final_norm, tail);
		if (n >= (int)size)
			die("tensor name too long: %s", name);
		return out;
	}
	return name;
}

void modeldir_tensor_name(const struct bert_config *c, const char *name, char *out, size_t size)
{
	const char *to = "";
	char renamed[NAME_MAX_LEN];
	name = layer_renamed(c, name, renamed, sizeof renamed);
	for (const struct rename *r = family_of(c->family)->renames; r->from; r++)
		if ((!r->pooled || bert_task_pooled(c->task)) && starts_with(name, r->from)) {
			to = r->to;
			name += strlen(r->from);
			break;
		}
	if (snprintf(out, size, "%s%s", to, name) >= (int)size)
		die("tensor name too long: %s", name);
}

/* The head is what a task adds on top of the encoder, so a checkpoint may
 * lack it (name: the model's own). */
static int is_head(const char *name)
{
	return starts_with(name, "bert.pooler.") || starts_with(name, "classifier.") || starts_with(name, "cls.");
}

static void shape_text(char *buf, size_t size, int ndim, const int64_t *shape)
{
	size_t n = (size_t)snprintf(buf, size, "[");
	for (int d = 0; d < ndim && n < size; d++)
		n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (n < size)
		snprintf(buf + n, size - n, "]");
}

/* The config.json keys whose value is n, for a message: "hidden_size 32",
 * or "" where none is. */
static void keys_of(const struct bert_config *c, int64_t n, char *out, size_t size)
{
	const struct config_keys *k = family_of(c->family)->keys;
	const struct { const char *key; int value; } keys[] = {
		{ "vocab_size", c->vocab }, { k->hidden, c->hidden }, { k->ffn, c->ffn },
		{ "max_position_embeddings", c->max_pos }, { k->types, c->type_vocab },
		{ "num_labels", c->num_labels }, { k->emb, bert_emb_width(c) },
	};
	size_t used = 0;
	out[0] = 0;
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (keys[i].key && keys[i].value == n && used < size)
			used += (size_t)snprintf(out + used, size - used, "%s%s %d", used ? " or " : " by config.json's ",
						 keys[i].key, keys[i].value);
}

/* Dies where the file's tensor s has another shape than the model's t,
 * naming the config key the differing size comes from. */
static void check_shape(const char *path, const struct bert_config *c, const struct st_tensor *s,
			const struct tensor_ref *t)
{
	int differs = s->ndim == t->ndim ? -1 : 0;
	for (int d = 0; differs < 0 && d < t->ndim; d++)
		differs = s->shape[d] == t->shape[d] ? -1 : d;
	if (differs < 0)
		return;
	char got[128], want[128], keys[256];
	shape_text(got, sizeof got, s->ndim, s->shape);
	shape_text(want, sizeof want, t->ndim, t->shape);
	keys_of(c, t->shape[differs], keys, sizeof keys);
	die("%s: tensor %s has shape %s, expected %s%s", path, s->name, got, want, keys);
}

/* The file's tensor that stands for hf_name, family's name of it, under
 * any alias, or NULL. */
static const struct st_tensor *find_tensor(const struct st_file *st, enum family_id family, const char *hf_name)
{
	char name[NAME_MAX_LEN];
	for (int i = 0; i < st_count(st); i++) {
		modeldir_hf_name(family, st_get(st, i)->name, name, sizeof name);
		if (!strcmp(name, hf_name))
			return st_get(st, i);
	}
	return NULL;
}

static void refuse_unsupported_format(const char *dir, const char *weights)
{
	static const struct {
		const char *file, *what;
	} unsupported[] = {
		{ "model.safetensors.index.json", "a sharded checkpoint (model.safetensors.index.json)" },
		{ "pytorch_model.bin.index.json", "a sharded PyTorch pickle (pytorch_model.bin.index.json)" },
		{ "pytorch_model.bin", "a PyTorch pickle (pytorch_model.bin) without model.safetensors" },
	};
	if (!access(weights, F_OK))
		return;
	for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
		char *path = path_join(dir, unsupported[i].file);
		if (!access(path, F_OK))
			die("%s: %s is not supported: save the model as one model.safetensors, with transformers' "
			    "save_pretrained(dir, safe_serialization=True, max_shard_size=\"1000GB\")", dir, unsupported[i].what);
		free(path);
	}
}

/* The layer a file's tensor belongs to (the N of "layer.N." or
 * "layers.N." in its name), or -1. */
static long layer_of(const char *name)
{
	for (const char *p = name; (p = strstr(p, "layer")); p++) {
		const char *n = p + 5 + (p[5] == 's');
		if ((p == name || p[-1] == '.') && *n == '.' && n[1] >= '0' && n[1] <= '9')
			return strtol(n + 1, NULL, 10);
	}
	return -1;
}

/* Every encoder layer of the file is one of the model's: weights of more
 * layers than config.json says are not left out unsaid. */
static void check_layers(const struct st_file *st, const char *path, const struct bert_config *c)
{
	for (int i = 0; i < st_count(st); i++)
		if (layer_of(st_get(st, i)->name) >= c->layers)
			die("%s: tensor %s is of layer %ld, past config.json's %s %d", path, st_get(st, i)->name,
			    layer_of(st_get(st, i)->name), family_of(c->family)->keys->layers, c->layers);
}

/* Copies every tensor of m from the file, but the classifier when
 * new_classifier; lists in missing the head tensors the file lacks. Those,
 * and a new classifier, get bert_init's values for seed, and only those:
 * drawing all of BERT-base's only to overwrite them took longer than the
 * rest of a load. */
static void copy_tensors(struct bert *m, const struct st_file *st, const char *path,
			 int new_classifier, uint64_t seed, struct strbuf *missing)
{
	const struct bert_config *c = bert_config_of(m);
	check_layers(st, path, c);
	int n = bert_tensors(m, NULL);
	struct tensor_ref *t = xmalloc((size_t)n * sizeof *t);
	bert_tensors(m, t);
	for (int i = 0; i < n; i++) {
		char hf[NAME_MAX_LEN];
		modeldir_tensor_name(c, t[i].name, hf, sizeof hf);
		int renewed = new_classifier && starts_with(t[i].name, "classifier.");
		const struct st_tensor *s = renewed ? NULL : find_tensor(st, c->family, hf);
		if (!s && !is_head(t[i].name))
			die("%s: missing tensor %s", path, hf);
		if (!s) {
			if (!renewed)
				sb_addf(missing, "%s%s", missing->n ? ", " : "", hf);
			bert_init_tensors(m, seed, t[i].name);   /* its name is the prefix of no other */
			continue;
		}
		check_shape(path, c, s, &t[i]);
		st_to_f32(s, t[i].data);
	}
	free(t);
}

/* Whether dir holds name. */
static int holds(const char *dir, const char *name)
{
	char *p = path_join(dir, name);
	int there = access(p, F_OK) == 0;
	free(p);
	return there;
}

/* A dir without config.json given for a model: a run dir or a data dir is
 * named as what it is (a slip of RUN for RUN/best, of -m for --data). */
static void check_has_config(const char *option, const char *dir)
{
	if (holds(dir, "config.json"))
		return;
	if (holds(dir, "config") && (holds(dir, "best") || holds(dir, "final"))) {
		char *model = path_join(dir, holds(dir, "best") ? "best" : "final");
		die("%s %s: a run dir, not a model: its model is in %s", option, dir, model);
	}
	if (holds(dir, "manifest.json"))
		die("%s %s: a data dir, not a model (give it as --data)", option, dir);
	die("%s %s: no config.json: not a model dir (RUN/best, a checkpoint, a Hugging Face model's)", option, dir);
}

void modeldir_verify(const char *option, const char *dir)
{
	static const char *const weights[] = { "model.safetensors", NULL };   /* modeldir_load's */
	struct stat st;
	if (stat(dir, &st))
		die("%s %s:", option, dir);
	if (!S_ISDIR(st.st_mode))
		die("%s %s: not a directory: a model is a dir (RUN/final, a checkpoint, a Hugging Face model's)", option, dir);
	check_has_config(option, dir);
	char *why;
	if (dirdigest_check(dir, weights, 0, &why) == DIGESTS_BAD)
		die("%s: damaged: %s; if that file was edited on purpose, remove %s/%s", dir, why, dir, DIGESTS_FILE);
}

struct bert *modeldir_load(const char *dir, const struct backend *be, enum bert_task task,
			   int num_labels, const uint64_t *head_seed, char ***labels, int *nlabels)
{
	char *cfg_path = path_join(dir, "config.json"), *weights = path_join(dir, "model.safetensors");
	refuse_unsupported_format(dir, weights);
	struct bert_config c;
	char **names;
	int nnames;
	hfconfig_read(cfg_path, &c, &names, &nnames);
	if (task == TASK_MLM && c.untied)
		die("%s: tie_word_embeddings is false: a masked LM decoder of its own is not supported (TopSpin's is "
		    "the word embeddings)", cfg_path);
	c.task = task;
	int new_classifier = task != TASK_MLM && num_labels > 0 && num_labels != c.num_labels;
	uint64_t seed = head_seed ? *head_seed : 0;
	if (new_classifier) {
		if (!head_seed)
			die("%s: the checkpoint has %d labels, not %d", dir, c.num_labels, num_labels);
		warnx("%s: %d labels instead of the checkpoint's %d: new classifier from seed %llu",
		      dir, num_labels, c.num_labels, (unsigned long long)seed);
		c.num_labels = num_labels;
		hfconfig_free_labels(names, nnames);
		names = NULL;
		nnames = 0;
	}
	struct st_file *st = st_open(weights);
	struct bert *m = bert_new(&c, be);
	struct strbuf missing = {0};
	copy_tensors(m, st, weights, new_classifier, seed, &missing);
	bert_push(m);
	if (missing.n && !head_seed)
		die("%s: no %s: the model has no trained head", weights, missing.s);
	if (missing.n)
		warnx("%s: no %s: new head from seed %llu", weights, missing.s, (unsigned long long)seed);
	sb_free(&missing);
	st_close(st);
	if (labels) {
		*labels = names;
		*nlabels = nnames;
	} else {
		hfconfig_free_labels(names, nnames);
	}
	free(cfg_path);
	free(weights);
	return m;
}

void modeldir_reload(struct bert *m, const char *dir, char ***labels, int *nlabels)
{
	char *cfg_path = path_join(dir, "config.json"), *weights = path_join(dir, "model.safetensors");
	struct bert_config c;
	hfconfig_read(cfg_path, &c, labels, nlabels);
	struct st_file *st = st_open(weights);
	struct strbuf missing = {0};
	copy_tensors(m, st, weights, 0, 0, &missing);
	if (missing.n)
		die("%s: no %s: the model has no trained head", weights, missing.s);
	bert_push(m);
	st_close(st);
	free(cfg_path);
	free(weights);
}

/* Puts row from[i] of t in row i (a tensor of rows, outermost first). */
static void reorder_rows(const struct tensor_ref *t, const int *from, int rows)
{
	size_t row = (size_t)tensor_numel(t) / (size_t)rows;
	float *copy = xmalloc((size_t)tensor_numel(t) * sizeof *copy);
	memcpy(copy, t->data, (size_t)tensor_numel(t) * sizeof *copy);
	for (int i = 0; i < rows; i++)
		memcpy((float *)t->data + (size_t)i * row, copy + (size_t)from[i] * row, row * sizeof *copy);
	free(copy);
}

int modeldir_reorder_classes(struct bert *m, char *const *have, int nhave, char *const *want, int nwant)
{
	int *from = xmalloc(((size_t)nwant + 1) * sizeof *from);
	int same = labels_reordered(have, nhave, want, nwant, from);
	if (same) {
		int n = bert_tensors(m, NULL);
		struct tensor_ref *t = xmalloc((size_t)n * sizeof *t);
		bert_tensors(m, t);
		for (int i = 0; i < n; i++)
			if (starts_with(t[i].name, "classifier."))
				reorder_rows(&t[i], from, nwant);
		free(t);
		bert_push(m);
	}
	free(from);
	return same;
}

void modeldir_order_classes(struct bert *m, const char *dir, char *const *have, int nhave, char *const *want,
			    int nwant, uint64_t seed)
{
	char *why = labels_disagree(have, nhave, want, nwant);
	if (!why)
		return;
	if (modeldir_reorder_classes(m, have, nhave, want, nwant)) {
		warnx("%s: %s: its classifier's rows put in the data's order", dir, why);
	} else {
		bert_init_tensors(m, seed, "classifier.");
		warnx("%s: %s: new classifier from seed %llu", dir, why, (unsigned long long)seed);
	}
	free(why);
}

/* The parameters under the names transformers saves them as. */
static void write_weights(const char *path, struct bert *m)
{
	bert_pull(m);
	int n = bert_tensors(m, NULL);
	struct tensor_ref *t = xmalloc((size_t)n * sizeof *t);
	bert_tensors(m, t);
	char (*names)[NAME_MAX_LEN] = xmalloc((size_t)n * sizeof *names);
	for (int i = 0; i < n; i++) {
		modeldir_tensor_name(bert_config_of(m), t[i].name, names[i], sizeof names[i]);
		t[i].name = names[i];
	}
	st_write(path, t, n);
	free(names);
	free(t);
}

/* The tokenizer's files into dir: the vocab at vocab_path, and the
 * tokenizer_config.json beside it where there is one (vocab_save_case). */
static void write_tokenizer(const char *dir, const char *vocab_path)
{
	char *vocab = path_join(dir, vocab_file_name_at(vocab_path)), *at = xstrdup(vocab_path);
	afile_copy(vocab_path, vocab);
	char *from = path_join(dirname(at), TOKENIZER_CONFIG), *to = path_join(dir, TOKENIZER_CONFIG);
	if (!access(from, F_OK))
		afile_copy(from, to);
	free(vocab), free(at), free(from), free(to);
}

void modeldir_write(const char *dir, struct bert *m, char *const *labels, int nlabels,
		    const char *vocab_path)
{
	char *weights = path_join(dir, "model.safetensors"), *cfg = path_join(dir, "config.json");
	write_weights(weights, m);
	hfconfig_write(cfg, bert_config_of(m), labels, nlabels);
	if (vocab_path)
		write_tokenizer(dir, vocab_path);
	free(weights);
	free(cfg);
}

void modeldir_save(const char *dir, struct bert *m, char *const *labels, int nlabels,
		   const char *vocab_path)
{
	struct adir *d = adir_begin(dir, 1, NULL);
	modeldir_write(adir_tmp(d), m, labels, nlabels, vocab_path);
	dirdigest_write(adir_tmp(d));
	adir_commit(d);
}
