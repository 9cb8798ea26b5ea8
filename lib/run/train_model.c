/* ts-train's data and model: the splits and vocab checked against the
 * run's config, the model built (new, from --init or resumed) with its
 * teacher, and the optimizer over its parameters. */
#include "run/trainer.h"
#include "run/train.h"
#include "backend/memcheck.h"
#include "data/labelmap.h"
#include "data/vocab.h"
#include "eval/evaluate.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "util/afile.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void open_data(struct trainer *t)
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

char *start_vocab(const struct train_config *c, const char *sha256, int lower)
{
	if (c->init)
		return vocab_of_model("--init", c->init, sha256, lower);
	if (!c->vocab)
		die("training from scratch needs the vocab the data was tokenized with: --vocab FILE");
	return xstrdup(c->vocab);
}

/* The vocab must be the one the data was tokenized with. */
void check_vocab(struct trainer *t)
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
static struct bert_config model_config(const struct train_config *c, const char *from, const struct vocab *v,
				       int num_labels)
{
	struct bert_config mc = c->model;
	if (from) {
		char *path = path_join(from, "config.json");
		hfconfig_read(path, &mc, NULL, NULL);
		free(path);
	} else {
		mc.vocab = vocab_size(v);
		mc.pad_id = vocab_special(v, VOCAB_PAD);
	}
	mc.task = c->task;
	if (num_labels > 0)
		mc.num_labels = num_labels;
	return mc;
}

size_t train_count_params(const struct train_config *c)
{
	struct manifest *man = manifest_read(c->data);
	struct vocab *v = NULL;
	if (!c->init) {
		char *path = start_vocab(c, NULL, manifest_lower(man));
		v = vocab_load(path);
		free(path);
	}
	struct bert_config mc = model_config(c, c->init, v, c->task == TASK_MLM ? 0 : data_classes(man, c->task));
	vocab_free(v);
	manifest_free(man);
	return bert_config_numel(&mc);
}

/* Token ids index the vocab's tables and the model's embeddings (at least as
 * large): the manifest's word is checked before step 1, and the records of
 * the splits the run batches with their labels (batch_check_records); a test
 * split the run does not score may be for predictions alone. */
static void check_records(struct trainer *t, struct split *sp, int batched)
{
	if (!sp->shard)
		return;
	manifest_check_ids(t->c->data, sp->ms, vocab_size(t->vocab));
	sp->src.vocab = vocab_size(t->vocab);
	sp->src.type_vocab = bert_config_of(t->m)->type_vocab;
	int32_t teacher_types = t->teacher && sp == &t->train ? bert_config_of(t->teacher)->type_vocab : 0;
	if (teacher_types && (!sp->src.type_vocab || teacher_types < sp->src.type_vocab))   /* it reads train's batches */
		sp->src.type_vocab = teacher_types, sp->src.type_owner = "the --teacher's";
	if (batched)
		batch_check_records(&sp->src);
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
 * would not fit in memory: fp32 parameters, gradients, the optimizer's
 * moments (with --zero 1, of this process's shard: two for adamw, adam and
 * lamb, one or none for sgd) and the moving average, the parameters' copy in
 * acts where they are not floats, then the activations (and VAT's). With
 * --batch-tokens N, ceil(N / T) records of the longest T tokens bound both
 * a micro-batch's tokens and its sum of squared lengths. */
static void check_memory(const struct trainer *t, const struct bert_config *mc, size_t numel)
{
	const struct train_config *c = t->c;
	const struct optim_config *o = &c->optim;
	double moments = o->kind != OPTIM_SGD ? 2 : o->momentum != 0;
	double kept = (c->zero ? moments / c->comm->size : moments) + (o->ema > 0);
	double copy = acts_are_floats(c->be) ? 0 : (double)c->be->act_size;
	double state = ((2 + kept) * sizeof(float) + copy) * (double)numel;
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

/* A teacher of the run's task must know the data's classes: the same
 * names, where both name them, and as many. */
static void check_teacher_labels(const struct trainer *t, const struct bert_config *tc, char *const *names, int n)
{
	const struct manifest *m = t->man;
	char *why = labels_missing(names, n, m->labels, m->nlabels);
	if (why)
		die("--teacher %s: its labels are not the data's: %s", t->c->teacher, why);
	if (tc->num_labels != t->num_labels)
		die("--teacher %s: a model of %d label%s, where the data has %d", t->c->teacher, tc->num_labels,
		    tc->num_labels == 1 ? "" : "s", t->num_labels);
}

/* --teacher: a model of the task and classes of the run, on its device,
 * tokenized with its vocab; it only predicts. */
static void load_teacher(struct trainer *t)
{
	const struct train_config *c = t->c;
	char *vocab = vocab_of_model("--teacher", c->teacher, vocab_sha256(t->vocab), manifest_lower(t->man));
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
	if (tc.task != c->task)
		die("--teacher %s: a model of task %s, where the run trains task %s", c->teacher, task_name(tc.task),
		    task_name(c->task));
	if (c->task != TASK_MLM)
		check_teacher_labels(t, &tc, names, n);
	if (c->task == TASK_MLM && tc.vocab != bert_config_of(t->m)->vocab)
		die("--teacher %s: a masked LM of vocab_size %d, where the run's model has %d", c->teacher, tc.vocab,
		    bert_config_of(t->m)->vocab);
	if ((int64_t)longest_record(t->man) > bert_positions(&tc))
		die("--teacher %s: %s holds records of up to %u tokens but the teacher takes %d", c->teacher, c->data,
		    longest_record(t->man), bert_positions(&tc));
	t->teacher = modeldir_load(c->teacher, c->be, c->task, 0, NULL, NULL, NULL);
	bert_set_forward_only(t->teacher);
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
		die_usage("--freeze-layers %ld: the model has %d layer%s", c->freeze_layers, mc->layers,
			  mc->layers == 1 ? "" : "s");
	if (from && mc->vocab < vocab_size(t->vocab))
		die("%s: the model's vocab_size %d is smaller than the vocab's %d tokens", from, mc->vocab,
		    vocab_size(t->vocab));
	uint32_t longest = longest_record(t->man);
	int room = bert_positions(mc), before = mc->max_pos - room;
	if ((int64_t)longest <= room)
		return;
	if (!from && (int64_t)longest + before > BERT_MAX_POS)
		die_usage("--arch %s: %s holds records of up to %u tokens, and a %s model's positions begin after "
			  "its pad id, here %d: past the %d positions a model may have (its tokenizer's pad id "
			  "should be small, as RoBERTa's 1)", family_of(mc->family)->model_type, c->data, longest,
			  family_of(mc->family)->model_type, mc->pad_id, BERT_MAX_POS);
	if (!from && before)
		die_usage("--max-pos %d: %s holds records of up to %u tokens, and a %s model's positions begin "
			  "at %d: --max-pos %lld takes them", mc->max_pos, c->data, longest,
			  family_of(mc->family)->model_type, before, (long long)longest + before);
	if (!from)
		die_usage("--max-pos %d: %s holds records of up to %u tokens", mc->max_pos, c->data, longest);
	die("%s holds records of up to %u tokens but the model takes %d", c->data, longest, room);
}

/* The data's labels must be of a kind the task takes; a run of the wrong
 * task (a forgotten --task) is told the one that fits. */
static void check_label_kind(const struct train_config *c, enum label_kind k, int names)
{
	const char *why = NULL;
	if (k == LABEL_INT && names && c->task == TASK_REG)
		die("%s: the labels are the names of %d classes, not numbers; --task reg takes a number a record "
		    "(in JSON lines, a JSON number)", c->data, names);
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

void build_model(struct trainer *t, const char *from)
{
	const struct train_config *c = t->c;
	if (c->task != TASK_MLM) {
		check_label_kind(c, t->man->label_kind, t->man->nlabels);
		t->num_labels = data_classes(t->man, c->task);
		if (t->num_labels < 2 && c->task != TASK_REG)
			die("%s: %s training needs labels of at least two classes", c->data, task_name(c->task));
	}
	struct bert_config start = model_config(c, from, t->vocab, t->num_labels);
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
	const struct bert_config *mc = bert_config_of(t->m);
	if (c->rdrop > 0 && mc->hidden_dropout == 0 && mc->attn_dropout == 0 && mc->cls_dropout == 0)
		die_usage("--rdrop compares two passes that dropout makes differ, and the model's dropout is 0: "
			  "give --dropout P");
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
	check_records(t, &t->train, 1), check_records(t, &t->valid, 1), check_records(t, &t->test, c->eval_test);
	check_scored(t, &t->valid);
	if (c->eval_test)
		check_scored(t, &t->test);
}

void reload_model(struct trainer *t, const char *ckpt)
{
	char **names;
	int n;
	modeldir_reload(t->m, ckpt, &names, &n);
	modeldir_order_classes(t->m, ckpt, names, n, t->man->labels, t->man->nlabels, (uint64_t)t->c->seed);
	hfconfig_free_labels(names, n);
}

static void gather_floats(const void *comm, float *x, size_t n)
{
	comm_sum_floats(comm, x, n);
}

/* The encoder layer a tensor belongs to by the name its family gives it
 * ("bert.encoder.layer.3.", "distilbert.transformer.layer.3.",
 * ModernBERT's "model.layers.3.", whose attn_norm is its layer's first
 * norm), or -1. */
static int layer_of(const char *name)
{
	const char *p = strstr(name, ".layer.");
	int l = -1;
	if (p)
		sscanf(p, ".layer.%d.", &l);
	else if ((p = strstr(name, ".layers.")))
		sscanf(p, ".layers.%d.", &l);
	return l;
}

/* A tensor's share of the learning rate: with --llrd F the head has all of
 * it, encoder layer l of L F^(L - l), the embeddings F^(L + 1); frozen
 * tensors none. The layers are the family's, as its files name them. */
static double lr_scale(const struct train_config *c, const struct bert_config *mc, const char *tensor)
{
	char name[256];
	modeldir_tensor_name(mc, tensor, name, sizeof name);
	int l = layer_of(name), emb = strstr(name, "embeddings") && l < 0, L = mc->layers;
	if ((emb && c->freeze_embeddings) || (l >= 0 && l < c->freeze_layers))
		return 0;
	double f = c->llrd > 0 ? c->llrd : 1;
	return emb ? pow(f, L + 1) : l >= 0 ? pow(f, L - l) : 1;
}

void build_optimizer(struct trainer *t)
{
	int n = bert_tensors(t->m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	unsigned char *decays = xcalloc((size_t)n, 1);
	double *scale = xcalloc((size_t)n, sizeof *scale);
	bert_tensors(t->m, refs);
	for (int i = 0; i < n; i++) {
		decays[i] = (unsigned char)bert_decays(refs[i].name);
		scale[i] = lr_scale(t->c, bert_config_of(t->m), refs[i].name);
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

/* The log's table of parameters, largest first, with their share, by the
 * names the model's family gives them in its files. */
static int by_size(const void *a, const void *b)
{
	int64_t x = tensor_numel(a), y = tensor_numel(b);
	return x < y ? 1 : x > y ? -1 : strcmp(((const struct tensor_ref *)a)->name, ((const struct tensor_ref *)b)->name);
}

void log_parameters(struct trainer *t)
{
	int n = bert_tensors(t->m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	bert_tensors(t->m, refs);
	qsort(refs, (size_t)n, sizeof *refs, by_size);
	double total = (double)bert_numel(t->m);
	fprintf(t->log, "%-64s %-16s %12s %7s %8s\n", "parameter", "shape", "count", "share", "lr");
	for (int i = 0; i < n; i++) {
		char shape[48] = "";
		for (int d = 0; d < refs[i].ndim; d++)
			snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? "x%lld" : "%lld",
				 (long long)refs[i].shape[d]);
		int64_t k = tensor_numel(&refs[i]);
		char name[256];
		modeldir_tensor_name(bert_config_of(t->m), refs[i].name, name, sizeof name);
		fprintf(t->log, "%-64s %-16s %12lld %6.2f%% %8.4g\n", name, shape, (long long)k,
			100.0 * (double)k / total, lr_scale(t->c, bert_config_of(t->m), refs[i].name));
	}
	fprintf(t->log, "%-64s %-16s %12.0f %6.2f%%\n", "total", "", total, 100.0);
	free(refs);
}
