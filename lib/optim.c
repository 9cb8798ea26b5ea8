/* AdamW, Adam, SGD and LAMB: the per-tensor bookkeeping and coefficients;
 * the backend's ops move the numbers. */
#include "optim.h"
#include "err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where one tensor lies in the backend's memory. */
struct optim_tensor {
	float *p;
	const float *g;
	float *m, *v;      /* moments; m alone is SGD's momentum buffer; NULL when unused */
	size_t n;
	double wd;
};

struct optim {
	struct optim_config c;
	const struct backend *be;
	int n, nstate;
	struct optim_tensor *t;
	struct tensor_ref *state;   /* views of the host copy of the moments, named for checkpoints */
	float *moments;             /* all of them, in the backend's memory */
	float *host;                /* their host copy: moments itself on a host backend */
	size_t nmoments;
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

/* The state names are PyTorch's state_dict keys. */
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
	const char *names[2];
	int nbuf = moment_names(c, names);
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += tensor_numel(&params[i]);
	o->c = *c;
	o->be = be;
	o->n = n;
	o->nstate = nbuf * n;
	o->t = xcalloc(n, sizeof *o->t);
	o->state = xcalloc(o->nstate, sizeof *o->state);
	o->nmoments = total * nbuf;
	o->moments = be->alloc(o->nmoments * sizeof *o->moments);
	o->host = be->host ? o->moments : xcalloc(o->nmoments ? o->nmoments : 1, sizeof *o->host);
	size_t next = 0;
	for (int i = 0; i < n; i++) {
		struct optim_tensor *t = &o->t[i];
		float **bufs[2] = {&t->m, &t->v};
		size_t at = (size_t)(params[i].data - layout_base);
		t->p = params_dev + at;
		t->g = grads_dev + at;
		t->n = tensor_numel(&params[i]);
		t->wd = decays[i] ? c->weight_decay : 0;
		for (int b = 0; b < nbuf; b++) {
			struct tensor_ref *s = &o->state[b * n + i];
			*s = params[i];
			s->name = state_name(names[b], params[i].name);
			s->data = o->host + next;
			*bufs[b] = o->moments + next;
			next += t->n;
		}
	}
	return o;
}

void optim_pull(struct optim *o)
{
	o->be->download(o->host, o->moments, o->nmoments * sizeof *o->host);
}

void optim_push(struct optim *o)
{
	o->be->upload(o->moments, o->host, o->nmoments * sizeof *o->host);
}

void optim_free(struct optim *o)
{
	if (!o)
		return;
	for (int i = 0; i < o->nstate; i++)
		free((char *)o->state[i].name);
	free(o->state);
	if (o->host != o->moments)
		free(o->host);
	o->be->release(o->moments);
	free(o->t);
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

int optim_state(const struct optim *o, struct tensor_ref *out)
{
	if (out)
		memcpy(out, o->state, o->nstate * sizeof *out);
	return o->nstate;
}

/* torch.optim.Adam/AdamW, each tensor with its own decay. */
static void adam_step(struct optim *o, double lr)
{
	const struct optim_config *c = &o->c;
	struct adam_coef a = {
		.b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.step_size = lr / (1 - pow(c->beta1, o->steps)),
		.bc2_sqrt = sqrt(1 - pow(c->beta2, o->steps)), .eps = c->eps,
	};
	for (int i = 0; i < o->n; i++) {
		const struct optim_tensor *t = &o->t[i];
		a.keep = c->kind == OPTIM_ADAMW ? 1 - lr * t->wd : 1;
		a.l2 = c->kind == OPTIM_ADAM ? t->wd : 0;
		o->be->adam_update(t->p, t->g, t->m, t->v, t->n, &a);
	}
}

/* LAMB as NVIDIA apex's FusedLAMB (adam_w_mode, grad averaging, no built-in
 * gradient clipping; --clip does that): with bias-corrected Adam moments
 *   u = m_hat/(sqrt(v_hat) + eps) + wd*p,  p -= lr * (|p|/|u|) * u
 * per tensor, the trust ratio |p|/|u| taken as 1 when either norm is 0. */
static void lamb_step(struct optim *o, double lr)
{
	const struct optim_config *c = &o->c;
	struct lamb_coef a = {
		.b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.bc1 = 1 - pow(c->beta1, o->steps), .bc2 = 1 - pow(c->beta2, o->steps),
		.eps = c->eps,
	};
	for (int i = 0; i < o->n; i++) {
		const struct optim_tensor *t = &o->t[i];
		double sq[2];
		a.wd = t->wd;
		o->be->lamb_moments(t->p, t->g, t->m, t->v, t->n, &a, sq);
		double trust = sq[0] > 0 && sq[1] > 0 ? sqrt(sq[0]) / sqrt(sq[1]) : 1;
		o->be->lamb_apply(t->p, t->m, t->v, t->n, &a, lr * trust);
	}
}

void optim_step(struct optim *o, double lr)
{
	o->steps++;
	switch (o->c.kind) {
	case OPTIM_ADAMW:
	case OPTIM_ADAM:
		adam_step(o, lr);
		break;
	case OPTIM_SGD:
		for (int i = 0; i < o->n; i++) {
			const struct optim_tensor *t = &o->t[i];
			o->be->sgd_update(t->p, t->g, t->m, t->n, lr, o->c.momentum, t->wd);
		}
		break;
	case OPTIM_LAMB:
		lamb_step(o, lr);
		break;
	}
}
