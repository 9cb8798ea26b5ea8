/* ts-train: train a BERT encoder (cls, mlm, tokcls, reg or multi) on a data dir into a run dir. */
#include "backend/backend.h"
#include "comm/comm.h"
#include "data/vocab.h"
#include "device/device.h"
#include "device/gpus.h"
#include "eval/evaluate.h"
#include "model/lossscale.h"
#include "model/modeldir.h"
#include "model/schedule.h"
#include "run/bugdump.h"
#include "run/train.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *data, *run, *resume, *init, *vocab, *replay, *metric, *device, *gpus, *net_if, *teacher;
static char *arch, *task = "cls", *optimizer = "adamw", *decay = "linear", *betas = "0.9,0.999", *precision;
/* The model's shape applies from scratch, --kd-alpha and --kd-temp with
 * --teacher, --vat-xi and --vat-iters with --vat, --batch without
 * --batch-tokens. Until resolve_defaults
 * gives them their defaults there, they hold values out of their ranges,
 * which mean "not given" and which the run's config does not record. */
static long layers, hidden, heads, ffn = -1, max_pos;
static long batch, batch_tokens, accum = 1, epochs = 3, max_steps, seed, threads;
static long eval_every, save_every, keep = 3, patience, max_ngram = 1, zero;
static double lr = 1e-4, weight_decay = 0.01, momentum = 0.9, eps = 1e-8, warmup = 0.06;
static double end_lr_ratio, clip = 1.0, dropout = -1, mask_prob = 0.15, comm_timeout = COMM_TIMEOUT_S;
static double threshold = 0.5, label_smoothing, llrd, ema, beta1, beta2;   /* beta1, beta2: --betas */
static double kd_alpha = -1, kd_temp = -1, rdrop, vat, vat_xi = -1, loss_scale;
static long freeze_layers, vat_iters = -1;
static int freeze_embeddings;
static int eval_test, bucket, whole_word, recompute, no_graphs, true_gradient, count_params, multi_label;

static const struct opt opts[] = {
	{0, "data", OPT_STR, &data, "DIR", "data dir made by ts-shard (train, valid, test)", "@dir"},
	{0, "run", OPT_STR, &run, "DIR", "run dir to create", "@dir"},
	{0, "resume", OPT_STR, &resume, "DIR", "continue the run in DIR where it stopped", "@dir"},
	{0, "task", OPT_STR, &task, "TASK", "cls (sequence classification), reg (regression), tokcls (token classification) or mlm (masked LM)", "cls|reg|tokcls|mlm"},
	{0, "multi-label", OPT_FLAG, &multi_label, NULL, "cls: each record has any number of the classes (sigmoid and binary cross-entropy)", NULL},
	{0, "threshold", OPT_FLOAT, &threshold, "P", "multi-label: a class is predicted at this probability", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN | OPEN_MAX},
	{0, "init", OPT_STR, &init, "DIR", "start from a Hugging Face model dir (bert, roberta, xlm-roberta, distilbert, electra, modernbert)", "@dir"},
	{'v', "vocab", OPT_STR, &vocab, "FILE", "vocab.txt of the data, when training from scratch", "@file"},
	{0, "arch", OPT_STR, &arch, "FAMILY", "the encoder family, from scratch: its tensor names, positions and heads (default bert)", "bert|roberta|xlm-roberta|distilbert|electra|modernbert"},
	{0, "layers", OPT_INT, &layers, "N", "encoder layers, from scratch (default 4)", NULL,
	 .min = 1, .max = BERT_MAX_LAYERS},
	{0, "hidden", OPT_INT, &hidden, "N", "hidden size, from scratch (default 256)", NULL,
	 .min = 1, .max = BERT_MAX_HIDDEN},
	{0, "heads", OPT_INT, &heads, "N", "attention heads, from scratch (default 4)", NULL,
	 .min = 1, .max = BERT_MAX_HEADS},
	{0, "ffn", OPT_INT, &ffn, "N", "feed-forward size, from scratch (default: 4 x --hidden)", NULL,
	 .min = 0, .max = BERT_MAX_FFN},
	{0, "max-pos", OPT_INT, &max_pos, "N", "positions, from scratch (default: 512 tokens' worth, 514 for roberta)", NULL,
	 .min = 1, .max = BERT_MAX_POS},
	{0, "dropout", OPT_FLOAT, &dropout, "P", "dropout on hidden states, the head's input and attention (default: the checkpoint's, or 0.1)", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MAX},
	{0, "optimizer", OPT_STR, &optimizer, "NAME", "optimizer", "adamw|adam|sgd|lamb"},
	{0, "lr", OPT_FLOAT, &lr, "LR", "peak learning rate", NULL,
	 .fmin = 0, .fmax = 1e12, .open = OPEN_MIN},
	{0, "weight-decay", OPT_FLOAT, &weight_decay, "W", "weight decay, not on biases and LayerNorm", NULL,
	 .fmin = 0, .fmax = 1},
	{0, "momentum", OPT_FLOAT, &momentum, "M", "SGD momentum", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MAX},
	{0, "betas", OPT_STR, &betas, "B1,B2", "Adam betas", NULL},
	{0, "eps", OPT_FLOAT, &eps, "E", "Adam epsilon", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN},
	{0, "warmup", OPT_FLOAT, &warmup, "W", "warmup: a ratio of all steps if below 1, else steps", NULL,
	 .fmin = 0, .fmax = 1e12},
	{0, "decay", OPT_STR, &decay, "KIND", "learning-rate decay after warmup", "linear|cosine|poly|constant"},
	{0, "end-lr-ratio", OPT_FLOAT, &end_lr_ratio, "R", "decay to this share of the peak lr", NULL,
	 .fmin = 0, .fmax = 1},
	{0, "clip", OPT_FLOAT, &clip, "N", "clip the global gradient norm to N; 0 for none", NULL,
	 .fmin = 0, .fmax = 1e6},
	{0, "batch", OPT_INT, &batch, "N", "records a micro-batch (default 32)", NULL,
	 .min = 1, .max = 32768},
	{0, "batch-tokens", OPT_INT, &batch_tokens, "N", "micro-batches of whole records up to N real tokens, instead of --batch", NULL,
	 .min = 1, .max = 1 << 24},
	{0, "accum", OPT_INT, &accum, "N", "micro-batches an optimizer step", NULL,
	 .min = 1, .max = 65536},
	{0, "epochs", OPT_INT, &epochs, "N", "epochs to train", NULL,
	 .min = 1, .max = 1000000},
	{0, "max-steps", OPT_INT, &max_steps, "N", "optimizer steps to train, instead of --epochs; 0 for --epochs", NULL,
	 .min = 0, .max = 1000000000000},
	{0, "seed", OPT_INT, &seed, "N", "seed of initialisation, order, masking and dropout", NULL,
	 .min = 0, .max = LONG_MAX},
	{0, "bucket", OPT_FLAG, &bucket, NULL, "batch records of similar length together", NULL},
	{0, "mask-prob", OPT_FLOAT, &mask_prob, "P", "mlm: share of tokens to predict", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN | OPEN_MAX},
	{0, "whole-word", OPT_FLAG, &whole_word, NULL, "mlm: mask all pieces of a word together", NULL},
	{0, "max-ngram", OPT_INT, &max_ngram, "N", "mlm: mask spans of up to N words", NULL,
	 .min = 1, .max = 32},
	{0, "label-smoothing", OPT_FLOAT, &label_smoothing, "E", "cls, tokcls and mlm: train against labels smoothed by E (1 - E on the label, E spread over all classes)", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MAX},
	{0, "llrd", OPT_FLOAT, &llrd, "F", "layer-wise learning-rate decay: layer l of L learns at F^(L - l) of the rate, the embeddings at F^(L + 1)", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN},
	{0, "freeze-embeddings", OPT_FLAG, &freeze_embeddings, NULL, "do not train the embeddings", NULL},
	{0, "freeze-layers", OPT_INT, &freeze_layers, "N", "do not train the lowest N encoder layers", NULL,
	 .min = 0, .max = 1024},
	{0, "ema", OPT_FLOAT, &ema, "D", "evaluate and save an exponential moving average of the weights, decay D a step", NULL,
	 .fmin = 0, .fmax = 1, .open = OPEN_MIN | OPEN_MAX},
	{0, "teacher", OPT_STR, &teacher, "DIR", "distil from the model dir DIR (its task, classes and vocab the run's)", "@dir"},
	{0, "kd-alpha", OPT_FLOAT, &kd_alpha, "A", "with --teacher: the soft loss's share of the loss (default 0.5)", NULL,
	 .fmin = 0, .fmax = 1},
	{0, "kd-temp", OPT_FLOAT, &kd_temp, "T", "with --teacher: the temperature of both softmaxes (default 2)", NULL,
	 .fmin = 0, .fmax = 1000, .open = OPEN_MIN},
	{0, "rdrop", OPT_FLOAT, &rdrop, "ALPHA", "cls, tokcls: R-Drop, each batch twice with the symmetric KL of the two weighted ALPHA", NULL,
	 .fmin = 0, .fmax = 1000, .open = OPEN_MIN},
	{0, "vat", OPT_FLOAT, &vat, "EPS", "virtual adversarial training: perturb each sequence's embeddings by norm EPS", NULL,
	 .fmin = 0, .fmax = 1e6, .open = OPEN_MIN},
	{0, "vat-xi", OPT_FLOAT, &vat_xi, "XI", "with --vat: the step of the power iteration (default 1e-3)", NULL,
	 .fmin = 0, .fmax = 1e6, .open = OPEN_MIN},
	{0, "vat-iters", OPT_INT, &vat_iters, "N", "with --vat: power iterations (default 1)", NULL,
	 .min = 0, .max = 100},
	{0, "eval-every", OPT_INT, &eval_every, "N", "evaluate every N steps as well as at each epoch end; 0 for only there", NULL,
	 .min = 0, .max = 1000000000000},
	{0, "eval-test", OPT_FLAG, &eval_test, NULL, "evaluate on the test split too", NULL},
	{0, "metric", OPT_STR, &metric, "NAME", "what best/ means: loss, ppl; cls accuracy (default), macro-f1; multi-label micro-f1 (default), macro-f1, exact-match; reg pearson, spearman (default loss); tokcls entity-f1 (default), accuracy; mlm loss (default)", NULL},
	{0, "save-every", OPT_INT, &save_every, "N", "checkpoint every N steps (default: at each evaluation point)", NULL,
	 .min = 0, .max = 1000000000000},
	{0, "keep", OPT_INT, &keep, "N", "checkpoints to keep", NULL,
	 .min = 1, .max = 1000000},
	{0, "patience", OPT_INT, &patience, "N", "stop after N evaluations without a better metric; 0 for never", NULL,
	 .min = 0, .max = 1000000},
	{'j', "threads", OPT_INT, &threads, "N", "CPU threads a process (default: the cores shared among a machine's processes)", NULL,
	 .min = 0, .max = 1024},
	{0, "true-gradient", OPT_FLAG, &true_gradient, NULL, "average over all processes' samples, not the processes' averages", NULL},
	{0, "zero", OPT_INT, &zero, "N", "1: each process keeps the optimizer state of, and updates, its shard of the parameters", NULL,
	 .min = 0, .max = 1},
	{0, "comm-timeout", OPT_FLOAT, &comm_timeout, "S", "end the run when processes wait S seconds for each other", NULL,
	 .fmin = 1, .fmax = 1e6},
	{0, "net-if", OPT_STR, &net_if, "NAME", "network interface the processes talk over (default: as the routes choose)", NULL},
	{0, "precision", OPT_STR, &precision, "P", "what the matrix work computes in: fp32; tf32 (a GPU's tensor cores); bf16 or fp16, with fp32 accumulation (bf16: sm_80 GPUs, CPUs with AVX512-BF16 or AMX; fp16: GPUs, with loss scaling); default bf16 on a GPU that has it, else fp32", "fp32|tf32|bf16|fp16"},
	{0, "loss-scale", OPT_FLOAT, &loss_scale, "S", "fp16: the loss scale to start from, a power of two (default 65536); halved on an overflow, doubled after 2000 clean steps", NULL,
	 .fmin = 1, .fmax = LOSS_SCALE_MAX},
	{0, "recompute", OPT_FLAG, &recompute, NULL, "keep one layer's activations; recompute the others in backward", NULL},
	{0, "no-cuda-graphs", OPT_FLAG, &no_graphs, NULL, "GPU: launch each kernel of a training pass on its own, not as a replayed CUDA graph", NULL},
	{0, "device", OPT_STR, &device, "DEV", "cpu, cuda or cuda:N (default: cuda when a GPU is usable)", "@device"},
	{0, "gpus", OPT_STR, &gpus, "LIST", "GPUs the processes of a machine take, such as 0-3 (default: the free ones, least busy first)", NULL},
	{0, "count-params", OPT_FLAG, &count_params, NULL, "print the parameters of the model the options make, and exit", NULL},
	{0, "replay", OPT_STR, &replay, "DIR", "re-run the step saved in a run's bug/step-N dir", "@dir"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-train", "Train a BERT encoder on a data dir.", "", NULL, opts,
	"--data DIR --run RUN [--vocab FILE | --init MODEL] [OPTION]...\n"
	"       ts-train --resume RUN [OPTION]...\n       ts-train --replay RUN/bug/step-N",
};

/* The options of a model from scratch, which --init's model dir stands instead of. */
static const char *const shape[] = {"arch", "vocab", "layers", "hidden", "heads", "ffn", "max-pos", NULL};

static char *run_precision;   /* --resume: its config's, which a leg's --precision leaves there */

/* The run's config file records every option but the ones naming the run,
 * the devices and the network interface, which a resumed run may change,
 * and a resumed leg's own precision. */
static void write_config(FILE *f)
{
	char *saved_run = run, *saved_resume = resume, *saved_device = device, *saved_gpus = gpus, *saved_net_if = net_if;
	char *saved_precision = precision;
	run = resume = device = gpus = net_if = NULL;
	precision = run_precision ? run_precision : precision;
	opt_write_config(&spec, f);
	run = saved_run, resume = saved_resume, device = saved_device, gpus = saved_gpus, net_if = saved_net_if;
	precision = saved_precision;
}

/* Without --precision: bf16 on a GPU that has it, else fp32, saying so (when
 * say) on a GPU without it. */
static enum precision default_precision(const char *dev, int say)
{
	int sm = device_sm(dev);
	enum precision p = precision_default(sm);
	if (say && sm && p == PREC_FP32)
		warnx("%s is sm_%d, without bf16: training in fp32", dev, sm);
	return p;
}

static enum bert_task task_of(void)
{
	if (!strcmp(task, "cls"))
		return multi_label ? TASK_MULTI : TASK_CLS;
	return !strcmp(task, "reg") ? TASK_REG : !strcmp(task, "tokcls") ? TASK_TOKCLS : TASK_MLM;
}

/* Each number is in its range already (opt.c); these are the rules across options. */
static void parse_betas(void)
{
	char *end, *second;
	beta1 = strtod(betas, &end);
	if (end == betas || isspace((unsigned char)*betas) || *end != ',' ||
	    (second = end + 1, beta2 = strtod(second, &end), end == second || isspace((unsigned char)*second) || *end) ||
	    !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
		die_usage("--betas takes two numbers in [0, 1) such as 0.9,0.999, not '%s'", betas);
}

static void check_options(void)
{
	if (!data)
		die_usage("a data dir is required: --data DIR");
	if (loss_scale && loss_scale != ldexp(1, ilogb(loss_scale)))
		die_usage("--loss-scale %g: not a power of two", loss_scale);
	if (!run && !count_params)
		die_usage("a run dir is required: --run DIR");
	for (int i = 0; init && !resume && shape[i]; i++)
		if (opt_given(&spec, shape[i]))
			die_usage("--%s is for a model from scratch: --init's model dir has its own", shape[i]);
	if (!init && hidden % heads)
		die_usage("--hidden %ld is not a multiple of --heads %ld", hidden, heads);
	if (!init && arch && family_by_type(arch) >= 0 && family_of((enum family_id)family_by_type(arch))->rotary &&
	    (hidden / heads) % 2)
		die_usage("--hidden %ld / --heads %ld makes heads of %ld: %s's rotary positions need an even head size",
			  hidden, heads, hidden / heads, arch);
	if (multi_label && strcmp(task, "cls"))
		die_usage("--multi-label goes with --task cls, not %s", task);
	if ((threshold != 0.5 || opt_on_line(&spec, "threshold")) && !multi_label)
		die_usage("--threshold goes with --multi-label");
	if (warmup > 1 && warmup != floor(warmup) && !resume)   /* a run begun before goes on as it began */
		die_usage("--warmup %g: from 1 on, a whole number of steps", warmup);
	if (zero && ema > 0)
		die_usage("--zero 1 does not go with --ema: the moving average needs the whole parameters");
	if ((teacher != NULL) + (rdrop > 0) + (vat > 0) > 1)
		die_usage("--teacher, --rdrop and --vat are one at a time");
	if (!teacher && (opt_given(&spec, "kd-alpha") || opt_given(&spec, "kd-temp")) && !resume)
		die_usage("--kd-alpha and --kd-temp go with --teacher");
	if (!(vat > 0) && (opt_given(&spec, "vat-xi") || opt_given(&spec, "vat-iters")) && !resume)
		die_usage("--vat-xi and --vat-iters go with --vat");
	if (batch_tokens && batch)
		die_usage("--batch-tokens and --batch are one at a time");
	if (batch_tokens && bucket)
		die_usage("--batch-tokens does not go with --bucket: packed micro-batches have no padding to save");
	if (rdrop > 0 && strcmp(task, "cls") && strcmp(task, "tokcls"))
		die_usage("--rdrop is for --task cls and tokcls");
	if (rdrop > 0 && multi_label)
		die_usage("--rdrop is for a softmax head, not --multi-label");
	if ((teacher || vat > 0) && (!strcmp(task, "reg") || multi_label))
		die_usage("--teacher and --vat are for the softmax heads of cls, tokcls and mlm");
	if (label_smoothing > 0 && (!strcmp(task, "reg") || multi_label))
		die_usage("--label-smoothing is for the cross-entropy of cls, tokcls and mlm");
	if (zero && !strcmp(optimizer, "lamb"))
		die_usage("--zero 1 takes adamw, adam or sgd: lamb's trust ratio needs whole tensors");
	/* the run's config records these whatever the run, so a file may hold them where they do not apply;
	 * the command line may not */
	if (opt_on_line(&spec, "momentum") && strcmp(optimizer, "sgd"))
		die_usage("--momentum is for --optimizer sgd, not %s", optimizer);
	if ((opt_on_line(&spec, "betas") || opt_on_line(&spec, "eps")) && !strcmp(optimizer, "sgd"))
		die_usage("--betas and --eps are for --optimizer adamw, adam and lamb, not sgd");
	if (opt_on_line(&spec, "end-lr-ratio") && !strcmp(decay, "constant"))
		die_usage("--end-lr-ratio is where a decay ends, and --decay constant has none");
	if ((opt_on_line(&spec, "mask-prob") || opt_on_line(&spec, "whole-word") || opt_on_line(&spec, "max-ngram")) &&
	    strcmp(task, "mlm"))
		die_usage("--mask-prob, --whole-word and --max-ngram are for --task mlm, not %s", task);
	if (metric && !metric_known(metric, task_of()))
		die_usage("--metric %s does not apply to the %s task", metric, task_name(task_of()));
}

/* Where they apply, the options not given take their defaults, which the
 * run's config then records (a resumed run keeps those it began with). */
static void resolve_defaults(void)
{
	if (!init) {
		arch = arch ? arch : "bert";
		layers = layers ? layers : 4;
		hidden = hidden ? hidden : 256;
		heads = heads ? heads : 4;
		ffn = ffn > 0 ? ffn : 4 * hidden;
		max_pos = max_pos ? max_pos : family_of((enum family_id)family_by_type(arch))->max_pos;
		dropout = dropout < 0 ? family_of((enum family_id)family_by_type(arch))->dropout : dropout;
	}
	if (!batch_tokens)
		batch = batch ? batch : 32;
	if (teacher) {
		kd_alpha = kd_alpha < 0 ? 0.5 : kd_alpha;
		kd_temp = kd_temp < 0 ? 2 : kd_temp;
	}
	if (vat > 0) {
		vat_xi = vat_xi < 0 ? 1e-3 : vat_xi;
		vat_iters = vat_iters < 0 ? 1 : vat_iters;
	}
}

/* Paths in the run's config must hold from any working directory. */
static void absolute(char **path)
{
	char *abs;
	if (*path && (abs = realpath(*path, NULL)))
		*path = abs;
}

/* A resumed run reads its data and --teacher where RUN/config says: one
 * moved since is named as the config's, which is where to say so. Its
 * --init it reads only where it has no checkpoint yet (train_run checks). */
static void check_moved(void)
{
	const char *key[] = { "data", "teacher" }, *path[] = { data, teacher };
	for (int i = 0; i < 2; i++)
		if (path[i] && access(path[i], F_OK) < 0) {
			const char *why = strerror(errno);
			die("%s: %s = %s: %s; where it has moved, set %s there", path_join(run, "config"), key[i],
			    path[i], why, key[i]);
		}
}

/* From scratch, the vocab ts-shard kept in the data dir, if it did. */
static void default_vocab(void)
{
	char *path = vocab_in_dir(data, NULL);
	if (access(path, F_OK))
		free(path);
	else
		vocab = path;
}

/* What RUN/config may say otherwise than when a checkpoint was made: first
 * what a resumed run may change besides where it runs, its end and its
 * cadence, which its config then records (their values are changeable[]);
 * then this leg's precision, where the files are now, and what suits the
 * machine. */
static const char *const resume_may_change[] = {
	"epochs", "max-steps", "eval-every", "save-every", "patience", "precision",
	"data", "vocab", "init", "teacher", "threads", "comm-timeout", NULL,
};
static long *const changeable[] = { &epochs, &max_steps, &eval_every, &save_every, &patience };
enum { CHANGEABLE = sizeof changeable / sizeof *changeable };

/* Reads the config at path of the run to resume, keeping the values the
 * command line gave to what a resume may change (--epochs alone sets a new
 * end in epochs: no --max-steps); returns the changes as JSON text,
 * {"name": [was, now]}, or NULL for none. */
static char *read_resumed_config(const char *path)
{
	long now[CHANGEABLE];
	int given[CHANGEABLE];
	for (int i = 0; i < CHANGEABLE; i++)
		given[i] = opt_given(&spec, resume_may_change[i]), now[i] = *changeable[i];
	if (given[0] && !given[1])   /* epochs, not max-steps */
		given[1] = 1, now[1] = 0;
	opt_read_config(&spec, path);
	json_t *changes = json_object();
	for (int i = 0; i < CHANGEABLE; i++)
		if (given[i] && now[i] != *changeable[i]) {
			json_object_set_new(changes, resume_may_change[i],
					    json_pack("[I I]", (json_int_t)*changeable[i], (json_int_t)now[i]));
			*changeable[i] = now[i];
		}
	char *text = json_object_size(changes) ? json_dumps(changes, JSON_COMPACT) : NULL;
	json_decref(changes);
	return text;
}

int main(int argc, char **argv)
{
	char **operands;
	comm_tell_refusal();
	if (opt_parse(&spec, argc, argv, &operands) > 0)
		die_usage("unexpected argument '%s'", operands[0]);
	/* -c RUN/config --epochs 1: the command line's end, batching or model, not the file's */
	opt_instead(&spec, "epochs", (const char *const[]){ "max-steps", NULL });
	opt_instead(&spec, "batch", (const char *const[]){ "batch-tokens", NULL });
	opt_instead(&spec, "batch-tokens", (const char *const[]){ "batch", NULL });
	opt_instead(&spec, "init", shape);
	if (replay) {
		opt_only_with(&spec, "replay", (const char *const[]){ "threads", NULL });
		omp_set_num_threads(threads ? (int)threads : omp_get_num_procs());
		int rc = bug_replay(replay);
		close_stdout();
		return rc;
	}
	char *changes = NULL;
	if (resume) {
		/* the run's own config, but where it runs, its precision, its end and cadence */
		opt_only_with(&spec, "resume", (const char *const[]){ "device", "gpus", "net-if", "precision", "epochs",
									"max-steps", "eval-every", "save-every", "patience", NULL });
		char *given = precision;   /* this leg's, over the run's */
		char *path = path_join(resume, "config");
		if (access(resume, F_OK) < 0)
			die("%s:", resume);
		if (access(path, F_OK) < 0)
			die("%s: not a run dir (no config file)", resume);
		changes = read_resumed_config(path);
		free(path);
		run = resume;
		run_precision = precision;
		precision = given ? given : precision;
	}
	resolve_defaults();
	check_options();
	if (!vocab && !init && !resume)
		default_vocab();
	if (resume)
		check_moved();
	absolute(&data);
	absolute(&init);
	absolute(&teacher);
	absolute(&vocab);
	if (init && !resume)
		modeldir_verify("--init", init);
	if (teacher)
		modeldir_verify("--teacher", teacher);
	opt_check_recordable(&spec);   /* the values as the config records them */
	parse_betas();
	enum family_id family = arch ? (enum family_id)family_by_type(arch) : FAMILY_BERT;   /* --init's says */
	struct train_config c = {
		.data = data, .run = run, .init = init, .vocab = vocab,
		.task = task_of(),
		.model = {.hidden = (int)hidden, .layers = (int)layers, .heads = (int)heads,
			  .ffn = (int)ffn, .max_pos = (int)max_pos, .family = family,
			  .type_vocab = family_of(family)->type_vocab, .ln_eps = family_of(family)->ln_eps,
			  .hidden_dropout = (float)(dropout < 0 ? family_of(family)->dropout : dropout),
			  .attn_dropout = (float)(dropout < 0 ? family_of(family)->dropout : dropout),
			  .cls_dropout = (float)(dropout < 0 ? family_of(family)->dropout : dropout),
			  .rope_global = family_of(family)->rope_global, .rope_local = family_of(family)->rope_local,
			  .local_window = family_of(family)->local_window,
			  .global_every = family_of(family)->global_every},
		.dropout_given = dropout >= 0,
		.optim = {.kind = (enum optim_kind)optim_kind_parse(optimizer), .weight_decay = weight_decay,
			  .beta1 = beta1, .beta2 = beta2,
			  .momentum = momentum, .eps = eps, .ema = ema},
		.lr = lr, .warmup = warmup, .end_lr_ratio = end_lr_ratio, .clip = clip,
		.decay = decay_kind_parse(decay),
		.accum = accum, .batch = batch, .batch_tokens = batch_tokens, .epochs = epochs, .max_steps = max_steps,
		.seed = seed,
		.eval_every = eval_every, .save_every = save_every, .keep = keep, .patience = patience,
		.eval_test = eval_test, .bucket = bucket, .metric = metric, .threshold = threshold,
		.mask_prob = (float)mask_prob, .whole_word = whole_word, .max_ngram = max_ngram,
		.label_smoothing = label_smoothing, .llrd = llrd, .freeze_layers = freeze_layers,
		.freeze_embeddings = freeze_embeddings, .teacher = teacher, .kd_alpha = kd_alpha, .kd_temp = kd_temp,
		.rdrop = rdrop, .vat = vat, .vat_xi = vat_xi, .vat_iters = vat_iters,
		.recompute = recompute, .no_graphs = no_graphs, .true_gradient = true_gradient, .zero = (int)zero,
		.resume = resume != NULL, .resume_changes = changes, .resume_may_change = resume_may_change,
		.write_config = write_config,
	};
	if (count_params) {
		printf("%zu\n", train_count_params(&c));
		close_stdout();
		return 0;
	}
	struct comm comm;
	comm_open(&comm, comm_timeout, net_if);
	int cores = omp_get_num_procs() / comm.local_size;
	omp_set_num_threads(threads ? (int)threads : cores > 1 ? cores : 1);
	c.comm = &comm;
	/* before the run dir exists: a missing GPU leaves nothing behind */
	const char *dev = gpus_pick(&comm, comm_sum_doubles, device ? device : backend_default(), gpus);
	c.precision = precision ? precision_parse(precision) : default_precision(dev, comm.rank == 0);
	if (loss_scale && c.precision != PREC_FP16 && !resume)
		die_usage("--loss-scale applies to --precision fp16, not %s", precision_name(c.precision));
	c.loss_scale = loss_scale ? loss_scale : LOSS_SCALE_INIT;
	c.be = backend_open(dev, c.precision);
	precision = (char *)precision_name(c.precision);   /* the run's config records it */
	int rc = train_run(&c);
	comm_close(&comm);
	close_stdout();
	return rc;
}
