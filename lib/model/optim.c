/* AdamW, Adam, SGD and LAMB: the per-tensor bookkeeping and coefficients;
 * the backend's ops move the numbers. */
#include "model/optim.h"
#include "util/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where one tensor, or the part of it the optimizer owns, lies in the
 * backend's memory. */
struct optim_tensor {
	float *p;
	const float *g;
	float *m, *v;      /* moments; m alone is SGD's momentum buffer; NULL when unused */
	float *ema;        /* the moving average, or NULL */
	size_t n;          /* elements owned */
	size_t at, full;   /* the tensor's offset in the layout and its size */
	size_t first;      /* the first element owned */
	double wd;
	double lr_scale;   /* optim_set_lr_scale */
};

struct optim {
	struct optim_config c;
	const struct backend *be;
	int n, nstate;
	struct optim_tensor *t;
	struct adam_tensor *jobs;   /* a step's Adam updates */
	struct tensor_ref *state;   /* views of the host copy of the moments, named for checkpoints */
	size_t *state_at;           /* where each view starts in the host copy */
	float *moments;             /* all of them (or the shard's), in the backend's memory */
	float *host;                /* their host copy: moments itself on a host backend, unsharded */
	size_t nmoments;            /* in the host copy */
	int nbuf;                   /* buffers a parameter: its moments (0, 1 or 2), then the ema */
	int nmoments_per;           /* its moments */
	int sharded;                /* optim_own: a shard's moments */
	void (*gather)(const void *ctx, float *x, size_t n);
	const void *gather_ctx;
	long steps;
};

static const char *const kind_names[] = {"adamw", "adam", "sgd", "lamb"};

int optim_kind_parse(const char *name)
{
	for (int k = 0; k < (int)(sizeof kind_names / sizeof *kind_names); k++)
		if (!strcmp(name, kind_names[k]))
			return k;
	return -1;
}

const char *optim_kind_name(enum optim_kind kind)
{
	return kind_names[kind];
}

/* The moments' names are PyTorch's state_dict keys. */
static int moment_names(const struct optim_config *c, const char **names)
{
	if (c->kind != OPTIM_SGD) {
		names[0] = "exp_avg";
		names[1] = "exp_avg_sq";
		return 2;
	}
	names[0] = "momentum_buffer";
	return c->momentum != 0;
}

/* Buffer b of tensor t: its moments, then the moving average. */
static float **buf_of(const struct optim *o, struct optim_tensor *t, int b)
{
	return b < o->nmoments_per ? (b ? &t->v : &t->m) : &t->ema;
}

static char *state_name(const char *moment, const char *param)
{
	size_t len = strlen(moment) + strlen(param) + 2;
	char *s = xmalloc(len);
	snprintf(s, len, "%s.%s", moment, param);
	return s;
}

struct optim *optim_new(const struct optim_config *c, const struct backend *be,
			const struct tensor_ref *params, const unsigned char *decays, int n,
			const float *layout_base, float *params_dev, const float *grads_dev)
{
	struct optim *o = xcalloc(1, sizeof *o);
	const char *names[3];
	int nbuf = moment_names(c, names);
	o->nmoments_per = nbuf;
	if (c->ema > 0)
		names[nbuf++] = "ema";
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += tensor_numel(&params[i]);
	o->c = *c;
	o->be = be;
	o->n = n;
	o->nstate = nbuf * n;
	o->t = xcalloc(n, sizeof *o->t);
	o->jobs = xcalloc(n ? n : 1, sizeof *o->jobs);
	o->state = xcalloc(o->nstate, sizeof *o->state);
	o->state_at = xcalloc(o->nstate ? o->nstate : 1, sizeof *o->state_at);
	o->nbuf = nbuf;
	o->nmoments = total * nbuf;
	o->moments = be->alloc(o->nmoments * sizeof *o->moments);
	o->host = be->host ? o->moments : xcalloc(o->nmoments ? o->nmoments : 1, sizeof *o->host);
	size_t next = 0;
	for (int i = 0; i < n; i++) {
		struct optim_tensor *t = &o->t[i];
		size_t at = (size_t)(params[i].data - layout_base);
		t->p = params_dev + at;
		t->g = grads_dev + at;
		t->n = t->full = tensor_numel(&params[i]);
		t->at = at;
		t->wd = decays[i] ? c->weight_decay : 0;
		t->lr_scale = 1;
		for (int b = 0; b < nbuf; b++) {
			struct tensor_ref *s = &o->state[b * n + i];
			*s = params[i];
			s->name = state_name(names[b], params[i].name);
			s->data = o->host + next;
			o->state_at[b * n + i] = next;
			*buf_of(o, t, b) = o->moments + next;
			next += t->n;
		}
		if (t->ema)   /* the average starts at the parameters */
			be->ema_update(t->ema, t->p, t->n, 0.0f);
	}
	return o;
}

void optim_own(struct optim *o, size_t lo, size_t hi, void (*gather)(const void *ctx, float *x, size_t n),
	       const void *ctx)
{
	size_t total = 0;
	for (int i = 0; i < o->n; i++)
		total += o->t[i].full;
	if (lo == 0 && hi >= total)
		return;   /* all of it */
	if (o->c.kind == OPTIM_LAMB)
		die("--zero 1 takes adamw, adam or sgd: lamb's trust ratio needs whole tensors");
	if (o->c.ema > 0)
		die("--zero 1 cannot keep a moving average of the parameters: it needs them whole");
	o->sharded = 1;
	o->gather = gather;
	o->gather_ctx = ctx;
	o->be->release(o->moments);
	if (o->host != o->moments)
		free(o->host);
	o->host = NULL;
	optim_unstage(o);
	size_t owned = 0;
	for (int i = 0; i < o->n; i++) {
		struct optim_tensor *t = &o->t[i];
		/* [lo, hi) and [at, at + full) in the tensor's own numbering */
		size_t a = lo > t->at ? lo - t->at : 0, b = hi > t->at ? hi - t->at : 0;
		t->first = a < t->full ? a : t->full;
		b = b < t->full ? b : t->full;
		t->n = b > t->first ? b - t->first : 0;
		t->p += t->first;
		t->g += t->first;
		owned += t->n;
	}
	o->moments = o->be->alloc(owned * o->nbuf * sizeof *o->moments);
	size_t next = 0;
	for (int i = 0; i < o->n; i++) {
		struct optim_tensor *t = &o->t[i];
		for (int b = 0; b < o->nbuf; b++, next += t->n)
			*buf_of(o, t, b) = o->moments + next;
	}
}

/* A sharded optimizer's host copy of all the moments, made when needed. */
static void stage(struct optim *o)
{
	if (o->host)
		return;
	o->host = xcalloc(o->nmoments ? o->nmoments : 1, sizeof *o->host);
	for (int k = 0; k < o->nstate; k++)
		o->state[k].data = o->host + o->state_at[k];
}

void optim_unstage(struct optim *o)
{
	if (!o->sharded)
		return;
	free(o->host);
	o->host = NULL;
	for (int k = 0; k < o->nstate; k++)
		o->state[k].data = NULL;
}

/* A shard's moment buffer b of tensor i, and where its elements sit in the host copy. */
static float *shard_buf(struct optim *o, int i, int b, float **host)
{
	struct optim_tensor *t = &o->t[i];
	*host = o->host + o->state_at[b * o->n + i] + t->first;
	return *buf_of(o, t, b);
}

void optim_pull(struct optim *o)
{
	if (!o->sharded) {
		o->be->download(o->host, o->moments, o->nmoments * sizeof *o->host);
		return;
	}
	stage(o);
	memset(o->host, 0, o->nmoments * sizeof *o->host);
	for (int i = 0; i < o->n; i++)
		for (int b = 0; b < o->nbuf; b++) {
			float *h, *d = shard_buf(o, i, b, &h);
			o->be->download(h, d, o->t[i].n * sizeof *h);
		}
	o->gather(o->gather_ctx, o->host, o->nmoments);   /* the others' shards: zeros here */
}

void optim_push(struct optim *o)
{
	if (!o->sharded) {
		o->be->upload(o->moments, o->host, o->nmoments * sizeof *o->host);
		return;
	}
	for (int i = 0; i < o->n; i++)
		for (int b = 0; b < o->nbuf; b++) {
			float *h, *d = shard_buf(o, i, b, &h);
			o->be->upload(d, h, o->t[i].n * sizeof *h);
		}
}

void optim_free(struct optim *o)
{
	if (!o)
		return;
	for (int i = 0; i < o->nstate; i++)
		free((char *)o->state[i].name);
	free(o->state);
	free(o->state_at);
	if (o->host != o->moments)
		free(o->host);
	o->be->release(o->moments);
	free(o->t);
	free(o->jobs);
	free(o);
}

long optim_steps(const struct optim *o)
{
	return o->steps;
}

void optim_set_steps(struct optim *o, long steps)
{
	o->steps = steps;
}

int optim_state(struct optim *o, struct tensor_ref *out)
{
	if (out) {
		if (o->sharded)
			stage(o);
		memcpy(out, o->state, o->nstate * sizeof *out);
	}
	return o->nstate;
}

/* torch.optim.Adam/AdamW, each tensor with its own decay and lr, all in
 * one call of the backend. */
static void adam_step(struct optim *o, double lr, float gscale)
{
	const struct optim_config *c = &o->c;
	struct adam_coef a = {
		.gscale = gscale, .b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.bc2_sqrt = sqrt(1 - pow(c->beta2, o->steps)), .eps = c->eps,
	};
	int n = 0;
	for (int i = 0; i < o->n; i++) {
		const struct optim_tensor *t = &o->t[i];
		if (!t->lr_scale)
			continue;
		double lr_t = lr * t->lr_scale;
		a.step_size = lr_t / (1 - pow(c->beta1, o->steps));
		a.keep = c->kind == OPTIM_ADAMW ? 1 - lr_t * t->wd : 1;
		a.l2 = c->kind == OPTIM_ADAM ? t->wd : 0;
		o->jobs[n++] = (struct adam_tensor){ t->p, t->g, t->m, t->v, t->n, a };
	}
	o->be->adam_update(o->jobs, n);
}

/* LAMB as NVIDIA apex's FusedLAMB (adam_w_mode, grad averaging, no built-in
 * gradient clipping; --clip does that; use_nvlamb off): with bias-corrected
 * Adam moments
 *   u = m_hat/(sqrt(v_hat) + eps) + wd*p,  p -= lr * (|p|/|u|) * u
 * per tensor, the trust ratio |p|/|u| taken as 1 when either norm is 0, and
 * for a tensor without weight decay (biases, LayerNorm), as apex does. */
static void lamb_step(struct optim *o, double lr, float gscale)
{
	const struct optim_config *c = &o->c;
	struct lamb_coef a = {
		.gscale = gscale, .b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.bc1 = 1 - pow(c->beta1, o->steps), .bc2 = 1 - pow(c->beta2, o->steps),
		.eps = c->eps,
	};
	for (int i = 0; i < o->n; i++) {
		const struct optim_tensor *t = &o->t[i];
		if (!t->lr_scale)
			continue;
		double sq[2];
		a.wd = t->wd;
		o->be->lamb_moments(t->p, t->g, t->m, t->v, t->n, &a, sq);
		double trust = t->wd && sq[0] > 0 && sq[1] > 0 ? sqrt(sq[0]) / sqrt(sq[1]) : 1;
		o->be->lamb_apply(t->p, t->m, t->v, t->n, &a, lr * t->lr_scale * trust);
	}
}

void optim_set_lr_scale(struct optim *o, const double *scale)
{
	for (int i = 0; i < o->n; i++)
		o->t[i].lr_scale = scale[i];
}

void optim_step(struct optim *o, double lr, float gscale)
{
	o->steps++;
	switch (o->c.kind) {
	case OPTIM_ADAMW:
	case OPTIM_ADAM:
		adam_step(o, lr, gscale);
		break;
	case OPTIM_SGD:
		for (int i = 0; i < o->n; i++) {
			const struct optim_tensor *t = &o->t[i];
			if (t->lr_scale)
				o->be->sgd_update(t->p, t->g, t->m, t->n, gscale, lr * t->lr_scale,
						  o->c.momentum, t->wd);
		}
		break;
	case OPTIM_LAMB:
		lamb_step(o, lr, gscale);
		break;
	}
	for (int i = 0; o->c.ema > 0 && i < o->n; i++)
		o->be->ema_update(o->t[i].ema, o->t[i].p, o->t[i].n, (float)o->c.ema);
}

void optim_swap_ema(struct optim *o)
{
	for (int i = 0; i < o->n; i++)
		o->be->swap(o->t[i].p, o->t[i].ema, o->t[i].n);
}
