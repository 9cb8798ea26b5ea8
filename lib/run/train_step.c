/* One ts-train step: its micro-batches forward and backward, the
 * gradient summed across processes bucket by bucket as the backward
 * completes them, clipped, and the optimizer's update. */
#include "run/trainer.h"
#include "run/train.h"
#include "run/bugdump.h"
#include "util/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* bug/step-N/ for --replay: the model before the step and its micro-batches. */
static void dump_bug(struct trainer *t, int nmicro, const uint64_t *seeds, float scale)
{
	struct bug_step b = {t->c->run, t->st.step + 1, t->c->precision, t->c->task, t->num_labels, t->m,
			     t->labels, t->nlabels, t->vocab_path, t->micro, nmicro, seeds, scale};
	char *name = bug_dump(&b);
	trainer_log(t, "step %ld: non-finite loss or gradient; batch saved in %s", t->st.step + 1, name);
	free(name);
}

/* Gathers this process's slice of the micro-batches of one optimizer step
 * (micro_batch: an epoch's last one may leave it fewer records, or none);
 * an epoch's last step may have fewer micro-batches. Returns their number. */
static int gather(struct trainer *t, int64_t *count)
{
	uint64_t total = shard_count(t->train.shard);
	int n = 0;
	*count = 0;
	if ((uint64_t)t->st.record == total) {
		t->st.epoch++;
		t->st.record = 0;
	}
	use_order(t, t->st.epoch);
	while (n < t->c->accum && (uint64_t)t->st.record < total) {
		uint64_t lo, hi;
		t->st.record = (int64_t)micro_batch(t, (uint64_t)t->st.record, t->comm->size, t->comm->rank, &lo, &hi);
		batch_fill(&t->micro[n], &t->train.src, t->order + lo, (int)(hi - lo), t->st.epoch);
		*count += t->micro[n].count;
		n++;
	}
	return n;
}

/* The dropout seed of micro-batch k of the coming step on this process. */
static uint64_t dropout_seed(const struct trainer *t, int k)
{
	uint64_t s = rng_derive((uint64_t)t->c->seed ^ 0x64726f706f7574ull, (uint64_t)(t->st.step * t->c->accum + k));
	return t->comm->rank ? rng_derive(s, (uint64_t)t->comm->rank) : s;
}

/* Starts the sums of the gradient's buckets up to last, in order. */
static void sum_buckets(struct trainer *t, int last)
{
	float *g = bert_backend_grads(t->m);
	for (; t->next_bucket <= last; t->next_bucket++) {
		size_t *b = t->buckets[t->next_bucket];
		comm_start_sum(t->comm, g + b[0], b[1] - b[0]);
	}
	comm_progress(t->comm);
}

/* bert_backward's bucket hook in the step's last micro-batch: each bucket
 * is summed while the backward pass goes on below it. */
static void bucket_done(void *trainer, int bucket)
{
	sum_buckets(trainer, bucket);
}

/* The gradient summed over the processes, as the mean over every item
 * predicted (true gradient), or the mean of the processes' means (each
 * process's gradient was scaled by its own count; those with none add
 * nothing). *loss holds this process's summed loss over count items; on
 * return the run's mean loss, the same on every process, and r's samples
 * and tokens are the run's. Returns the processes that had items. */
static int reduce_gradient(struct trainer *t, double *loss, int64_t count, struct step_result *r)
{
	if (t->comm->size == 1) {
		*loss = count ? *loss / (double)count : 0;
		return count > 0;
	}
	/* the buckets a backward did not start (it had nothing to predict),
	 * before any other collective: all processes start them in one order */
	if (!t->c->zero)
		sum_buckets(t, t->nbuckets - 1);
	comm_wait_sums(t->comm);
	double v[5] = { t->c->true_gradient ? *loss : count ? *loss / (double)count : 0, (double)count,
			count > 0, (double)r->samples, (double)r->tokens };
	comm_sum_doubles(t->comm, v, 5);
	if (t->c->zero)
		comm_reduce_scatter_floats(t->comm, bert_backend_grads(t->m), bert_numel(t->m));
	if (t->c->true_gradient)
		*loss = v[1] ? v[0] / v[1] : 0;
	else if (v[2]) {
		*loss = v[0] / v[2];
		if (v[2] > 1)
			bert_scale_grads(t->m, (float)(1.0 / v[2]));
	}
	r->samples = (int64_t)v[3];
	r->tokens = (int64_t)v[4];
	return (int)v[2];
}

/* The norm of the run's gradient: with --zero 1 each process holds the sum
 * of its shard only, and the squares are summed over the processes. */
static double grad_norm(struct trainer *t)
{
	if (!t->c->zero || t->comm->size == 1)
		return bert_grad_norm(t->m);
	double sq = bert_grad_sum_squares(t->m, t->shard_lo, t->shard_hi);
	comm_sum_doubles(t->comm, &sq, 1);
	return sqrt(sq);
}

void train_step(struct trainer *t, struct step_result *r)
{
	int64_t count;
	int n = gather(t, &count);
	uint64_t seeds[n];
	bert_zero_grads(t->m);
	memset(r, 0, sizeof *r);
	int64_t scale_count = count;
	if (t->c->true_gradient) {   /* every process scales by the run's count */
		double all = (double)count;
		comm_sum_doubles(t->comm, &all, 1);
		scale_count = (int64_t)all;
	}
	/* fp16: the loss scaled up, so small gradients stay within fp16's range */
	double ls = t->st.ls.scale ? t->st.ls.scale : 1;
	float scale = scale_count ? (float)ls / (float)scale_count : 0;
	/* VAT adds to the gradient after the backward: no bucket is final before */
	int overlap = t->comm->size > 1 && !t->c->zero && !(t->c->vat > 0);
	t->next_bucket = 0;
	for (int k = 0; k < n; k++) {
		/* no sum on accumulation micro-steps: only the last one's backward starts them */
		bert_set_bucket_hook(t->m, overlap && k == n - 1 ? bucket_done : NULL, t);
		seeds[k] = dropout_seed(t, k);
		r->samples += t->micro[k].B;
		r->tokens += t->micro[k].tokens;
		if (!t->micro[k].B)
			continue;
		struct bert_batch v = batch_view(&t->micro[k]);
		int64_t cnt;
		if (t->teacher) {   /* its logits teach; its loss sum is never read */
			bert_forward_sum(t->teacher, &v, 0, 0, &cnt);
			bert_targets_from(t->m, t->teacher, (float)t->c->kd_temp);
		}
		const char *note = bert_train_pass(t->m, &v, seeds[k], count > 0, scale, &cnt);
		if (note)
			trainer_log(t, "step %ld: %s", t->st.step + 1, note);
		if (!count)
			continue;
		if (t->c->vat > 0)
			bert_vat(t->m, (float)t->c->vat, (float)t->c->vat_xi, (int)t->c->vat_iters,
				 rng_derive(seeds[k], 0x766174), scale);
	}
	double loss = bert_take_loss(t->m);   /* the step's first wait for a GPU */
	int with_items = reduce_gradient(t, &loss, count, r);
	r->loss = with_items ? loss : NAN;   /* nothing to predict: no loss, not 0 */
	r->grad_norm = grad_norm(t) / ls;
	r->lr = schedule_lr(&t->sched, sched_position(t));
	r->loss_scale = t->st.ls.scale;
	int finite = isfinite(r->loss) && isfinite(r->grad_norm);
	if (with_items && t->st.ls.scale && loss_scale_update(&t->st.ls, finite) == SCALE_HALVED) {
		r->skipped = r->overflow = 1;
		t->st.overflows++;
		trainer_log(t, "step %ld: the fp16 gradient overflowed: skipped, the loss scale halves to %g",
		      t->st.step + 1, t->st.ls.scale);
		return;
	}
	if (!with_items || !finite) {
		r->skipped = 1;
		if (count && t->lead && t->st.skipped < MAX_BUG_DUMPS)
			dump_bug(t, n, seeds, scale);
		t->st.skipped++;
		return;
	}
	double unscale = 1 / ls;   /* fp16's scale out of the gradient, and --clip's */
	if (t->c->clip > 0 && r->grad_norm > t->c->clip)
		unscale *= t->c->clip / r->grad_norm;
	optim_step(t->o, r->lr, (float)unscale);
	if (t->c->zero)   /* every process's updated shard to all */
		comm_all_gather_floats(t->comm, bert_backend_params(t->m), bert_numel(t->m));
	t->st.optim_steps++;
}
