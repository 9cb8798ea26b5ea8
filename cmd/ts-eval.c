/* ts-eval: evaluate a model dir on a data split or token streams: metrics,
 * a readable report, or per-record predictions. */
#include "data/labelmap.h"
#include "data/manifest.h"
#include "data/streamshard.h"
#include "data/vocab.h"
#include "device/device.h"
#include "device/gpus.h"
#include "eval/evaluate.h"
#include "eval/predictions.h"
#include "format/mpjson.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/strbuf.h"
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *model, *data, *split = "test", *output = "-", *device, *precision;
static long batch = 64, threads, seed, max_ngram = 1;
static double mask_prob = 0.15, threshold = 0.5;
static int predict, csv, report, merge_folds, whole_word;

static const struct opt opts[] = {
	{'m', "model", OPT_STR, &model, "DIR", "model dir (Hugging Face format), required", "@dir"},
	{0, "data", OPT_STR, &data, "DIR", "data dir made by ts-shard", "@dir"},
	{0, "split", OPT_STR, &split, "NAME", "split of the data dir", NULL},
	{0, "predict", OPT_FLAG, &predict, NULL, "write a prediction record per input record", NULL},
	{0, "csv", OPT_FLAG, &csv, NULL, "with --predict, write CSV", NULL},
	{0, "report", OPT_FLAG, &report, NULL, "print a readable report with the confusion matrix", NULL},
	{0, "merge-folds", OPT_FLAG, &merge_folds, NULL, "merge the folded pieces of an id (mean of logits; tags joined)", NULL},
	{0, "threshold", OPT_FLOAT, &threshold, "P", "multi-label: a class is predicted at this probability", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN | OPEN_MAX},
	{0, "batch", OPT_INT, &batch, "N", "records a batch", NULL,
	 .min = 1, .max = 32768},
	{0, "seed", OPT_INT, &seed, "N", "mlm: seed of the masking", NULL,
	 .min = 0, .max = LONG_MAX},
	{0, "mask-prob", OPT_FLOAT, &mask_prob, "P", "mlm: share of tokens to predict", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN | OPEN_MAX},
	{0, "whole-word", OPT_FLAG, &whole_word, NULL, "mlm: mask all pieces of a word together", NULL},
	{0, "max-ngram", OPT_INT, &max_ngram, "N", "mlm: mask spans of up to N words", NULL,
	 .min = 1, .max = 32},
	{'j', "threads", OPT_INT, &threads, "N", "CPU threads (default: all cores)", NULL,
	 .min = 0, .max = 1024},
	{0, "device", OPT_STR, &device, "DEV", "cpu, cuda or cuda:N (default: cuda when a GPU is usable)", "@device"},
	{0, "precision", OPT_STR, &precision, "P", "what the matrix work computes in, as ts-train's: fp32, tf32, bf16 or fp16; default bf16 on a GPU that has it, else fp32", "fp32|tf32|bf16|fp16"},
	{'o', "output", OPT_STR, &output, "FILE", "write predictions to FILE (default: standard output)", "@file"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-eval", "Evaluate a model on a data split or token records.", "[FILE...]", "file", opts,
};

struct input {
	struct shard *shard;
	char *name, *vocab_sha256;
	int lower;                            /* whether its text was lowercased; -1 not known */
	char **labels;
	int nlabels;
	const struct manifest_split *split;   /* with --data */
	struct row_origin origin;             /* with record files: where each row came from */
	int32_t vocab;                        /* token ids must be below this */
};

static void open_input(struct input *in, char **files, int nfiles)
{
	if (data) {
		struct manifest *m = manifest_read(data);
		const struct manifest_split *sp = manifest_split(m, split);
		if (!sp) {
			struct strbuf all = {0};
			for (int i = 0; i < m->nsplits; i++)
				sb_addf(&all, "%s%s", i ? ", " : "", m->splits[i].name);
			die("%s: no split '%s' (its splits: %s)", data, split, all.n ? all.s : "none");
		}
		in->name = manifest_shard_path(data, sp);
		in->shard = shard_open(in->name);
		if (shard_count(in->shard) == 0)
			die("%s: the %s split is empty", data, split);
		in->vocab_sha256 = m->vocab_sha256;
		in->lower = manifest_lower(m);
		in->labels = m->labels;
		in->nlabels = m->nlabels;
		in->split = sp;
		return;
	}
	static char *dash[] = {"-"};
	in->lower = -1;
	in->shard = shard_from_streams(nfiles ? files : dash, nfiles ? nfiles : 1, &in->vocab_sha256, &in->labels,
				       &in->nlabels, &in->origin);
	in->name = xstrdup(nfiles == 1 ? files[0] : "the input records");
}

/* The data's vocab is the model's, and its token ids fit the vocab and the
 * model's embeddings (the manifest's word first, then every record batched). */
static void check_vocab(struct input *in, int32_t model_vocab)
{
	char *path = vocab_of_model("-m", model, in->vocab_sha256, in->lower);
	struct vocab *v = vocab_load(path);
	if (in->vocab_sha256 && strcmp(in->vocab_sha256, vocab_sha256(v)))
		die("%s was tokenized with another vocab (sha256 %.12s…) than %s (sha256 %.12s…)",
		    data ? data : in->name, in->vocab_sha256, path, vocab_sha256(v));   /* its manifest's */
	in->vocab = vocab_size(v) < model_vocab ? vocab_size(v) : model_vocab;
	if (in->split)
		manifest_check_ids(data, in->split, in->vocab);
	vocab_free(v);
	free(path);
}

/* Every record fits in the model's positions, before any is scored. */
static void check_lengths(const struct input *in, const struct bert_config *bc)
{
	uint32_t longest = 0;
	for (uint64_t i = 0; i < shard_count(in->shard); i++)
		if (shard_ntokens(in->shard, i) > longest)
			longest = shard_ntokens(in->shard, i);
	if ((int64_t)longest > bert_positions(bc))
		die("%s holds records of up to %u tokens but the model takes %d", in->name, longest,
		    bert_positions(bc));
}

/* Whether a record has the label the task scores: tokcls a tag for every word. */
static int labelled(const struct tokrec *t, enum bert_task task)
{
	if (task == TASK_TOKCLS) {
		for (size_t i = 0; t->label_kind == LABEL_LIST && i < t->nlabels; i++)
			if (t->labels[i] == TAG_UNKNOWN)
				return 0;
		return t->label_kind == LABEL_LIST;
	}
	return t->label_kind == LABEL_INT || (task == TASK_REG && t->label_kind == LABEL_FLOAT) ||
	       (task == TASK_MULTI && t->label_kind == LABEL_LIST);
}

/* What the records' labels are where the model's task does not score
 * them (the data of another task), else NULL; the first labelled record
 * tells (a data dir's are all of one kind). */
static const char *other_labels(const struct input *in, enum bert_task task)
{
	struct tokrec t = {0};
	enum label_kind k = LABEL_NONE;
	for (uint64_t i = 0; k == LABEL_NONE && i < shard_count(in->shard); i++) {
		shard_get(in->shard, i, &t);
		k = t.label_kind;
	}
	tokrec_free(&t);
	if (k == LABEL_INT && in->nlabels && task == TASK_REG)
		return "the names of classes";
	if (k == LABEL_FLOAT && task != TASK_REG)
		return "numbers";
	if (k == LABEL_LIST && (task == TASK_CLS || task == TASK_REG))
		return "lists";
	if (k == LABEL_INT && task == TASK_TOKCLS)
		return "a class a record, not a tag a word";
	return NULL;
}

/* Whether every record is labelled (else only predictions are possible). */
static int all_labelled(const struct shard *s, enum bert_task task)
{
	struct tokrec t = {0};
	int yes = 1;
	for (uint64_t i = 0; yes && i < shard_count(s); i++) {
		shard_get(s, i, &t);
		yes = labelled(&t, task);
	}
	tokrec_free(&t);
	return yes;
}

static void print_json(json_t *j)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	printf("%s\n", text);
	free(text);
}

static int eval_mlm(struct bert *m, const struct input *in)
{
	if (predict || merge_folds)
		die_usage("--predict and --merge-folds are not for a masked language model: they predict labels");
	if (opt_given(&spec, "threshold"))
		die_usage("--threshold is for multi-label models");
	struct mlm_config mlm;
	char *vpath = vocab_of_model("-m", model, in->vocab_sha256, in->lower);
	struct vocab *v = vocab_load(vpath);
	mlm_config_init(&mlm, v, (float)mask_prob, whole_word, (int)max_ngram);
	mlm.vocab = in->vocab;   /* random replacements must fit the model's embeddings too */
	struct batch_source src = {in->shard, in->name, TASK_MLM, 0, &mlm, (uint64_t)seed, 0, in->vocab,
				   bert_config_of(m)->type_vocab, in->origin.files ? &in->origin : NULL};
	struct eval_result r;
	struct eval_opts o = {(int)batch, 0, NULL, NULL};
	evaluate(m, &src, &o, NULL, NULL, &r);
	if (r.count == 0)
		die("%s: no token was masked (records too short or --mask-prob too small)", in->name);
	if (report) {
		eval_report(stdout, &r, NULL);
	} else {
		json_t *j = eval_json(&r, NULL);
		print_json(j);
		json_decref(j);
	}
	eval_result_free(&r);
	free(vpath);
	return 0;
}

/* The metrics of reg, multi and tokcls, as JSON or a report. */
static void print_metrics(const struct eval_result *r, char **names)
{
	if (report) {
		eval_report(stdout, r, names);
		return;
	}
	json_t *j = eval_json(r, names);
	print_json(j);
	json_decref(j);
}

static int eval_classifier(struct bert *m, const struct input *in, char **names, int nnames)
{
	enum bert_task task = bert_config_of(m)->task;
	const char *other = other_labels(in, task);
	if (other && !predict)
		die("%s: the labels are %s, which a %s model does not score; --predict predicts without them", in->name,
		    other, task_name(task));
	int L = bert_logit_width(bert_config_of(m)), all = !other && all_labelled(in->shard, task);
	if (!all && !predict)
		die("%s: some records have no label: only --predict works without labels", in->name);
	if (merge_folds && task == TASK_TOKCLS && !predict)
		die_usage("--merge-folds of a token classifier goes with --predict: its metrics join a text's pieces "
			  "already");
	if (merge_folds && task != TASK_CLS && task != TASK_TOKCLS && !predict)
		die_usage("--merge-folds of a %s model goes with --predict: its metrics are by record",
			  task == TASK_REG ? "regression" : "multi-label");
	if (opt_given(&spec, "threshold") && task != TASK_MULTI)
		die_usage("--threshold is for multi-label models");
	if (opt_given(&spec, "mask-prob") || opt_given(&spec, "whole-word") || opt_given(&spec, "max-ngram") ||
	    opt_given(&spec, "seed"))
		die_usage("--mask-prob, --whole-word, --max-ngram and --seed are for masked language models");
	if (names && nnames != bert_config_of(m)->num_labels)
		names = NULL, nnames = 0;
	/* the data's classes become the model's by name: scored, or named in CSV,
	 * each must be one the model knows */
	int scored = all && (!predict || strcmp(output, "-")), named = scored || (csv && task == TASK_CLS);
	int32_t *to = xmalloc(((size_t)in->nlabels + 1) * sizeof *to);
	char *why = labels_map(names, nnames, in->labels, in->nlabels, to);
	if (why && named)
		die("-m %s: %s", model, why);
	if (!why)
		shard_relabel(in->shard, to, in->nlabels);
	struct batch_source src = {in->shard, in->name, task, L, NULL, (uint64_t)seed, !all, in->vocab,
				   bert_config_of(m)->type_vocab, in->origin.files ? &in->origin : NULL};
	struct predictions *p = predictions_new(in->shard, task, L, threshold, !why);   /* labels the model's */
	struct eval_result r;
	struct eval_opts o = {(int)batch, threshold, labels_unnamed(names, nnames) ? NULL : names, NULL};
	evaluate(m, &src, &o, predictions_hook, p, &r);
	if (merge_folds)
		predictions_merge_folds(p);
	if (scored && task != TASK_CLS && (!merge_folds || task == TASK_TOKCLS))   /* tokcls's: by word, merged or not */
		print_metrics(&r, names);
	if (scored && task == TASK_CLS) {
		struct confusion *c = predictions_confusion(p);
		struct cls_metrics *cm = metrics_compute(c);
		if (report) {
			metrics_report(stdout, cm, c, names);
		} else {
			json_t *j = metrics_json(cm, c, names);
			if (!merge_folds)
				json_object_set_new(j, "loss", json_number(r.loss));   /* NaN: null */
			json_object_set_new(j, "records", json_integer((json_int_t)p->n));
			print_json(j);
			json_decref(j);
		}
		metrics_free(cm);
		confusion_free(c);
	}
	/* a file of predictions appears only once the metrics are out */
	if (predict && strcmp(output, "-") && (fflush(stdout) || ferror(stdout)))
		die("write standard output:");
	if (predict)
		predictions_write(p, output, csv, names, nnames);
	eval_result_free(&r);
	predictions_free(p);
	free(why);
	free(to);
	return 0;
}

/* The predictions' file destroys none of the files they are made from. */
static void check_output(char **files, int nfiles)
{
	if (!strcmp(output, "-"))
		return;
	if (lies_in(output, model))
		die("cannot write %s: it is in the model dir %s", output, model);
	if (data && lies_in(output, data))
		die("cannot write %s: it is in the data dir %s", output, data);
	for (int i = 0; i < nfiles; i++)
		check_not_input(output, "the input", files[i]);
}

int main(int argc, char **argv)
{
	char **files;
	int nfiles = opt_parse(&spec, argc, argv, &files);
	if (!model)
		die_usage("a model dir is required: -m DIR");
	if (data && nfiles)
		die_usage("give either --data DIR or record files, not both");
	if (csv && !predict)
		die_usage("--csv goes with --predict");
	if (opt_given(&spec, "output") && !predict)
		die_usage("-o goes with --predict");
	if (opt_given(&spec, "split") && !data)
		die_usage("--split goes with --data: record files are read whole");
	if (report && predict && !strcmp(output, "-"))
		die_usage("--report with --predict needs -o FILE: the predictions take standard output");
	check_output(files, nfiles);
	omp_set_num_threads(threads ? (int)threads : omp_get_num_procs());
	modeldir_verify("-m", model);
	char *config = path_join(model, "config.json"), **names = NULL;
	struct bert_config bc;
	int nnames = 0;
	hfconfig_read(config, &bc, &names, &nnames);
	struct input in = {0};
	open_input(&in, files, nfiles);
	check_vocab(&in, bc.vocab);
	check_lengths(&in, &bc);
	const struct comm alone = {.size = 1, .local_size = 1};   /* "cuda": the least busy GPU */
	const char *dev = gpus_pick(&alone, NULL, device ? device : backend_default(), NULL);
	const struct backend *be = backend_open(dev, precision ? precision_parse(precision) :
						precision_default(device_sm(dev)));
	struct bert *m = modeldir_load(model, be, bc.task, 0, NULL, NULL, NULL);
	bert_set_forward_only(m);
	if (labels_unnamed(names, nnames) && in.nlabels)   /* LABEL_0, LABEL_1, ... name nothing */
		names = in.labels, nnames = in.nlabels;
	int rc = bc.task == TASK_MLM ? eval_mlm(m, &in) : eval_classifier(m, &in, names, nnames);
	close_stdout();
	return rc;
}
