/* The processes of a run, and ways of summing between them: comm.c
 * chooses the transport that launched this process (comm_mpi.c for mpirun
 * or srun, comm_tcp.c for a launch by the environment), and for a run on
 * GPUs the one their sums take (comm_nccl.c, joined over the first), and
 * times and counts what passes through them. */
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
	/* connections at MASTER_PORT that were no process of the run, dropped
	 * while the processes joined (process 0 of a launch by the environment) */
	long strays;
};

/* This process's shard of n elements: [*lo, *hi), process r's the r-th of
 * size nearly equal runs. */
void comm_shard(const struct comm *c, size_t n, size_t *lo, size_t *hi);

/* The clock of the sums that overlap the backward pass, between two waits:
 * comm.c's, on the host's clock (clock_seconds). */
struct sum_times {
	double started;            /* when the first started */
	double seen_done;          /* when a progress call last found all done; 0: none */
	double span, exposed;      /* wait_sums': first start to last end, and
				    * the part of it after the wait began */
};

/* span and exposed of t from the host's clock, for a wait that began at
 * t0 and whose sums finished at done (0: not known) */
void sum_times_on_host(struct sum_times *t, double t0, double done);

struct transport {
	const char *algorithm;     /* how its sums run, for the step's statistics */
	/* whether its launcher started this process */
	int (*launched)(void);
	/* joins the processes into c (dies in one line where it cannot); under:
	 * NULL for a launcher's transport, the launcher's for one joined over
	 * it */
	void (*open)(struct comm *c, const struct transport *under);
	void (*close)(void);
	/* x[0..n) of doubles (dbl) or floats becomes the sum over all processes,
	 * the same bits on each */
	void (*sum)(const struct comm *c, void *x, size_t n, int dbl);
	/* comm_reduce_scatter_floats and comm_all_gather_floats */
	void (*reduce_scatter)(const struct comm *c, float *x, size_t n);
	void (*all_gather)(const struct comm *c, float *x, size_t n);
	/* comm_start_sum's; progress lets them move on and says whether all
	 * are done; wait_sums returns once they are, with their times in t */
	void (*start_sum)(const struct comm *c, float *x, size_t n);
	int (*progress)(void);
	void (*wait_sums)(const struct comm *c, struct sum_times *t);
};
#endif
