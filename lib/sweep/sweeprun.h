/* Running a sweep's jobs (sweep.h): each job is ts-train with its own
 * options and its own run dir SWEEPDIR/job-NNN, started (launch.h) on this
 * machine or a server, as many at a time as the places have slots. The sweep dir's jobs.msgpack records every change
 * of a job's state, and its lock names the scheduler, so that ts-stop
 * SWEEPDIR stops it and every running job with a checkpoint. */
#ifndef TS_SWEEPRUN_H
#define TS_SWEEPRUN_H
#include "sweep/launch.h"
#include "sweep/sweep.h"
#include <jansson.h>

struct sweep_plan {
	const char *dir;
	struct sweep_job *jobs;
	int njobs;
	struct sweep_place *places;
	int nplaces;
	char **ssh;            /* the command that reaches a server, as words */
	int nssh;
	int eta;               /* > 1: stop the worse jobs at rungs (asha.h), keeping 1 in eta */
	const char *metric;    /* what ranks the jobs; NULL: their task's default, as ts-train's */
	long max_params;       /* > 0: skip a job whose model has more parameters */
};

/* The value of metric name (see metric_path) in an evaluation record; NAN
 * when it has none. */
double sweep_metric(const json_t *eval, const char *name);

/* Job i's command line, NULL-terminated: its command, its options and
 * --run. */
char **sweep_argv(const struct sweep_plan *p, int i);
/* Asks ts-train --count-params about every job, dying with its line when
 * it refuses a job's options; makes the sweep dir, skips the jobs whose
 * models are too big, checks the servers (the working dir, the sweep dir
 * and the jobs' data dirs reachable there, 1 GiB free for the runs: a
 * server that fails is left out with a warning, its cores counted for
 * -j), and runs every job, as many at a time as the places have slots; a
 * job that fails is recorded and the sweep goes on, without the server of
 * a job that ssh could not start; a line on standard error names each
 * job that fails. Returns 1 when any failed (stopped or not), else 2 when
 * stopped (SIGINT, SIGTERM, SIGHUP, ts-stop), else 0. */
int sweep_run(struct sweep_plan *p);
/* Runs again the jobs of the sweep in dir that are not done, where it ran
 * them (slots > 0: that many at a time on this machine, for a sweep that
 * ran here), reaching its servers by ssh[0..nssh) when nssh > 0, else by
 * the command it recorded: a job whose run began goes on from its
 * checkpoint (ts-train --resume), the others start as they would have; in
 * the sweep's working dir. Returns as sweep_run. */
int sweep_resume(const char *dir, long slots, char **ssh, int nssh);
/* The records of the sweep in dir: returns each job's merged into one
 * object, in job order, and sets *sweep to the sweep's first record; dies
 * when dir holds no sweep. */
json_t *sweep_read(const char *dir, json_t **sweep);
#endif
