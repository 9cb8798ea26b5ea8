/* ts-train's loop (train_run, at the end, reads top to bottom): a run
 * claimed and built (train_claim.c, train_model.c), its steps planned
 * (train_plan.c) and taken (train_step.c), evaluated, saved and logged
 * here, until its end or a stop. */
#include "run/train.h"
#include "run/trainer.h"
#include "data/utf8.h"
#include "eval/evaluate.h"
#include "format/mpjson.h"
#include "model/modeldir.h"
#include "run/rundir.h"
#include "run/runplots.h"
#include "util/afile.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t run_kept;   /* from the making or taking of the run dir on */
static int says_stop;   /* process 0: a Control-C is answered */

/* A stop at the step's end (or before the first); a second Control-C quits
 * at once, the run left to resume from its last checkpoint, as after a
 * crash, without the temp dir of a checkpoint it was writing. Before the run
 * dir is made, the first quits so: a run stopped then leaves nothing, as one
 * refused does. */
static void on_stop_signal(int sig)
{
	static const char line[] = "ts-train: stopping after this step (Control-C again quits now; --resume goes on "
				   "from the last checkpoint)\n";
	if (!run_kept || (sig == SIGINT && stop_signal)) {
		cleanup_run();
		signal(sig, SIG_DFL);
		raise(sig);   /* taken when the handler returns, sig blocked in it */
		return;
	}
	if (sig == SIGINT && says_stop && write(STDERR_FILENO, line, sizeof line - 1) < 0)
		says_stop = 0;   /* nothing more to do: the stop goes on */
	stop_signal = 1;
}

/* A line on standard error, from process 0 for all. */
static void say(struct trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct trainer *t, const char *fmt, ...)
{
	if (!t->lead)
		return;
	progress_clear(t->prog);
	fprintf(stderr, "%s: ", ts_prog);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* --- evaluation and checkpoints --- */

static void save_checkpoint(struct trainer *t)
{
	if (t->saved_step == t->st.step)
		return;
	t->saved_step = t->st.step;
	if (!t->lead) {
		if (t->c->zero) {   /* its shard of the optimizer state, for process 0 to save */
			optim_pull(t->o);
			optim_unstage(t->o);
		}
		return;
	}
	char *config = trainer_config_text(t);
	checkpoint_save(t->c->run, t->m, t->o, &t->st, t->labels, t->nlabels, t->vocab_path, config, (int)t->c->keep);
	free(config);
	char name[32];
	snprintf(name, sizeof name, "ckpt/step-%ld", t->st.step);
	trainer_event(t, "checkpoint", json_pack("{sI ss}", "step", (json_int_t)t->st.step, "path", name));
	events_sync(t->ev);
}

/* Saves the model, or with --ema its moving average (the parameters have
 * been swapped with it by the caller). */
static void save_model(struct trainer *t, const char *name)
{
	if (!t->lead)
		return;
	char *dir = path_join(t->c->run, name);
	modeldir_save(dir, t->m, t->labels, t->nlabels, t->vocab_path);
	free(dir);
}

/* With --ema, evaluations and saved models use the moving average:
 * swapped in before, out after. */
static void swap_ema(struct trainer *t)
{
	if (t->c->optim.ema > 0)
		optim_swap_ema(t->o);
}

static void sum_doubles(const void *comm, double *v, int n)
{
	comm_sum_doubles(comm, v, n);
}

/* Records an evaluation batch of a split takes: --batch, or as many of the
 * split's longest records as --batch-tokens holds (at least one). */
static int eval_batch(const struct trainer *t, const struct split *sp)
{
	if (!t->c->batch_tokens)
		return (int)t->c->batch;
	long records = t->c->batch_tokens / (sp->ms->max_tokens > 0 ? (long)sp->ms->max_tokens : 1);
	return records > 1 ? (int)records : 1;
}

static json_t *eval_split(struct trainer *t, struct split *sp, const char *name, struct eval_result *r)
{
	struct eval_share share = { t->comm->rank, t->comm->size, sum_doubles, t->comm };
	struct eval_opts o = { eval_batch(t, sp), t->c->threshold, t->labels, &share };
	evaluate(t->m, &sp->src, &o, NULL, NULL, r);
	json_t *j = eval_json(r, t->labels);
	json_object_set_new(j, "step", json_integer(t->st.step));
	json_object_set_new(j, "epoch", json_integer(t->st.epoch));
	json_object_set_new(j, "split", json_string(name));
	trainer_event(t, "eval", json_deep_copy(j));
	return j;
}

/* Evaluates on valid (and test), every process its share; keeps best/ and
 * counts towards patience. Returns 1, on every process, when patience has
 * run out on process 0. */
static int evaluate_swapped(struct trainer *t)
{
	struct eval_result r;
	json_t *j = eval_split(t, &t->valid, "valid", &r);
	double v = metric_value(&r, t->metric);
	if (strcmp(t->metric, "loss"))
		say(t, "step %ld/%ld: valid %s %.4f, loss %.4f", t->st.step, t->total_steps, t->metric, v, r.loss);
	else
		say(t, "step %ld/%ld: valid loss %.4f", t->st.step, t->total_steps, v);
	char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	trainer_log(t, "step %ld eval valid %s %.6g: %s", t->st.step, t->metric, v, text);
	free(text);
	json_decref(j);
	eval_result_free(&r);
	if (t->c->eval_test && t->test.shard) {
		json_decref(eval_split(t, &t->test, "test", &r));
		eval_result_free(&r);
	}
	if (t->lead)
		run_plots(t->c->run, t->metric);
	int better = isfinite(v) &&   /* undefined (Pearson of constant values) is never the best */
		     (t->st.best_step < 0 || (metric_higher_is_better(t->metric) ? v > t->st.best : v < t->st.best));
	if (better) {
		t->st.best = v;
		t->st.best_step = t->st.step;
		t->st.bad_evals = 0;
		save_model(t, "best");
		trainer_event(t, "best", json_pack("{sI ss so}", "step", (json_int_t)t->st.step, "metric", t->metric, "value",
						   json_number(v)));
		if (t->lead)
			trainer_log(t, "step %ld: new best %s %.6g, saved best/", t->st.step, t->metric, v);
		return comm_any(t->comm, 0);
	}
	t->st.bad_evals++;
	return comm_any(t->comm, t->lead && t->c->patience > 0 && t->st.bad_evals >= t->c->patience);
}

static int evaluate_now(struct trainer *t)
{
	if (!t->valid.shard)
		return 0;
	swap_ema(t);
	int stop = evaluate_swapped(t);
	swap_ema(t);
	return stop;
}

/* The step's collectives on several processes, for its event and the log:
 * their time and the part of it not hidden behind the backward pass, the
 * bytes summed, algorithm and bus bandwidth over that time (the bus figure
 * as NCCL counts an all-reduce, 2(n-1)/n of the data crossing each link),
 * and the process whose computation took longest. NULL on one process. */
static json_t *comm_json(struct trainer *t, double step_s)
{
	if (t->comm->size == 1)
		return NULL;
	struct comm_stats cs;
	comm_take_stats(&cs);
	int slowest;
	double compute_s = comm_max(t->comm, step_s - cs.exposed, &slowest);
	int n = t->comm->size;
	double algbw = cs.seconds > 0 ? cs.bytes / cs.seconds / 1e9 : 0;
	json_t *j = json_pack("{sf sf sf sf sf ss sI sf}", "ms", cs.seconds * 1e3, "exposed_ms", cs.exposed * 1e3,
			      "bytes", cs.bytes, "algbw_gbs", algbw, "busbw_gbs", algbw * 2 * (n - 1) / n,
			      "algorithm", comm_algorithm(), "slowest", (json_int_t)slowest, "slowest_compute_ms",
			      compute_s * 1e3);
	if (t->steps_this_process == 3 || t->st.step == t->total_steps)
		trainer_log(t, "step %ld: collectives %.1f ms (%.1f ms exposed), %.0f bytes, bus %.2f GB/s; slowest "
		      "process %d (%.1f ms of computation)", t->st.step, cs.seconds * 1e3, cs.exposed * 1e3, cs.bytes,
		      algbw * 2 * (n - 1) / n, slowest, compute_s * 1e3);
	return j;
}

static void log_step(struct trainer *t, const struct step_result *r, double step_s)
{
	json_t *comm = comm_json(t, step_s);
	double elapsed = clock_seconds() - t->t0;
	double per_step = elapsed / (double)t->steps_this_process;
	double eta = per_step * (double)(t->total_steps - t->st.step);
	json_t *j = json_pack("{sI sI sI sI so so so sf so sI}", "step", (json_int_t)t->st.step, "epoch",
			      (json_int_t)t->st.epoch, "samples", (json_int_t)t->st.samples, "tokens",
			      (json_int_t)t->st.tokens, "loss", json_number(r->loss), "lr", json_number(r->lr),
			      "grad_norm", json_number(r->grad_norm), "step_ms", step_s * 1e3, "tokens_per_s",
			      json_number((double)r->tokens / step_s), "eta_s", (json_int_t)eta);
	if (r->skipped)
		json_object_set_new(j, "skipped", json_true());
	if (r->overflow)
		json_object_set_new(j, "overflow", json_true());
	if (r->loss_scale)
		json_object_set_new(j, "loss_scale", json_real(r->loss_scale));
	if (comm)
		json_object_set_new(j, "comm", comm);
	trainer_event(t, "step", j);
	char note[96];
	snprintf(note, sizeof note, "loss %.4f lr %.3g epoch %ld", r->loss, r->lr, t->st.epoch + 1);
	progress_update(t->prog, (uint64_t)t->st.step, note);
	if (t->steps_this_process == 3 || t->st.step == t->total_steps) {
		time_t finish = time(NULL) + (time_t)eta;
		char when[32];
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&finish));
		trainer_log(t, "step %ld/%ld: %.0f ms per step; predicted finish %s", t->st.step, t->total_steps,
		      per_step * 1e3, when);
	}
}

/* --- the run --- */

/* At an evaluation point (every eval-every steps and at each epoch end):
 * evaluate, checkpoint unless --save-every says otherwise. Returns 1 to stop early. */
static int at_step_end(struct trainer *t)
{
	const struct train_config *c = t->c;
	int last = t->st.step == t->total_steps;
	int epoch_end = (uint64_t)t->st.record == shard_count(t->train.shard);
	int eval_point = last || epoch_end || (c->eval_every > 0 && t->st.step % c->eval_every == 0);
	int early = eval_point ? evaluate_now(t) : 0;
	t->st.finished = last || early;
	last |= early;
	if (last || (c->save_every > 0 ? t->st.step % c->save_every == 0 : eval_point))
		save_checkpoint(t);
	if (early)
		trainer_event(t, "early_stop", json_pack("{sI sI}", "step", (json_int_t)t->st.step, "patience",
							  (json_int_t)c->patience));
	return early;
}

static void finish(struct trainer *t)
{
	if (t->lead)
		rundir_clear_stop(t->c->run);   /* a request that came with the last step */
	swap_ema(t);
	save_model(t, "final");
	if (t->valid.shard && t->st.best_step < 0) {
		trainer_log(t, "no evaluation gave a valid %s (each was nan): best/ is the last model", t->metric);
		say(t, "no evaluation gave a valid %s (each was nan): best/ is the last model, as final/", t->metric);
	}
	if (!t->valid.shard || t->st.best_step < 0)
		save_model(t, "best");
	swap_ema(t);
	double secs = t->st.elapsed_s > 0 ? t->st.elapsed_s : 1e-9;
	json_t *done = json_pack("{sI sI sI sf sf sf}", "step", (json_int_t)t->st.step, "skipped",
				 (json_int_t)t->st.skipped, "best_step", (json_int_t)t->st.best_step, "elapsed_s",
				 t->st.elapsed_s, "samples_per_s", (double)t->st.samples / secs, "tokens_per_s",
				 (double)t->st.tokens / secs);
	double peak = t->c->be->peak_memory();
	if (peak > 0)   /* this leg's: a resumed run counts from its resume */
		json_object_set_new(done, "peak_memory_mib", json_real(peak / 1048576));
	if (t->c->be->graph_begin)   /* this leg's training passes, by how they ran */
		json_object_set_new(done, "passes", json_pack("{sI sI sI}",
			"eager", (json_int_t)bert_graph_runs(t->m, GRAPH_EAGER),
			"captured", (json_int_t)bert_graph_runs(t->m, GRAPH_CAPTURED),
			"replayed", (json_int_t)bert_graph_runs(t->m, GRAPH_REPLAYED)));
	if (t->c->be->attention_runs)   /* the process's attention calls, by kernel */
		json_object_set_new(done, "attention", json_pack("{sI sI sI}",
			"cudnn_unified", (json_int_t)t->c->be->attention_runs(ATT_CUDNN_UNIFIED),
			"cudnn_composite", (json_int_t)t->c->be->attention_runs(ATT_CUDNN_COMPOSITE),
			"own", (json_int_t)t->c->be->attention_runs(ATT_OWN)));
	trainer_event(t, "done", done);
	if (t->lead) {
		run_plots(t->c->run, t->metric);
		trainer_log(t, "done at step %ld (%ld skipped); final/ and best/ written", t->st.step, t->st.skipped);
		char best[96] = "no evaluation";
		if (t->st.best_step >= 0)
			snprintf(best, sizeof best, "best valid %s %.6g at step %ld", t->metric, t->st.best, t->st.best_step);
		trainer_log(t, "summary: %ld steps in %.0fh%02.0fm%02.0fs of training, %.1f samples/s, %.0f tokens/s; %s",
		      t->st.step, floor(secs / 3600), floor(fmod(secs, 3600) / 60), floor(fmod(secs, 60)),
		      (double)t->st.samples / secs, (double)t->st.tokens / secs, best);
	} else
		trainer_log(t, "done at step %ld (%ld skipped)", t->st.step, t->st.skipped);
	char *best = path_join(t->c->run, "best");
	say(t, "done at step %ld; the model is in %s", t->st.step, best);
	free(best);
}

static void stop_now(struct trainer *t)
{
	save_checkpoint(t);
	trainer_event(t, "stop", json_pack("{sI}", "step", (json_int_t)t->st.step));
	char *run = shell_quote(t->c->run);
	trainer_log(t, "stopped at step %ld on request; resume with ts-train --resume %s", t->st.step, run);
	say(t, "stopped at step %ld; continue with ts-train --resume %s", t->st.step, run);
	free(run);
}

int train_run(const struct train_config *c)
{
	struct trainer t = {.c = c, .comm = c->comm, .lead = c->comm->rank == 0};
	char *ckpt;
	if (!c->be->host)
		comm_use_gpu(c->comm);
	/* a request to stop, and a lost terminal or connection (a closed pipe
	 * behind standard error, an ssh session gone): each stops the run at
	 * the step's end with a checkpoint, where it can resume */
	int stops[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
	says_stop = t.lead;
	for (size_t i = 0; i < sizeof stops / sizeof *stops; i++)
		signal(stops[i], on_stop_signal);
	open_data(&t);
	claim_run(&t, &ckpt);
	check_vocab(&t);
	build_model(&t, ckpt ? ckpt : c->init);
	check_same_run(&t);
	t.metric = c->metric ? c->metric : metric_default(c->task);
	if (c->task == TASK_TOKCLS && !strcmp(t.metric, "entity-f1") && !t.labels)
		die("%s numbers its tags, which name no entities: --metric entity-f1 (tokcls's default) needs them "
		    "named (B-PER, I-LOC, ...: ts-tokenize --labels FILE names numbered tags), or give --metric accuracy",
		    c->data);
	build_optimizer(&t);
	run_kept = 1;
	open_run(&t);
	start_state(&t, &ckpt);
	t.saved_step = t.st.step;   /* a stop before the first step has nothing new to save */
	/* killed after its last checkpoint, a finished run still lacks final/ or its done event */
	if (comm_any(t.comm, t.lead && t.st.finished && events_last_is(t.ev, "done"))) {
		if (t.lead)
			warnx("%s: the run already finished at step %ld", c->run, t.st.step);
		trainer_record_failures(NULL);
		return 0;
	}
	if (ckpt) {
		json_t *resume = json_pack("{sI so sI sI sI ss}", "step", (json_int_t)t.st.step, "from", utf8_json(ckpt),
					   "total_steps", (json_int_t)t.total_steps, "steps_per_epoch",
					   (json_int_t)t.steps_per_epoch, "processes", (json_int_t)t.comm->size,
					   "device", c->be->name);
		if (json_array_size(t.passed_over))
			json_object_set(resume, "passed_over", t.passed_over);
		if (c->resume_changes)
			json_object_set_new(resume, "changes", json_loads(c->resume_changes, 0, NULL));
		trainer_event(&t, "resume", add_batch_tokens(&t, resume));
	}
	t.prog = t.lead ? progress_new("training", (uint64_t)t.total_steps, PROGRESS_STEPS) : NULL;
	t.t0 = clock_seconds();
	double elapsed0 = t.st.elapsed_s;
	int stopped = 0;
	while (!t.st.finished && t.st.step < t.total_steps) {
		if (comm_any(t.comm, stop_signal || (t.lead && rundir_stop_requested(c->run)))) {
			stop_now(&t);
			stopped = 1;
			break;
		}
		double s0 = clock_seconds();
		struct comm_stats before;   /* the evaluations', checkpoints' and checks' since the last step */
		comm_take_stats(&before);
		struct step_result r;
		train_step(&t, &r);
		t.st.step++;
		t.st.samples += r.samples;
		t.st.tokens += r.tokens;
		t.steps_this_process++;
		t.st.elapsed_s = elapsed0 + (clock_seconds() - t.t0);
		log_step(&t, &r, clock_seconds() - s0);
		if (at_step_end(&t))
			break;
	}
	if (!stopped)
		finish(&t);
	progress_done(t.prog);
	if (t.lead) {
		trainer_record_failures(NULL);
		events_close(t.ev);
		tb_close(t.tb);
	}
	if (fclose(t.log))
		die("%s/log/rank-%d.log: cannot write:", c->run, t.comm->rank);
	return 0;
}
