/* What ts-train's files share (lib/run/train*.c), none of it used outside
 * them: a run in training (struct trainer) and the functions of one file
 * that another calls. train.c holds the loop, from train_run down. */
#ifndef TS_TRAINER_H
#define TS_TRAINER_H
#include "comm/comm.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "format/events.h"
#include "format/tboard.h"
#include "model/batcher.h"
#include "model/bert.h"
#include "model/optim.h"
#include "model/schedule.h"
#include "run/checkpoint.h"
#include "util/progress.h"
#include <jansson.h>
#include <stdio.h>

struct train_config;

enum { MAX_BUG_DUMPS = 3 };

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
	double pace;           /* the lr schedule's steps a training step advances (sched_pace) */
	struct batch *micro;
	const char *metric;
	double t0;
	long steps_this_process;
	long saved_step;       /* step of the last checkpoint written, or of the state the run started from */
	struct progress *prog;
	json_t *passed_over;   /* checkpoints --resume passed over, damaged: {checkpoint, why} */
};

struct step_result {
	double loss, grad_norm, lr;
	int skipped, overflow;
	double loss_scale;             /* fp16's, the step's; 0 in other precisions */
	int64_t samples, tokens;
};

/* train_log.c: the run's log, its events */
void trainer_log(struct trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* From now on, a death of this process records a failed event in ev
 * (NULL: no longer). */
void trainer_record_failures(struct events *ev);
void trainer_event(struct trainer *t, const char *type, json_t *fields);

/* train_model.c: the data, the vocab, the model and its optimizer */
void open_data(struct trainer *t);
/* The vocab a run starts with: --init's (that of sha256, the data's, where
 * its dir holds two, and that lowercases as the data did: lower), or from
 * scratch --vocab's. */
char *start_vocab(const struct train_config *c, const char *sha256, int lower);
void check_vocab(struct trainer *t);
void build_model(struct trainer *t, const char *from);
/* The model's weights from the checkpoint ckpt instead, as build_model
 * loads them. */
void reload_model(struct trainer *t, const char *ckpt);
void build_optimizer(struct trainer *t);
void log_parameters(struct trainer *t);

/* train_plan.c: the plan of steps and records */
void use_order(struct trainer *t, long epoch);
uint64_t micro_batch(const struct trainer *t, uint64_t at, int processes, int rank, uint64_t *lo,
		    uint64_t *hi);
double sched_position(const struct trainer *t);
void check_processes(const struct trainer *t);
void plan_steps(struct trainer *t, const char *ckpt);

/* train_step.c: a step */
void train_step(struct trainer *t, struct step_result *r);

/* train_claim.c: the run dir and the state a run starts from */
void claim_run(struct trainer *t, char **ckpt);
/* The resolved options, as RUN/config holds them (malloc'd). */
char *trainer_config_text(const struct trainer *t);
void check_same_run(struct trainer *t);
void open_run(struct trainer *t);
json_t *add_batch_tokens(const struct trainer *t, json_t *fields);
/* The state the run starts from: a new run's, or that of the checkpoint
 * *from, which becomes the one before it where it was damaged. */
void start_state(struct trainer *t, char **from);
#endif
