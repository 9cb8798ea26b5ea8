/* bug/step-N/ of a run dir: the model before a step whose loss or gradient
 * was not finite and its micro-batches (batch.msgpack), for --replay. */
#ifndef TS_BUGDUMP_H
#define TS_BUGDUMP_H
#include "device/device.h"
#include "model/batcher.h"
#include "model/bert.h"
#include <stdint.h>

struct bug_step {
	const char *run;                 /* the run dir */
	long step;                       /* the step, from 1 */
	enum precision precision;
	enum bert_task task;
	int num_labels;
	struct bert *m;                  /* the model before the step */
	char *const *labels;             /* its class names */
	int nlabels;
	const char *vocab;               /* its vocab.txt */
	const struct batch *micro;       /* the step's micro-batches on this process */
	int nmicro;
	const uint64_t *seeds;           /* their dropout seeds */
	float scale;                     /* their losses' weight in the step's */
};

/* Writes RUN/bug/step-N whole or not at all; returns "bug/step-N" (malloc'd). */
char *bug_dump(const struct bug_step *s);
/* Runs the step saved in a bug/ dir again and prints whether the loss or
 * the gradient is again not finite; returns the exit code. */
int bug_replay(const char *bugdir);
#endif
