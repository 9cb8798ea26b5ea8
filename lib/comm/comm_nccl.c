#include "comm/comm_nccl.h"
#include "util/err.h"
#include <stdlib.h>

static int nccl_launched(void)
{
	return 0;   /* it joins processes that another launched */
}

#ifdef TS_GPU
#include "cuda_api.h"

static const struct transport *under;   /* the launcher's */

/* Ends the run when a collective did not finish: the processes that do
 * not answer a roll call over the launcher's transport are named there; if
 * all answer, NCCL itself failed. */
static void failed(const struct comm *c)
{
	double v = 0;
	under->sum(c, &v, 1, 1);
	die("NCCL: a collective did not finish within %g s while every process answered; "
	    "NCCL_DEBUG=WARN says why (--net-if picks the network)", c->timeout_s);
}

static void nccl_open(struct comm *c, const struct transport *launcher)
{
	under = launcher;
	double id[CUDA_COMM_ID_BYTES] = {0};
	unsigned char raw[CUDA_COMM_ID_BYTES];
	if (c->rank == 0) {
		cuda_comm_id(raw);
		for (int i = 0; i < CUDA_COMM_ID_BYTES; i++)
			id[i] = raw[i];
	}
	under->sum(c, id, CUDA_COMM_ID_BYTES, 1);   /* process 0's id to all */
	for (int i = 0; i < CUDA_COMM_ID_BYTES; i++)
		raw[i] = (unsigned char)id[i];
	if (!cuda_comm_join(raw, c->rank, c->size, c->timeout_s))
		failed(c);
}

static void nccl_close(void)
{
	cuda_comm_close();
}

/* Floats in GPU memory; doubles, which live on the host, go to the launcher's. */
static void nccl_sum(const struct comm *c, void *x, size_t n, int dbl)
{
	if (dbl)
		under->sum(c, x, n, dbl);
	else if (!cuda_comm_sum(x, n))
		failed(c);
}

static void sharded(const struct comm *c, float *x, size_t n, int gather)
{
	size_t *start = xcalloc((size_t)c->size + 1, sizeof *start);
	struct comm each = *c;
	for (each.rank = 0; each.rank < c->size; each.rank++)
		comm_shard(&each, n, &start[each.rank], &start[each.rank + 1]);
	int ok = cuda_comm_sharded(x, start, c->size, gather);
	free(start);
	if (!ok)
		failed(c);
}

static void nccl_reduce_scatter(const struct comm *c, float *x, size_t n)
{
	sharded(c, x, n, 0);
}

static void nccl_all_gather(const struct comm *c, float *x, size_t n)
{
	sharded(c, x, n, 1);
}

static void nccl_start_sum(const struct comm *c, float *x, size_t n)
{
	if (!cuda_comm_start_sum(x, n))
		failed(c);
}

static int nccl_progress(void)
{
	return 0;   /* the sums move on, on their stream */
}

/* Timed on the GPU, by events around the sums. */
static void nccl_wait_sums(const struct comm *c, struct sum_times *t)
{
	if (!cuda_comm_wait_sums(&t->span, &t->exposed))
		failed(c);
}
#else
static void nccl_open(struct comm *c, const struct transport *launcher)
{
	(void)c, (void)launcher;
	die("this build has no CUDA backend");
}

static void nccl_close(void)
{
}

static void nccl_sum(const struct comm *c, void *x, size_t n, int dbl)
{
	(void)c, (void)x, (void)n, (void)dbl;
}

static void nccl_reduce_scatter(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static void nccl_all_gather(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static void nccl_start_sum(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static int nccl_progress(void)
{
	return 1;
}

static void nccl_wait_sums(const struct comm *c, struct sum_times *t)
{
	(void)c, (void)t;
}
#endif

const struct transport nccl_transport = {
	"nccl allreduce", nccl_launched, nccl_open, nccl_close, nccl_sum, nccl_reduce_scatter,
	nccl_all_gather, nccl_start_sum, nccl_progress, nccl_wait_sums,
};
