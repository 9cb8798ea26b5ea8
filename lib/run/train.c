#include "run/train.h"
#include "backend/memcheck.h"
#include "data/labelmap.h"
#include "data/manifest.h"
#include "data/vocab.h"
#include "device/device.h"
#include "eval/evaluate.h"
#include "format/events.h"
#include "format/mpjson.h"
#include "format/tboard.h"
#include "model/batcher.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "model/schedule.h"
#include "run/bugdump.h"
#include "run/checkpoint.h"
#include "run/rundir.h"
#include "run/runplots.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/clock.h"
#include "util/digest.h"
#include "util/err.h"
#include "util/progress.h"
#include "util/rng.h"
#include "util/strbuf.h"
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_BUG_DUMPS = 3 };

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_signal = 1;
}

struct split {
	struct shard *shard;
	const struct manifest_split *ms;
	struct batch_source src;
	char *path;
};

struct trainer {
	const struct train_config *c;
	const struct comm *comm;
	int lead;              /* process 0: writes the run dir, evaluates */
	struct manifest *man;
	struct split train, valid, test;
	struct vocab *vocab;
	char *vocab_path;
	struct mlm_config mlm;
	char **labels;
	int nlabels, num_labels;
	struct bert *m;
	struct bert *teacher;  /* --teacher */
	struct optim *o;
	size_t shard_lo, shard_hi;   /* --zero 1: the parameters this process updates */
	size_t (*buckets)[2];        /* the gradient's, in the order backward completes them */
	int nbuckets, next_bucket;   /* the next bucket to sum */
	struct schedule sched;
	struct train_state st;
	struct events *ev;
	struct tboard *tb;     /* process 0's TensorBoard file */
	FILE *log;
	uint64_t *order;
	long order_epoch;      /* the epoch order holds, -1 for none */
	long steps_per_epoch, total_steps;
	double pace;           /* schedule steps a step: sched_pace */
	struct batch *micro;
	const char *metric;
	double t0;
	long steps_this_process;
	long saved_step;       /* step of the last checkpoint written, -1 for none */
	struct progress *prog;
	json_t *passed_over;   /* checkpoints --resume passed over, damaged: {checkpoint, why} */
};

static void logf_(struct trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct trainer *t, const char *fmt, ...)
{
	time_t now_t = time(NULL);
	char stamp[32];
	strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime(&now_t));
	fprintf(t->log, "%s ", stamp);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(t->log, fmt, ap);
	va_end(ap);
	fputc('\n', t->log);
	if (fflush(t->log) || ferror(t->log))
		die("%s/log/rank-%d.log: cannot write:", t->c->run, t->comm->rank);
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

/* An event of the run: process 0 records it. */
/* Process 0's events while it trains, so that a run that dies says so. */
static struct events *dying_events;

static void record_failure(void)
{
	struct events *ev = dying_events;
	dying_events = NULL;   /* once, and not again if this write fails */
	if (ev)
		events_add(ev, "failed", json_object());
}

/* An event for the log of events, its numbers for TensorBoard too. */
static void event(struct trainer *t, const char *type, json_t *fields)
{
	if (!t->lead) {
		json_decref(fields);
		return;
	}
	int step = !strcmp(type, "step");
	if (step || !strcmp(type, "eval")) {
		const char *split = json_string_value(json_object_get(fields, "split"));
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		tb_fields(t->tb, step ? "train" : split ? split : "eval", fields, (double)now.tv_sec + now.tv_nsec * 1e-9);
		tb_flush(t->tb);
	}
	events_add(t->ev, type, fields);
}

/* --- data --- */

static void open_split(struct trainer *t, const char *name, struct split *sp)
{
	const struct manifest_split *ms = manifest_split(t->man, name);
	if (!ms || ms->count == 0)
		return;
	sp->ms = ms;
	sp->path = manifest_shard_path(t->c->data, ms);
	sp->shard = shard_open(sp->path);
	sp->src = (struct batch_source){sp->shard, sp->path, t->c->task, 0, &t->mlm, (uint64_t)t->c->seed, 0, 0};
}

static void open_data(struct trainer *t)
{
	t->man = manifest_read(t->c->data);
	open_split(t, "train", &t->train);
	if (!t->train.shard)
		die("%s: the train split is empty or missing", t->c->data);
	if (t->c->batch_tokens) {
		char limit[48];
		snprintf(limit, sizeof limit, "--batch-tokens %ld", t->c->batch_tokens);
		batch_check_tokens(&t->train.src, t->c->batch_tokens, limit);
	}
	open_split(t, "valid", &t->valid);
	open_split(t, "test", &t->test);
}

/* The vocab a run starts with: --init's, or from scratch --vocab's. */
static char *start_vocab(const struct train_config *c)
{
	if (c->init)
		return path_join(c->init, "vocab.txt");
	if (!c->vocab)
		die("training from scratch needs the vocab the data was tokenized with: --vocab FILE");
	return xstrdup(c->vocab);
}

/* The vocab must be the one the data was tokenized with. */
static void check_vocab(struct trainer *t)
{
	t->vocab = vocab_load(t->vocab_path);
	const char *want = t->man->vocab_sha256, *have = vocab_sha256(t->vocab);
	if (want && strcmp(want, have))
		die("%s was tokenized with another vocab (sha256 %.12s…) than %s (sha256 %.12s…)", t->c->data, want,
		    t->vocab_path, have);
	mlm_config_init(&t->mlm, t->vocab, t->c->mask_prob, t->c->whole_word, (int)t->c->max_ngram);
}

/* Outputs of the head: 1 for reg; else the label names of the data, or the
 * largest id + 1. */
static int data_classes(const struct manifest *m, enum bert_task task)
{
	if (task == TASK_REG)
		return 1;
	if (m->nlabels > 0)
		return m->nlabels;
	int k = 0;
	for (int s = 0; s < m->nsplits; s++)
		for (size_t i = 0; i < m->splits[s].nlabel_counts; i++)
			if (m->splits[s].label_counts[i].label + 1 > k)
				k = m->splits[s].label_counts[i].label + 1;
	return k;
}

/* The model a run builds, before it is made: the one of from's config.json
 * (--init's model dir, or a checkpoint), or c->model from scratch over a
 * vocab of vocab tokens; with the head of c's task, over num_labels
 * classes (0: from's). */
static struct bert_config model_config(const struct train_config *c, const char *from, int vocab,
				       int num_labels)
{
	struct bert_config mc = c->model;
	if (from) {
		char *path = path_join(from, "config.json");
		hfconfig_read(path, &mc, NULL, NULL);
		free(path);
	} else {
		mc.vocab = vocab;
	}
	mc.task = c->task;
	if (num_labels > 0)
		mc.num_labels = num_labels;
	return mc;
}

size_t train_count_params(const struct train_config *c)
{
	struct manifest *man = manifest_read(c->data);
	int vocab = 0;
	if (!c->init) {
		char *path = start_vocab(c);
		struct vocab *v = vocab_load(path);
		vocab = vocab_size(v);
		vocab_free(v);
		free(path);
	}
	struct bert_config mc = model_config(c, c->init, vocab, c->task == TASK_MLM ? 0 : data_classes(man, c->task));
	manifest_free(man);
	return bert_config_numel(&mc);
}

/* Token ids index the vocab's tables and the model's embeddings (at least as
 * large): the manifest's word is checked before step 1, every record as it
 * is batched. */
static void check_ids(struct trainer *t, struct split *sp)
{
	if (!sp->shard)
		return;
	manifest_check_ids(t->c->data, sp->ms, vocab_size(t->vocab));
	sp->src.vocab = vocab_size(t->vocab);
}

/* An evaluation that scores nothing would report a loss of 0, the best
 * there is. */
static void check_scored(const struct trainer *t, const struct split *sp)
{
	if (!sp->shard || eval_scores_any(&sp->src))
		return;
	if (t->c->task == TASK_MLM)
		die("%s: no token is masked for evaluation (records too short or --mask-prob too small)", sp->path);
	die("%s: no record has anything to score", sp->path);
}

/* --- model and optimizer --- */

static uint32_t longest_record(const struct manifest *m)
{
	uint32_t longest = 0;
	for (int i = 0; i < m->nsplits; i++)
		if (m->splits[i].max_tokens > longest)
			longest = m->splits[i].max_tokens;
	return longest;
}

/* Whether passes are shaped for CUDA graphs (bert_set_head_slots, and
 * bert_set_pad_rows with --batch-tokens): on a backend that has them, with
 * or without --no-cuda-graphs (so that both give the same bits), for the
 * tasks of the cross-entropy, where neither VAT nor R-Drop nor a teacher
 * needs every head row's loss */
static int graph_shapes(const struct train_config *c)
{
	return c->be->graph_begin &&
	       (c->task == TASK_CLS || c->task == TASK_MLM || c->task == TASK_TOKCLS) &&
	       !(c->vat > 0) && !(c->rdrop > 0) && !c->teacher;
}

/* Refuses a model, or a model with a batch of the longest records, that
 * would not fit in memory: fp32 parameters, gradients and two optimizer
 * moments (with --zero 1, of this process's shard), the parameters' copy in
 * acts where they are not floats, then the activations (and VAT's). With
 * --batch-tokens N, ceil(N / T) records of the longest T tokens bound both
 * a micro-batch's tokens and its sum of squared lengths. */
static void check_memory(const struct trainer *t, const struct bert_config *mc, size_t numel)
{
	const struct train_config *c = t->c;
	double moments = c->zero ? 2.0 / c->comm->size : 2.0;
	double copy = acts_are_floats(c->be) ? 0 : (double)c->be->act_size;
	double state = ((2 + moments) * sizeof(float) + copy) * (double)numel;
	memory_check(c->be, "model", state, "parameters, gradients and optimizer state");
	uint32_t longest = longest_record(t->man);
	int T = longest < 1 ? 1 : longest > (uint32_t)mc->max_pos ? mc->max_pos : (int)longest;
	int records = c->batch_tokens ? (int)((c->batch_tokens + T - 1) / T) : (int)c->batch;
	int B = records * (c->rdrop > 0 ? 2 : 1);   /* R-Drop runs each record twice */
	double tokens = c->batch_tokens ? (double)c->batch_tokens : (double)B * T;
	int M = bert_task_pooled(c->task) ? B : c->task == TASK_TOKCLS ? B * T : (int)ceil(tokens * c->mask_prob);
	if (graph_shapes(c))
		M = bert_head_slots(M);
	char purpose[128];
	snprintf(purpose, sizeof purpose, "the model and the activations of %d records of %d tokens", B, T);
	double acts = bert_batch_bytes(mc, c->be, B, T, M, c->recompute);
	if (c->vat > 0)
		acts += bert_vat_bytes(mc, c->be, B, T, M, c->recompute);
	memory_check(c->be, "batch", state + acts, purpose);
}

/* A teacher's class i must be the data's class i, where both are named:
 * the same classes in another order would teach the student inverted
 * labels, so its classifier's rows are put in the data's order; other
 * classes cannot teach. */
static void order_teacher_classes(const struct trainer *t, char *const *names, int n)
{
	const struct manifest *m = t->man;
	char *why = t->c->task == TASK_MLM ? NULL : labels_disagree(names, n, m->labels, m->nlabels);
	if (why && !modeldir_reorder_classes(t->teacher, names, n, m->labels, m->nlabels))
		die("--teacher %s: %s", t->c->teacher, why);
	free(why);
}

/* --teacher: a model of the task and classes of the run, on its device,
 * tokenized with its vocab; it only predicts. */
static void load_teacher(struct trainer *t)
{
	const struct train_config *c = t->c;
	char *vocab = path_join(c->teacher, "vocab.txt");
	struct vocab *v = vocab_load(vocab);
	if (strcmp(vocab_sha256(v), vocab_sha256(t->vocab)))
		die("--teacher %s: its vocab is not the data's", c->teacher);
	vocab_free(v);
	free(vocab);
	struct bert_config tc;
	char *config = path_join(c->teacher, "config.json"), **names;
	int n;
	hfconfig_read(config, &tc, &names, &n);
	free(config);
	if (tc.task != c->task || (c->task != TASK_MLM && tc.num_labels != t->num_labels))
		die("--teacher %s is a %s model of %d labels, the run trains a %s model of %d", c->teacher,
		    task_name(tc.task), tc.num_labels, task_name(c->task), t->num_labels);
	t->teacher = modeldir_load(c->teacher, c->be, c->task, 0, NULL, NULL, NULL);
	order_teacher_classes(t, names, n);
	hfconfig_free_labels(names, n);
	bert_set_soft_loss(t->m, (float)(1 - c->kd_alpha), (float)c->kd_alpha, (float)c->kd_temp);
}

/* The model mc, to be made from from (or from scratch), must take the
 * run's options, vocab and records. */
static void check_model(const struct trainer *t, const struct bert_config *mc, const char *from)
{
	const struct train_config *c = t->c;
	if (c->freeze_layers > mc->layers)
		die_usage("--freeze-layers %ld: the model has %d layers", c->freeze_layers, mc->layers);
	if (from && mc->vocab < vocab_size(t->vocab))
		die("%s: the model's vocab_size %d is smaller than the vocab's %d tokens", from, mc->vocab,
		    vocab_size(t->vocab));
	uint32_t longest = longest_record(t->man);
	if ((int64_t)longest <= mc->max_pos)
		return;
	if (!from)
		die_usage("--max-pos %d: %s holds records of up to %u tokens", mc->max_pos, c->data, longest);
	die("%s holds records of up to %u tokens but the model has %d positions", c->data, longest, mc->max_pos);
}

/* The data's labels must be of a kind the task takes; a run of the wrong
 * task (a forgotten --task) is told the one that fits. */
static void check_label_kind(const struct train_config *c, enum label_kind k)
{
	const char *why = NULL;
	if (k == LABEL_NONE)
		why = "the records have no labels; only --task mlm trains on them";
	else if (k == LABEL_FLOAT && c->task != TASK_REG)
		why = "the labels are numbers; train them with --task reg";
	else if (k == LABEL_LIST && (c->task == TASK_CLS || c->task == TASK_REG))
		why = "the labels are lists; train them with --multi-label (classes of a record) or --task tokcls (a tag "
		      "per token)";
	else if (k == LABEL_INT && c->task == TASK_TOKCLS)
		why = "the labels are one class per record, not a tag per token; train them with --task cls";
	if (why)
		die("%s: %s", c->data, why);
}

static void build_model(struct trainer *t, const char *from)
{
	const struct train_config *c = t->c;
	if (c->task != TASK_MLM) {
		check_label_kind(c, t->man->label_kind);
		t->num_labels = data_classes(t->man, c->task);
		if (t->num_labels < 2 && c->task != TASK_REG)
			die("%s: %s training needs labels of at least two classes", c->data, task_name(c->task));
	}
	struct bert_config start = model_config(c, from, vocab_size(t->vocab), t->num_labels);
	check_model(t, &start, from);
	check_memory(t, &start, bert_config_numel(&start));
	if (from) {
		char **names;
		int n;
		t->m = modeldir_load(from, c->be, c->task, t->num_labels, &(uint64_t){(uint64_t)c->seed}, &names, &n);
		modeldir_order_classes(t->m, from, names, n, t->man->labels, t->man->nlabels, (uint64_t)c->seed);
		hfconfig_free_labels(names, n);
		if (c->dropout_given)
			bert_set_dropout(t->m, c->model.hidden_dropout, c->model.attn_dropout);
	} else {
		t->m = bert_new(&start, c->be);
		bert_init(t->m, (uint64_t)c->seed);
	}
	bert_set_recompute(t->m, c->recompute);
	bert_set_graphs(t->m, !c->no_graphs);
	bert_set_head_slots(t->m, graph_shapes(c));
	bert_set_pad_rows(t->m, graph_shapes(c) ? (int)c->batch_tokens : 0);
	bert_set_label_smoothing(t->m, (float)c->label_smoothing);
	bert_set_frozen(t->m, (int)c->freeze_layers, c->freeze_embeddings);
	bert_set_rdrop(t->m, (float)c->rdrop);
	if (c->teacher)
		load_teacher(t);
	t->labels = t->man->labels;
	t->nlabels = t->man->nlabels;
	t->train.src.num_labels = t->valid.src.num_labels = t->test.src.num_labels = t->num_labels;
	check_ids(t, &t->train), check_ids(t, &t->valid), check_ids(t, &t->test);
	check_scored(t, &t->valid);
	if (c->eval_test)
		check_scored(t, &t->test);
}

static void gather_floats(const void *comm, float *x, size_t n)
{
	comm_sum_floats(comm, x, n);
}

/* A tensor's share of the learning rate: with --llrd F the head has all of
 * it, encoder layer l of L F^(L - l), the embeddings F^(L + 1); frozen
 * tensors none. */
static double lr_scale(const struct train_config *c, const char *name, int L)
{
	int l = -1, emb = !strncmp(name, "bert.embeddings.", 16);
	sscanf(name, "bert.encoder.layer.%d.", &l);
	if ((emb && c->freeze_embeddings) || (l >= 0 && l < c->freeze_layers))
		return 0;
	double f = c->llrd > 0 ? c->llrd : 1;
	return emb ? pow(f, L + 1) : l >= 0 ? pow(f, L - l) : 1;
}

static void build_optimizer(struct trainer *t)
{
	int n = bert_tensors(t->m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	unsigned char *decays = xcalloc((size_t)n, 1);
	double *scale = xcalloc((size_t)n, sizeof *scale);
	bert_tensors(t->m, refs);
	for (int i = 0; i < n; i++) {
		decays[i] = (unsigned char)bert_decays(refs[i].name);
		scale[i] = lr_scale(t->c, refs[i].name, bert_config_of(t->m)->layers);
	}
	t->o = optim_new(&t->c->optim, bert_backend(t->m), refs, decays, n, bert_params(t->m),
			 bert_backend_params(t->m), bert_backend_grads(t->m));
	optim_set_lr_scale(t->o, scale);
	free(scale);
	if (t->c->zero) {
		comm_shard(t->comm, bert_numel(t->m), &t->shard_lo, &t->shard_hi);
		optim_own(t->o, t->shard_lo, t->shard_hi, gather_floats, t->comm);
	}
	t->nbuckets = bert_grad_buckets(t->m, NULL);
	t->buckets = xcalloc((size_t)t->nbuckets, sizeof *t->buckets);
	bert_grad_buckets(t->m, t->buckets);
	free(refs);
	free(decays);
}

/* Records a step's micro-batch takes from all processes together. */
static uint64_t global_batch(const struct trainer *t)
{
	return (uint64_t)t->c->batch * (uint64_t)t->comm->size;
}

/* The epoch's record order, in t->order. */
static void use_order(struct trainer *t, long epoch)
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
static uint64_t micro_batch(const struct trainer *t, uint64_t at, int processes, int rank, uint64_t *lo,
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

/* The pace of the schedule from its anchor on: schedule steps a step that
 * ends it with the run on a number of processes (1 on the first number). */
static double sched_pace(struct trainer *t, int processes)
{
	long to_end = t->st.step - t->st.sched_step + steps_to_end(t, processes);
	return to_end > 0 ? (t->sched.total_steps - t->st.sched_pos) / (double)to_end : 1;
}

/* The schedule's position at the state's step. */
static double sched_position(const struct trainer *t)
{
	return t->st.sched_pos + (double)(t->st.step - t->st.sched_step) * t->pace;
}

/* A run resumed on another number of processes goes on from the same
 * record of the epoch, in micro-batches of --batch records or of a
 * --batch-tokens group a process (whose cuts the processes do not move), and
 * its schedule goes on from where it was at the pace that ends it with the
 * data; but a --bucket run, whose order depends on the micro-batch, resumes
 * on as many. */
static void resize(struct trainer *t)
{
	int was = t->st.processes, now = t->comm->size;
	if (t->c->bucket)
		die("%s: a --bucket run resumes on as many processes as it trained on (%d), not %d", t->c->run, was,
		    now);
	t->pace = sched_pace(t, was);
	t->st.sched_pos = sched_position(t);
	t->st.sched_step = t->st.step;
	t->st.processes = now;
	logf_(t, "the run trained on %d processes and goes on on %d", was, now);
}

/* The steps of the run from its state (fresh or resumed from ckpt) and its
 * lr schedule, which keeps the length the run first planned. */
static void plan_steps(struct trainer *t, const char *ckpt)
{
	const struct train_config *c = t->c;
	t->order = xmalloc(shard_count(t->train.shard) * sizeof *t->order);
	t->order_epoch = -1;
	long planned = c->max_steps > 0 ? c->max_steps : steps_from(t, 0, 0, t->st.sched_processes);
	if (t->st.sched_pos > (double)planned && !c->resume_changes)   /* a run cut short may be past its end */
		die("%s/state.json: 'sched_pos' is %g, past the schedule's %ld steps", ckpt, t->st.sched_pos, planned);
	t->sched = (struct schedule){c->lr, planned, warmup_steps_from(c->warmup, planned), (enum decay_kind)c->decay,
				     c->end_lr_ratio, 1.0};
	if (t->st.processes != t->comm->size)
		resize(t);
	t->steps_per_epoch = steps_for(t, micro_batches(t, t->st.epoch, 0, t->comm->size));
	t->total_steps = t->st.step + steps_to_end(t, t->comm->size);
	t->pace = sched_pace(t, t->comm->size);
	t->micro = xcalloc((size_t)c->accum, sizeof *t->micro);
}

/* The log's table of parameters, largest first, with their share. */
static int by_size(const void *a, const void *b)
{
	int64_t x = tensor_numel(a), y = tensor_numel(b);
	return x < y ? 1 : x > y ? -1 : strcmp(((const struct tensor_ref *)a)->name, ((const struct tensor_ref *)b)->name);
}

static void log_parameters(struct trainer *t)
{
	int n = bert_tensors(t->m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	bert_tensors(t->m, refs);
	qsort(refs, (size_t)n, sizeof *refs, by_size);
	double total = (double)bert_numel(t->m);
	int L = bert_config_of(t->m)->layers;
	fprintf(t->log, "%-64s %-16s %12s %7s %8s\n", "parameter", "shape", "count", "share", "lr");
	for (int i = 0; i < n; i++) {
		char shape[48] = "";
		for (int d = 0; d < refs[i].ndim; d++)
			snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? "x%lld" : "%lld",
				 (long long)refs[i].shape[d]);
		int64_t k = tensor_numel(&refs[i]);
		fprintf(t->log, "%-64s %-16s %12lld %6.2f%% %8.4g\n", refs[i].name, shape, (long long)k,
			100.0 * (double)k / total, lr_scale(t->c, refs[i].name, L));
	}
	fprintf(t->log, "%-64s %-16s %12.0f %6.2f%%\n", "total", "", total, 100.0);
	free(refs);
}

/* --- evaluation, checkpoints, bug dumps --- */

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
	checkpoint_save(t->c->run, t->m, t->o, &t->st, t->labels, t->nlabels, t->vocab_path, (int)t->c->keep);
	char name[32];
	snprintf(name, sizeof name, "ckpt/step-%ld", t->st.step);
	event(t, "checkpoint", json_pack("{sI ss}", "step", (json_int_t)t->st.step, "path", name));
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
	event(t, "eval", json_deep_copy(j));
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
	say(t, "step %ld/%ld: valid %s %.4f, loss %.4f", t->st.step, t->total_steps, t->metric, v, r.loss);
	char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	logf_(t, "step %ld eval valid %s %.6g: %s", t->st.step, t->metric, v, text);
	free(text);
	json_decref(j);
	eval_result_free(&r);
	if (t->c->eval_test && t->test.shard) {
		json_decref(eval_split(t, &t->test, "test", &r));
		eval_result_free(&r);
	}
	if (t->lead)
		run_plots(t->c->run, t->metric);
	int better = t->st.best_step < 0 || (metric_higher_is_better(t->metric) ? v > t->st.best : v < t->st.best);
	if (better) {
		t->st.best = v;
		t->st.best_step = t->st.step;
		t->st.bad_evals = 0;
		save_model(t, "best");
		event(t, "best", json_pack("{sI ss sf}", "step", (json_int_t)t->st.step, "metric", t->metric, "value", v));
		if (t->lead)
			logf_(t, "step %ld: new best %s %.6g, saved best/", t->st.step, t->metric, v);
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

/* bug/step-N/ for --replay: the model before the step and its micro-batches. */
static void dump_bug(struct trainer *t, int nmicro, const uint64_t *seeds, float scale)
{
	struct bug_step b = {t->c->run, t->st.step + 1, t->c->precision, t->c->task, t->num_labels, t->m,
			     t->labels, t->nlabels, t->vocab_path, t->micro, nmicro, seeds, scale};
	char *name = bug_dump(&b);
	logf_(t, "step %ld: non-finite loss or gradient; batch saved in %s", t->st.step + 1, name);
	free(name);
}

/* --- the step --- */

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

struct step_result {
	double loss, grad_norm, lr;
	int skipped, overflow;
	double loss_scale;             /* fp16's, the step's; 0 in other precisions */
	int64_t samples, tokens;
};

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

static void train_step(struct trainer *t, struct step_result *r)
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
			logf_(t, "step %ld: %s", t->st.step + 1, note);
		if (!count)
			continue;
		if (t->c->vat > 0)
			bert_vat(t->m, (float)t->c->vat, (float)t->c->vat_xi, (int)t->c->vat_iters,
				 rng_derive(seeds[k], 0x766174), scale);
	}
	double loss = bert_take_loss(t->m);   /* the step's first wait for a GPU */
	int with_items = reduce_gradient(t, &loss, count, r);
	r->loss = loss;
	r->grad_norm = grad_norm(t) / ls;
	r->lr = schedule_lr(&t->sched, sched_position(t));
	r->loss_scale = t->st.ls.scale;
	int finite = isfinite(r->loss) && isfinite(r->grad_norm);
	if (with_items && t->st.ls.scale && loss_scale_update(&t->st.ls, finite) == SCALE_HALVED) {
		r->skipped = r->overflow = 1;
		t->st.overflows++;
		logf_(t, "step %ld: the fp16 gradient overflowed: skipped, the loss scale halves to %g",
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
		logf_(t, "step %ld: collectives %.1f ms (%.1f ms exposed), %.0f bytes, bus %.2f GB/s; slowest "
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
	event(t, "step", j);
	char note[96];
	snprintf(note, sizeof note, "loss %.4f lr %.3g epoch %ld", r->loss, r->lr, t->st.epoch + 1);
	progress_update(t->prog, (uint64_t)t->st.step, note);
	if (t->steps_this_process == 3 || t->st.step == t->total_steps) {
		time_t finish = time(NULL) + (time_t)eta;
		char when[32];
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&finish));
		logf_(t, "step %ld/%ld: %.0f ms per step; predicted finish %s", t->st.step, t->total_steps,
		      per_step * 1e3, when);
	}
}

/* --- the run --- */

/* The resolved options, as RUN/config holds them. */
static char *config_text(const struct trainer *t)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	t->c->write_config(f);
	fclose(f);
	return text;
}

/* A resumed run keeps the copy of the vocab it made when it began (so that
 * checkpoints can come and go), or, killed before it made one, makes it now
 * from the vocab it began with. */
static void keep_vocab(const struct train_config *c)
{
	char *copy = path_join(c->run, "vocab.txt");
	if (access(copy, F_OK)) {
		char *src = start_vocab(c);
		afile_copy(src, copy);
		free(src);
	}
	free(copy);
}

/* Process 0 takes over the dir of a resumed run, which the other processes
 * then find as it left it, or checks that a new run may be made where
 * --run says. Sets *ckpt to the checkpoint a resumed run goes on from: NULL
 * for a new run, and for one killed before its first checkpoint, which
 * starts again. */
static void claim_run(struct trainer *t, char **ckpt)
{
	const struct train_config *c = t->c;
	if (t->lead && c->resume) {
		rundir_attach(c->run);
		rundir_clear_stop(c->run);
		keep_vocab(c);
	} else if (t->lead) {
		rundir_check_new(c->run);
	}
	comm_barrier(t->comm);
	*ckpt = NULL;
	t->passed_over = json_array();
	if (c->resume) {   /* process 0 verifies the checkpoints, and all take its choice */
		char *mine = t->lead ? checkpoint_intact(c->run, t->passed_over) : NULL;
		size_t i;
		json_t *p;
		json_array_foreach(t->passed_over, i, p)
			warnx("%s: passed over: %s", json_string_value(json_object_get(p, "checkpoint")),
			      json_string_value(json_object_get(p, "why")));
		char *chosen = comm_lead_text(t->comm, mine ? mine : "");
		if (*chosen)
			*ckpt = chosen;
		else
			free(chosen);
		free(mine);
	}
	t->vocab_path = c->resume ? path_join(c->run, "vocab.txt") : start_vocab(c);
}

/* The line of text that holds offset at: its start, and its length as the
 * return value. */
static int line_at(const char *text, size_t at, const char **start)
{
	while (at > 0 && text[at - 1] != '\n')
		at--;
	*start = text + at;
	return (int)strcspn(*start, "\n");
}

/* Every process trains the run process 0 records: with the options of its
 * config (which all the processes of a resumed run read) and from the same
 * weights. One started otherwise would add another model's gradients to
 * the sums, or wait for sums the others never make; so all end before the
 * run dir is made, the one that differs naming its first line that does. */
static void check_same_run(struct trainer *t)
{
	if (t->comm->size == 1)
		return;
	char *config = config_text(t), hex[SHA256_HEX_SIZE];
	sha256_hex(bert_params(t->m), bert_numel(t->m) * sizeof(float), hex);
	struct strbuf mine = {0};
	sb_addf(&mine, "%sstarting weights sha256 = %.16s\n", config, hex);
	char *lead = comm_lead_text(t->comm, mine.s);
	size_t at = 0;
	while (mine.s[at] && mine.s[at] == lead[at])
		at++;
	int who, differs = mine.s[at] != lead[at];
	if (comm_max(t->comm, differs, &who) > 0) {
		const char *here, *there;
		int n = line_at(mine.s, at, &here), m = line_at(lead, at, &there);
		if (differs)
			die("process %d: %.*s here, %.*s on process 0 (the processes of a run must be started alike)",
			    t->comm->rank, n, here, m, there);
		die("process %d: process %d was started otherwise than process 0 (it says how)", t->comm->rank, who);
	}
	free(lead);
	sb_free(&mine);
	free(config);
}

/* Once the run has passed every check, process 0 makes a new run's dir, so
 * that a run refused leaves nothing behind; then each process opens its log. */
static void open_run(struct trainer *t)
{
	const struct train_config *c = t->c;
	if (t->lead && !c->resume) {
		char *config = config_text(t);
		rundir_create(c->run, config);
		free(config);
		char *copy = path_join(c->run, "vocab.txt");
		vocab_save(t->vocab, copy);   /* the one checked: --vocab may be a pipe, read once */
		free(copy);
	}
	comm_barrier(t->comm);
	free(t->vocab_path);
	t->vocab_path = path_join(c->run, "vocab.txt");
	char name[32];
	snprintf(name, sizeof name, "log/rank-%d.log", t->comm->rank);
	char *logpath = path_join(c->run, name);
	t->log = fopen(logpath, "a");
	if (!t->log)
		die("cannot open %s:", logpath);
	free(logpath);
}

/* The fields of a start or resume event, which plan the run, with
 * --batch-tokens's tokens a micro-batch where it has them (its
 * steps_per_epoch are then the current epoch's: each epoch's order makes
 * its own groups). */
static json_t *add_batch_tokens(const struct trainer *t, json_t *fields)
{
	if (t->c->batch_tokens)
		json_object_set_new(fields, "batch_tokens", json_integer(t->c->batch_tokens));
	return fields;
}

static void start_state(struct trainer *t, const char *ckpt)
{
	char *events = path_join(t->c->run, "events.msgpack");
	memset(&t->st, 0, sizeof t->st);
	t->st.best_step = -1;
	t->st.processes = t->st.sched_processes = t->comm->size;
	if (t->lead) {
		t->ev = events_open(events);
		dying_events = t->ev;
		die_hook(record_failure);
		char *tb = path_join(t->c->run, "tb");
		t->tb = tb_open(tb);
		free(tb);
	}
	if (ckpt) {
		checkpoint_load(ckpt, (int64_t)shard_count(t->train.shard), t->o, &t->st);
		size_t i;
		json_t *p;
		json_array_foreach(t->passed_over, i, p)
			logf_(t, "passed over %s, damaged: %s", json_string_value(json_object_get(p, "checkpoint")),
			      json_string_value(json_object_get(p, "why")));
		logf_(t, "resumed from %s at step %ld", ckpt, t->st.step);
	}
	if (t->c->precision != PREC_FP16)
		t->st.ls = (struct loss_scale){ 0, 0 };
	else if (!t->st.ls.scale)   /* a fresh fp16 run, or one that goes on in fp16 */
		t->st.ls = (struct loss_scale){ t->c->loss_scale, 0 };
	plan_steps(t, ckpt);
	if (ckpt && t->c->resume_changes) {   /* a finished run taken further goes on */
		const struct train_state *st = &t->st;
		if (t->c->max_steps > 0 ? st->step > t->c->max_steps : st->epoch > t->c->epochs)
			die("%s: --%s %ld ends the run before step %ld, where it is", t->c->run,
			    t->c->max_steps > 0 ? "max-steps" : "epochs",
			    t->c->max_steps > 0 ? t->c->max_steps : t->c->epochs, st->step);
		t->st.finished = t->st.finished && t->total_steps <= t->st.step;
		logf_(t, "resumed with changes %s: the run ends at step %ld", t->c->resume_changes, t->total_steps);
		if (t->lead) {   /* its config records the new end and cadence */
			char *config = config_text(t), *path = path_join(t->c->run, "config");
			afile_put_text(path, config);
			free(path);
			free(config);
		}
	}
	if (!ckpt) {
		event(t, "start", add_batch_tokens(t, json_pack("{sI sI sI sI sI ss}", "total_steps",
								(json_int_t)t->total_steps, "steps_per_epoch",
								(json_int_t)t->steps_per_epoch, "params",
								(json_int_t)bert_numel(t->m), "train_records",
								(json_int_t)shard_count(t->train.shard), "processes",
								(json_int_t)t->comm->size, "device", t->c->be->name)));
		log_parameters(t);
	}
	free(events);
	char who[96] = "", batch[48];
	if (t->comm->size > 1)
		snprintf(who, sizeof who, ", process %d of %d%s%s", t->comm->rank, t->comm->size,
			 *t->comm->net_if ? " talking over " : "", t->comm->net_if);
	if (t->c->batch_tokens)
		snprintf(batch, sizeof batch, "%ld tokens", t->c->batch_tokens);
	else
		snprintf(batch, sizeof batch, "%ld", t->c->batch);
	logf_(t, "%ld steps (%ld per epoch), batch %s x %ld accumulation x %d processes, %zu parameters, "
	      "on %s%s", t->total_steps, t->steps_per_epoch, batch, t->c->accum, t->comm->size,
	      bert_numel(t->m), t->c->be->name, who);
	if (t->comm->strays)
		logf_(t, "dropped %ld connections at MASTER_PORT that were no processes of the run while they "
		      "joined (stderr names the first)", t->comm->strays);
}

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
		event(t, "early_stop", json_pack("{sI sI}", "step", (json_int_t)t->st.step, "patience",
							  (json_int_t)c->patience));
	return early;
}

static void finish(struct trainer *t)
{
	if (t->lead)
		rundir_clear_stop(t->c->run);   /* a request that came with the last step */
	swap_ema(t);
	save_model(t, "final");
	if (!t->valid.shard)
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
	event(t, "done", done);
	if (t->lead) {
		run_plots(t->c->run, t->metric);
		logf_(t, "done at step %ld (%ld skipped); final/ and best/ written", t->st.step, t->st.skipped);
		char best[96] = "no evaluation";
		if (t->st.best_step >= 0)
			snprintf(best, sizeof best, "best valid %s %.6g at step %ld", t->metric, t->st.best, t->st.best_step);
		logf_(t, "summary: %ld steps in %.0fh%02.0fm%02.0fs of training, %.1f samples/s, %.0f tokens/s; %s",
		      t->st.step, floor(secs / 3600), floor(fmod(secs, 3600) / 60), floor(fmod(secs, 60)),
		      (double)t->st.samples / secs, (double)t->st.tokens / secs, best);
	} else
		logf_(t, "done at step %ld (%ld skipped)", t->st.step, t->st.skipped);
	say(t, "done at step %ld; the model is in %s/best", t->st.step, t->c->run);
}

static void stop_now(struct trainer *t)
{
	save_checkpoint(t);
	event(t, "stop", json_pack("{sI}", "step", (json_int_t)t->st.step));
	logf_(t, "stopped at step %ld on request; resume with ts-train --resume %s", t->st.step, t->c->run);
	say(t, "stopped at step %ld; continue with ts-train --resume %s", t->st.step, t->c->run);
}

int train_run(const struct train_config *c)
{
	struct trainer t = {.c = c, .comm = c->comm, .lead = c->comm->rank == 0, .saved_step = -1};
	char *ckpt;
	if (!c->be->host)
		comm_use_gpu(c->comm);
	signal(SIGINT, on_stop_signal);
	signal(SIGTERM, on_stop_signal);
	open_data(&t);
	claim_run(&t, &ckpt);
	check_vocab(&t);
	build_model(&t, ckpt ? ckpt : c->init);
	check_same_run(&t);
	t.metric = c->metric ? c->metric : metric_default(c->task);
	build_optimizer(&t);
	open_run(&t);
	start_state(&t, ckpt);
	/* killed after its last checkpoint, a finished run still lacks final/ or its done event */
	if (comm_any(t.comm, t.lead && t.st.finished && events_last_is(t.ev, "done"))) {
		if (t.lead)
			warnx("%s: the run already finished at step %ld", c->run, t.st.step);
		dying_events = NULL;
		return 0;
	}
	if (ckpt) {
		json_t *resume = json_pack("{sI ss sI sI sI ss}", "step", (json_int_t)t.st.step, "from", ckpt,
					   "total_steps", (json_int_t)t.total_steps, "steps_per_epoch",
					   (json_int_t)t.steps_per_epoch, "processes", (json_int_t)t.comm->size,
					   "device", c->be->name);
		if (json_array_size(t.passed_over))
			json_object_set(resume, "passed_over", t.passed_over);
		if (c->resume_changes)
			json_object_set_new(resume, "changes", json_loads(c->resume_changes, 0, NULL));
		event(&t, "resume", add_batch_tokens(&t, resume));
	}
	t.prog = t.lead ? progress_new("training", (uint64_t)t.total_steps, PROGRESS_STEPS) : NULL;
	t.t0 = clock_seconds();
	double elapsed0 = t.st.elapsed_s;
	int stopped = 0;
	while (!t.st.finished && t.st.step < t.total_steps) {
		double s0 = clock_seconds();
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
		int stop = comm_any(t.comm, stop_signal || (t.lead && rundir_stop_requested(c->run)));
		if (stop && t.st.step < t.total_steps) {
			stop_now(&t);
			stopped = 1;
			break;
		}
	}
	if (!stopped)
		finish(&t);
	progress_done(t.prog);
	if (t.lead) {
		dying_events = NULL;
		die_hook(NULL);
		events_close(t.ev);
		tb_close(t.tb);
	}
	if (fclose(t.log))
		die("%s/log/rank-%d.log: cannot write:", c->run, t.comm->rank);
	return 0;
}
