/* comm.c's processes joined over TCP, for launches without MPI: the
 * environment torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and
 * LOCAL_RANK, LOCAL_WORLD_SIZE where more than one process shares a machine). */
#ifndef TS_COMM_TCP_H
#define TS_COMM_TCP_H
#include "comm/transport.h"

/* The network interface the processes talk over: dies in one line, naming
 * the machine's interfaces, when it has no address here. */
void tcp_use_if(const char *name);
/* Joins the processes from the environment, or dies in one line on a bad
 * variable or a process that cannot be reached within c->timeout_s. */
extern const struct transport tcp_transport;
/* Before the processes have joined, tells the others that this one cannot
 * start, and why: comm_tell_refusal's die_tell. */
void tcp_refuse(const char *message);
#endif
