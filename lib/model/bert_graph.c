/* BERT with Hugging Face semantics (modeling_bert.py): post-LN encoder
 * layers and the heads: sequence classification and regression (pooler,
 * dropout, classifier: BertForSequenceClassification), token classification
 * (dropout, classifier: BertForTokenClassification) and masked LM
 * (transform, decoder tied to the word embeddings). One
 * function per block forward and backward, top to bottom, each calling the
 * ops of the model's backend on buffers in the backend's memory.
 * Dimension letters: B batch, T sequence, N rows, C hidden, H heads,
 * F feed-forward, V vocab, L labels, M rows the head predicts.
 * A batch runs unpadded: each sequence's rows stop at its last real token,
 * and the rows of all sequences are packed one after another, so no matrix
 * product, LayerNorm or attention works on padding. */
#include "model/bert.h"
#include "model/bert_inside.h"
#include "backend/memcheck.h"
#include "util/err.h"
#include "util/rng.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const task_names[] = {"cls", "mlm", "reg", "multi", "tokcls"};

const char *task_name(enum bert_task task)
{
	return task_names[task];
}

/* ---- parameter layout ---- */

static float *add_tensor(struct layout *l, int64_t rows, int64_t cols, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static float *add_tensor(struct layout *l, int64_t rows, int64_t cols, const char *fmt, ...)
{
	float *p = l->base ? l->base + l->used : NULL;
	if (l->list) {
		char name[128];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(name, sizeof name, fmt, ap);
		va_end(ap);
		struct tensor_ref *t = &l->list[l->count];
		t->name = xstrdup(name);
		t->ndim = cols ? 2 : 1;
		t->shape[0] = rows;
		t->shape[1] = cols;
		t->data = p;
	}
	l->used += (size_t)rows * (cols ? cols : 1);
	l->count++;
	return p;
}

/* A bias of n floats where the family has them, else NULL (bert_new
 * points it at a row of zeros). */
static float *add_bias(struct layout *l, const struct bert_config *c, int64_t n, const char *fmt, int i)
{
	char name[128];
	if (!family_of(c->family)->biases)
		return NULL;
	snprintf(name, sizeof name, fmt, i);
	return add_tensor(l, n, 0, "%s", name);
}

static void lay_out_layer(struct layout *l, const struct bert_config *c, int i,
			  struct layer_weights *w)
{
	const char *pre = "bert.encoder.layer";
	const struct family *f = family_of(c->family);
	int C = c->hidden, F = c->ffn;
	/* query, key and value side by side make one [3C, C] product */
	if (f->qkv_one) {
		w->qkv_w = add_tensor(l, 3 * C, C, "%s.%d.attention.self.qkv.weight", pre, i);
	} else {
		w->qkv_w = add_tensor(l, C, C, "%s.%d.attention.self.query.weight", pre, i);
		add_tensor(l, C, C, "%s.%d.attention.self.key.weight", pre, i);
		add_tensor(l, C, C, "%s.%d.attention.self.value.weight", pre, i);
		w->qkv_b = add_tensor(l, C, 0, "%s.%d.attention.self.query.bias", pre, i);
		add_tensor(l, C, 0, "%s.%d.attention.self.key.bias", pre, i);
		add_tensor(l, C, 0, "%s.%d.attention.self.value.bias", pre, i);
	}
	w->attn_out_w = add_tensor(l, C, C, "%s.%d.attention.output.dense.weight", pre, i);
	w->attn_out_b = add_bias(l, c, C, "bert.encoder.layer.%d.attention.output.dense.bias", i);
	w->attn_ln_w = add_tensor(l, C, 0, "%s.%d.attention.output.LayerNorm.weight", pre, i);
	w->attn_ln_b = add_bias(l, c, C, "bert.encoder.layer.%d.attention.output.LayerNorm.bias", i);
	w->ffn_in_w = add_tensor(l, f->geglu ? 2 * F : F, C, "%s.%d.intermediate.dense.weight", pre, i);
	w->ffn_in_b = add_bias(l, c, f->geglu ? 2 * F : F, "bert.encoder.layer.%d.intermediate.dense.bias", i);
	w->ffn_out_w = add_tensor(l, C, F, "%s.%d.output.dense.weight", pre, i);
	w->ffn_out_b = add_bias(l, c, C, "bert.encoder.layer.%d.output.dense.bias", i);
	w->ffn_ln_w = add_tensor(l, C, 0, "%s.%d.output.LayerNorm.weight", pre, i);
	w->ffn_ln_b = add_bias(l, c, C, "bert.encoder.layer.%d.output.LayerNorm.bias", i);
	w->end = l->base ? l->base + l->used : NULL;
}

void bert_lay_out(struct layout *l, const struct bert_config *c, struct weights *w)
{
	const struct family *f = family_of(c->family);
	int C = c->hidden, E = bert_emb_width(c);
	w->word = add_tensor(l, c->vocab, E, "bert.embeddings.word_embeddings.weight");
	if (!f->rotary)
		w->pos = add_tensor(l, c->max_pos, E, "bert.embeddings.position_embeddings.weight");
	if (c->type_vocab)   /* else bert_new's row of zeros */
		w->type = add_tensor(l, c->type_vocab, E, "bert.embeddings.token_type_embeddings.weight");
	w->emb_ln_w = add_tensor(l, E, 0, "bert.embeddings.LayerNorm.weight");
	w->emb_ln_b = add_bias(l, c, E, "bert.embeddings.LayerNorm.bias", 0);
	if (E != C) {
		w->proj_w = add_tensor(l, C, E, "bert.embeddings_project.weight");
		w->proj_b = add_tensor(l, C, 0, "bert.embeddings_project.bias");
	}
	w->emb_end = l->base ? l->base + l->used : NULL;
	for (int i = 0; i < c->layers; i++)
		lay_out_layer(l, c, i, &w->layer[i]);
	int transform = c->task == TASK_MLM || f->head_transform;
	if (bert_task_pooled(c->task) && !transform) {
		w->pool_w = add_tensor(l, C, C, "bert.pooler.dense.weight");
		w->pool_b = add_tensor(l, C, 0, "bert.pooler.dense.bias");
	}
	if (transform) {
		w->tr_w = add_tensor(l, E, C, "cls.predictions.transform.dense.weight");
		w->tr_b = add_bias(l, c, E, "cls.predictions.transform.dense.bias", 0);
		w->tr_ln_w = add_tensor(l, E, 0, "cls.predictions.transform.LayerNorm.weight");
		w->tr_ln_b = add_bias(l, c, E, "cls.predictions.transform.LayerNorm.bias", 0);
	}
	if (c->task != TASK_MLM) {
		w->cls_w = add_tensor(l, bert_logit_width(c), C, "classifier.weight");
		w->cls_b = add_tensor(l, bert_logit_width(c), 0, "classifier.bias");
	} else {
		w->decoder_b = add_tensor(l, c->vocab, 0, "cls.predictions.bias");
	}
}

/* Whether layer l attends to a local band of keys (ModernBERT's local
 * layers: all but every global_every-th). */
static int layer_local(const struct bert_config *c, int l)
{
	return family_of(c->family)->rotary && c->global_every > 0 && l % c->global_every;
}

/* Sizes in range: then no count of the parameters overflows. */
static void check_sizes(const struct bert_config *c)
{
	if (c->vocab < 1 || c->hidden < 1 || c->layers < 0 || c->heads < 1 || c->ffn < 1 ||
	    c->max_pos < 1 || c->type_vocab < 0 || c->emb < 0)
		die("bert: config sizes must be positive");
	if (c->layers > BERT_MAX_LAYERS || c->hidden > BERT_MAX_HIDDEN || c->heads > BERT_MAX_HEADS ||
	    c->ffn > BERT_MAX_FFN || c->max_pos > BERT_MAX_POS || c->emb > BERT_MAX_HIDDEN)
		die("bert: config sizes beyond the largest model");
}

static void check_config(const struct bert_config *c)
{
	check_sizes(c);
	if (c->hidden % c->heads)
		die("bert: hidden size %d is not a multiple of %d heads", c->hidden, c->heads);
	if (!(c->hidden_dropout >= 0 && c->hidden_dropout < 1 && c->attn_dropout >= 0 &&
	      c->attn_dropout < 1 && c->cls_dropout >= 0 && c->cls_dropout < 1))
		die("bert: dropout must be in [0, 1)");
	if (!(c->ln_eps > 0))
		die("bert: layer norm eps must be positive");
	if (c->task < TASK_CLS || c->task > TASK_TOKCLS)
		die("bert: unknown task %d", (int)c->task);
	if (c->family < FAMILY_BERT || c->family >= FAMILY_COUNT)
		die("bert: unknown family %d", (int)c->family);
	const struct family *f = family_of(c->family);
	if (f->prenorm && c->layers < 1)
		die("bert: a %s model has at least one layer", f->model_type);
	if (f->rotary && ((c->hidden / c->heads) % 2 || !(c->rope_global > 0) || !(c->rope_local > 0) ||
			  c->global_every < 1 || c->local_window < 2))
		die("bert: rotary positions need an even head size, bases above 0, a global layer every "
		    "1 or more and a local window of 2 or more");
	if (bert_emb_width(c) != c->hidden && !family_of(c->family)->keys->emb)
		die("bert: a %s model's embeddings are as wide as its layers", family_of(c->family)->model_type);
	if (!c->type_vocab != !family_of(c->family)->type_vocab)
		die("bert: a %s model %s token types", family_of(c->family)->model_type,
		    c->type_vocab ? "has no" : "needs");
	if (c->pad_id < 0 || c->pad_id >= c->vocab)
		die("bert: pad id %d is not in the vocab of %d", c->pad_id, c->vocab);
	if (family_first_position(c->family, c->pad_id) >= c->max_pos)
		die("bert: %d positions leave none after the pad id %d", c->max_pos, c->pad_id);
	if (c->task == TASK_REG && c->num_labels != 1)
		die("bert: the regression head has 1 output, not %d", c->num_labels);
	if ((c->task == TASK_CLS || c->task == TASK_MULTI || c->task == TASK_TOKCLS) &&
	    c->num_labels < 2)
		die("bert: a classification head needs at least 2 labels, not %d", c->num_labels);
}


/* A host copy of a backend buffer: the buffer itself on a host backend. */
static float *host_copy(const struct backend *be, float *buf, size_t n)
{
	return be->host ? buf : xcalloc(n ? n : 1, sizeof(float));
}

void bert_stand_in(const struct bert *m, struct weights *x, float *with)
{
	float **top[] = { &x->pos, &x->type, &x->emb_ln_b, &x->tr_b, &x->tr_ln_b };
	for (size_t i = 0; i < sizeof top / sizeof *top; i++)
		if (!*top[i])
			*top[i] = with;
	for (int l = 0; l < m->c.layers; l++) {
		struct layer_weights *w = &x->layer[l];
		float **b[] = { &w->qkv_b, &w->attn_out_b, &w->attn_ln_b, &w->ffn_in_b, &w->ffn_out_b, &w->ffn_ln_b };
		for (size_t i = 0; i < sizeof b / sizeof *b; i++)
			if (!*b[i])
				*b[i] = with;
	}
}

/* The zeros and the sink that stand in for what the family lacks. */
static void stand_ins(struct bert *m)
{
	const struct bert_config *c = &m->c;
	size_t n = (size_t)3 * c->hidden;
	n = n > (size_t)2 * c->ffn ? n : (size_t)2 * c->ffn;
	n = n > (size_t)bert_emb_width(c) ? n : (size_t)bert_emb_width(c);
	m->stand_in = n;
	m->zeros = m->be->alloc(2 * sizeof(float) * n);
	m->be->zero(m->zeros, 2 * sizeof(float) * n);
	bert_stand_in(m, &m->w, m->zeros);
	bert_stand_in(m, &m->g, m->zeros + n);
}

struct bert *bert_new(const struct bert_config *c, const struct backend *be)
{
	check_config(c);
	struct bert *m = xcalloc(1, sizeof *m);
	m->c = *c;
	m->be = be;
	m->w.layer = xcalloc(c->layers ? c->layers : 1, sizeof *m->w.layer);
	m->g.layer = xcalloc(c->layers ? c->layers : 1, sizeof *m->g.layer);
	m->a.layer = xcalloc(c->layers ? c->layers : 1, sizeof *m->a.layer);

	struct layout count = { 0 };
	bert_lay_out(&count, c, &m->w);
	m->numel = count.used;
	m->ntensors = count.count;
	memory_check(be, "model", 2.0 * sizeof(float) * (double)m->numel, "parameters and gradients");
	m->dparams = be->alloc(m->numel * sizeof(float));
	m->dgrads = be->alloc(m->numel * sizeof(float));
	m->loss = be->alloc(2 * sizeof *m->loss);
	m->loss_to = m->loss;
	m->graphs = 1;
	m->params = host_copy(be, m->dparams, m->numel);
	m->grads = host_copy(be, m->dgrads, m->numel);
	m->tensors = xcalloc(m->ntensors, sizeof *m->tensors);
	struct layout params = { m->dparams, 0, m->tensors, 0 };
	bert_lay_out(&params, c, &m->w);
	for (int i = 0; i < m->ntensors; i++)   /* the names go with the host copy */
		m->tensors[i].data = m->params + (m->tensors[i].data - m->dparams);
	struct layout grads = { m->dgrads, 0, NULL, 0 };
	bert_lay_out(&grads, c, &m->g);
	stand_ins(m);
	return m;
}

size_t bert_config_numel(const struct bert_config *c)
{
	check_sizes(c);
	struct weights w = { .layer = xcalloc(c->layers ? c->layers : 1, sizeof *w.layer) };
	struct layout count = { 0 };
	bert_lay_out(&count, c, &w);
	free(w.layer);
	return count.used;
}

void bert_free(struct bert *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->ntensors; i++)
		free((char *)m->tensors[i].name);
	free(m->tensors);
	if (!m->be->host) {
		free(m->params);
		free(m->grads);
	}
	m->be->release(m->dparams);
	m->be->release(m->dgrads);
	m->be->release(m->loss);
	m->be->release(m->zeros);
	free(m->w.layer);
	free(m->g.layer);
	free(m->a.layer);
	free(m->ids);
	free(m->types);
	free(m->positions);
	free(m->rows);
	free(m->labels);
	free(m->kv_start);
	free(m->q_start);
	free(m->head_pos);
	free(m->p_all);
	free(m->p_head);
	free(m->mask);
	free(m->targets);
	free(m->twice_ids), free(m->twice_types), free(m->twice_labels), free(m->twice_mask);
	free(m->vat_layers);
	struct on_backend *bufs[] = { &m->d_ids, &m->d_types, &m->d_positions, &m->d_rows,
				      &m->d_labels, &m->d_kv_start, &m->d_q_start, &m->d_head_pos, &m->d_p_all,
				      &m->d_p_head, &m->d_mask, &m->d_targets, &m->targets_soft,
				      &m->vat_r, &m->vat_g, &m->vat_grads, &m->vat_p, &m->work,
				      &m->weight_acts_space };
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		if (bufs[i]->p)
			m->be->release(bufs[i]->p);
	free(m->logits);
	free(m);
}

const struct bert_config *bert_config_of(const struct bert *m)
{
	return &m->c;
}

float *bert_params(struct bert *m)
{
	return m->params;
}

float *bert_grads(struct bert *m)
{
	return m->grads;
}

void bert_pull(struct bert *m)
{
	m->be->download(m->params, m->dparams, m->numel * sizeof(float));
	m->be->download(m->grads, m->dgrads, m->numel * sizeof(float));
}

void bert_push(struct bert *m)
{
	m->weight_acts_kept = 0;
	m->be->upload(m->dparams, m->params, m->numel * sizeof(float));
}

const struct backend *bert_backend(const struct bert *m)
{
	return m->be;
}

float *bert_backend_params(struct bert *m)
{
	return m->dparams;
}

float *bert_backend_grads(struct bert *m)
{
	return m->dgrads;
}

void bert_zero_grads(struct bert *m)
{
	m->be->zero(m->dgrads, m->numel * sizeof(float));
	m->be->zero(m->zeros + m->stand_in, m->stand_in * sizeof(float));   /* the sink */
}

double bert_grad_norm(const struct bert *m)
{
	return sqrt(m->be->sum_squares(m->dgrads, m->numel));
}

double bert_grad_sum_squares(const struct bert *m, size_t lo, size_t hi)
{
	return m->be->sum_squares(m->dgrads + lo, hi - lo);
}

void bert_scale_grads(struct bert *m, float s)
{
	m->be->scale(m->dgrads, m->numel, s);
}

size_t bert_numel(const struct bert *m)
{
	return m->numel;
}

int bert_tensors(struct bert *m, struct tensor_ref *out)
{
	if (out)
		memcpy(out, m->tensors, sizeof *out * m->ntensors);
	return m->ntensors;
}

int bert_decays(const char *name)
{
	return !strstr(name, "bias") && !strstr(name, "LayerNorm");
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

void bert_init_tensors(struct bert *m, uint64_t seed, const char *prefix)
{
	for (int i = 0; i < m->ntensors; i++) {
		const struct tensor_ref *t = &m->tensors[i];
		if (strncmp(t->name, prefix, strlen(prefix)))
			continue;
		int64_t n = tensor_numel(t);
		float *p = t->data;
		if (ends_with(t->name, "LayerNorm.weight")) {
			for (int64_t j = 0; j < n; j++)
				p[j] = 1.0f;
		} else if (ends_with(t->name, "bias")) {
			memset(p, 0, sizeof(float) * n);
		} else {
			uint64_t s = rng_derive(seed, i);
#pragma omp parallel for schedule(static)
			for (int64_t j = 0; j < n; j++)
				p[j] = 0.02f * rng_normal_at(s, j);
		}
	}
	if (!strncmp(m->tensors[0].name, prefix, strlen(prefix))) {   /* the embeddings come first */
		float *word = m->tensors[0].data;
		memset(word + (size_t)m->c.pad_id * m->c.hidden, 0, sizeof(float) * m->c.hidden);
	}
	bert_push(m);
}

void bert_init(struct bert *m, uint64_t seed)
{
	bert_init_tensors(m, seed, "");
}

/* ---- workspace ---- */

/* Hands out consecutive pieces of the workspace, 64-byte aligned relative to
 * its start, of floats or of the backend's acts (act bytes each); with no
 * base it only measures. */
struct carver {
	char *base;
	size_t used;               /* bytes */
	size_t act;
};

static void *carve_bytes(struct carver *k, size_t bytes)
{
	void *p = k->base ? k->base + k->used : NULL;
	k->used += (bytes + 63) & ~(size_t)63;
	return p;
}

static float *carve(struct carver *k, size_t n)
{
	return carve_bytes(k, n * sizeof(float));
}

static struct act *carve_act(struct carver *k, size_t n)
{
	return carve_bytes(k, n * k->act);
}

/* x[n] in acts: x itself where an act is a float, else n acts of its own. */
static struct act *carve_low(struct carver *k, float *x, size_t n)
{
	return k->act == sizeof(float) ? (struct act *)x : carve_act(k, n);
}

/* Space for as_act to round n floats into: none where an act is a float. */
static struct act *carve_space(struct carver *k, size_t n)
{
	return k->act == sizeof(float) ? NULL : carve_act(k, n);
}

/* Where a layer's acts are not floats, its LayerNorm's fp32 output and the
 * fp32 residual stream it passes on are read by its forward alone (the
 * backward reads their copies in acts), and GELU's output is made again
 * from its input for the backward (the same bits): the layers share those,
 * and layer l's output is the other one of two (outs[l % 2], the
 * embeddings' outs[1]). The backward reuses them in turn, each once what
 * last read it is done: the fp32 ones (one block) for the gradient of
 * GELU's output and then of the attention's, GELU's for the gradient of
 * its input and then of Q, K and V. With recompute, the layers share
 * everything. */
struct shared_acts {
	float *block;            /* ln and outs[]; the backward's dffn, dctx */
	float *ln, *outs[2];
	struct act *gelu;        /* GELU's output; the backward's dffn_low, dqkv */
};

/* A layer's activations for N rows, the attention keeping state floats;
 * layer l's, sharing what s holds (NULL: none). */
static void carve_layer(struct carver *k, const struct bert_config *c, size_t N, size_t state,
			const struct shared_acts *s, int l, struct layer_acts *a)
{
	size_t C = c->hidden, F = c->ffn;
	a->qkv = carve_act(k, N * 3 * C);
	a->att_state = carve(k, state);
	a->ctx = carve_act(k, N * C);
	a->attn_sum = carve(k, N * C);
	a->attn_mean = carve(k, N);
	a->attn_rstd = carve(k, N);
	a->attn_ln = s ? s->ln : carve(k, N * C);
	a->attn_low = carve_low(k, a->attn_ln, N * C);
	a->ffn_pre = carve_act(k, N * (family_of(c->family)->geglu ? 2 * F : F));
	a->ffn_act = s ? s->gelu : carve_act(k, N * F);
	a->ffn_sum = carve(k, N * C);
	a->ffn_mean = carve(k, N);
	a->ffn_rstd = carve(k, N);
	a->out = s ? s->outs[l % 2] : carve(k, N * C);
	a->out_low = carve_low(k, a->out, N * C);
}

/* The widest row of the head: the hidden size, or the MLM transform's. */
static size_t head_width(const struct bert_config *c)
{
	return (size_t)(c->hidden > bert_emb_width(c) ? c->hidden : bert_emb_width(c));
}

static void carve_head(struct carver *k, const struct bert_config *c, int M,
		       struct head_acts *h)
{
	size_t C = c->hidden, W = head_width(c);
	size_t width = (size_t)bert_logit_width(c);
	h->dropped_in = carve(k, M * C);
	h->dropped_space = carve_space(k, M * C);
	h->dense = carve(k, M * C);
	h->pre = carve_act(k, M * W);
	h->act = carve(k, M * W);
	h->norm = carve(k, M * W);
	h->mean = carve(k, M);
	h->rstd = carve(k, M);
	h->logits = carve(k, M * width);
	h->dlogits = carve(k, M * width);
	h->lse = carve(k, M);
	h->kl_lse = carve(k, M);
	h->space = carve_space(k, M * W);
}

/* The widest of what a layer's shared buffers hold: Q, K and V, or the
 * feed-forward's activations (its input's gradient, twice as wide, for a
 * GeGLU). */
static size_t shared_width(const struct bert_config *c, int acts)
{
	size_t F = (size_t)c->ffn * (acts && family_of(c->family)->geglu ? 2 : 1), QKV = 3 * (size_t)c->hidden;
	return QKV > F ? QKV : F;
}

/* With share, the layers share one set of activations and keep only their
 * outputs (recompute: a layer's backward first runs its forward again),
 * and with streams their residual streams too (a pre-norm model that
 * trains). Returns the bytes. */
static size_t carve_all(struct carver *k, const struct bert_config *c, size_t N, size_t state,
			int M, int share, int streams, struct acts *a)
{
	const struct family *f = family_of(c->family);
	size_t C = c->hidden, F = c->ffn;
	struct shared_acts shared, *s = NULL;
	if (k->act != sizeof(float) && !share) {
		s = &shared;
		s->block = carve(k, N * shared_width(c, 0));
		s->ln = s->block;
		s->outs[0] = s->block + N * C;
		s->outs[1] = s->block + 2 * N * C;
		s->gelu = carve_act(k, N * shared_width(c, 1));
	}
	a->gelu_zero_bias = s ? carve(k, F) : NULL;
	size_t E = (size_t)bert_emb_width(c);
	a->emb_sum = carve(k, N * E);
	a->emb_mean = carve(k, N);
	a->emb_rstd = carve(k, N);
	a->emb_out = s ? s->outs[1] : carve(k, N * C);
	a->emb_space = carve_space(k, N * C);
	a->proj_in = E != C ? carve(k, N * E) : NULL;
	a->proj_space = E != C ? carve_space(k, N * E) : NULL;
	a->dproj = E != C ? carve(k, N * E) : NULL;
	for (int i = 0; i < c->layers; i++) {
		if (i && share) {
			a->layer[i] = a->layer[0];
			a->layer[i].out = carve(k, N * C);
			a->layer[i].out_low = carve_low(k, a->layer[i].out, N * C);
			if (streams)
				a->layer[i].ffn_sum = carve(k, N * C);
		} else {
			carve_layer(k, c, N, state, s, i, &a->layer[i]);
		}
	}
	a->rows_in = carve(k, (size_t)M * C);
	a->rows_space = carve_space(k, (size_t)M * C);
	a->rows_stream = f->prenorm ? carve(k, (size_t)M * C) : NULL;
	carve_head(k, c, M, &a->head);
	a->dh = carve(k, N * C);
	a->ds = f->prenorm ? carve(k, N * C) : NULL;
	a->dtmp = f->prenorm ? carve(k, N * C) : NULL;
	a->dbranch = carve_act(k, N * C);
	a->dctx = s ? s->block : carve(k, N * C);
	a->dqkv = s ? s->gelu : carve_act(k, N * 3 * C);
	a->dffn = s ? s->block : carve(k, N * F);
	a->dffn_low = s ? s->gelu : f->geglu ? carve_act(k, N * 2 * F) : carve_low(k, a->dffn, N * F);
	a->dlogits_space = carve_space(k, (size_t)M * bert_logit_width(c));
	a->dhead = carve(k, (size_t)M * head_width(c));
	a->dhead_low = carve_low(k, a->dhead, (size_t)M * head_width(c));
	a->dhead_in = carve(k, (size_t)M * C);
	return k->used;
}

/* carve_all's bytes for a batch of B sequences of T tokens, none padding,
 * in a model of c with layers layers. */
static double carved_bytes(const struct bert_config *c, const struct backend *be, int B, int T, int M,
			   int recompute, int layers)
{
	struct bert_config one = *c;
	one.layers = layers;
	struct acts a = { .layer = xcalloc(layers ? layers : 1, sizeof *a.layer) };
	struct carver k = { NULL, 0, be->act_size };
	size_t N = (size_t)B * T;
	carve_all(&k, &one, N, N * c->heads * be->attention_state, M, recompute,
		  recompute && family_of(c->family)->prenorm, &a);
	free(a.layer);
	return (double)k.used;
}

double bert_batch_bytes(const struct bert_config *c, const struct backend *be, int B, int T,
			int M, int recompute)
{
	/* each layer adds the same: carved for one and two, and the rest in
	 * doubles, so that no count overflows */
	double scratch = be->attention_scratch(B, T, c->hidden, c->heads);
	if (c->layers < 2)
		return carved_bytes(c, be, B, T, M, recompute, c->layers) + scratch;
	double one = carved_bytes(c, be, B, T, M, recompute, 1), two = carved_bytes(c, be, B, T, M, recompute, 2);
	return one + (c->layers - 1) * (two - one) + scratch;
}

/* Grows the workspace to the batch's size on the model's backend. The
 * layers of a model that only scores share their activations, as with
 * recompute: nothing is read again. */
void bert_reserve(struct bert *m)
{
	struct carver measure = { NULL, 0, m->be->act_size };
	size_t state = (size_t)m->N * m->c.heads * m->be->attention_state;
	int share = m->recompute || m->forward_only;
	int streams = m->recompute && !m->forward_only && family_of(m->c.family)->prenorm;
	size_t need = carve_all(&measure, &m->c, m->N, state, m->M, share, streams, &m->a);
	struct carver place = { bert_fit(m->be, &m->work, need), 0, m->be->act_size };
	carve_all(&place, &m->c, m->N, state, m->M, share, streams, &m->a);
	if (m->a.gelu_zero_bias)
		m->be->zero(m->a.gelu_zero_bias, sizeof(float) * (size_t)m->c.ffn);
	m->shared = share;
}

/* ---- dropout sites ---- */

enum { SITE_ATTN_PROBS, SITE_ATTN_OUT, SITE_FFN_OUT, SITES_PER_LAYER };

/* Every dropout site draws from its own stream of the step's seed. */
static uint64_t site_seed(const struct bert *m, int layer, int site)
{
	return rng_derive(m->dropout_seed, 1 + (uint64_t)layer * SITES_PER_LAYER + site);
}

static uint64_t embeddings_seed(const struct bert *m)
{
	return rng_derive(m->dropout_seed, 0);
}

static uint64_t classifier_seed(const struct bert *m)
{
	return rng_derive(m->dropout_seed, 1 + (uint64_t)m->c.layers * SITES_PER_LAYER);
}

static float hidden_p(const struct bert *m)
{
	return m->train ? m->c.hidden_dropout : 0.0f;
}

static float cls_p(const struct bert *m)
{
	return m->train ? m->c.cls_dropout : 0.0f;
}

static float attn_p(const struct bert *m)
{
	return m->train ? m->c.attn_dropout : 0.0f;
}

/* The dropout of the attention's output, before its residual sum. */
static float attn_out_p(const struct bert *m)
{
	return family_of(m->c.family)->attn_out_dropout ? hidden_p(m) : 0.0f;
}

/* The first parameter a product takes: the first after the embeddings'
 * LayerNorm (the projection's or the first layer's), or the word
 * embeddings for mlm, whose decoder they are. */
static size_t first_weight_in_acts(const struct bert *m)
{
	return m->c.task == TASK_MLM ? 0 : (size_t)((m->w.proj_w ? m->w.proj_w : m->w.emb_end) - m->dparams);
}

/* w's copy in acts, for a weight w among the parameters. */
static const struct act *weight_act(const struct bert *m, const float *w)
{
	return act_at(m->be, m->weight_acts, (size_t)(w - m->dparams) - first_weight_in_acts(m));
}

/* The parameters from first_weight_in_acts on, in acts, for this forward and its
 * backward: made afresh for each, but once for a model that only scores,
 * whose weights change only by bert_push. */
static void weights_in_acts(struct bert *m)
{
	const struct backend *be = m->be;
	if (m->weight_acts_kept)
		return;
	size_t from = first_weight_in_acts(m), n = m->numel - from;
	struct act *space = acts_are_floats(be) ? NULL : bert_fit(be, &m->weight_acts_space, n * be->act_size);
	m->weight_acts = m->forward_only && be->as_fixed_act ? be->as_fixed_act(space, m->dparams + from, n) :
							       be->as_act(space, m->dparams + from, n);
	m->weight_acts_kept = m->forward_only;
}

/* ---- embeddings ---- */

/* The rows of the position table the tokens take: their positions, or
 * where positions are rotary and the table a row of zeros (bert_stand_in),
 * that row: the token types' ids, all 0 in such a family. */
static const int32_t *table_positions(const struct bert *m)
{
	return family_of(m->c.family)->rotary ? m->d.types : m->d.positions;
}

/* The embeddings' LayerNorm (after dropout) into emb_out, or where they
 * are narrower than the layers into proj_in, and its projection into
 * emb_out. */
static void embeddings_forward(struct bert *m)
{
	struct acts *a = &m->a;
	const struct backend *be = m->be;
	int N = m->N, C = m->c.hidden, E = bert_emb_width(&m->c);
	struct embedding e = { m->d.ids, m->d.types, table_positions(m), m->w.word, m->w.pos,
			       m->w.type, N, E };
	float *ln = a->proj_in ? a->proj_in : a->emb_out;
	struct act *space = a->proj_in ? a->proj_space : a->emb_space;
	be->embedding_layernorm_forward(ln, space, a->emb_sum, a->emb_mean, a->emb_rstd, &e, m->w.emb_ln_w,
					m->w.emb_ln_b, m->c.ln_eps, hidden_p(m), embeddings_seed(m));
	const struct act *low = acts_are_floats(be) ? float_acts(ln) : space;
	if (!a->proj_in) {
		a->emb_low = low;
		return;
	}
	a->proj_low = low;
	be->linear_forward(a->emb_out, low, weight_act(m, m->w.proj_w), m->w.proj_b, N, E, C);
	a->emb_low = be->as_act(a->emb_space, a->emb_out, (size_t)N * C);
}

/* dh: the gradient of the embeddings' output, consumed. */
static void embeddings_backward(struct bert *m, float *dh)
{
	struct acts *a = &m->a;
	int N = m->N, C = m->c.hidden, E = bert_emb_width(&m->c);
	if (a->proj_in) {   /* dh becomes the gradient of the projection's input */
		m->be->linear_backward(a->dproj, m->g.proj_w, m->g.proj_b,
				       m->be->as_act(a->dbranch, dh, (size_t)N * C), a->proj_low,
				       weight_act(m, m->w.proj_w), N, E, C, 0);
		dh = a->dproj;
	}
	m->be->dropout_apply(dh, dh, (size_t)N * E, hidden_p(m), embeddings_seed(m));
	m->be->layernorm_backward(dh, m->g.emb_ln_w, m->g.emb_ln_b, dh, a->emb_sum,
				  a->emb_mean, a->emb_rstd, m->w.emb_ln_w, N, E);
	m->be->embedding_backward(m->g.word, m->g.pos, m->g.type, dh, m->d.ids, m->d.types,
				  table_positions(m), N, E, m->c.pad_id);
	if (family_first_position(m->c.family, m->c.pad_id))   /* the pad's position, a padding row too */
		m->be->zero(m->g.pos + (size_t)m->c.pad_id * E, sizeof(float) * (size_t)E);
}

/* ---- encoder layer ---- */

/* Layer l's input, the residual stream, and the same in acts. */
static const float *layer_input(const struct bert *m, int l)
{
	return l ? m->a.layer[l - 1].out : m->a.emb_out;
}

static const struct act *layer_input_low(const struct bert *m, int l)
{
	return l ? m->a.layer[l - 1].out_low : m->a.emb_low;
}


/* The last layer needs queries, and everything after the attention, only at
 * the rows its head reads: the same loss and gradients for far less work. */
static struct layer_rows all_rows(const struct bert *m)
{
	struct layer_rows r = { m->N, NULL, NULL, m->d.p_all };
	return r;
}

static struct layer_rows head_rows(const struct bert *m)
{
	struct layer_rows r = { m->M, m->d.rows, m->d.q_start, m->d.p_head };
	return r;
}

/* Where batches are padded (bert_set_pad_rows), zeroes an [N, width] act
 * buffer that the attention then writes at the sequences' rows only, so
 * that its padding rows are zero. The whole buffer, whatever the padding:
 * a CUDA graph replays a memset only of the size it captured. */
static void clear_for_padding(const struct bert *m, struct act *x, size_t width)
{
	if (m->pad_rows && m->train)
		m->be->zero(x, (size_t)m->N * width * m->be->act_size);
}

/* Where layer l's attention finds Q, K and V: in the fused [N, 3C] product,
 * or K|V over all rows and Q over the selected ones. */
static struct attention layer_attention(const struct bert *m, int l, const struct layer_rows *r)
{
	const struct backend *be = m->be;
	const struct act *qkv = m->a.layer[l].qkv;
	int N = m->N, C = m->c.hidden;
	struct attention att = { m->B, m->T, C, m->c.heads, qkv, act_at(be, qkv, C),
				 act_at(be, qkv, 2 * (size_t)C), 3 * C, 3 * C, m->d.kv_start, NULL,
				 r->p_start, m->d.mask, attn_p(m), site_seed(m, l, SITE_ATTN_PROBS),
				 r->R, m->a.layer[l].ctx, m->holes, 0 };
	att.band = layer_local(&m->c, l) ? m->c.local_window / 2 : 0;
	if (r->rows) {
		att.q_at = r->rows;
		att.k = qkv, att.v = act_at(be, qkv, C), att.ldkv = 2 * C;
		att.q = act_at(be, qkv, (size_t)N * 2 * C), att.ldq = C;
		att.q_start = r->q_start;
		att.empty = m->empty;
	}
	return att;
}

/* x: the layer's input, the residual stream; xl: the same in acts. */
/* Rotary positions (ModernBERT's) in parts C-wide blocks of rows rows of x,
 * ld apart, at the positions pos, with layer l's base; inverse: back. */
static void layer_rotary(const struct bert *m, int l, struct act *x, int ld, int parts, const int32_t *pos,
			 int rows, int inverse)
{
	if (family_of(m->c.family)->rotary)
		m->be->rotary(x, ld, parts, m->c.hidden, m->c.heads, pos, rows,
			      layer_local(&m->c, l) ? m->c.rope_local : m->c.rope_global, inverse);
}

/* x: the layer's input (in acts xl); s: the residual stream, x itself
 * but in a pre-norm model, whose x is s normed. */
static void layer_forward(struct bert *m, int l, const float *x, const struct act *xl, const float *s,
			  const struct layer_rows *r)
{
	const struct backend *be = m->be;
	const struct family *f = family_of(m->c.family);
	const struct layer_weights *w = &m->w.layer[l];
	struct layer_acts *a = &m->a.layer[l];
	int N = m->N, R = r->R, C = m->c.hidden, F = m->c.ffn;
	float eps = m->c.ln_eps;
	struct attention att = layer_attention(m, l, r);
	const float *res = s;   /* the residual stream at the R rows */

	if (!r->rows) {
		be->linear_forward_act(a->qkv, xl, weight_act(m, w->qkv_w), w->qkv_b, N, C, 3 * C);
		layer_rotary(m, l, a->qkv, 3 * C, 2, m->d.positions, N, 0);
	} else {
		struct act *q = act_at(be, a->qkv, (size_t)N * 2 * C);
		be->linear_forward_act(a->qkv, xl, weight_act(m, w->qkv_w + C * C), w->qkv_b + C, N, C,
				       2 * C);
		layer_rotary(m, l, a->qkv, 2 * C, 1, m->d.positions, N, 0);
		be->gather_rows(m->a.rows_in, x, r->rows, R, C);
		res = m->a.rows_in;
		if (s != x) {
			be->gather_rows(m->a.rows_stream, s, r->rows, R, C);
			res = m->a.rows_stream;
		}
		m->a.rows_low = be->as_act(m->a.rows_space, m->a.rows_in, (size_t)R * C);
		be->linear_forward_act(q, m->a.rows_low, weight_act(m, w->qkv_w), w->qkv_b, R, C, C);
		layer_rotary(m, l, q, C, 1, m->d.head_pos, R, 0);
	}
	if (!r->rows)
		clear_for_padding(m, a->ctx, (size_t)C);
	be->attention_forward(a->ctx, a->att_state, &att);
	be->linear_forward(a->attn_sum, a->ctx, weight_act(m, w->attn_out_w), NULL, R, C, C);
	be->residual_layernorm_forward(a->attn_ln, a->attn_low, a->attn_sum, a->attn_mean,
				       a->attn_rstd, res, w->attn_out_b, w->attn_ln_w,
				       w->attn_ln_b, R, C, eps, attn_out_p(m),
				       site_seed(m, l, SITE_ATTN_OUT));
	if (f->geglu) {
		be->linear_forward_act(a->ffn_pre, a->attn_low, weight_act(m, w->ffn_in_w), w->ffn_in_b, R, C, 2 * F);
		be->geglu_forward(a->ffn_act, a->ffn_pre, R, F);
	} else if (m->forward_only && be->linear_gelu_forward_act) {
		be->linear_gelu_forward_act(a->ffn_act, a->attn_low, weight_act(m, w->ffn_in_w), w->ffn_in_b, R,
					    C, F);
	} else {
		be->linear_forward_act(a->ffn_pre, a->attn_low, weight_act(m, w->ffn_in_w), NULL, R, C, F);
		be->bias_gelu_forward(NULL, a->ffn_act, a->ffn_pre, w->ffn_in_b, R, F);
	}
	be->linear_forward(a->ffn_sum, a->ffn_act, weight_act(m, w->ffn_out_w), NULL, R, F, C);
	/* the sum's other term: the stream (pre-norm), or the attention's normed output */
	be->residual_layernorm_forward(a->out, a->out_low, a->ffn_sum, a->ffn_mean,
				       a->ffn_rstd, f->prenorm ? a->attn_sum : a->attn_ln, w->ffn_out_b,
				       w->ffn_ln_w, w->ffn_ln_b, R, C, eps, hidden_p(m),
				       site_seed(m, l, SITE_FFN_OUT));
}

/* Layer l's residual stream: its input, or a pre-norm model's sum that its
 * input is the norm of (the first layer's, the embeddings themselves). */
static const float *layer_stream(const struct bert *m, int l)
{
	return family_of(m->c.family)->prenorm && l ? m->a.layer[l - 1].ffn_sum : layer_input(m, l);
}

/* Layer l's forward over all rows, or r's. */
static void layer_forward_at(struct bert *m, int l, const struct layer_rows *r)
{
	layer_forward(m, l, layer_input(m, l), layer_input_low(m, l), layer_stream(m, l), r);
}

/* The rows the last layer computes after its attention: the head's, or
 * all where the head pools them. */
static struct layer_rows last_rows(const struct bert *m)
{
	return m->c.mean_pool ? all_rows(m) : head_rows(m);
}

/* Back through the LayerNorm of a residual sum of rows rows: dh, the
 * gradient of its output, becomes that of the sum. Returns the gradient of
 * the branch that fed the sum, through its dropout p, in acts: dh itself
 * where an act is a float and nothing is dropped. */
static const struct act *sum_backward(struct bert *m, float *dh, float *dw, float *db,
				      const float *sum, const float *mean, const float *rstd,
				      const float *w, int rows, float p, uint64_t seed)
{
	int own = p > 0.0f || !acts_are_floats(m->be);
	struct act *branch = own ? m->a.dbranch : NULL;
	m->be->residual_layernorm_backward(dh, branch, dw, db, dh, sum, mean, rstd, w, rows,
					   m->c.hidden, p, seed);
	return own ? branch : float_acts(dh);
}

/* Into the fused QKV product, or its two parts for the last layer: dh holds
 * the gradient of the residual stream at the R rows, to which (accumulate)
 * the queries' input's adds, or which it replaces; dx gets the gradient of
 * the layer's input, xl in acts. */
static void qkv_backward(struct bert *m, int l, const struct act *xl, const struct layer_rows *r,
			 const struct act *dq, float *dh, float *dx, int accumulate)
{
	const struct layer_weights *w = &m->w.layer[l];
	struct layer_weights *g = &m->g.layer[l];
	int N = m->N, C = m->c.hidden;
	if (!r->rows) {
		m->be->linear_backward(dx, g->qkv_w, g->qkv_b, m->a.dqkv, xl, weight_act(m, w->qkv_w), N,
				       C, 3 * C, accumulate);
		return;
	}
	m->be->linear_backward(dh, g->qkv_w, g->qkv_b, dq, m->a.rows_low, weight_act(m, w->qkv_w), r->R,
			       C, C, accumulate);
	m->be->linear_backward(dx, g->qkv_w + C * C, g->qkv_b + C, m->a.dqkv, xl,
			       weight_act(m, w->qkv_w + C * C), N, C, 2 * C, 0);
	m->be->scatter_add_rows(dx, dh, r->rows, r->R, C);
}

/* From the attention's output's gradient, dbranch in acts, to Q, K and V's
 * (turned back where they were turned), left in dqkv; returns where Q's is. */
static const struct act *attention_backward(struct bert *m, int l, const struct layer_rows *r,
					    const struct act *dbranch)
{
	const struct backend *be = m->be;
	const struct layer_weights *w = &m->w.layer[l];
	struct layer_weights *g = &m->g.layer[l];
	struct layer_acts *a = &m->a.layer[l];
	struct acts *d = &m->a;
	int N = m->N, R = r->R, C = m->c.hidden;
	be->linear_backward(d->dctx, g->attn_out_w, g->attn_out_b, dbranch, a->ctx,
			    weight_act(m, w->attn_out_w), R, C, C, 0);
	struct attention att = layer_attention(m, l, r);
	struct act *dq = r->rows ? act_at(be, d->dqkv, (size_t)N * 2 * C) : d->dqkv;
	struct act *dk = r->rows ? d->dqkv : act_at(be, d->dqkv, C);
	clear_for_padding(m, d->dqkv, (size_t)(r->rows ? 2 : 3) * C);
	be->attention_backward(dq, dk, act_at(be, dk, C), d->dctx, a->att_state, &att);
	if (!r->rows) {
		layer_rotary(m, l, d->dqkv, 3 * C, 2, m->d.positions, N, 1);
	} else {
		layer_rotary(m, l, dk, 2 * C, 1, m->d.positions, N, 1);
		layer_rotary(m, l, dq, C, 1, m->d.head_pos, R, 1);
	}
	return dq;
}

/* dh: in, the gradient of the layer's R output rows, overwritten; dx: out,
 * that of its input, xl in acts (dx is dh when all rows are computed). */
static void layer_backward(struct bert *m, int l, const struct act *xl,
			   const struct layer_rows *r, float *dh, float *dx)
{
	const struct layer_weights *w = &m->w.layer[l];
	struct layer_weights *g = &m->g.layer[l];
	struct layer_acts *a = &m->a.layer[l];
	struct acts *d = &m->a;
	int R = r->R, C = m->c.hidden, F = m->c.ffn;

	const struct act *dbranch = sum_backward(m, dh, g->ffn_ln_w, g->ffn_ln_b, a->ffn_sum,
						 a->ffn_mean, a->ffn_rstd, w->ffn_ln_w, R, hidden_p(m),
						 site_seed(m, l, SITE_FFN_OUT));
	if (d->gelu_zero_bias)   /* GELU's output again from its input, which holds its bias */
		m->be->bias_gelu_forward(NULL, a->ffn_act, a->ffn_pre, d->gelu_zero_bias, R, F);
	m->be->linear_backward(d->dffn, g->ffn_out_w, g->ffn_out_b, dbranch, a->ffn_act,
			       weight_act(m, w->ffn_out_w), R, F, C, 0);
	m->be->gelu_backward(d->dffn_low, d->dffn, a->ffn_pre, R, F);
	/* the residual: dh already holds the sum's gradient, the FFN's adds to it */
	m->be->linear_backward(dh, g->ffn_in_w, g->ffn_in_b, d->dffn_low, a->attn_low,
			       weight_act(m, w->ffn_in_w), R, C, F, 1);

	dbranch = sum_backward(m, dh, g->attn_ln_w, g->attn_ln_b, a->attn_sum, a->attn_mean,
			       a->attn_rstd, w->attn_ln_w, R, attn_out_p(m), site_seed(m, l, SITE_ATTN_OUT));
	qkv_backward(m, l, xl, r, attention_backward(m, l, r, dbranch), dh, dx, 1);
}

/* A pre-norm stream's gradient dh at rows rows as the branch that fed it
 * sees it: through its dropout p, in acts. */
static const struct act *stream_branch(struct bert *m, float *dh, int rows, float p, uint64_t seed)
{
	size_t n = (size_t)rows * m->c.hidden;
	if (p <= 0.0f)
		return acts_are_floats(m->be) ? float_acts(dh) : m->be->as_act(m->a.dbranch, dh, n);
	m->be->dropout_apply(m->a.dtmp, dh, n, p, seed);
	return m->be->as_act(m->a.dbranch, m->a.dtmp, n);
}

/* A pre-norm layer's backward (ModernBERT's). dh: in, the gradient of the
 * layer's R output rows (its last norm's), overwritten; the stream's
 * gradient a.ds: in, that from above at all rows (none for the last layer,
 * top), out, that of the stream below; dx: out, that of the layer's input
 * x, xl in acts (dx is dh when all rows are computed). */
static void prenorm_layer_backward(struct bert *m, int l, const struct act *xl, const struct layer_rows *r,
				   float *dh, float *dx, int top)
{
	const struct backend *be = m->be;
	const struct layer_weights *w = &m->w.layer[l];
	struct layer_weights *g = &m->g.layer[l];
	struct layer_acts *a = &m->a.layer[l];
	struct acts *d = &m->a;
	int N = m->N, R = r->R, C = m->c.hidden, F = m->c.ffn;
	size_t n = (size_t)R * C;

	/* the stream after the feed-forward: through the norm, and from above */
	be->layernorm_backward(dh, g->ffn_ln_w, g->ffn_ln_b, dh, a->ffn_sum, a->ffn_mean, a->ffn_rstd, w->ffn_ln_w,
			       R, C);
	if (!top)
		be->axpy(dh, d->ds, n, 1.0f);
	const struct act *branch = stream_branch(m, dh, R, hidden_p(m), site_seed(m, l, SITE_FFN_OUT));
	if (d->gelu_zero_bias)   /* the GeGLU's output again */
		be->geglu_forward(a->ffn_act, a->ffn_pre, R, F);
	be->linear_backward(d->dffn, g->ffn_out_w, g->ffn_out_b, branch, a->ffn_act, weight_act(m, w->ffn_out_w),
			    R, F, C, 0);
	be->geglu_backward(d->dffn_low, d->dffn, a->ffn_pre, R, F);
	be->linear_backward(d->dtmp, g->ffn_in_w, g->ffn_in_b, d->dffn_low, a->attn_low, weight_act(m, w->ffn_in_w),
			    R, C, 2 * F, 0);
	/* the stream after the attention: the skip's, and through the norm */
	be->layernorm_backward(d->dtmp, g->attn_ln_w, g->attn_ln_b, d->dtmp, a->attn_sum, a->attn_mean,
			       a->attn_rstd, w->attn_ln_w, R, C);
	be->axpy(dh, d->dtmp, n, 1.0f);
	const struct act *dq = attention_backward(m, l, r, stream_branch(m, dh, R, attn_out_p(m),
									   site_seed(m, l, SITE_ATTN_OUT)));
	/* the stream below: the skip's gradient */
	if (r->rows) {
		be->zero(d->ds, sizeof(float) * (size_t)N * C);
		be->scatter_add_rows(d->ds, dh, r->rows, R, C);
	} else {
		be->dropout_apply(d->ds, dh, n, 0.0f, 0);   /* a copy */
	}
	qkv_backward(m, l, xl, r, dq, dh, dx, 0);
}

/* Layer l's backward, of its family's form: dh the gradient of its R
 * output rows, dx out that of its input; top: the last layer. */
static void any_layer_backward(struct bert *m, int l, const struct layer_rows *r, float *dh, float *dx, int top)
{
	if (family_of(m->c.family)->prenorm)
		prenorm_layer_backward(m, l, layer_input_low(m, l), r, dh, dx, top);
	else
		layer_backward(m, l, layer_input_low(m, l), r, dh, dx);
}

/* ---- the losses of the heads ---- */

/* Label smoothing applies in training only: evaluations see the plain loss. */
static float smoothing(const struct bert *m)
{
	return m->train ? m->smoothing : 0.0f;
}

/* Whether a training forward learns from soft targets too (bert_set_soft_loss). */
static int soft_on(const struct bert *m)
{
	if (!m->train || !m->soft)
		return 0;
	if (m->targets_rows != m->M)
		die("bert: soft targets for %d rows, but the batch predicts %d", m->targets_rows, m->M);
	return 1;
}

/* Adds the summed loss of the M rows of logits into *m->loss_to: squared
 * error, binary cross-entropy, or the cross-entropy with in training the
 * soft targets' KL divergence (weights hard and soft) and R-Drop's (all
 * halved, as the batch ran twice). */
static void head_loss(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, W = bert_logit_width(&m->c), soft = soft_on(m);
	double *loss = m->loss_to, half = m->doubled ? 0.5 : 1;
	if (m->c.task == TASK_REG) {
		m->be->mse_forward(loss, 1, h->logits, m->d.targets, M);
		return;
	}
	if (m->c.task == TASK_MULTI) {
		m->be->bce_forward(loss, 1, h->logits, m->d.targets, (size_t)M * W);
		return;
	}
	if (!soft || m->hard > 0)
		m->be->crossentropy_forward(loss, half * (soft ? m->hard : 1), h->lse, h->logits,
					    m->d.labels, M, W, smoothing(m));
	if (soft)
		m->be->kl_forward(loss, half * ((double)m->soft * m->temp * m->temp), h->kl_lse,
				  h->logits, m->targets_soft.p, M, W, m->temp);
	if (m->doubled)
		m->be->symkl_forward(loss, half * m->rdrop, h->logits, M / 2, W);
}

static void head_loss_backward(struct bert *m, float scale)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, W = bert_logit_width(&m->c), soft = soft_on(m);
	if (m->c.task == TASK_REG) {
		m->be->mse_backward(h->dlogits, h->logits, m->d.targets, M, scale);
		return;
	}
	if (m->c.task == TASK_MULTI) {
		m->be->bce_backward(h->dlogits, h->logits, m->d.targets, (size_t)M * W, scale);
		return;
	}
	float s = m->doubled ? 0.5f * scale : scale;
	if (!soft || m->hard > 0)
		m->be->crossentropy_backward(h->dlogits, h->logits, h->lse, m->d.labels, M, W,
					     smoothing(m), soft ? s * m->hard : s);
	else
		m->be->zero(h->dlogits, (size_t)M * W * sizeof(float));
	if (soft)
		m->be->kl_backward(h->dlogits, h->logits, h->kl_lse, m->targets_soft.p, M, W, m->temp,
				   s * m->soft * m->temp * m->temp);
	if (m->doubled)
		m->be->symkl_backward(h->dlogits, h->logits, M / 2, W, s * m->rdrop);
}

/* The logits' gradient, which head_loss_backward left, in acts. */
static const struct act *dlogits_low(struct bert *m)
{
	return m->be->as_act(m->a.dlogits_space, m->a.head.dlogits,
			     (size_t)m->M * bert_logit_width(&m->c));
}

/* ---- the classifier: dropout, linear, loss ---- */

/* The classifier over the head's rows x [M, C], x after its dropout into
 * out, and the loss. */
static void classifier_forward(struct bert *m, float *out, const float *x)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, C = m->c.hidden, W = bert_logit_width(&m->c);
	m->be->dropout_apply(out, x, (size_t)M * C, cls_p(m), classifier_seed(m));
	h->last_in = m->be->as_act(h->space, out, (size_t)M * C);
	m->be->linear_forward(h->logits, h->last_in, weight_act(m, m->w.cls_w), m->w.cls_b, M, C, W);
	head_loss(m);
}

/* Back from the loss through the classifier and its dropout, into dx
 * [M, C]. */
static void classifier_backward(struct bert *m, float scale, float *dx)
{
	int M = m->M, C = m->c.hidden, W = bert_logit_width(&m->c);
	head_loss_backward(m, scale);
	m->be->linear_backward(dx, m->g.cls_w, m->g.cls_b, dlogits_low(m), m->a.head.last_in,
			       weight_act(m, m->w.cls_w), M, C, W, 0);
	m->be->dropout_apply(dx, dx, (size_t)M * C, cls_p(m), classifier_seed(m));
}

/* ---- sequence classification and regression head ---- */

/* The dropout on the pooled head's input (RoBERTa's), from its own stream. */
static uint64_t pooled_input_seed(const struct bert *m)
{
	return rng_derive(classifier_seed(m), 1);
}

static int pooled_input_dropped(const struct bert *m)
{
	return family_of(m->c.family)->pooled_dropout_first && cls_p(m) > 0.0f;
}

/* The pooled head's dense layer and its activation (family.h's pooled_act),
 * from dense_in into dense. */
static void pooled_dense_forward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, C = m->c.hidden;
	size_t n = (size_t)M * C;
	const struct act *w = weight_act(m, m->w.pool_w);
	switch (family_of(m->c.family)->pooled_act) {
	case POOLED_GELU:
		m->be->linear_forward_act(h->pre, h->dense_in, w, NULL, M, C, C);
		m->be->bias_gelu_forward(h->dense, NULL, h->pre, m->w.pool_b, M, C);
		break;
	case POOLED_RELU:
		m->be->linear_forward(h->dense, h->dense_in, w, m->w.pool_b, M, C, C);
		m->be->relu_forward(h->dense, h->dense, n);
		break;
	case POOLED_TANH:
		m->be->linear_forward(h->dense, h->dense_in, w, m->w.pool_b, M, C, C);
		m->be->tanh_forward(h->dense, h->dense, n);
		break;
	}
}

/* From the gradient of dense (dhead, consumed) to that of its product, in
 * acts. */
static const struct act *pooled_dense_backward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	struct acts *d = &m->a;
	int M = m->M, C = m->c.hidden;
	size_t n = (size_t)M * C;
	switch (family_of(m->c.family)->pooled_act) {
	case POOLED_GELU:
		m->be->gelu_backward(d->dhead_low, d->dhead, h->pre, M, C);
		return d->dhead_low;
	case POOLED_RELU:
		m->be->relu_backward(d->dhead, d->dhead, h->dense, n);
		break;
	case POOLED_TANH:
		m->be->tanh_backward(d->dhead, d->dhead, h->dense, n);
		break;
	}
	return m->be->as_act(d->dhead_low, d->dhead, n);
}

static void pooled_head_forward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, C = m->c.hidden;
	h->dense_in = h->in_low;
	if (pooled_input_dropped(m)) {
		m->be->dropout_apply(h->dropped_in, h->in, (size_t)M * C, cls_p(m), pooled_input_seed(m));
		h->dense_in = m->be->as_act(h->dropped_space, h->dropped_in, (size_t)M * C);
	}
	pooled_dense_forward(m);
	classifier_forward(m, h->act, h->dense);
}

/* Leaves the gradient of the head's input rows in dhead_in. */
static void pooled_head_backward(struct bert *m, float scale)
{
	struct head_acts *h = &m->a.head;
	struct acts *d = &m->a;
	int M = m->M, C = m->c.hidden;
	classifier_backward(m, scale, d->dhead);
	m->be->linear_backward(d->dhead_in, m->g.pool_w, m->g.pool_b, pooled_dense_backward(m), h->dense_in,
			       weight_act(m, m->w.pool_w), M, C, C, 0);
	if (pooled_input_dropped(m))
		m->be->dropout_apply(d->dhead_in, d->dhead_in, (size_t)M * C, cls_p(m), pooled_input_seed(m));
}

/* ---- token classification head ---- */

static void token_head_forward(struct bert *m)
{
	classifier_forward(m, m->a.head.act, m->a.head.in);
}

static void token_head_backward(struct bert *m, float scale)
{
	classifier_backward(m, scale, m->a.dhead_in);
}

/* ---- masked language model head ---- */

/* The transform of the head's rows into h->norm: dense, GELU, LayerNorm
 * (BERT's MLM head's, and every head's of ModernBERT). */
static void transform_forward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, C = m->c.hidden, E = bert_emb_width(&m->c);
	m->be->linear_forward_act(h->pre, h->in_low, weight_act(m, m->w.tr_w), NULL, M, C, E);
	m->be->bias_gelu_forward(h->act, NULL, h->pre, m->w.tr_b, M, E);
	m->be->layernorm_forward(h->norm, h->mean, h->rstd, h->act, m->w.tr_ln_w,
				 m->w.tr_ln_b, M, E, m->c.ln_eps);
}

/* From the gradient of the transform's output (dhead, consumed) to that of
 * the head's input rows (dhead_in). */
static void transform_backward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	struct acts *d = &m->a;
	int M = m->M, C = m->c.hidden, E = bert_emb_width(&m->c);
	m->be->layernorm_backward(d->dhead, m->g.tr_ln_w, m->g.tr_ln_b, d->dhead, h->act,
				  h->mean, h->rstd, m->w.tr_ln_w, M, E);
	m->be->gelu_backward(d->dhead_low, d->dhead, h->pre, M, E);
	m->be->linear_backward(d->dhead_in, m->g.tr_w, m->g.tr_b, d->dhead_low, h->in_low,
			       weight_act(m, m->w.tr_w), M, C, E, 0);
}

static void mlm_head_forward(struct bert *m)
{
	struct head_acts *h = &m->a.head;
	int M = m->M, E = bert_emb_width(&m->c), V = m->c.vocab;
	transform_forward(m);
	h->last_in = m->be->as_act(h->space, h->norm, (size_t)M * E);
	m->be->linear_forward(h->logits, h->last_in, weight_act(m, m->w.word), m->w.decoder_b, M, E, V);
	head_loss(m);
}

static void mlm_head_backward(struct bert *m, float scale)
{
	struct head_acts *h = &m->a.head;
	struct acts *d = &m->a;
	int M = m->M, E = bert_emb_width(&m->c), V = m->c.vocab;
	head_loss_backward(m, scale);
	/* the decoder is the word embedding matrix: its gradient adds there */
	m->be->linear_backward(d->dhead, m->g.word, m->g.decoder_b, dlogits_low(m), h->last_in,
			       weight_act(m, m->w.word), M, E, V, 0);
	transform_backward(m);
}

/* ---- ModernBERT's heads of the other tasks: transform, dropout, classifier ---- */

static void transformed_head_forward(struct bert *m)
{
	transform_forward(m);
	classifier_forward(m, m->a.head.dense, m->a.head.norm);
}

static void transformed_head_backward(struct bert *m, float scale)
{
	classifier_backward(m, scale, m->a.dhead);
	transform_backward(m);
}

/* ---- the whole model ---- */

void bert_run_forward(struct bert *m)
{
	struct acts *a = &m->a;
	size_t n = (size_t)m->N * m->c.hidden;
	weights_in_acts(m);
	embeddings_forward(m);
	if (m->perturbation) {
		m->be->axpy(a->emb_out, m->perturbation, n, 1.0f);
		a->emb_low = m->be->as_act(a->emb_space, a->emb_out, n);
	}
	int L = m->c.layers;
	struct layer_rows all = all_rows(m), last = last_rows(m);
	for (int l = 0; l + 1 < L; l++)
		layer_forward_at(m, l, &all);
	if (L) {
		layer_forward_at(m, L - 1, &last);
		a->head.in = a->layer[L - 1].out;
		a->head.in_low = a->layer[L - 1].out_low;
	}
	if (L && m->c.mean_pool) {
		m->be->mean_rows(a->rows_in, a->head.in, m->d.kv_start, m->d.mask, m->B, m->c.hidden);
		a->head.in = a->rows_in;
		a->head.in_low = m->be->as_act(a->rows_space, a->rows_in, (size_t)m->M * m->c.hidden);
	} else if (!L) {
		m->be->gather_rows(a->rows_in, a->emb_out, m->d.rows, m->M, m->c.hidden);
		a->head.in = a->rows_in;
		a->head.in_low = m->be->as_act(a->rows_space, a->rows_in, (size_t)m->M * m->c.hidden);
	}
	if (m->c.task == TASK_MLM)
		mlm_head_forward(m);
	else if (family_of(m->c.family)->head_transform)
		transformed_head_forward(m);
	else if (bert_task_pooled(m->c.task))
		pooled_head_forward(m);
	else
		token_head_forward(m);
}

/* The batch in the backend's memory and room for its activations, before a
 * forward; *count as bert_forward_sum says. */
static void take_batch(struct bert *m, const struct bert_batch *b, int train,
		       uint64_t dropout_seed, int64_t *count)
{
	struct bert_batch doubled;
	m->doubled = train && m->rdrop > 0;
	if (m->doubled)
		b = (doubled = bert_twice(m, b), &doubled);
	m->train = train;
	bert_take_batch(m, b);
	bert_reserve(m);
	m->dropout_seed = dropout_seed;
	*count = (int64_t)m->predicted * (m->c.task == TASK_MULTI ? m->c.num_labels : 1) /
		 (m->doubled ? 2 : 1);
}

void bert_forward_sum(struct bert *m, const struct bert_batch *b, int train,
		      uint64_t dropout_seed, int64_t *count)
{
	take_batch(m, b, train, dropout_seed, count);
	if (m->M)      /* else nothing to predict */
		bert_run_forward(m);
}

/* What a training pass's work depends on beyond its arguments' values:
 * the key of its CUDA graph. */
static uint64_t pass_key(const struct bert *m, int backward)
{
	/* T by cuDNN's rounding; the own kernels' launches are patched for T */
	const int v[] = { m->B, (m->T + 63) / 64, m->N, m->M, m->holes, m->empty, m->doubled, backward };
	uint64_t k = 0;
	for (size_t i = 0; i < sizeof v / sizeof *v; i++)
		k = rng_derive(k, (uint64_t)(uint32_t)v[i]);
	return k;
}

static void walk_pass(struct bert *m, int backward, float scale)
{
	bert_run_forward(m);
	if (backward)
		bert_backward(m, scale);
}

const char *bert_train_pass(struct bert *m, const struct bert_batch *b, uint64_t dropout_seed,
			    int backward, float scale, int64_t *count)
{
	const struct backend *be = m->be;
	const char *note = NULL;
	take_batch(m, b, 1, dropout_seed, count);
	if (!m->M)
		return NULL;
	/* a bucket hook starts collectives on another stream, outside any graph */
	if (!m->graphs || !be->graph_begin || m->bucket_done || m->perturbation || m->input_grad) {
		walk_pass(m, backward, scale);
		m->graph_runs[GRAPH_EAGER]++;
		return NULL;
	}
	be->graph_begin(pass_key(m, backward));
	walk_pass(m, backward, scale);
	enum graph_done done = be->graph_end(&note);
	if (done == GRAPH_AGAIN) {   /* nothing of it ran: eagerly now */
		walk_pass(m, backward, scale);
		done = GRAPH_EAGER;
	}
	m->graph_runs[done]++;
	return note;
}

void bert_set_graphs(struct bert *m, int on)
{
	m->graphs = on;
}

void bert_set_head_slots(struct bert *m, int on)
{
	m->head_slots = on;
}

void bert_set_pad_rows(struct bert *m, int n)
{
	if (n < 0)
		die("bert: %d rows to pad to", n);
	m->pad_rows = n;
}

long bert_graph_runs(const struct bert *m, enum graph_done how)
{
	return m->graph_runs[how];
}

double bert_take_loss(struct bert *m)
{
	double loss;
	m->be->download(&loss, m->loss, sizeof loss);
	m->be->zero(m->loss, sizeof loss);
	return loss;
}

double bert_forward(struct bert *m, const struct bert_batch *b, int train,
		    uint64_t dropout_seed, int64_t *count)
{
	double loss;
	m->loss_to = m->loss + 1;
	m->be->zero(m->loss_to, sizeof loss);
	bert_forward_sum(m, b, train, dropout_seed, count);
	m->loss_to = m->loss;
	m->be->download(&loss, m->loss + 1, sizeof loss);
	return loss;
}


int bert_grad_buckets(const struct bert *m, size_t (*bucket)[2])
{
	int L = m->c.layers;
	if (bucket) {
		/* the layout: embeddings, layers 0.., the head */
		size_t head = (size_t)((L ? m->g.layer[L - 1].end : m->g.emb_end) - m->dgrads);
		bucket[0][0] = head, bucket[0][1] = m->numel;
		for (int l = L - 1, i = 1; l >= 0; l--, i++) {
			bucket[i][0] = (size_t)(m->g.layer[l].qkv_w - m->dgrads);
			bucket[i][1] = i == 1 ? head : bucket[i - 1][0];
		}
		bucket[L + 1][0] = 0, bucket[L + 1][1] = L ? bucket[L][0] : head;
	}
	return L + 2;
}

void bert_set_bucket_hook(struct bert *m, void (*done)(void *ctx, int bucket), void *ctx)
{
	m->bucket_done = done;
	m->bucket_ctx = ctx;
}

static void bucket_complete(struct bert *m, int bucket)
{
	if (m->bucket_done)
		m->bucket_done(m->bucket_ctx, bucket);
}

/* A frozen layer's parameter gradients are zero: its backward runs only to
 * carry the gradient down to the embeddings. In a pre-norm family a
 * layer's last norm is the next layer's first (its attn_norm), which
 * trains where that layer does. */
static void zero_if_frozen(struct bert *m, int l)
{
	if (l >= m->frozen_layers)
		return;
	const struct layer_weights *g = &m->g.layer[l];   /* laid out from qkv_w to end */
	int next_trains = family_of(m->c.family)->prenorm && l == m->frozen_layers - 1;
	m->be->zero(g->qkv_w, (size_t)((next_trains ? g->ffn_ln_w : g->end) - g->qkv_w) * sizeof(float));
}

/* The lowest layer whose backward runs where the embeddings are frozen:
 * the first that trains, or in a pre-norm family the one below it, whose
 * last norm is its first. */
static int lowest_backward(const struct bert *m)
{
	int f = m->frozen_layers;
	return f && family_of(m->c.family)->prenorm ? f - 1 : f;
}

void bert_backward(struct bert *m, float scale)
{
	int N = m->N, C = m->c.hidden, L = m->c.layers;
	if (m->forward_only)
		die("internal error: a backward of a model that only scores");
	if (m->M == 0)
		return;    /* nothing predicted: every gradient is zero */
	if (m->c.task == TASK_MLM)
		mlm_head_backward(m, scale);
	else if (family_of(m->c.family)->head_transform)
		transformed_head_backward(m, scale);
	else if (bert_task_pooled(m->c.task))
		pooled_head_backward(m, scale);
	else
		token_head_backward(m, scale);
	bucket_complete(m, 0);
	/* below the frozen layers of a model with frozen embeddings nothing
	 * needs a gradient */
	int stop = m->frozen_embeddings && !m->input_grad ? lowest_backward(m) : 0;
	float *dh = m->a.dh, *dtop = m->a.dhead_in;
	struct layer_rows all = all_rows(m), last = last_rows(m);
	if (L && m->c.mean_pool) {   /* the pooled rows' gradient spread over their sequences */
		m->be->zero(dh, sizeof(float) * (size_t)N * C);
		m->be->mean_rows_backward(dh, dtop, m->d.kv_start, m->d.mask, m->B, C);
		dtop = dh;
	}
	if (L && L - 1 >= stop) {
		any_layer_backward(m, L - 1, &last, dtop, dh, 1);
		zero_if_frozen(m, L - 1);
	} else if (!L) {
		m->be->zero(dh, sizeof(float) * N * C);
		m->be->scatter_add_rows(dh, m->a.dhead_in, m->d.rows, m->M, C);
	}
	if (L)
		bucket_complete(m, 1);
	for (int l = L - 2; l >= 0; l--) {
		if (l >= stop) {
			if (m->shared)
				layer_forward_at(m, l, &all);
			any_layer_backward(m, l, &all, dh, dh, 0);
			zero_if_frozen(m, l);
		}
		bucket_complete(m, L - l);
	}
	if (L && stop == 0 && family_of(m->c.family)->prenorm)   /* the first layer's input is its stream */
		m->be->axpy(dh, m->a.ds, (size_t)N * C, 1.0f);
	if (m->input_grad) {   /* VAT: the gradient of the embeddings' output, and no further */
		m->be->zero(m->input_grad, (size_t)N * C * sizeof(float));
		m->be->axpy(m->input_grad, dh, (size_t)N * C, 1.0f);
	} else if (!m->frozen_embeddings) {
		embeddings_backward(m, dh);
	} else if (m->c.task == TASK_MLM)   /* the decoder's gradient went to the word embeddings */
		m->be->zero(m->g.word, (size_t)m->c.vocab * bert_emb_width(&m->c) * sizeof(float));
	bucket_complete(m, L + 1);
}

const float *bert_logits(struct bert *m)
{
	if (m->be->host)
		return m->a.head.logits;
	size_t n = (size_t)m->M * bert_logit_width(&m->c);
	grow(&m->logits, &m->logits_cap, n, sizeof *m->logits);
	m->be->download(m->logits, m->a.head.logits, n * sizeof *m->logits);
	return m->logits;
}

void bert_set_frozen(struct bert *m, int layers, int embeddings)
{
	if (layers < 0 || layers > m->c.layers)
		die("bert: cannot freeze %d of %d layers", layers, m->c.layers);
	m->frozen_layers = layers;
	m->frozen_embeddings = embeddings;
}

void bert_set_label_smoothing(struct bert *m, float e)
{
	if (!(e >= 0 && e < 1))
		die("bert: label smoothing must be in [0, 1)");
	m->smoothing = e;
}

void bert_set_recompute(struct bert *m, int on)
{
	m->recompute = on;
}

void bert_set_forward_only(struct bert *m)
{
	m->forward_only = 1;
}

void bert_set_dropout(struct bert *m, float hidden, float attn)
{
	m->c.hidden_dropout = m->c.cls_dropout = hidden;
	m->c.attn_dropout = attn;
	check_config(&m->c);
}
