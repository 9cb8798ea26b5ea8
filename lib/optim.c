/* AdamW, Adam, SGD and LAMB. Each update follows PyTorch's order of float
 * operations, so results agree with torch.optim to the last bit or two. */
#include "optim.h"
#include "err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loops shorter than PARALLEL_MIN stay on one thread: a bias is not worth the
 * fork. Sums run over SUM_CHUNK-sized chunks whatever the thread count. */
enum { PARALLEL_MIN = 1 << 15, SUM_CHUNK = 1 << 14 };

struct optim_tensor {
	float *p;
	const float *g;
	float *m, *v;      /* moments; m alone is SGD's momentum buffer; NULL when unused */
	size_t n;
	double wd;
};

struct optim {
	struct optim_config c;
	int n, nstate;
	struct optim_tensor *t;
	struct tensor_ref *state;   /* views of the moments, named for checkpoints */
	float *moments;
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

struct optim *optim_new(const struct optim_config *c, const struct tensor_ref *params,
			const unsigned char *decays, int n, const float *grads_base,
			const float *params_base)
{
	struct optim *o = xcalloc(1, sizeof *o);
	const char *names[2];
	int nbuf = moment_names(c, names);
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += tensor_numel(&params[i]);
	o->c = *c;
	o->n = n;
	o->nstate = nbuf * n;
	o->t = xcalloc(n, sizeof *o->t);
	o->state = xcalloc(o->nstate, sizeof *o->state);
	o->moments = xcalloc(total * nbuf, sizeof *o->moments);
	float *next = o->moments;
	for (int i = 0; i < n; i++) {
		struct optim_tensor *t = &o->t[i];
		float **bufs[2] = {&t->m, &t->v};
		t->p = params[i].data;
		t->g = grads_base + (params[i].data - params_base);
		t->n = tensor_numel(&params[i]);
		t->wd = decays[i] ? c->weight_decay : 0;
		for (int b = 0; b < nbuf; b++) {
			struct tensor_ref *s = &o->state[b * n + i];
			*s = params[i];
			s->name = state_name(names[b], params[i].name);
			s->data = *bufs[b] = next;
			next += t->n;
		}
	}
	return o;
}

void optim_free(struct optim *o)
{
	if (!o)
		return;
	for (int i = 0; i < o->nstate; i++)
		free((char *)o->state[i].name);
	free(o->state);
	free(o->moments);
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

typedef void chunk_sums_fn(void *ctx, size_t lo, size_t hi, double *sums);

/* out[0..nsum) = the sums fn adds up over [0, n). Chunks have a fixed size and
 * their partial sums are added in chunk order, so no bit depends on threads. */
static void chunked_sums(size_t n, int nsum, chunk_sums_fn *fn, void *ctx, double *out)
{
	size_t nchunk = (n + SUM_CHUNK - 1) / SUM_CHUNK;
	double *part = xcalloc(nchunk * nsum, sizeof *part);
	#pragma omp parallel for schedule(static) if (nchunk > 1)
	for (size_t c = 0; c < nchunk; c++) {
		size_t hi = (c + 1) * SUM_CHUNK < n ? (c + 1) * SUM_CHUNK : n;
		fn(ctx, c * SUM_CHUNK, hi, part + c * nsum);
	}
	for (int s = 0; s < nsum; s++)
		out[s] = 0;
	for (size_t c = 0; c < nchunk; c++)
		for (int s = 0; s < nsum; s++)
			out[s] += part[c * nsum + s];
	free(part);
}

static void sum_squares(void *ctx, size_t lo, size_t hi, double *sums)
{
	const float *x = ctx;
	for (size_t i = lo; i < hi; i++)
		sums[0] += (double)x[i] * x[i];
}

double grad_global_norm(const float *g, size_t n)
{
	double ss;
	chunked_sums(n, 1, sum_squares, (void *)g, &ss);
	return sqrt(ss);
}

void grad_scale(float *g, size_t n, float s)
{
	#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
	for (size_t i = 0; i < n; i++)
		g[i] *= s;
}

/* Adam and AdamW differ only in where the decay goes: AdamW shrinks p by
 * keep = 1 - lr*wd (decoupled), Adam adds l2*p to the gradient. */
struct adam_coef {
	float keep, l2, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};

static void adam_tensor(const struct optim_tensor *t, const struct adam_coef *c)
{
	float *restrict p = t->p, *restrict m = t->m, *restrict v = t->v;
	const float *restrict grad = t->g;
	const struct adam_coef a = *c;
	#pragma omp parallel for schedule(static) if (t->n >= PARALLEL_MIN)
	for (size_t i = 0; i < t->n; i++) {
		float g = grad[i] + a.l2 * p[i];
		m[i] = m[i] * a.b1 + a.omb1 * g;
		v[i] = v[i] * a.b2 + a.omb2 * g * g;
		float denom = sqrtf(v[i]) / a.bc2_sqrt + a.eps;
		p[i] = p[i] * a.keep - a.step_size * (m[i] / denom);
	}
}

/* torch.optim.Adam/AdamW: m_hat/(sqrt(v_hat) + eps) with eps outside the sqrt. */
static void adam_step(struct optim *o, double lr)
{
	const struct optim_config *c = &o->c;
	struct adam_coef a = {
		.b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.step_size = lr / (1 - pow(c->beta1, o->steps)),
		.bc2_sqrt = sqrt(1 - pow(c->beta2, o->steps)), .eps = c->eps,
	};
	for (int i = 0; i < o->n; i++) {
		double wd = o->t[i].wd;
		a.keep = c->kind == OPTIM_ADAMW ? 1 - lr * wd : 1;
		a.l2 = c->kind == OPTIM_ADAM ? wd : 0;
		adam_tensor(&o->t[i], &a);
	}
}

/* torch.optim.SGD without dampening or Nesterov: the zeroed buffer makes the
 * first step's buf = 0*m + g = g, as PyTorch's clone of the gradient. */
static void sgd_tensor(const struct optim_tensor *t, float lr, float momentum)
{
	float wd = t->wd;
	#pragma omp parallel for schedule(static) if (t->n >= PARALLEL_MIN)
	for (size_t i = 0; i < t->n; i++) {
		float g = t->g[i] + wd * t->p[i];
		if (t->m)
			g = t->m[i] = t->m[i] * momentum + g;
		t->p[i] = t->p[i] - lr * g;
	}
}

/* LAMB as NVIDIA apex's FusedLAMB (adam_w_mode, grad averaging, no built-in
 * gradient clipping; --clip does that): with bias-corrected Adam moments
 *   u = m_hat/(sqrt(v_hat) + eps) + wd*p,  p -= lr * (|p|/|u|) * u
 * per tensor, the trust ratio |p|/|u| taken as 1 when either norm is 0. */
struct lamb_coef {
	float b1, omb1, b2, omb2, bc1, bc2, eps, wd;
};

struct lamb_pass {
	const struct optim_tensor *t;
	const struct lamb_coef *a;
};

static inline float lamb_update(const struct lamb_coef *a, float m, float v, float p)
{
	return m / a->bc1 / (sqrtf(v / a->bc2) + a->eps) + a->wd * p;
}

/* Moves the moments and sums |p|^2 and |u|^2 over [lo, hi). */
static void lamb_moments(void *ctx, size_t lo, size_t hi, double *sums)
{
	const struct lamb_pass *l = ctx;
	const struct optim_tensor *t = l->t;
	const struct lamb_coef *a = l->a;
	for (size_t i = lo; i < hi; i++) {
		float g = t->g[i];
		t->m[i] = t->m[i] * a->b1 + a->omb1 * g;
		t->v[i] = t->v[i] * a->b2 + a->omb2 * g * g;
		float u = lamb_update(a, t->m[i], t->v[i], t->p[i]);
		sums[0] += (double)t->p[i] * t->p[i];
		sums[1] += (double)u * u;
	}
}

/* Two passes so the update never needs a buffer: the second recomputes u. */
static void lamb_tensor(const struct optim_tensor *t, const struct lamb_coef *a, double lr)
{
	struct lamb_pass pass = {t, a};
	double sq[2];
	chunked_sums(t->n, 2, lamb_moments, &pass, sq);
	double trust = sq[0] > 0 && sq[1] > 0 ? sqrt(sq[0]) / sqrt(sq[1]) : 1;
	float step = lr * trust;
	#pragma omp parallel for schedule(static) if (t->n >= PARALLEL_MIN)
	for (size_t i = 0; i < t->n; i++)
		t->p[i] -= step * lamb_update(a, t->m[i], t->v[i], t->p[i]);
}

static void lamb_step(struct optim *o, double lr)
{
	const struct optim_config *c = &o->c;
	struct lamb_coef a = {
		.b1 = c->beta1, .omb1 = 1 - c->beta1, .b2 = c->beta2, .omb2 = 1 - c->beta2,
		.bc1 = 1 - pow(c->beta1, o->steps), .bc2 = 1 - pow(c->beta2, o->steps),
		.eps = c->eps,
	};
	for (int i = 0; i < o->n; i++) {
		a.wd = o->t[i].wd;
		lamb_tensor(&o->t[i], &a, lr);
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
		for (int i = 0; i < o->n; i++)
			sgd_tensor(&o->t[i], lr, o->c.momentum);
		break;
	case OPTIM_LAMB:
		lamb_step(o, lr);
		break;
	}
}
