/* ts-train's plan of steps: which records each micro-batch of a step
 * takes on each process, how many steps an epoch and the run have, and
 * where the lr schedule stands, across a change in the number of
 * processes. */
#include "run/trainer.h"
#include "run/train.h"
#include "util/err.h"

/* Records a step's micro-batch takes from all processes together. */
static uint64_t global_batch(const struct trainer *t)
{
	return (uint64_t)t->c->batch * (uint64_t)t->comm->size;
}

/* The epoch's record order, in t->order. */
void use_order(struct trainer *t, long epoch)
{
	if (t->order_epoch == epoch)
		return;
	epoch_order(t->train.shard, (uint64_t)t->c->seed, epoch, (int)global_batch(t), t->c->bucket, t->order);
	t->order_epoch = epoch;
}

/* The micro-batch of a run on a number of processes that starts at record
 * at of the epoch's order: process rank's slice of it is order[*lo, *hi)
 * (--batch records, or with --batch-tokens a group, to each process in
 * turn; at an epoch's end it may be empty). Returns where the next starts. */
uint64_t micro_batch(const struct trainer *t, uint64_t at, int processes, int rank, uint64_t *lo,
		   uint64_t *hi)
{
	uint64_t total = shard_count(t->train.shard), batch = (uint64_t)t->c->batch;
	for (int r = 0; r < processes; r++) {
		uint64_t end = t->c->batch_tokens ? token_group_end(t->train.shard, t->order, total, at, t->c->batch_tokens)
			     : total - at < batch ? total : at + batch;
		if (r == rank)
			*lo = at, *hi = end;
		at = end;
	}
	return at;
}

/* The micro-batches of a run on a number of processes from record from of
 * an epoch's order to its end: --batch's from the count of records, and
 * --batch-tokens's from the epoch's groups. */
static uint64_t micro_batches(struct trainer *t, long epoch, uint64_t from, int processes)
{
	uint64_t total = shard_count(t->train.shard), n = 0, lo, hi;
	if (!t->c->batch_tokens) {
		uint64_t gb = (uint64_t)t->c->batch * (uint64_t)processes;
		return (total - from + gb - 1) / gb;
	}
	use_order(t, epoch);
	for (; from < total; n++)
		from = micro_batch(t, from, processes, 0, &lo, &hi);
	return n;
}

/* Optimizer steps that take a number of micro-batches. */
static long steps_for(const struct trainer *t, uint64_t micro)
{
	uint64_t accum = (uint64_t)t->c->accum;
	return (long)((micro + accum - 1) / accum);
}

/* Optimizer steps from record from of an epoch to the end of the run's
 * epochs on a number of processes: the rest of that epoch, then whole ones. */
static long steps_from(struct trainer *t, long epoch, uint64_t from, int processes)
{
	long steps = 0;
	for (; epoch < t->c->epochs; epoch++, from = 0)
		steps += steps_for(t, micro_batches(t, epoch, from, processes));
	return steps;
}

/* Optimizer steps to the end of the run from the state's place in the data,
 * on a number of processes. */
static long steps_to_end(struct trainer *t, int processes)
{
	if (t->c->max_steps > 0)
		return t->c->max_steps - t->st.step;
	return steps_from(t, t->st.epoch, (uint64_t)t->st.record, processes);
}

/* How fast the lr schedule moves from the step where it was last anchored
 * on: how many of its steps one training step advances it, such that it
 * reaches its end with the run's last step when the run goes on with the
 * given number of processes (1 while the run keeps the number it began
 * with). */
static double sched_pace(struct trainer *t, int processes)
{
	long to_end = t->st.step - t->st.sched_step + steps_to_end(t, processes);
	return to_end > 0 ? (t->sched.total_steps - t->st.sched_pos) / (double)to_end : 1;
}

/* The schedule's position at the state's step. */
double sched_position(const struct trainer *t)
{
	return t->st.sched_pos + (double)(t->st.step - t->st.sched_step) * t->pace;
}

/* A --bucket run, whose order depends on the micro-batch, resumes on as
 * many processes as it trained on: another number is refused before the
 * run's log or events say anything, and the run is left as it was. */
void check_processes(const struct trainer *t)
{
	int was = t->st.processes, now = t->comm->size;
	if (!t->c->bucket || was == now)
		return;
	trainer_record_failures(NULL);
	die("%s: a --bucket run resumes on as many processes as it trained on (%d), not %d", t->c->run, was, now);
}

/* A run resumed on another number of processes goes on from the same
 * record of the epoch, in micro-batches of --batch records or of a
 * --batch-tokens group a process (whose cuts the processes do not move), and
 * its schedule goes on from where it was at the pace that ends it with the
 * data. */
static void resize(struct trainer *t)
{
	int was = t->st.processes, now = t->comm->size;
	t->pace = sched_pace(t, was);
	t->st.sched_pos = sched_position(t);
	t->st.sched_step = t->st.step;
	t->st.processes = now;
	trainer_log(t, "the run trained on %d processes and goes on on %d", was, now);
}

/* The steps of the run from its state (fresh or resumed from ckpt) and its
 * lr schedule, which keeps the length the run first planned. */
void plan_steps(struct trainer *t, const char *ckpt)
{
	const struct train_config *c = t->c;
	t->order = xmalloc(shard_count(t->train.shard) * sizeof *t->order);
	t->order_epoch = -1;
	long planned = c->max_steps > 0 ? c->max_steps : steps_from(t, 0, 0, t->st.sched_processes);
	if (t->st.sched_pos > (double)planned && !c->resume_changes)   /* a run cut short may be past its end */
		die("%s/state.json: 'sched_pos' is %g, past the schedule's %ld steps", ckpt, t->st.sched_pos, planned);
	int by_steps = c->max_steps > 0;
	if (ckpt && !c->resume_changes && (by_steps ? t->st.step > c->max_steps : t->st.epoch > c->epochs))
		die("%s/state.json: '%s' is %ld, past the run's end at %ld", ckpt, by_steps ? "step" : "epoch",
		    by_steps ? t->st.step : t->st.epoch, by_steps ? c->max_steps : c->epochs);
	t->sched = (struct schedule){c->lr, planned, warmup_steps_from(c->warmup, planned), (enum decay_kind)c->decay,
				     c->end_lr_ratio, 1.0};
	if (t->st.processes != t->comm->size)
		resize(t);
	t->steps_per_epoch = steps_for(t, micro_batches(t, t->st.epoch, 0, t->comm->size));
	t->total_steps = t->st.step + steps_to_end(t, t->comm->size);
	t->pace = sched_pace(t, t->comm->size);
	t->micro = xcalloc((size_t)c->accum, sizeof *t->micro);
}
