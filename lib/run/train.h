/* The training loop of ts-train: data, model, optimizer and schedule, with
 * evaluation, checkpoints, early stop, stop requests and exact resume. */
#ifndef TS_TRAIN_H
#define TS_TRAIN_H
#include "comm/comm.h"
#include "device/device.h"
#include "model/bert.h"
#include "model/optim.h"
#include <stddef.h>
#include <stdio.h>

struct train_config {
	const char *data, *run, *init, *vocab;
	const struct backend *be;      /* where the model lives and computes */
	enum precision precision;      /* be's: the bug records say it, for --replay */
	double loss_scale;             /* fp16: the loss scale a run starts from */
	enum bert_task task;
	struct bert_config model;      /* from scratch; its dropout also applies to --init when given */
	int dropout_given;             /* override the checkpoint's dropout */
	struct optim_config optim;
	double lr, warmup, end_lr_ratio, clip;
	int decay;                     /* enum decay_kind */
	long accum, batch, epochs, max_steps, seed;
	long batch_tokens;             /* micro-batches of whole records up to this many tokens; 0: of batch records */
	long eval_every, save_every, keep, patience;
	int eval_test, bucket;
	const char *metric;
	double threshold;              /* multi: a class is predicted at this probability */
	float mask_prob;
	int whole_word;
	int recompute;                 /* bert_set_recompute */
	int no_graphs;                 /* bert_set_graphs off: every GPU kernel launched on its own */
	double label_smoothing;        /* bert_set_label_smoothing */
	double llrd;                   /* layer-wise lr decay: 0 or 1 for none */
	long freeze_layers;            /* bert_set_frozen */
	int freeze_embeddings;
	const char *teacher;           /* distillation from this model dir, or NULL */
	double kd_alpha, kd_temp;      /* bert_set_soft_loss: the soft loss's weight, temperature */
	double rdrop;                  /* bert_set_rdrop */
	double vat, vat_xi;            /* bert_vat's eps and xi; vat 0: none */
	long vat_iters;
	int true_gradient;             /* the mean over all processes' items, not of their means */
	int zero;                      /* 1: ZeRO-1, each process updates its shard of the parameters */
	const struct comm *comm;       /* the run's processes: each trains on its slice of every batch */
	long max_ngram;
	int resume;
	/* a resumed run's changes to its end and cadence, as JSON text
	 * {"max-steps": [was, now], ...}; NULL: none */
	const char *resume_changes;
	const char *const *resume_may_change;   /* the keys of RUN/config a resume may find changed */
	void (*write_config)(FILE *f);   /* the resolved options, for RUN/config */
};

/* Runs (or resumes) a run to its end or a stop request; returns the exit code.
 * With several processes, each computes the gradient of its slice of every
 * step's records and they sum them; process 0 alone writes the run dir (but
 * for each one's log/rank-N.log) and evaluates. */
int train_run(const struct train_config *c);
/* The parameters of the model c describes (its --init's, or one from
 * scratch of c->model over c->vocab), with the head for c->data's task. */
size_t train_count_params(const struct train_config *c);
#endif
