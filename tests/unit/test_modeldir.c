/* Model dirs: config.json, loading under HF names and their aliases, new heads,
 * atomic saving, and refusal of bad dirs.
 * usage: test_modeldir [FIXTURE_DIR]   (default tests/fixtures/hf) */
#include "check.h"
#include "expect_die.h"
#include "format/safetensors.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "testfiles.h"
#include "util/afile.h"
#include "util/err.h"
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SEED = 7 };
static char tmpdir[] = "/tmp/ts-test-md.XXXXXX";
static const char *fixdir = "tests/fixtures/hf";

static int ntensors(struct bert *m, struct tensor_ref **t)
{
	int n = bert_tensors(m, NULL);
	*t = xmalloc((size_t)n * sizeof **t);
	return bert_tensors(m, *t);
}

static int same_floats(const float *a, const float *b, int64_t n)
{
	return !memcmp(a, b, (size_t)n * sizeof *a);
}

/* Whether name starts with one of the space-separated prefixes. */
static int starts_with_any(const char *name, const char *prefixes)
{
	for (const char *p = prefixes; p && *p; p += strcspn(p, " "), p += *p == ' ')
		if (!strncmp(name, p, strcspn(p, " ")))
			return 1;
	return 0;
}

/* "" when every tensor of m (but those starting with a prefix in skip) holds
 * exactly the values the safetensors file has under its HF name or an alias;
 * else the first that does not, as " (first differs: NAME)". */
static const char *differences(struct bert *m, const char *weights, const char *skip)
{
	static char first[300];
	struct st_file *st = st_open(weights);
	struct tensor_ref *t;
	int n = ntensors(m, &t);
	first[0] = 0;
	for (int i = 0; !first[0] && i < n; i++) {
		char hf[256];
		modeldir_tensor_name(bert_config_of(m), t[i].name, hf, sizeof hf);
		if (starts_with_any(hf, skip))
			continue;
		const struct st_tensor *s = NULL;
		for (int j = 0; !s && j < st_count(st); j++) {
			char alias[256];
			modeldir_hf_name(bert_config_of(m)->family, st_get(st, j)->name, alias, sizeof alias);
			if (!strcmp(alias, hf))
				s = st_get(st, j);
		}
		float *want = xmalloc((size_t)tensor_numel(&t[i]) * sizeof *want);
		int same = s && s->nbytes == (size_t)tensor_numel(&t[i]) * 4;
		if (same) {
			st_to_f32(s, want);
			same = same_floats(t[i].data, want, tensor_numel(&t[i]));
		}
		if (!same)
			snprintf(first, sizeof first, " (first differs: %s)", hf);
		free(want);
	}
	free(t);
	st_close(st);
	return first;
}

/* Whether m's tensors starting with prefix hold bert_init's values for seed. */
static int is_init(struct bert *m, const char *prefix, uint64_t seed)
{
	struct bert *fresh = bert_new(bert_config_of(m), backend_cpu());
	bert_init(fresh, seed);
	struct tensor_ref *a, *b;
	int n = ntensors(m, &a), found = 0, ok = 1;
	ntensors(fresh, &b);
	for (int i = 0; i < n; i++)
		if (!strncmp(a[i].name, prefix, strlen(prefix))) {
			found = 1;
			ok &= same_floats(a[i].data, b[i].data, tensor_numel(&a[i]));
		}
	free(a);
	free(b);
	bert_free(fresh);
	return found && ok;
}

static void test_load_cls(void)
{
	char *dir = path_join(fixdir, "tiny-cls"), *weights = path_join(dir, "model.safetensors");
	char **labels;
	int nlabels;
	struct bert *m = modeldir_load(dir, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, &labels, &nlabels);
	const struct bert_config *c = bert_config_of(m);
	CHECK(c->vocab == 64 && c->hidden == 32 && c->layers == 2 && c->heads == 4 && c->ffn == 64 &&
	      c->max_pos == 32 && c->type_vocab == 2 && c->ln_eps == 1e-12f && c->num_labels == 3 &&
	      c->task == TASK_CLS && c->hidden_dropout == 0 && c->attn_dropout == 0,
	      "tiny-cls: config read");
	CHECK(nlabels == 3 && !strcmp(labels[0], "neg") && !strcmp(labels[1], "neu") &&
	      !strcmp(labels[2], "pos"), "tiny-cls: labels in id order");
	const char *diff = differences(m, weights, NULL);
	CHECK(!*diff, "tiny-cls: every tensor as in the file%s", diff);
	hfconfig_free_labels(labels, nlabels);
	bert_free(m);
	free(weights);
	free(dir);
}

static void load_quietly(const void *dir)
{
	bert_free(modeldir_load(dir, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, NULL, NULL));
}

/* As load_quietly, but killed by SIGALRM after 10 s: a FIFO must not hang
 * it. */
static void load_soon(const void *dir)
{
	alarm(10);
	load_quietly(dir);
}

/* Loads dir as a whole model (to evaluate or learn from): no new head. */
static void load_whole(const void *dir)
{
	bert_free(modeldir_load(dir, backend_cpu(), TASK_CLS, 0, NULL, NULL, NULL));
}

static void load_whole_5(const void *dir)
{
	bert_free(modeldir_load(dir, backend_cpu(), TASK_CLS, 5, NULL, NULL, NULL));
}

/* Loads dir, catching what the load says on stderr in said. */
static struct bert *load_telling(const char *dir, enum bert_task task, int num_labels, char *said, size_t size)
{
	FILE *caught = tmpfile();
	int saved = dup(2);
	fflush(stderr);
	dup2(fileno(caught), 2);
	struct bert *m = modeldir_load(dir, backend_cpu(), task, num_labels, &(uint64_t){SEED}, NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(caught);
	size_t n = fread(said, 1, size - 1, caught);
	said[n] = 0;
	if (n && said[n - 1] == '\n')
		said[n - 1] = 0;
	fclose(caught);
	return m;
}

/* Whether what was said is one line (its newline taken off by load_telling). */
static int one_line(const char *said)
{
	return *said && !strchr(said, '\n');
}

static void test_heads(void)
{
	char *cls = path_join(fixdir, "tiny-cls"), *alias = path_join(fixdir, "tiny-cls-alias");
	char *mlm = path_join(fixdir, "tiny-mlm"), *cls_weights = path_join(cls, "model.safetensors");
	char *mlm_weights = path_join(mlm, "model.safetensors");
	char said[4096];
	const char *diff;

	struct bert *m = load_telling(cls, TASK_CLS, 0, said, sizeof said);
	CHECK(!*said, "a complete checkpoint loads without a word (said: %s)", said);
	bert_free(m);

	m = load_telling(alias, TASK_CLS, 0, said, sizeof said);
	diff = differences(m, cls_weights, "classifier.");
	CHECK(!*diff, "alias names (no bert. prefix, gamma/beta) load the same encoder and pooler%s", diff);
	CHECK(is_init(m, "classifier.", SEED), "alias: missing classifier is bert_init's for the seed");
	CHECK(one_line(said) && strstr(said, "no classifier.weight, classifier.bias: new head from seed 7"),
	      "alias: one line tells of the new head: %s", said);
	bert_free(m);

	m = load_telling(cls, TASK_CLS, 5, said, sizeof said);
	CHECK(bert_config_of(m)->num_labels == 5 && is_init(m, "classifier.", SEED) &&
	      !*differences(m, cls_weights, "classifier."),
	      "another label count: a new 5-class classifier on the checkpoint's encoder");
	CHECK(one_line(said) && strstr(said, "5 labels instead of the checkpoint's 3"),
	      "another label count is told: %s", said);
	bert_free(m);

	m = load_telling(mlm, TASK_CLS, 0, said, sizeof said);
	CHECK(!*differences(m, mlm_weights, "bert.pooler. classifier.") &&
	      is_init(m, "bert.pooler.", SEED) && is_init(m, "classifier.", SEED),
	      "mlm checkpoint as cls: encoder loaded, pooler new");
	CHECK(one_line(said) && strstr(said, "bert.pooler.dense.weight"), "mlm as cls tells: %s", said);
	bert_free(m);

	m = load_telling(cls, TASK_MLM, 0, said, sizeof said);
	CHECK(!*differences(m, cls_weights, "cls.") && is_init(m, "cls.predictions.", SEED),
	      "cls checkpoint as mlm: encoder loaded, mlm head new");
	CHECK(one_line(said) && strstr(said, "cls.predictions.bias"), "cls as mlm tells: %s", said);
	bert_free(m);

	expect_die("without a seed for a new head, a missing head is an error", load_whole, alias,
		   "no classifier.weight, classifier.bias: the model has no trained head");
	expect_die("and another label count too", load_whole_5, cls, "the checkpoint has 3 labels, not 5");
	bert_free(modeldir_load(cls, backend_cpu(), TASK_CLS, 0, NULL, NULL, NULL));

	m = modeldir_load(mlm, backend_cpu(), TASK_MLM, 0, NULL, NULL, NULL);
	diff = differences(m, mlm_weights, NULL);
	CHECK(!*diff, "tiny-mlm: every tensor as in the file%s", diff);
	bert_free(m);
	free(cls), free(alias), free(mlm), free(cls_weights), free(mlm_weights);
}

static char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0;
	*n = 0;
	for (size_t r; grow(&buf, &cap, *n + 4096, 1), (r = fread(buf + *n, 1, 4096, f)) > 0;)
		*n += r;
	fclose(f);
	buf[*n] = 0;
	return buf;
}

/* Copies the fixture from into dir name as a bare encoder is saved
 * (transformers' BertModel, ElectraModel, ...: no prefix, no head): its
 * tensors whose names start with prefix, that prefix taken off. */
static char *bare_copy(const char *from, const char *name, const char *prefix)
{
	char *src = path_join(fixdir, from), *dir = path_join(tmpdir, name), *weights = path_join(src, "model.safetensors");
	make_parents(dir);
	mkdir(dir, 0755);
	const char *files[] = {"config.json", "vocab.txt"};
	for (int i = 0; i < 2; i++) {
		char *a = path_join(src, files[i]), *b = path_join(dir, files[i]);
		size_t n;
		char *text = read_all(a, &n);
		write_file(b, text, n);
		free(text), free(a), free(b);
	}
	struct st_file *st = st_open(weights);
	struct tensor_ref *t = xcalloc((size_t)st_count(st), sizeof *t);
	int k = 0;
	for (int i = 0; i < st_count(st); i++) {
		const struct st_tensor *s = st_get(st, i);
		if (strncmp(s->name, prefix, strlen(prefix)))
			continue;
		t[k] = (struct tensor_ref){.name = s->name + strlen(prefix), .ndim = s->ndim};
		memcpy(t[k].shape, s->shape, (size_t)s->ndim * sizeof *s->shape);
		t[k].data = xmalloc((size_t)tensor_numel(&t[k]) * sizeof(float));
		st_to_f32(s, t[k++].data);
	}
	char *out = path_join(dir, "model.safetensors");
	st_write(out, t, k);
	for (int i = 0; i < k; i++)
		free(t[i].data);
	free(t), free(out), free(weights), free(src);
	st_close(st);
	return dir;
}

/* Every family's bare encoder loads as its encoder, a new head on it. */
static void test_bare_encoders(void)
{
	const struct { const char *fixture, *prefix, *heads; } f[] = {
		{"tiny-cls", "bert.", "classifier."},
		{"roberta-cls", "roberta.", "classifier."},
		{"distilbert-cls", "distilbert.", "pre_classifier. classifier."},
		{"electra-cls", "electra.", "classifier."},   /* its embeddings_project too */
		{"modernbert-cls", "model.", "head. classifier."},
	};
	for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
		char name[64];
		snprintf(name, sizeof name, "bare-%s", f[i].fixture);
		char *dir = bare_copy(f[i].fixture, name, f[i].prefix);
		char *weights = path_join(fixdir, f[i].fixture), *w = path_join(weights, "model.safetensors");
		struct bert *m = modeldir_load(dir, backend_cpu(), TASK_CLS, 2, &(uint64_t){SEED}, NULL, NULL);
		const char *diff = differences(m, w, f[i].heads);
		CHECK(!*diff, "%s saved bare (no %s): its encoder loads as it is%s", f[i].fixture, f[i].prefix, diff);
		bert_free(m);
		free(w), free(weights), free(dir);
	}
}

static void test_save(void)
{
	char *mlm = path_join(fixdir, "tiny-mlm"), *vocab = path_join(mlm, "vocab.txt");
	char *out = path_join(tmpdir, "saved"), *weights = path_join(out, "model.safetensors");
	struct bert *m = modeldir_load(mlm, backend_cpu(), TASK_MLM, 0, &(uint64_t){SEED}, NULL, NULL);
	bert_params(m)[5] = 123.5f;
	mkdir(out, 0755);
	char *stale = path_join(out, "stale-file"), *old_config = path_join(out, "config.json");
	fclose(fopen(stale, "w"));
	fclose(fopen(old_config, "w"));
	modeldir_save(out, m, NULL, 0, vocab);
	CHECK(access(stale, F_OK) && dir_entries(out) == 4, "save replaces the old model dir whole (3 files and their digests)");
	free(old_config);
	CHECK(dir_entries(tmpdir) == 1, "save leaves no temp dir beside it");

	struct bert *back = modeldir_load(out, backend_cpu(), TASK_MLM, 0, &(uint64_t){SEED}, NULL, NULL);
	CHECK(bert_numel(back) == bert_numel(m) &&
	      same_floats(bert_params(back), bert_params(m), (int64_t)bert_numel(m)),
	      "saved mlm model loads back bit for bit");
	const char *diff = differences(m, weights, NULL);
	CHECK(!*diff, "saved tensors are under their HF names%s", diff);
	struct st_file *st = st_open(weights);
	CHECK(st_find(st, "cls.predictions.bias") && !st_find(st, "cls.predictions.decoder.bias") &&
	      !st_find(st, "cls.predictions.decoder.weight") &&
	      st_find(st, "bert.encoder.layer.1.output.LayerNorm.weight"),
	      "saved names are those transformers writes (decoder tied, not stored)");
	st_close(st);

	size_t n1, n2;
	char *v_in = read_all(vocab, &n1), *vout = path_join(out, "vocab.txt"), *v_out = read_all(vout, &n2);
	CHECK(v_out && n1 == n2 && !memcmp(v_in, v_out, n1), "vocab.txt copied");
	free(v_in), free(v_out), free(vout);
	bert_free(back);
	bert_free(m);
	free(mlm), free(vocab), free(out), free(weights), free(stale);
}

static void test_config_round_trip(void)
{
	struct bert_config c = {.vocab = 30522, .hidden = 384, .layers = 6, .heads = 12, .ffn = 1536,
				.max_pos = 512, .type_vocab = 2, .ln_eps = 1e-12f, .hidden_dropout = 0.1f,
				.attn_dropout = 0.15f, .cls_dropout = 0.2f, .task = TASK_CLS, .num_labels = 3}, r;
	char *names[] = {"bad", "so-so", "good \"quoted\""};
	char *path = path_join(tmpdir, "config.json");
	hfconfig_write(path, &c, names, 3);
	char **labels;
	int n;
	hfconfig_read(path, &r, &labels, &n);
	CHECK(!memcmp(&c, &r, sizeof c), "config.json round trip keeps every field");
	CHECK(n == 3 && !strcmp(labels[2], names[2]), "config.json round trip keeps the labels");
	hfconfig_free_labels(labels, n);
	size_t len;
	char *text = read_all(path, &len);
	CHECK(strstr(text, "\"layer_norm_eps\": 1e-12,") && strstr(text, "\"hidden_dropout_prob\": 0.1,") &&
	      strstr(text, "\"model_type\": \"bert\"") &&
	      strstr(text, "\"BertForSequenceClassification\""),
	      "config.json writes floats short and names the architecture");
	free(text);

	c.task = TASK_MLM;
	hfconfig_write(path, &c, NULL, 0);
	hfconfig_read(path, &r, &labels, &n);
	text = read_all(path, &len);
	CHECK(r.task == TASK_MLM && n == 0 && strstr(text, "\"BertForMaskedLM\"") && !strstr(text, "id2label"),
	      "mlm config.json: BertForMaskedLM, no labels");
	free(text);

	/* the head's dropout by each family's key; BERT's null is the hidden one's */
	c.task = TASK_CLS, c.family = FAMILY_DISTILBERT;
	hfconfig_write(path, &c, names, 3);
	hfconfig_read(path, &r, &labels, &n);
	hfconfig_free_labels(labels, n);
	text = read_all(path, &len);
	CHECK(r.cls_dropout == 0.2f && r.hidden_dropout == 0.1f && strstr(text, "\"seq_classif_dropout\": 0.2,"),
	      "DistilBERT's head dropout is its seq_classif_dropout, read and written");
	free(text);
	FILE *f = fopen(path, "w");
	fputs("{\"model_type\": \"bert\", \"vocab_size\": 30, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
	      "\"num_attention_heads\": 2, \"intermediate_size\": 16, \"max_position_embeddings\": 16, "
	      "\"hidden_dropout_prob\": 0.3, \"classifier_dropout\": null}", f);
	fclose(f);
	hfconfig_read(path, &r, &labels, &n);
	CHECK(r.cls_dropout == 0.3f, "BERT's classifier_dropout null: the head's dropout is hidden_dropout_prob");
	hfconfig_free_labels(labels, n);
	free(path);
}

/* A copy of the fixture from named name in tmpdir, with config key set to
 * value (JSON text; NULL deletes the key). */
static char *bad_copy(const char *from, const char *name, const char *key, const char *value)
{
	char *src = path_join(fixdir, from), *dir = path_join(tmpdir, name);
	struct bert *m = modeldir_load(src, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, NULL, NULL);
	modeldir_save(dir, m, NULL, 0, NULL);
	bert_free(m);
	char *cfg_path = path_join(dir, "config.json");
	json_t *cfg = json_load_file(cfg_path, 0, NULL);
	if (!value)
		json_object_del(cfg, key);
	else if (key)
		json_object_set_new(cfg, key, json_loads(value, JSON_DECODE_ANY, NULL));
	json_dump_file(cfg, cfg_path, 0);
	json_decref(cfg);
	free(cfg_path);
	free(src);
	return dir;
}

/* The same of tiny-cls. */
static char *bad_dir(const char *name, const char *key, const char *value)
{
	return bad_copy("tiny-cls", name, key, value);
}

/* Rewrites dir's weights without tensor drop, and with tensor reshape's two
 * dimensions swapped. */
static void rewrite_weights(const char *dir, const char *drop, const char *reshape)
{
	struct bert *m = modeldir_load(dir, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, NULL, NULL);
	struct tensor_ref *t;
	int n = ntensors(m, &t), k = 0;
	for (int i = 0; i < n; i++) {
		if (drop && !strcmp(t[i].name, drop))
			continue;
		struct tensor_ref r = t[i];
		if (reshape && !strcmp(r.name, reshape)) {
			r.shape[0] = t[i].shape[1];
			r.shape[1] = t[i].shape[0];
		}
		t[k++] = r;
	}
	char *weights = path_join(dir, "model.safetensors");
	st_write(weights, t, k);
	free(weights);
	free(t);
	bert_free(m);
}

/* A label2id of null, as transformers writes it where only id2label was
 * given, is none: the labels are id2label's. */
static void test_null_label2id(void)
{
	char *d = bad_dir("null-label2id", "label2id", "null");
	char **labels;
	int n;
	bert_free(modeldir_load(d, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, &labels, &n));
	CHECK(n == 3 && !strcmp(labels[0], "LABEL_0") && !strcmp(labels[2], "LABEL_2"),
	      "a label2id of null: id2label's labels (%d: %s, ...)", n, n ? labels[0] : "");
	hfconfig_free_labels(labels, n);
	free(d);
}

/* A local_rope_theta of null, as transformers 4.48 reads it, is the global
 * base: its local layers turn as its global ones. */
static void test_null_local_rope(void)
{
	char *d = bad_copy("modernbert-cls", "mb-null-rope", "local_rope_theta", "null");
	struct bert *m = modeldir_load(d, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, NULL, NULL);
	const struct bert_config *c = bert_config_of(m);
	CHECK(c->rope_local == c->rope_global, "a local_rope_theta of null: the global base %g (%g)",
	      (double)c->rope_global, (double)c->rope_local);
	bert_free(m);
	free(d);
}

static void test_bad_dirs(void)
{
	char *d = bad_dir("no-hidden", "hidden_size", NULL);
	expect_die("config without hidden_size", load_quietly, d, "config.json: missing key hidden_size");
	free(d);
	d = bad_dir("relu", "hidden_act", "\"relu\"");
	expect_die("hidden_act relu", load_quietly, d, "hidden_act relu is not supported (only \"gelu\"");
	free(d);
	d = bad_dir("heads", "num_attention_heads", "5");
	expect_die("hidden not a multiple of heads", load_quietly, d, "not a multiple of num_attention_heads 5");
	free(d);
	d = bad_dir("id2label", "id2label", "{\"0\": \"a\", \"2\": \"b\"}");
	expect_die("id2label with a gap", load_quietly, d, "id2label must map the ids 0..1");
	free(d);
	d = bad_dir("id2label-twice", "id2label", "{\"0\": \"neg\", \"1\": \"neg\"}");
	expect_die("id2label naming a label twice", load_quietly, d, "id2label names \"neg\" twice");
	free(d);
	d = bad_dir("deberta", "model_type", "\"deberta-v2\"");
	expect_die("another model type", load_quietly, d,
		   "model_type deberta-v2 is not supported (only bert, roberta, xlm-roberta, distilbert, electra, "
		   "modernbert)");
	free(d);
	d = bad_copy("distilbert-cls", "sinusoidal", "sinusoidal_pos_embds", "true");
	expect_die("DistilBERT's fixed sinusoidal positions", load_quietly, d,
		   "config.json: sinusoidal_pos_embds must be false");
	free(d);
	d = bad_copy("distilbert-cls", "distil-relu", "activation", "\"relu\"");
	expect_die("DistilBERT's activation relu", load_quietly, d,
		   "activation relu is not supported (only \"gelu\"");
	free(d);
	d = bad_copy("distilbert-cls", "distil-dim", "dim", "36");
	expect_die("a DistilBERT config whose dim the weights disagree with", load_quietly, d,
		   "tensor distilbert.embeddings.word_embeddings.weight has shape [64, 32], expected [64, 36] "
		   "by config.json's dim 36");
	free(d);
	d = bad_copy("modernbert-cls", "mb-eps", "norm_eps", NULL);   /* ModernBertConfig's default */
	struct bert *mb = modeldir_load(d, backend_cpu(), TASK_CLS, 0, &(uint64_t){SEED}, NULL, NULL);
	CHECK(bert_config_of(mb)->ln_eps == 1e-5f, "a ModernBERT config without norm_eps: 1e-5, its class's (%g)",
	      (double)bert_config_of(mb)->ln_eps);
	bert_free(mb);
	free(d);
	d = bad_copy("modernbert-cls", "mb-bias", "attention_bias", "true");
	expect_die("a ModernBERT with attention biases", load_quietly, d, "config.json: attention_bias must be false");
	free(d);
	d = bad_copy("modernbert-cls", "mb-pool", "classifier_pooling", "\"max\"");
	expect_die("a ModernBERT pooling by max", load_quietly, d, "classifier_pooling must be \"cls\" or \"mean\"");
	free(d);
	d = bad_copy("modernbert-cls", "mb-types", "layer_types",
		     "[\"full_attention\", \"full_attention\", \"sliding_attention\"]");
	expect_die("ModernBERT's layer_types in no every-n pattern", load_quietly, d,
		   "layer_types must list 3 layers, full_attention every n-th from the first");
	free(d);
	d = bad_copy("distilbert-cls", "distil-layers", "n_layers", "1");
	expect_die("a DistilBERT config of fewer layers than its weights", load_quietly, d,
		   "tensor distilbert.transformer.layer.1.attention.q_lin.weight is of layer 1, past config.json's "
		   "n_layers 1");
	free(d);
	d = bad_copy("modernbert-cls", "mb-layers", "num_hidden_layers", "2");
	expect_die("a ModernBERT config of fewer layers than its weights", load_quietly, d,
		   "is of layer 2, past config.json's num_hidden_layers 2");
	free(d);
	d = bad_copy("modernbert-cls", "mb-window", "local_attention", "1");   /* band 0 would be global */
	expect_die("a ModernBERT local window of 1", load_quietly, d,
		   "config.json: local_attention must be 2 or more: a window of 1 is the token alone");
	free(d);
	d = bad_copy("modernbert-cls", "mb-heads", "num_attention_heads", "32");
	expect_die("a ModernBERT with an odd head size", load_quietly, d,
		   "rotary positions need an even head size, not hidden_size 32 / num_attention_heads 32");
	free(d);
	d = bad_copy("electra-cls", "electra-emb", "embedding_size", "24");
	expect_die("an ELECTRA config whose embedding_size the weights disagree with", load_quietly, d,
		   "tensor electra.embeddings.word_embeddings.weight has shape [64, 16], expected [64, 24] "
		   "by config.json's embedding_size 24");
	free(d);
	d = bad_dir("label2id-text", "label2id", "\"neg\"");
	expect_die("a label2id that is no object", load_quietly, d, "config.json: label2id must be an object");
	free(d);
	d = bad_dir("dropout", "hidden_dropout_prob", "0.99999999");
	expect_die("a dropout that is 1 as a float", load_quietly, d, "hidden_dropout_prob 0.99999999 is not a number in [0, 1)");
	free(d);
	d = bad_dir("heads-text", "num_attention_heads", "\"2\"");
	expect_die("a size given as text, named as the file gives it", load_quietly, d,
		   "config.json: num_attention_heads \"2\" is not an integer from 1 to 65536");
	free(d);

	d = bad_dir("no-tensor", NULL, NULL);
	rewrite_weights(d, "bert.encoder.layer.1.attention.self.key.bias", NULL);
	expect_die("missing encoder tensor", load_quietly, d,
		   "model.safetensors: missing tensor bert.encoder.layer.1.attention.self.key.bias");
	free(d);
	d = bad_dir("misshaped", NULL, NULL);
	rewrite_weights(d, NULL, "bert.encoder.layer.0.intermediate.dense.weight");
	expect_die("mis-shaped tensor", load_quietly, d,
		   "tensor bert.encoder.layer.0.intermediate.dense.weight has shape [32, 64], expected [64, 32] "
		   "by config.json's vocab_size 64 or intermediate_size 64");
	free(d);
	d = bad_dir("vocab-size", "vocab_size", "65");
	expect_die("a config whose vocab_size the weights disagree with", load_quietly, d,
		   "tensor bert.embeddings.word_embeddings.weight has shape [64, 32], expected [65, 32] "
		   "by config.json's vocab_size 65");
	free(d);

	d = bad_dir("pytorch", NULL, NULL);
	char *w = path_join(d, "model.safetensors"), *bin = path_join(d, "pytorch_model.bin");
	rename(w, bin);
	expect_die("pytorch_model.bin only", load_quietly, d,
		   "a PyTorch pickle (pytorch_model.bin) without model.safetensors is not supported: save the model as one "
		   "model.safetensors, with transformers' save_pretrained(dir, safe_serialization=True, "
		   "max_shard_size=\"1000GB\")");
	unlink(bin);
	char *index = path_join(d, "pytorch_model.bin.index.json");
	write_file(index, "{}", 2);
	expect_die("a sharded pytorch_model.bin", load_quietly, d,
		   "a sharded PyTorch pickle (pytorch_model.bin.index.json) is not supported");
	unlink(index), free(index);
	expect_die("no weights at all", load_quietly, d, "model.safetensors: No such file");
	free(w), free(bin), free(d);

	d = bad_dir("notjson", NULL, NULL);
	char *cfg = path_join(d, "config.json");
	FILE *f = fopen(cfg, "w");
	fputs("{\"hidden_size\": 32,\n oops}", f);
	fclose(f);
	expect_die("config.json not JSON", load_quietly, d, "config.json:2:");
	char want[512];
	unlink(cfg);
	snprintf(want, sizeof want, "cannot open %s: No such file or directory", cfg);
	expect_die("no config.json", load_quietly, d, want);
	mkdir(cfg, 0755);
	snprintf(want, sizeof want, "%s: not a regular file", cfg);
	expect_die("config.json a directory", load_quietly, d, want);
	rmdir(cfg);
	mkfifo(cfg, 0644);
	expect_die("config.json a FIFO, refused at once", load_soon, d, want);
	unlink(cfg);
	free(cfg), free(d);
}

static void remove_all(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	if (!mkdtemp(tmpdir))
		die("cannot create %s:", tmpdir);
	test_load_cls();
	test_heads();
	test_save();
	test_bare_encoders();
	test_null_label2id();
	test_null_local_rope();
	test_config_round_trip();
	test_bad_dirs();
	remove_all(tmpdir);
	CHECK_DONE();
}
