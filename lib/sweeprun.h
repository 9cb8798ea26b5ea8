/* Running a sweep's jobs (sweep.h) on this machine's slots: each job is
 * ts-train with the sweep's arguments, its own options and its own run dir
 * SWEEPDIR/job-NNN, started directly (no shell), its output in
 * SWEEPDIR/job-NNN.out. The sweep dir's jobs.msgpack records every change
 * of a job's state, and its lock names the scheduler, so that ts-stop
 * SWEEPDIR stops it and every running job with a checkpoint. */
#ifndef TS_SWEEPRUN_H
#define TS_SWEEPRUN_H
#include "sweep.h"
#include <jansson.h>

struct sweep_plan {
	const char *dir;
	struct sweep_job *jobs;
	int njobs;
	int slots;             /* jobs at a time */
};

/* Job i's command line, NULL-terminated. */
char **sweep_argv(const struct sweep_plan *p, int i);
/* Job i's run dir. */
char *sweep_job_dir(const char *dir, int i);
/* Makes the sweep dir and runs every job, at most p->slots at a time; a
 * job that fails is recorded and the sweep goes on. Returns 0 when all
 * finished, 1 when any failed, 2 when stopped (SIGINT, SIGTERM, ts-stop). */
int sweep_run(const struct sweep_plan *p);
/* Runs again, slots at a time (0: as before), the jobs of the sweep in dir
 * that are not done: a job whose run began goes on from its checkpoint
 * (ts-train --resume), the others start as they would have; in the sweep's
 * working dir. Returns as sweep_run. */
int sweep_resume(const char *dir, long slots);
/* The records of the sweep in dir: returns each job's merged into one
 * object, in job order, and sets *sweep to the sweep's first record; dies
 * when dir holds no sweep. */
json_t *sweep_read(const char *dir, json_t **sweep);
#endif
