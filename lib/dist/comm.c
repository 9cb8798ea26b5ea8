#include "dist/comm.h"
#include "dist/comm_mpi.h"
#include "dist/comm_tcp.h"
#include "dist/host.h"
#include "util/clock.h"
#include "util/err.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TS_GPU
#include "cuda_api.h"
#endif

static const struct transport *via;   /* NULL: a world of one */
static int on_gpu;                /* the float collectives run over NCCL */
static struct comm_stats stats;   /* since comm_take_stats */

void comm_take_stats(struct comm_stats *out)
{
	*out = stats;
	memset(&stats, 0, sizeof stats);
}

const char *comm_algorithm(void)
{
	return on_gpu ? "nccl allreduce" : via ? via->algorithm : "none";
}

/* The processes on this machine, where the launch did not say. */
static void count_local(struct comm *c)
{
	char name[256];
	double *hosts = xcalloc((size_t)c->size, sizeof *hosts);
	hosts[c->rank] = host_key(name, sizeof name);
	comm_sum_doubles(c, hosts, c->size);
	int first;
	c->local_size = host_share(hosts, c->size, c->rank, &c->local_rank, &first);
	free(hosts);
}

static void refuse(const char *message)
{
	if (!mpi_transport.launched())   /* mpirun ends the others itself */
		tcp_refuse(message);
}

void comm_tell_refusal(void)
{
	die_tell(refuse);
}

void comm_open(struct comm *c, double timeout_s, const char *net_if)
{
	*c = (struct comm){ 0, 1, 0, 1, timeout_s, "" };
	if (net_if) {
		snprintf(c->net_if, sizeof c->net_if, "%s", net_if);
		tcp_use_if(net_if);
		/* MPI's TCP transport and NCCL's sockets read these */
		setenv("OMPI_MCA_btl_tcp_if_include", net_if, 1);
		setenv("NCCL_SOCKET_IFNAME", net_if, 1);
	}
	via = mpi_transport.launched() ? &mpi_transport : tcp_transport.launched() ? &tcp_transport : NULL;
	if (via)
		via->open(c);
	if (via == &tcp_transport) {
		if (!c->local_size)
			count_local(c);
		/* NCCL's own choice leaves out lo, and may take an interface
		 * the others cannot reach: the one that reached them is known */
		if (*c->net_if)
			setenv("NCCL_SOCKET_IFNAME", c->net_if, 0);
	}
}

void comm_close(const struct comm *c)
{
	(void)c;
#ifdef TS_GPU
	if (on_gpu)
		cuda_comm_close();
	on_gpu = 0;
#endif
	if (via)
		via->close();
	via = NULL;
}

#ifdef TS_GPU
/* Ends the run when a GPU collective did not finish: the processes that do
 * not answer a roll call over MPI or TCP are named there; if all answer,
 * NCCL itself failed. */
static void gpu_failed(const struct comm *c)
{
	comm_barrier(c);
	die("NCCL: a collective did not finish within %g s while every process answered; "
	    "NCCL_DEBUG=WARN says why (--net-if picks the network)", c->timeout_s);
}
#endif

void comm_use_gpu(const struct comm *c)
{
	if (c->size == 1)
		return;
#ifdef TS_GPU
	double id[CUDA_COMM_ID_BYTES] = {0};
	unsigned char raw[CUDA_COMM_ID_BYTES];
	if (c->rank == 0) {
		cuda_comm_id(raw);
		for (int i = 0; i < CUDA_COMM_ID_BYTES; i++)
			id[i] = raw[i];
	}
	comm_sum_doubles(c, id, CUDA_COMM_ID_BYTES);   /* process 0's id to all */
	for (int i = 0; i < CUDA_COMM_ID_BYTES; i++)
		raw[i] = (unsigned char)id[i];
	if (!cuda_comm_join(raw, c->rank, c->size, c->timeout_s))
		gpu_failed(c);
	on_gpu = 1;
#else
	die("this build has no CUDA backend");
#endif
}

/* The sum every collective is made of, timed and counted. */
static void sum(const struct comm *c, void *x, size_t n, int dbl)
{
	if (c->size == 1)
		return;
	double t0 = clock_seconds();
	via->sum(c, x, n, dbl);
	stats.seconds += clock_seconds() - t0;
	stats.exposed += clock_seconds() - t0;
	stats.bytes += (double)n * (dbl ? sizeof(double) : sizeof(float));
}

void comm_sum_floats(const struct comm *c, float *x, size_t n)
{
	sum(c, x, n, 0);
}

/* A sharded collective over n floats in GPU memory. */
static void gpu_sharded(const struct comm *c, float *x, size_t n, int gather)
{
#ifdef TS_GPU
	size_t *start = xcalloc((size_t)c->size + 1, sizeof *start);
	struct comm each = *c;
	for (each.rank = 0; each.rank < c->size; each.rank++)
		comm_shard(&each, n, &start[each.rank], &start[each.rank + 1]);
	int ok = cuda_comm_sharded(x, start, c->size, gather);
	free(start);
	if (!ok)
		gpu_failed(c);
#else
	(void)x, (void)n, (void)gather, (void)c;
#endif
}

/* A sharded collective over n floats, timed and counted. */
static void sharded(const struct comm *c, float *x, size_t n, int gather)
{
	if (c->size == 1)
		return;
	double t0 = clock_seconds();
	if (on_gpu)
		gpu_sharded(c, x, n, gather);
	else
		(gather ? via->all_gather : via->reduce_scatter)(c, x, n);
	stats.seconds += clock_seconds() - t0;
	stats.exposed += clock_seconds() - t0;
	stats.bytes += (double)n * sizeof *x / 2;   /* half an all-reduce's traffic */
}

/* Overlapped sums since the last comm_wait_sums: when the first started,
 * and the last time all were seen done (0: not yet). */
static double first_start, all_done;

void comm_start_sum(const struct comm *c, float *x, size_t n)
{
	if (c->size == 1)
		return;
	stats.bytes += (double)n * sizeof *x;
#ifdef TS_GPU
	if (on_gpu) {
		if (!cuda_comm_start_sum(x, n))
			gpu_failed(c);
		return;
	}
#endif
	if (!first_start)
		first_start = clock_seconds();
	all_done = 0;
	via->start_sum(c, x, n);
}

void comm_progress(const struct comm *c)
{
	if (c->size > 1 && first_start && !all_done && via->progress())
		all_done = clock_seconds();
}

void comm_wait_sums(const struct comm *c)
{
	if (c->size == 1)
		return;
#ifdef TS_GPU
	if (on_gpu) {
		double span, exposed;
		if (!cuda_comm_wait_sums(&span, &exposed))
			gpu_failed(c);
		stats.seconds += span;
		stats.exposed += exposed;
		return;
	}
#endif
	if (!first_start)
		return;
	double t0 = clock_seconds(), done = via->wait_sums(c);
	all_done = done ? done : all_done;
	/* the part of the sums' span after this process began to wait */
	double end = all_done ? all_done : clock_seconds();
	stats.seconds += end - first_start;
	stats.exposed += end > t0 ? end - t0 : 0;
	first_start = all_done = 0;
}

void comm_reduce_scatter_floats(const struct comm *c, float *x, size_t n)
{
	sharded(c, x, n, 0);
}

void comm_all_gather_floats(const struct comm *c, float *x, size_t n)
{
	sharded(c, x, n, 1);
}

void comm_sum_doubles(const struct comm *c, double *x, int n)
{
	sum(c, x, (size_t)n, 1);
}

int comm_any(const struct comm *c, int flag)
{
	double v = flag != 0;
	sum(c, &v, 1, 1);
	return v > 0;
}

char *comm_lead_text(const struct comm *c, const char *text)
{
	double len = c->rank == 0 ? (double)strlen(text) : 0;
	comm_sum_doubles(c, &len, 1);
	if (len > INT_MAX)
		die("process 0's text of %.0f bytes is more than the sums carry", len);
	size_t n = (size_t)len;
	double *bytes = xcalloc(n + 1, sizeof *bytes);
	for (size_t i = 0; c->rank == 0 && i < n; i++)
		bytes[i] = (unsigned char)text[i];
	comm_sum_doubles(c, bytes, (int)n);
	char *copy = xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		copy[i] = (char)(unsigned char)bytes[i];
	copy[n] = 0;
	free(bytes);
	return copy;
}

void comm_barrier(const struct comm *c)
{
	double v = 0;
	sum(c, &v, 1, 1);
}

double comm_max(const struct comm *c, double v, int *who)
{
	double *all = xcalloc((size_t)c->size, sizeof *all);
	all[c->rank] = v;
	sum(c, all, (size_t)c->size, 1);
	*who = 0;
	for (int r = 1; r < c->size; r++)
		if (all[r] > all[*who])
			*who = r;
	double most = all[*who];
	free(all);
	return most;
}
