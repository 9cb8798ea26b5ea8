/* comm.c's processes joined over TCP, for launches without MPI: the
 * environment torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and
 * LOCAL_RANK, LOCAL_WORLD_SIZE where more than one process shares a machine). */
#ifndef TS_COMM_TCP_H
#define TS_COMM_TCP_H
#include "comm.h"

/* The network interface the processes talk over: dies in one line, naming
 * the machine's interfaces, when it has no address here. */
void tcp_use_if(const char *name);
/* Whether the environment asks for such a launch (WORLD_SIZE is set). */
int tcp_launched(void);
/* Reads the environment into c and joins the processes; dies in one line on
 * a bad variable or a process that cannot be reached within c->timeout_s. */
void tcp_open(struct comm *c);
void tcp_close(void);
/* Before the processes have joined, tells the others that this one cannot
 * start, and why: comm_tell_refusal's die_tell. */
void tcp_refuse(const char *message);
/* x[0..n) of doubles (dbl) or floats becomes the sum over all processes, the
 * same bits on each. */
void tcp_sum(const struct comm *c, void *x, size_t n, int dbl);
/* comm_reduce_scatter_floats and comm_all_gather_floats. */
void tcp_reduce_scatter(const struct comm *c, float *x, size_t n);
void tcp_all_gather(const struct comm *c, float *x, size_t n);
/* comm_start_sum's, over TCP: the started sums run in order on a thread of
 * their own; tcp_wait_sums returns when all are done, with the time the
 * last one finished (CLOCK_MONOTONIC seconds). Every other collective waits
 * for them first. */
void tcp_start_sum(const struct comm *c, float *x, size_t n);
double tcp_wait_sums(void);
#endif
