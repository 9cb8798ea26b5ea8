/* comm.c's sums of GPU memory between the processes of a run on GPUs:
 * NCCL (kernels/cuda_comm.cu), joined over the transport that launched
 * them, which carries process 0's NCCL id to the others and, when a
 * collective does not finish, the roll call that names a process that does
 * not answer. Without CUDA in the build, open dies in one line. */
#ifndef TS_COMM_NCCL_H
#define TS_COMM_NCCL_H
#include "comm/transport.h"

extern const struct transport nccl_transport;
#endif
