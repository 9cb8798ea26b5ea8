/* The processes of a run, and a way of summing between them: comm.c
 * chooses the transport that launched this process (comm_mpi.c for mpirun
 * or srun, comm_tcp.c for a launch by the environment) and times and counts
 * what passes through it. */
#ifndef TS_TRANSPORT_H
#define TS_TRANSPORT_H
#include <stddef.h>

struct comm {
	int rank, size;            /* this process, of size */
	int local_rank, local_size;  /* the same on this machine */
	/* how long a collective waits for the other processes before it names
	 * those that do not answer and ends the run */
	double timeout_s;
	/* the network interface they talk over, where known ("": not) */
	char net_if[32];
};

/* This process's shard of n elements: [*lo, *hi), process r's the r-th of
 * size nearly equal runs. */
void comm_shard(const struct comm *c, size_t n, size_t *lo, size_t *hi);

struct transport {
	const char *algorithm;     /* how its sums run, for the step's statistics */
	/* whether its launcher started this process */
	int (*launched)(void);
	/* joins the processes into c (dies in one line where it cannot) */
	void (*open)(struct comm *c);
	void (*close)(void);
	/* x[0..n) of doubles (dbl) or floats becomes the sum over all processes,
	 * the same bits on each */
	void (*sum)(const struct comm *c, void *x, size_t n, int dbl);
	/* comm_reduce_scatter_floats and comm_all_gather_floats */
	void (*reduce_scatter)(const struct comm *c, float *x, size_t n);
	void (*all_gather)(const struct comm *c, float *x, size_t n);
	/* comm_start_sum's; progress lets them move on and says whether all
	 * are done; wait_sums returns once they are, with the time the last one
	 * finished (clock_seconds) or 0 where not known */
	void (*start_sum)(const struct comm *c, float *x, size_t n);
	int (*progress)(void);
	double (*wait_sums)(const struct comm *c);
};
#endif
