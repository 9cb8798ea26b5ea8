/* Running a sweep's jobs (sweep.h) on this machine's slots: each job is
 * ts-train with the sweep's arguments, its own options and its own run dir
 * SWEEPDIR/job-NNN, started directly (no shell), its output in
 * SWEEPDIR/job-NNN.out. The sweep dir's jobs.msgpack records every change
 * of a job's state, and its lock names the scheduler, so that ts-stop
 * SWEEPDIR stops it and every running job with a checkpoint. */
#ifndef TS_SWEEPRUN_H
#define TS_SWEEPRUN_H
#include "sweep.h"

struct sweep_plan {
	const char *dir;
	char **cmd;            /* ts-train and the arguments every job shares */
	int ncmd;
	struct sweep_job *jobs;
	int njobs;
	int slots;             /* jobs at a time */
	int threads;           /* -j each job gets; 0: the command's own */
};

/* Job i's command line, NULL-terminated. */
char **sweep_argv(const struct sweep_plan *p, int i);
/* Job i's run dir. */
char *sweep_job_dir(const char *dir, int i);
/* Runs every job, at most p->slots at a time; a job that fails is recorded
 * and the sweep goes on. Returns 0 when all finished, 1 when any failed, 2
 * when stopped (SIGINT, SIGTERM, ts-stop). */
int sweep_run(const struct sweep_plan *p);
#endif
