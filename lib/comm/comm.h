/* The processes of a run and what passes between them: MPI's processes when
 * mpirun or srun started this one (comm_mpi.c), those of a launch by the
 * environment over TCP (comm_tcp.c: RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, as torchrun sets them), else a world of one, where every
 * collective returns at once. Every process calls the collectives in the same
 * order; each leaves all processes with the same bits. */
#ifndef TS_COMM_H
#define TS_COMM_H
#include "comm/transport.h"
#include <stddef.h>

enum { COMM_TIMEOUT_S = 300 };


/* Joins the run's processes, each collective waiting at most timeout_s for
 * the others, over network interface net_if (NULL: as the launcher or the
 * routes choose; over TCP, NCCL then takes the interface the routes chose
 * unless NCCL_SOCKET_IFNAME says otherwise); dies in one line when mpirun or srun started this process
 * but the build has no MPI, on a bad launch environment, or when net_if is
 * not an interface of this machine. */
void comm_open(struct comm *c, double timeout_s, const char *net_if);
/* From now until the processes have joined, a process of a launch by the
 * environment that dies tells the others why (die_tell), so that they end
 * within seconds, naming it, rather than wait for it --comm-timeout long. */
void comm_tell_refusal(void);
/* Leaves them (after the last collective). */
void comm_close(const struct comm *c);
/* From now on the collectives over floats that run on the trainer's
 * buffers (comm_start_sum, comm_reduce_scatter_floats,
 * comm_all_gather_floats) take GPU memory of the device this process has
 * made current, and run over NCCL; the others stay on the host. Dies in one
 * line without NCCL; a process missing from the join is named as a
 * collective names it. */
void comm_use_gpu(const struct comm *c);

/* x[0..n) becomes the sum over all processes of their x. */
void comm_sum_floats(const struct comm *c, float *x, size_t n);
/* Only this process's shard of x[0..n) becomes the sum over all processes
 * (the rest is left as it is); the same bits as comm_sum_floats gives there
 * need not be. */
void comm_reduce_scatter_floats(const struct comm *c, float *x, size_t n);
/* Every process's shard of x[0..n) becomes the one of the process that owns it. */
void comm_all_gather_floats(const struct comm *c, float *x, size_t n);
/* Sums that overlap computation: comm_start_sum starts x[0..n) becoming
 * the sum over all processes, which runs while this process computes (over
 * MPI and NCCL as nonblocking collectives, over TCP on a thread of its own);
 * comm_progress lets started sums move on; comm_wait_sums returns when all
 * are done. x must be left alone until then, and no other collective
 * called before. Every process starts the same sums in the same order. */
void comm_start_sum(const struct comm *c, float *x, size_t n);
void comm_progress(const struct comm *c);
void comm_wait_sums(const struct comm *c);
void comm_sum_doubles(const struct comm *c, double *x, int n);
/* Whether flag is set on any process. */
int comm_any(const struct comm *c, int flag);
/* A copy of process 0's text on every process (free it), carried by the
 * sums: for short texts. */
char *comm_lead_text(const struct comm *c, const char *text);
/* Returns when every process has called it. */
void comm_barrier(const struct comm *c);
/* The largest of the processes' v, and in *who the first process with it. */
double comm_max(const struct comm *c, double v, int *who);

/* What this process's collectives took since the last call: seconds they
 * ran (for overlapped sums, from the first start to the last end seen), the
 * part of it this process spent waiting for them, and bytes of data they
 * summed; all start again at 0. */
struct comm_stats {
	double seconds, exposed, bytes;
};
void comm_take_stats(struct comm_stats *out);
/* How the sums run: "nccl allreduce", "mpi allreduce", "tcp ring" or "none". */
const char *comm_algorithm(void);
#endif
