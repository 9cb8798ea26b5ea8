/* The whole model: gradients of every head against central differences of
 * the summed loss (dropout off, and on with a fixed seed), repeatability,
 * unpadded batches, parameter names and initialisation. */
#include "check.h"
#include "model/bert.h"
#include "model/bert_inside.h"
#include "util/rng.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 7, V = 50, L = 3, SEED = 11 };

static const int lengths[B] = { 7, 5, 3 };

struct sample {
	int32_t ids[B * T], types[B * T], cls_labels[B], mlm_labels[B * T], tags[B * T];
	uint8_t mask[B * T];
	float reg_targets[B], multi_targets[B * L];
};

static const char *task_names[] = {"cls", "mlm", "reg", "multi", "tokcls"};

static struct sample make_sample(void)
{
	struct sample s;
	struct rng r;
	rng_seed(&r, 3);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			int i = b * T + t, real = t < lengths[b];
			s.ids[i] = real ? 1 + (int32_t)rng_below(&r, V - 1) : 0;
			s.types[i] = real && b == 0 && t >= 4;  /* a sentence pair */
			s.mask[i] = (uint8_t)real;
			/* sequence 1 has nothing to predict */
			s.mlm_labels[i] = real && t % 2 && b != 1 ? (int32_t)rng_below(&r, V) : -100;
			/* words start at even positions but [CLS]; sequence 2 has none */
			s.tags[i] = real && t && t % 2 == 0 && b != 2 ? (int32_t)rng_below(&r, L) : -100;
		}
	s.cls_labels[0] = 2, s.cls_labels[1] = 0, s.cls_labels[2] = 1;
	s.reg_targets[0] = 1.5f, s.reg_targets[1] = -0.25f, s.reg_targets[2] = 0.5f;
	for (int i = 0; i < B * L; i++)
		s.multi_targets[i] = (float)(i % 2);
	s.multi_targets[4] = 0.25f;   /* a soft target */
	return s;
}

static struct bert_batch batch_of(const struct sample *s, enum bert_task task)
{
	const int32_t *labels[] = {s->cls_labels, s->mlm_labels, s->cls_labels, s->cls_labels, s->tags};
	struct bert_batch b = { B, T, s->ids, s->types, s->mask, labels[task],
				task == TASK_REG ? s->reg_targets : s->multi_targets };
	return b;
}

static enum family_id family;   /* of the models tiny_config describes */
static int mean_pool;           /* their pooled head's: the mean of the rows */

/* "", or the family's name and pooling before a check's name. */
static const char *model_name(void)
{
	static char name[64];
	snprintf(name, sizeof name, "%s%s%s", family ? family_of(family)->model_type : "", family ? " " : "",
		 mean_pool ? "mean-pooled " : "");
	return name;
}

static struct bert_config tiny_config(enum bert_task task, float dropout)
{
	struct bert_config c = { .vocab = V, .hidden = 16, .layers = 2, .heads = 2, .ffn = 32,
				 .max_pos = 18, .type_vocab = family_of(family)->type_vocab ? 2 : 0, .ln_eps = 1e-12f,
				 .hidden_dropout = dropout, .attn_dropout = dropout, .cls_dropout = dropout,
				 .task = task, .num_labels = task == TASK_REG ? 1 : L,
				 .family = family, .pad_id = family_of(family)->pad_id < V ? family_of(family)->pad_id : 0,
				 .emb = family_of(family)->keys->emb ? 8 : 0, .mean_pool = mean_pool,
				 /* rotary: layer 0 global, 1 local, the band 2 keys either side */
				 .rope_global = family_of(family)->rope_global,
				 .rope_local = family_of(family)->rope_local, .local_window = 4, .global_every = 2 };
	return c;
}

/* HF's init, then every parameter moved by normal(0, 0.2) so that the check
 * also sees non-trivial biases and LayerNorm weights and far-from-linear
 * activations; the [PAD] row stays at zero as HF keeps it. */
static float label_smoothing;   /* of the models tiny_model makes */

static struct bert *tiny_model(enum bert_task task, float dropout)
{
	struct bert_config c = tiny_config(task, dropout);
	struct bert *m = bert_new(&c, backend_cpu());
	bert_set_label_smoothing(m, label_smoothing);
	bert_init(m, 1);
	float *p = bert_params(m);
	struct rng r;
	rng_seed(&r, 2);
	for (size_t i = c.hidden; i < bert_numel(m); i++)
		p[i] += 0.2f * rng_normal(&r);
	return m;
}

static double loss_of(struct bert *m, const struct bert_batch *b, int train)
{
	int64_t count;
	return bert_forward(m, b, train, SEED, &count);
}

/* The head's dropout is cls_dropout, not the hidden one: with every other
 * dropout 0, a training pass differs from scoring exactly when it is set. */
static void check_head_dropout(void)
{
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, TASK_CLS);
	double loss[2][2];
	for (int set = 0; set < 2; set++) {
		struct bert_config c = tiny_config(TASK_CLS, 0.0f);
		c.cls_dropout = set ? 0.5f : 0.0f;
		struct bert *m = bert_new(&c, backend_cpu());
		bert_init(m, 1);
		loss[set][0] = loss_of(m, &b, 0), loss[set][1] = loss_of(m, &b, 1);
		bert_free(m);
	}
	CHECK(loss[0][0] == loss[0][1] && loss[1][0] != loss[1][1],
	      "%s: the head's dropout is cls_dropout alone (%.6f %.6f; %.6f %.6f)", model_name(), loss[0][0],
	      loss[0][1], loss[1][0], loss[1][1]);
}

static double central_difference(struct bert *m, const struct bert_batch *b, int train,
				 float *x, float h)
{
	float x0 = *x, up = x0 + h, down = x0 - h;
	*x = up;
	double lu = loss_of(m, b, train);
	*x = down;
	double ld = loss_of(m, b, train);
	*x = x0;
	return (lu - ld) / ((double)up - down);
}

/* Checks a sample of coordinates of every tensor: most where the analytic
 * gradient is non-zero, a few anywhere (where it may rightly be zero). */
/* A method the gradient check sets on its model first, and its name. */
static void (*method)(struct bert *m, const struct bert_batch *b);
static const char *method_name = "";

static void check_gradients(enum bert_task task, float dropout, int train)
{
	struct bert *m = tiny_model(task, dropout);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	if (method)
		method(m, &b);
	loss_of(m, &b, train);
	memset(bert_grads(m), 0, sizeof(float) * bert_numel(m));
	bert_backward(m, 1.0f);

	int n = bert_tensors(m, NULL), bad = 0, checked = 0, big = 0;
	struct tensor_ref *t = malloc(sizeof *t * n);
	bert_tensors(m, t);
	float *grads = bert_grads(m), *params = bert_params(m);
	struct rng r;
	rng_seed(&r, 5);
	double worst = 0;
	for (int k = 0; k < n; k++) {
		size_t off = t[k].data - params, size = tensor_numel(&t[k]);
		for (int j = 0; j < 8; j++) {
			size_t i = rng_below(&r, size);
			for (int tries = 0; j < 6 && grads[off + i] == 0 && tries < 1000; tries++)
				i = rng_below(&r, size);
			double analytic = grads[off + i];
			double numeric = central_difference(m, &b, train, params + off + i, 1e-2f);
			/* fp32 activations put about 1e-4 of noise on the differences */
			double excess = fabs(analytic - numeric) - (2e-2 * fabs(numeric) + 2e-4);
			worst = fmax(worst, fabs(analytic - numeric));
			checked++;
			big += fabs(numeric) > 1e-2;
			if (excess > 0 && bad++ < 5)
				printf("    %s[%zu]: analytic %.6g numeric %.6g\n", t[k].name, i,
				       analytic, numeric);
		}
	}
	/* most sampled gradients must be large: zeros everywhere would agree too */
	CHECK(!bad && big >= checked / 2,
	      "%s%s gradients, dropout %.1f%s%s%s: %d of %d coordinates (%d above 1e-2) off, worst by %.1e",
	      model_name(), task_names[task], dropout,
	      train ? " on" : " off", label_smoothing ? ", label smoothing" : "", method_name, bad,
	      checked, big,
	      worst);
	free(t);
	bert_free(m);
}

/* ---- distillation, R-Drop, VAT ---- */

/* Distillation from a larger teacher at temperature 2: 0.3 of the
 * cross-entropy and 0.7 of the soft loss. */
static void distil(struct bert *m, const struct bert_batch *b)
{
	struct bert_config c = tiny_config(bert_config_of(m)->task, 0);
	c.layers = 3, c.hidden = 24, c.ffn = 48;
	struct bert *teacher = bert_new(&c, backend_cpu());
	bert_init(teacher, 9);
	for (size_t i = c.hidden; i < bert_numel(teacher); i++)   /* far from uniform predictions */
		bert_params(teacher)[i] *= 20;
	loss_of(teacher, b, 0);
	bert_targets_from(m, teacher, 2.0f);
	bert_set_soft_loss(m, 0.3f, 0.7f, 2.0f);
	bert_free(teacher);
}

static void rdrop(struct bert *m, const struct bert_batch *b)
{
	(void)b;
	bert_set_rdrop(m, 0.7f);
}

/* The soft loss alone against the model's own predictions is 0 (dropout
 * off, so training predicts as evaluation does), and the head's loss with
 * hard weight 1 is the plain one: every softmax head takes the soft loss. */
static void check_self_distillation(enum bert_task task)
{
	struct bert *m = tiny_model(task, 0.0f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	double plain = loss_of(m, &b, 0);
	bert_targets_from(m, m, 1.0f);
	bert_set_soft_loss(m, 0, 1, 1);
	double self = loss_of(m, &b, 1);
	bert_set_soft_loss(m, 1, 1, 1);
	double both = loss_of(m, &b, 1);
	CHECK(fabs(self) < 1e-4 && fabs(both - plain) < 1e-4 * fabs(plain) && plain > 0.1,
	      "%s: the soft loss against its own predictions %.2g; with the labels %.6f, plain %.6f", task_names[task],
	      self, both, plain);
	bert_free(m);
}

/* VAT: the perturbation the power iteration finds changes the predictions
 * more than a random one of the same norm; none changes nothing. */
static void check_vat(enum bert_task task)
{
	struct bert *m = tiny_model(task, 0.1f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	double kl[3];
	int iters[3] = {0, 1, 1};
	float eps[3] = {2.0f, 2.0f, 0.0f};
	for (int k = 0; k < 3; k++) {
		loss_of(m, &b, 1);
		bert_backward(m, 1.0f);
		bert_vat(m, eps[k], 1e-3f, iters[k], 7, 1.0f);
		kl[k] = bert_take_loss(m);   /* the KL alone: bert_forward left the sum at 0 */
	}
	CHECK(kl[1] > 2 * kl[0] && kl[0] > 0 && fabs(kl[2]) < 1e-6,
	      "%s%s VAT: KL %.3g after a power iteration, %.3g in a random direction, %.1g at eps 0", model_name(),
	      task_names[task],
	      kl[1], kl[0], kl[2]);
	bert_free(m);
}

/* ---- freezing ---- */

/* Gradients of frozen parts are zero, the others those of the whole
 * model's, bit for bit: frozen layers below frozen embeddings are skipped,
 * others carry the gradient down. */
static void check_frozen(enum bert_task task, int layers, int embeddings)
{
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct bert *whole = tiny_model(task, 0.1f), *part = tiny_model(task, 0.1f);
	bert_set_frozen(part, layers, embeddings);
	struct bert *m[2] = {whole, part};
	for (int k = 0; k < 2; k++) {
		loss_of(m[k], &b, 1);
		memset(bert_grads(m[k]), 0, sizeof(float) * bert_numel(m[k]));
		bert_backward(m[k], 1.0f);
	}
	int n = bert_tensors(part, NULL), ok = 1;
	struct tensor_ref *t = malloc(sizeof *t * n);
	bert_tensors(part, t);
	for (int k = 0; k < n; k++) {
		size_t off = t[k].data - bert_params(part), size = tensor_numel(&t[k]);
		int l = -1, emb = !strncmp(t[k].name, "bert.embeddings.", 16);
		sscanf(t[k].name, "bert.encoder.layer.%d.", &l);
		int frozen = (emb && embeddings) || (l >= 0 && l < layers);
		for (size_t i = 0; i < size; i++)
			ok &= bert_grads(part)[off + i] == (frozen ? 0.0f : bert_grads(whole)[off + i]);
	}
	CHECK(ok, "%s, %d layers%s frozen: their gradients zero, the others the same bits", task_names[task], layers,
	      embeddings ? " and the embeddings" : "");
	free(t);
	bert_free(whole);
	bert_free(part);
}

/* ---- repeatability ---- */

struct run {
	double loss;
	float *grads, *logits;
	size_t n;
};

static struct run forward_backward(enum bert_task task, int threads)
{
	int saved = omp_get_max_threads();
	omp_set_num_threads(threads);
	struct bert *m = tiny_model(task, 0.1f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct run r = { loss_of(m, &b, 1), NULL, NULL, bert_numel(m) };
	bert_backward(m, 0.5f);
	r.grads = malloc(sizeof(float) * r.n);
	memcpy(r.grads, bert_grads(m), sizeof(float) * r.n);
	size_t nl = task == TASK_CLS ? B * L : 0;
	r.logits = malloc(sizeof(float) * (nl + 1));
	memcpy(r.logits, bert_logits(m), sizeof(float) * nl);
	bert_free(m);
	omp_set_num_threads(saved);
	return r;
}

static int same_run(const struct run *a, const struct run *b)
{
	return a->loss == b->loss && !memcmp(a->grads, b->grads, sizeof(float) * a->n);
}

static void check_repeatable(enum bert_task task)
{
	const char *name = task == TASK_CLS ? "cls" : "mlm";
	struct run a = forward_backward(task, 2), b = forward_backward(task, 2);
	CHECK(same_run(&a, &b), "%s: forward+backward twice on 2 threads gives the same bits", name);
	struct run c = forward_backward(task, 1), d = forward_backward(task, 1);
	CHECK(same_run(&c, &d), "%s: forward+backward twice on 1 thread gives the same bits", name);
	/* not promised, reported for information */
	printf("note %s: 1 and 2 threads give %s results\n", name,
	       same_run(&a, &c) ? "bitwise identical" : "different");
	free(a.grads), free(a.logits), free(b.grads), free(b.logits);
	free(c.grads), free(c.logits), free(d.grads), free(d.logits);
}

/* Recomputed activations (the layers sharing one set, the last layer's
 * head rows in the first layer's buffers) give the same bits, dropout on. */
static void check_recompute(enum bert_task task)
{
	const char *name = task == TASK_CLS ? "cls" : "mlm";
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct bert *plain = tiny_model(task, 0.1f), *re = tiny_model(task, 0.1f);
	bert_set_recompute(re, 1);
	double l1 = loss_of(plain, &b, 1), l2 = loss_of(re, &b, 1);
	bert_backward(plain, 0.5f);
	bert_backward(re, 0.5f);
	size_t n = bert_numel(plain);
	CHECK(l1 == l2 && !memcmp(bert_grads(plain), bert_grads(re), sizeof(float) * n),
	      "%s%s: with activation recomputation, the same loss and gradients, bit for bit", model_name(), name);
	struct bert_config c = tiny_config(task, 0.1f);
	const struct backend *cpu = backend_cpu();
	double saved = bert_batch_bytes(&c, cpu, B, T, B, 0) - bert_batch_bytes(&c, cpu, B, T, B, 1);
	CHECK(saved > 0, "%s%s: recomputation needs %.0f fewer bytes of activations", model_name(), name, saved);
	bert_free(plain);
	bert_free(re);
}

static void check_accumulates(void)
{
	struct bert *m = tiny_model(TASK_MLM, 0.1f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, TASK_MLM);
	size_t n = bert_numel(m);
	loss_of(m, &b, 1);
	bert_backward(m, 1.0f);
	float *once = malloc(sizeof(float) * n);
	memcpy(once, bert_grads(m), sizeof(float) * n);
	loss_of(m, &b, 1);
	bert_backward(m, 1.0f);
	int twice = 1;
	for (size_t i = 0; i < n; i++)
		twice &= close_enough(bert_grads(m)[i], 2 * once[i], 1e-7, 1e-5);
	CHECK(twice, "a second backward adds to the grads");
	free(once);
	bert_free(m);
}

/* ---- padding, eval mode, loss ---- */

/* The logits of the last forward and the gradients of its backward. */
struct outcome {
	double loss;
	int64_t count;
	float *logits, *grads;
	int nlogits;
};

static struct outcome train_step(struct bert *m, const struct bert_batch *b)
{
	struct outcome o = { 0 };
	bert_zero_grads(m);
	o.loss = bert_forward(m, b, 1, SEED, &o.count);
	bert_backward(m, 1.0f);
	o.nlogits = (int)o.count * (bert_config_of(m)->task == TASK_CLS ? L : V);
	o.logits = malloc(sizeof(float) * (o.nlogits + 1));
	memcpy(o.logits, bert_logits(m), sizeof(float) * o.nlogits);
	o.grads = malloc(sizeof(float) * bert_numel(m));
	memcpy(o.grads, bert_grads(m), sizeof(float) * bert_numel(m));
	return o;
}

static void free_outcome(struct outcome *o)
{
	free(o->logits);
	free(o->grads);
}

/* Padding takes no rows: a batch padded further trains to the same bits,
 * dropout on. */
static void check_padding(enum bert_task task)
{
	struct bert *m = tiny_model(task, 0.1f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct outcome before = train_step(m, &b);

	enum { TP = T + 4 };
	int32_t ids[B * TP] = { 0 }, types[B * TP] = { 0 }, labels[B * TP];
	uint8_t mask[B * TP] = { 0 };
	for (int i = 0; i < B * TP; i++)
		labels[i] = -100;
	for (int i = 0; i < B; i++) {
		memcpy(ids + i * TP, s.ids + i * T, sizeof(int32_t) * T);
		memcpy(types + i * TP, s.types + i * T, sizeof(int32_t) * T);
		memcpy(mask + i * TP, s.mask + i * T, T);
		memcpy(labels + i * TP, s.mlm_labels + i * T, sizeof(int32_t) * T);
	}
	struct bert_batch padded = { B, TP, ids, types, mask,
				     task == TASK_CLS ? s.cls_labels : labels };
	struct outcome after = train_step(m, &padded);
	CHECK(before.count == after.count && before.loss == after.loss &&
	      !memcmp(before.logits, after.logits, sizeof(float) * before.nlogits) &&
	      !memcmp(before.grads, after.grads, sizeof(float) * bert_numel(m)),
	      "%s: appending padding gives the same loss, logits and gradients, bit for bit",
	      task == TASK_CLS ? "cls" : "mlm");
	free_outcome(&before);
	free_outcome(&after);
	bert_free(m);
}

/* The batch of mixed lengths against each sequence alone, unpadded: the same
 * logits, and gradients that sum to the batch's, within fp32 rounding. */
static void check_alone(enum bert_task task)
{
	const char *name = task == TASK_CLS ? "cls" : "mlm";
	struct bert *m = tiny_model(task, 0.0f);
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct outcome all = train_step(m, &b);
	size_t n = bert_numel(m);
	double *sum = calloc(n, sizeof *sum), logit_err = 0, loss = 0;
	int at = 0;
	for (int i = 0; i < B; i++) {
		const int32_t *labels = task == TASK_CLS ? s.cls_labels + i : s.mlm_labels + i * T;
		struct bert_batch one = { 1, lengths[i], s.ids + i * T, s.types + i * T,
					  s.mask + i * T, labels };
		struct outcome o = train_step(m, &one);
		for (int j = 0; j < o.nlogits; j++, at++)
			logit_err = fmax(logit_err, fabs(o.logits[j] - all.logits[at]));
		for (size_t j = 0; j < n; j++)
			sum[j] += o.grads[j];
		loss += o.loss;
		free_outcome(&o);
	}
	int grads_close = 1;
	for (size_t j = 0; j < n; j++)
		grads_close &= close_enough(all.grads[j], sum[j], 1e-6, 1e-4);
	CHECK(at == all.nlogits && logit_err < 1e-5 && close_enough(loss, all.loss, 1e-6, 1e-6),
	      "%s: a batch of lengths 7, 5, 3 gives each sequence's logits and loss alone (%.1e)",
	      name, logit_err);
	CHECK(grads_close, "%s: its gradients are the sum of each sequence's alone", name);
	free(sum);
	free_outcome(&all);
	bert_free(m);
}

/* The summed loss recomputed from the logits in double. */
static double loss_from_logits(const float *logits, const int32_t *labels, int rows, int width)
{
	double sum = 0;
	for (int r = 0; r < rows; r++) {
		const float *x = logits + (size_t)r * width;
		double mx = x[0], s = 0;
		for (int j = 1; j < width; j++)
			mx = fmax(mx, x[j]);
		for (int j = 0; j < width; j++)
			s += exp(x[j] - mx);
		sum += mx + log(s) - x[labels[r]];
	}
	return sum;
}

static void check_loss_and_eval(void)
{
	struct sample s = make_sample();
	struct bert *m = tiny_model(TASK_MLM, 0.3f);
	struct bert_batch b = batch_of(&s, TASK_MLM);
	int64_t count;
	double loss = bert_forward(m, &b, 0, SEED, &count);
	int32_t labels[B * T];
	int expected = 0;
	for (int i = 0; i < B * T; i++)
		if (s.mlm_labels[i] != -100)
			labels[expected++] = s.mlm_labels[i];
	CHECK(count == expected, "mlm count is the number of labelled positions (%lld)",
	      (long long)count);
	double ref = loss_from_logits(bert_logits(m), labels, expected, V);
	CHECK(close_enough(loss, ref, 1e-4, 1e-5), "mlm loss is the summed CE of its logits (%.5f vs %.5f)",
	      loss, ref);

	struct bert_config c = tiny_config(TASK_MLM, 0.0f);
	struct bert *plain = bert_new(&c, backend_cpu());
	memcpy(bert_params(plain), bert_params(m), sizeof(float) * bert_numel(m));
	int64_t count2;
	CHECK(bert_forward(plain, &b, 1, SEED, &count2) == loss,
	      "eval mode ignores dropout (same loss as a model without it)");
	CHECK(bert_forward(m, &b, 1, SEED, &count2) != loss, "train mode applies dropout");
	bert_free(plain);
	bert_free(m);

	m = tiny_model(TASK_CLS, 0.0f);
	b = batch_of(&s, TASK_CLS);
	loss = bert_forward(m, &b, 0, SEED, &count);
	ref = loss_from_logits(bert_logits(m), s.cls_labels, B, L);
	CHECK(count == B && close_enough(loss, ref, 1e-4, 1e-5),
	      "cls loss is the summed CE of B logit rows (%.5f vs %.5f)", loss, ref);
	bert_free(m);
}

/* ---- names, layout and init ---- */

static int has_tensor(const struct tensor_ref *t, int n, const char *name, int64_t d0, int64_t d1)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return t[i].shape[0] == d0 && (t[i].ndim == 1 ? d1 == 0 : t[i].shape[1] == d1);
	return 0;
}

static void check_tensors(enum bert_task task)
{
	struct bert_config c = tiny_config(task, 0.1f);
	struct bert *m = bert_new(&c, backend_cpu());
	int n = bert_tensors(m, NULL);
	struct tensor_ref *t = malloc(sizeof *t * n);
	bert_tensors(m, t);
	size_t at = 0;
	int tiled = 1, unique = 1;
	for (int i = 0; i < n; i++) {
		tiled &= t[i].data == bert_params(m) + at;
		at += tensor_numel(&t[i]);
		for (int j = 0; j < i; j++)
			unique &= strcmp(t[i].name, t[j].name) != 0;
	}
	const char *name = task == TASK_CLS ? "cls" : "mlm";
	CHECK(tiled && at == bert_numel(m), "%s: tensors tile the parameter buffer in order", name);
	CHECK(unique, "%s: tensor names are unique", name);
	CHECK(n == 5 + 16 * c.layers + 4 + (task == TASK_MLM), "%s: %d tensors", name, n);
	int C = c.hidden;
	int common = has_tensor(t, n, "bert.embeddings.word_embeddings.weight", V, C) &&
		     has_tensor(t, n, "bert.embeddings.position_embeddings.weight", c.max_pos, C) &&
		     has_tensor(t, n, "bert.embeddings.token_type_embeddings.weight", 2, C) &&
		     has_tensor(t, n, "bert.embeddings.LayerNorm.bias", C, 0) &&
		     has_tensor(t, n, "bert.encoder.layer.1.attention.self.key.weight", C, C) &&
		     has_tensor(t, n, "bert.encoder.layer.0.attention.self.value.bias", C, 0) &&
		     has_tensor(t, n, "bert.encoder.layer.1.attention.output.LayerNorm.weight", C, 0) &&
		     has_tensor(t, n, "bert.encoder.layer.0.intermediate.dense.weight", c.ffn, C) &&
		     has_tensor(t, n, "bert.encoder.layer.1.output.dense.weight", C, c.ffn);
	int head = task == TASK_CLS
		? has_tensor(t, n, "bert.pooler.dense.weight", C, C) &&
		  has_tensor(t, n, "classifier.weight", L, C) && has_tensor(t, n, "classifier.bias", L, 0)
		: has_tensor(t, n, "cls.predictions.transform.dense.weight", C, C) &&
		  has_tensor(t, n, "cls.predictions.transform.LayerNorm.weight", C, 0) &&
		  has_tensor(t, n, "cls.predictions.bias", V, 0) &&
		  !has_tensor(t, n, "bert.pooler.dense.weight", C, C);
	CHECK(common && head, "%s: HF names and shapes are there", name);

	bert_init(m, 9);
	double sum = 0, sum2 = 0;
	size_t count = 0;
	int ln_ones = 1, zero_biases = 1, pad_zero = 1;
	for (int i = 0; i < n; i++) {
		int64_t k = tensor_numel(&t[i]);
		const char *nm = t[i].name;
		for (int64_t j = 0; j < k; j++) {
			float x = t[i].data[j];
			if (strstr(nm, "LayerNorm.weight"))
				ln_ones &= x == 1.0f;
			else if (strstr(nm, "bias"))
				zero_biases &= x == 0.0f;
			else if (!strstr(nm, "word_embeddings") || j >= C) {
				sum += x, sum2 += (double)x * x, count++;
			} else
				pad_zero &= x == 0.0f;
		}
	}
	double sd = sqrt(sum2 / count - (sum / count) * (sum / count));
	CHECK(ln_ones && zero_biases && pad_zero && fabs(sd - 0.02) < 0.001 && fabs(sum / count) < 0.001,
	      "%s: init is HF's (LayerNorm 1/0, biases 0, [PAD] row 0, weights sd %.4f)", name, sd);
	CHECK(bert_decays("bert.encoder.layer.0.output.dense.weight") &&
	      bert_decays("bert.embeddings.word_embeddings.weight") &&
	      !bert_decays("bert.encoder.layer.0.output.LayerNorm.weight") &&
	      !bert_decays("classifier.bias") && !bert_decays("cls.predictions.bias"),
	      "weight decay skips biases and LayerNorm");
	free(t);
	bert_free(m);
}

/* An MLM training pass with its head rows padded (bert_set_head_slots, for
 * CUDA graphs) against one without: the rows are padded, the count is the masked tokens', the loss and gradients the
 * same up to the products' order of sums (dropout off: the padded query
 * rows take other draws of the last sequence's attention dropout). */
static void check_head_slots(void)
{
	enum { SB = 3, ST = 100 };
	int32_t ids[SB * ST], labels[SB * ST];
	struct rng r;
	rng_seed(&r, 5);
	for (int i = 0; i < SB * ST; i++) {
		ids[i] = 1 + (int32_t)rng_below(&r, V - 1);
		labels[i] = rng_below(&r, 10) < 7 ? (int32_t)rng_below(&r, V) : -100;
	}
	struct bert_batch b = { SB, ST, ids, NULL, NULL, labels, NULL };
	struct bert_config c = tiny_config(TASK_MLM, 0.0f);
	c.max_pos = ST;
	struct bert *m[2];
	double loss[2];
	int64_t count[2];
	for (int k = 0; k < 2; k++) {
		m[k] = bert_new(&c, backend_cpu());
		bert_init(m[k], 1);
		bert_set_head_slots(m[k], k);
		const char *note = bert_train_pass(m[k], &b, SEED, 1, 0.01f, &count[k]);
		CHECK(!note, "head slots %s: no note from the CPU", k ? "on" : "off");
		loss[k] = bert_take_loss(m[k]);
	}
	int rows = m[0]->M;
	CHECK(rows > 64 && m[1]->M == bert_head_slots(rows) && m[1]->M > rows,
	      "mlm: %d masked rows padded to %d", rows, m[1]->M);
	CHECK(bert_head_slots(38) == 64 && bert_head_slots(640) == 640 && bert_head_slots(641) == 704 &&
	      bert_head_slots(1500) == 1536, "slots: 38 rows take 64, 640 640, 641 704, 1500 1536");
	CHECK(count[0] == rows && count[1] == rows, "the count is the masked tokens' (%lld, %lld)",
	      (long long)count[0], (long long)count[1]);
	CHECK(close_enough(loss[1], loss[0], 0, 1e-6), "the same loss (%.9g, %.9g)", loss[1], loss[0]);
	size_t n = bert_numel(m[0]), far = 0;
	for (size_t i = 0; i < n; i++)
		far += !close_enough(bert_grads(m[1])[i], bert_grads(m[0])[i], 1e-7, 1e-5);
	CHECK(far == 0, "the same gradients (%zu of %zu apart)", far, n);
	double l2 = bert_forward(m[1], &b, 0, SEED, &count[1]);
	CHECK(m[1]->M == rows && close_enough(l2, bert_forward(m[0], &b, 0, SEED, &count[0]), 0, 1e-6),
	      "evaluation is not padded");
	bert_free(m[0]);
	bert_free(m[1]);
}

/* A training pass's loss, count and gradients with the model's shapes set
 * by slots and pad (rows to pad to, 0: none). */
static struct run shaped_pass(enum bert_task task, float dropout, int slots, int pad, int64_t *count)
{
	struct sample s = make_sample();
	struct bert_batch b = batch_of(&s, task);
	struct bert *m = tiny_model(task, dropout);
	bert_set_head_slots(m, slots);
	bert_set_pad_rows(m, pad);
	bert_train_pass(m, &b, SEED, 1, 0.5f, count);
	struct run r = { bert_take_loss(m), malloc(sizeof(float) * bert_numel(m)), NULL, bert_numel(m) };
	memcpy(r.grads, bert_grads(m), sizeof(float) * r.n);
	CHECK(m->N == (pad ? pad : m->packed) && m->packed == lengths[0] + lengths[1] + lengths[2],
	      "%s: %d rows of %d in sequences", task_names[task], m->N, m->packed);
	bert_free(m);
	return r;
}

/* the largest gradient difference over the largest gradient */
static double grads_apart(const struct run *a, const struct run *b)
{
	double big = 0, diff = 0;
	for (size_t i = 0; i < a->n; i++) {
		big = fmax(big, fabs(a->grads[i]));
		diff = fmax(diff, fabs(a->grads[i] - b->grads[i]));
	}
	return diff / big;
}

/* A batch's rows padded to 40 (bert_set_pad_rows): the padding rows belong
 * to no sequence and change nothing, dropout on (a row's draws do not
 * depend on the rows after it); with cls's head rows padded to 64 as well,
 * dropout off. */
static void check_pad_rows(enum bert_task task)
{
	int64_t c0, c1, c2;
	struct run plain = shaped_pass(task, 0.1f, 0, 0, &c0), padded = shaped_pass(task, 0.1f, 0, 40, &c1);
	CHECK(c0 == c1 && close_enough(padded.loss, plain.loss, 0, 1e-6) && grads_apart(&padded, &plain) < 1e-5,
	      "%s: 15 rows padded to 40, dropout on: the same count, loss (%.9g, %.9g) and gradients "
	      "(%.2g apart)", task_names[task], padded.loss, plain.loss, grads_apart(&padded, &plain));
	free(padded.grads);
	free(plain.grads);
	plain = shaped_pass(task, 0.0f, 0, 0, &c0);
	padded = shaped_pass(task, 0.0f, 1, 40, &c2);
	CHECK(c0 == c2 && close_enough(padded.loss, plain.loss, 0, 1e-6) && grads_apart(&padded, &plain) < 1e-5,
	      "%s: and the head's rows padded to 64: the same count (%lld), loss and gradients (%.2g apart)",
	      task_names[task], (long long)c2, grads_apart(&padded, &plain));
	free(padded.grads);
	free(plain.grads);
}

int main(void)
{
	check_head_slots();
	check_pad_rows(TASK_CLS);
	check_pad_rows(TASK_MLM);
	check_pad_rows(TASK_TOKCLS);
	check_tensors(TASK_CLS);
	check_tensors(TASK_MLM);
	check_gradients(TASK_CLS, 0.0f, 0);
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.0f, 0);
	check_gradients(TASK_MLM, 0.1f, 1);
	for (enum bert_task k = TASK_REG; k <= TASK_TOKCLS; k++) {
		check_gradients(k, 0.0f, 0);
		check_gradients(k, 0.1f, 1);
	}
	label_smoothing = 0.1f;
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.0f, 1);
	label_smoothing = 0;
	method = distil, method_name = ", distilled";
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.0f, 1);
	check_gradients(TASK_MLM, 0.1f, 1);
	method = rdrop, method_name = ", R-Drop";
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	method = NULL, method_name = "";
	family = FAMILY_ROBERTA;   /* its positions after the pad id, its pooled head's two dropouts */
	check_head_dropout();
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_REG, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.1f, 1);
	family = FAMILY_DISTILBERT;   /* no token types, no dropout on the attention's output, ReLU */
	check_head_dropout();
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_MULTI, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.1f, 1);
	family = FAMILY_ELECTRA;   /* embeddings narrower than the layers, projected; GELU in the pooled head */
	check_head_dropout();
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_REG, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.1f, 1);
	family = FAMILY_MODERNBERT;   /* pre-norm, rotary, local bands, GeGLU, no biases, transformed heads */
	check_head_dropout();
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_MULTI, 0.1f, 1);
	check_gradients(TASK_TOKCLS, 0.1f, 1);
	check_gradients(TASK_MLM, 0.1f, 1);
	check_recompute(TASK_CLS);
	check_recompute(TASK_MLM);
	check_vat(TASK_TOKCLS);
	mean_pool = 1;
	check_gradients(TASK_CLS, 0.1f, 1);
	check_gradients(TASK_REG, 0.0f, 1);
	check_recompute(TASK_CLS);
	mean_pool = 0;
	family = FAMILY_BERT;
	check_head_dropout();
	check_self_distillation(TASK_CLS);
	check_self_distillation(TASK_TOKCLS);
	check_self_distillation(TASK_MLM);
	check_vat(TASK_CLS);
	check_vat(TASK_TOKCLS);
	check_vat(TASK_MLM);
	check_frozen(TASK_CLS, 1, 1);
	check_frozen(TASK_CLS, 2, 1);
	check_frozen(TASK_CLS, 1, 0);
	check_frozen(TASK_TOKCLS, 0, 1);
	check_frozen(TASK_MLM, 1, 1);
	check_repeatable(TASK_CLS);
	check_repeatable(TASK_MLM);
	check_accumulates();
	check_recompute(TASK_CLS);
	check_recompute(TASK_MLM);
	check_padding(TASK_CLS);
	check_padding(TASK_MLM);
	check_alone(TASK_CLS);
	check_alone(TASK_MLM);
	check_loss_and_eval();
	CHECK_DONE();
}
