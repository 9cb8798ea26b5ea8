/* Starting a sweep's jobs: each directly (no shell) on this machine, or
 * through ssh on a server that shares the file system (its command quoted
 * exactly for the remote shell), its output in SWEEPDIR/job-NNN.out. */
#ifndef TS_LAUNCH_H
#define TS_LAUNCH_H
#include <sys/types.h>

/* Where jobs run: this machine or a server, how many at a time, the -j
 * each process gets there (for the jobs that give none), the GPUs a job
 * sees there (CUDA_VISIBLE_DEVICES) and the processes of a job (more than
 * 1: a distributed run, launched by the environment). */
struct sweep_place {
	char *host;            /* NULL: this machine */
	int slots;
	int threads;
	char *gpus;            /* NULL: the machine's as they are */
	int procs;
};

/* Where jobs start from: the sweep dir, the working dir they run in, and
 * the command that reaches a server, as words. */
struct launcher {
	const char *dir, *cwd;
	char **ssh;
	int nssh;
};

/* Job i's run dir. */
char *sweep_job_dir(const char *dir, int i);
/* Job command line argv as place pl runs it: with the place's -j (its
 * digits written into threads) where add_j, and where the place has no
 * GPUs, --device cpu unless argv names a device, so that the jobs that
 * share a machine's cores never reach for its GPUs (more processes than
 * GPUs stop a run). A new array of argv's words (free it alone). */
char **sweep_at(const struct sweep_place *pl, char **argv, int add_j, char threads[16]);
/* The command that runs argv at place pl: argv itself here, else the ssh
 * command, the host and the remote command line (a new array whose words
 * but the last are the given ones). */
char **launch_placed(const struct launcher *l, const struct sweep_place *pl, char **argv);
/* Starts job i (from 0) with command line argv at place pl, its output into
 * job i's .out file; returns its pid. With pl->procs above 1, a process of
 * its own starts them as a launch by the environment and passes a stop on. */
pid_t launch_start(const struct launcher *l, const struct sweep_place *pl, int i, char **argv);
/* Asks job i, started at pl as pid, to stop with a checkpoint. */
void launch_stop(const struct launcher *l, const struct sweep_place *pl, int i, pid_t pid);
#endif
