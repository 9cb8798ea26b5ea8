/* A run's checkpoints, DIR/ckpt/step-N: a model dir plus the optimizer's
 * moments (optimizer.safetensors) and where the run stands (state.json),
 * the run's options (run.config) and the digests of them all, written last
 * (digests.json). */
#ifndef TS_CHECKPOINT_H
#define TS_CHECKPOINT_H
#include "model/bert.h"
#include "model/lossscale.h"
#include "model/optim.h"
#include <jansson.h>
#include <stdint.h>

/* Where a run stands; saved in every checkpoint as state.json. */
struct train_state {
	long step;            /* optimizer steps done */
	long epoch;           /* current epoch (0-based) */
	int64_t record;       /* records of the epoch's order taken so far */
	int64_t samples, tokens;
	double best;          /* best value of the chosen metric so far */
	long best_step;       /* -1: no evaluation yet */
	long bad_evals;       /* evaluations since the best one (for --patience) */
	long skipped;         /* steps skipped for a non-finite loss or gradient */
	long optim_steps;     /* updates the optimizer made (skipped steps make none) */
	int finished;         /* the run reached its end or stopped early */
	int processes;        /* the processes it trains on */
	/* The lr schedule runs over the steps the run planned on sched_processes;
	 * from sched_step (at schedule position sched_pos) it goes at the pace
	 * that ends it with the data: resumed on another number of processes, a
	 * step takes other records, and the schedule goes on without a jump. */
	int sched_processes;
	long sched_step;
	double sched_pos;
	double elapsed_s;     /* training time so far */
	struct loss_scale ls; /* fp16's; scale 0 in the other precisions */
	long overflows;       /* fp16 steps skipped for an overflow (and the scale halved) */
};

/* DIR/ckpt/step-N, with config (the run's options, as RUN/config holds
 * them) as run.config, written whole or not at all; then all but the newest keep
 * checkpoints are removed. With an optimizer that owns a shard, every other
 * process calls optim_pull meanwhile (optim.h). */
void checkpoint_save(const char *dir, struct bert *m, struct optim *o, const struct train_state *st,
		     char *const *labels, int nlabels, const char *vocab, const char *config, int keep);
/* The newest checkpoint dir of run DIR whose files are whole (their
 * digests match), malloc'd; NULL where DIR has no checkpoint. Each newer one
 * passed over is appended to skipped as {"checkpoint", "why"}; where none
 * is whole, dies naming each in skipped and why. Its weights and optimizer
 * state are kept for the loads that come next (modeldir_load,
 * checkpoint_load), which check all of them but their heads as they copy
 * them: checkpoint_confirm then says whether they were whole. With after
 * (one found damaged so), only older ones, checked whole. */
char *checkpoint_intact(const char *dir, json_t *skipped, const char *after);
/* After the loads from ckpt: why its weights or optimizer state were not
 * whole (malloc'd), or NULL. */
char *checkpoint_confirm(const char *ckpt);
/* Loads optimizer moments and the training state (the model loads as a model
 * dir); dies naming the file and field of a state out of range for a run of
 * records training records. */
void checkpoint_load(const char *ckpt, int64_t records, struct optim *o, struct train_state *st);
#endif
