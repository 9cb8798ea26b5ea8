/* Which GPU each process of a run trains on: --device cuda:N names one;
 * --device cuda lets every process of a machine take a GPU of its own from
 * --gpus LIST, or by default from the machine's GPUs, free ones first, then
 * the least busy (NVML's readings). The processes of one machine agree: the
 * first of them orders the GPUs for all, before any of them opens one. */
#ifndef TS_GPUS_H
#define TS_GPUS_H
#include "comm/comm.h"
#include "device/gpulist.h"
#include "device/nvml.h"

/* Orders n GPUs by their usage u: free ones (no process) first, then by
 * utilisation, then by memory in use, then as given. */
void gpus_by_load(const struct gpu_usage *u, int n, int *order);
/* Dies, on every one of the share processes of host alike, when the have
 * GPUs of --gpus list (NULL: of the machine) are too few to give each its
 * own, in one line naming the way out: --device cpu, or a longer list. */
void gpus_enough(int share, int have, const char *host, const char *list);
/* The --device name this process trains on, for the given --device and
 * --gpus (NULL: none given): "cpu", or "cuda:N". The processes of c agree
 * through sum (comm_sum_doubles; NULL for a process alone, which keeps the
 * commands of one process free of the comm layer) and call it in the same
 * order. Dies in one line when list names a GPU that is not here, or a
 * machine has more processes than GPUs to give them (gpus_enough). */
const char *gpus_pick(const struct comm *c, void (*sum)(const struct comm *c, double *x, int n),
		      const char *device, const char *list);
#endif
