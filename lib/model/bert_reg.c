/* The model's regularisers beyond dropout: soft targets (distillation
 * from a teacher), R-Drop (each batch twice, their predictions pulled
 * together) and virtual adversarial training. */
#include "model/bert_inside.h"
#include "util/err.h"
#include "util/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- soft targets ---- */

void bert_set_soft_loss(struct bert *m, float hard, float soft, float temp)
{
	if (!(hard >= 0 && soft >= 0 && temp > 0))
		die("bert: soft loss weights must be at least 0 and the temperature positive");
	if (soft && (m->c.task == TASK_REG || m->c.task == TASK_MULTI))
		die("bert: soft targets are for the softmax heads of cls, tokcls and mlm");
	m->hard = hard, m->soft = soft, m->temp = temp;
}

void bert_targets_from(struct bert *m, const struct bert *teacher, float temp)
{
	int W = bert_logit_width(&m->c);
	if (bert_logit_width(&teacher->c) != W || teacher->c.task != m->c.task)
		die("bert: a %s teacher of %d outputs cannot teach a %s model of %d", task_name(teacher->c.task),
		    bert_logit_width(&teacher->c), task_name(m->c.task), W);
	size_t n = (size_t)teacher->M * W;
	bert_fit(m->be, &m->targets_soft, (n ? n : 1) * sizeof(float));
	m->be->softmax_rows(m->targets_soft.p, teacher->a.head.logits, teacher->M, W, temp);
	m->targets_rows = teacher->M;
}

/* ---- R-Drop ---- */

void bert_set_rdrop(struct bert *m, float alpha)
{
	if (!(alpha >= 0))
		die("bert: the R-Drop weight must be at least 0");
	if (alpha && m->c.task != TASK_CLS && m->c.task != TASK_TOKCLS)
		die("bert: R-Drop is for the cls and tokcls heads");
	m->rdrop = alpha;
}

/* ---- virtual adversarial training ---- */

/* x scaled to norm `to` over each sequence's rows (a sequence's part of
 * all zeros stays so). */
static void normalize_sequences(const struct bert *m, float *x, float to)
{
	size_t C = (size_t)m->c.hidden;
	for (int i = 0; i < m->B; i++) {
		float *v = x + (size_t)m->kv_start[i] * C;
		size_t n = (size_t)(m->kv_start[i + 1] - m->kv_start[i]) * C;
		double ss = 0;
		for (size_t j = 0; j < n; j++)
			ss += (double)v[j] * v[j];
		float k = ss > 0 ? (float)(to / sqrt(ss)) : 0.0f;
		for (size_t j = 0; j < n; j++)
			v[j] *= k;
	}
}

/* The backward of the last forward to the embeddings' output only, into
 * g: the parameters' gradients go to a scratch buffer, and no bucket is
 * announced. */
static void backward_to_input(struct bert *m, float *g)
{
	if (!m->vat_layers)
		m->vat_layers = xcalloc(m->c.layers ? m->c.layers : 1, sizeof *m->vat_layers);
	float *scratch = bert_fit(m->be, &m->vat_grads, m->numel * sizeof(float)), *grads = m->dgrads;
	struct weights g_scratch = {.layer = m->vat_layers}, g_real = m->g;
	struct layout l = {scratch, 0, NULL, 0};
	bert_lay_out(&l, &m->c, &g_scratch);
	bert_stand_in(m, &g_scratch, m->zeros + m->stand_in);
	void (*hook)(void *, int) = m->bucket_done;
	m->be->zero(scratch, m->numel * sizeof(float));
	m->dgrads = scratch, m->g = g_scratch, m->bucket_done = NULL, m->input_grad = g;
	bert_backward(m, 1.0f);
	m->dgrads = grads, m->g = g_real, m->bucket_done = hook, m->input_grad = NULL;
}

/* bert_vat's power iteration: d, from a random direction towards the most
 * sensitive one, r and g the perturbation and its gradient. Where the
 * backend computes in a coarser precision than fp32, the iteration runs on
 * its fp32 twin, against predictions of an fp32 forward of its own: the
 * coarser rounding of the layers' inputs would drown the probe's effect. */
static void power_iteration(struct bert *m, float *d, float *r, float *g, float xi, int iters)
{
	const struct backend *be = m->be;
	m->loss_to = m->loss + 1;   /* the probes' losses: read by nobody */
	size_t n = (size_t)m->N * m->c.hidden;
	int fp32 = iters && be->precise;
	struct on_backend own = m->targets_soft;
	if (fp32) {
		int W = bert_logit_width(&m->c);
		m->be = be->precise;
		bert_reserve(m);   /* its activations are floats */
		m->perturbation = NULL;
		bert_run_forward(m);
		m->perturbation = r;
		bert_fit(m->be, &m->vat_p, (size_t)m->M * W * sizeof(float));
		m->be->softmax_rows(m->vat_p.p, m->a.head.logits, m->M, W, 1.0f);
		m->targets_soft = m->vat_p;
	}
	for (int it = 0; it < iters; it++) {
		normalize_sequences(m, d, xi);
		m->be->upload(r, d, n * sizeof *d);
		bert_run_forward(m);
		backward_to_input(m, g);
		m->be->download(d, g, n * sizeof *d);
	}
	if (fp32) {
		m->vat_p = m->targets_soft;
		m->targets_soft = own;
		m->be = be;
		bert_reserve(m);
	}
	m->loss_to = m->loss;
}

double bert_vat_bytes(const struct bert_config *c, const struct backend *be, int B, int T, int M,
		      int recompute)
{
	double more = 0;
	if (be->precise)
		more = bert_batch_bytes(c, be->precise, B, T, M, recompute) -
		       bert_batch_bytes(c, be, B, T, M, recompute);
	double rows = (double)B * T, width = bert_logit_width(c);
	return (more > 0 ? more : 0) +
	       sizeof(float) * ((double)bert_config_numel(c) + 2 * rows * c->hidden + 2 * M * width);
}

void bert_vat(struct bert *m, float eps, float xi, int iters, uint64_t seed, float scale)
{
	if (!m->M || !m->train)
		return;
	int W = bert_logit_width(&m->c);
	size_t n = (size_t)m->N * m->c.hidden;
	float hard = m->hard, soft = m->soft, temp = m->temp;
	bert_fit(m->be, &m->targets_soft, (size_t)m->M * W * sizeof(float));
	m->be->softmax_rows(m->targets_soft.p, m->a.head.logits, m->M, W, 1.0f);
	m->targets_rows = m->M;
	bert_set_soft_loss(m, 0, 1, 1);
	float *d = xmalloc(n * sizeof *d), *r = bert_fit(m->be, &m->vat_r, n * sizeof *d);
	float *g = bert_fit(m->be, &m->vat_g, n * sizeof *d);
	for (size_t i = 0; i < n; i++)
		d[i] = rng_normal_at(seed, i);
	m->perturbation = r;
	power_iteration(m, d, r, g, xi, iters);
	normalize_sequences(m, d, eps);
	m->be->upload(r, d, n * sizeof *d);
	bert_run_forward(m);
	bert_backward(m, scale);
	m->perturbation = NULL;
	m->hard = hard, m->soft = soft, m->temp = temp;
	free(d);
}
