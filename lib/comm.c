#include "comm.h"
#include "comm_mpi.h"
#include "comm_tcp.h"
#include "err.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ALONE, MPI, TCP };
static int kind = ALONE;
static struct comm_stats stats;   /* since comm_take_stats */

void comm_take_stats(struct comm_stats *out)
{
	*out = stats;
	memset(&stats, 0, sizeof stats);
}

const char *comm_algorithm(void)
{
	return kind == MPI ? "mpi allreduce" : kind == TCP ? "tcp ring" : "none";
}

void comm_open(struct comm *c, double timeout_s, const char *net_if)
{
	*c = (struct comm){ 0, 1, 0, 1, timeout_s };
	if (net_if) {
		tcp_use_if(net_if);
		/* MPI's TCP transport and NCCL's sockets read these */
		setenv("OMPI_MCA_btl_tcp_if_include", net_if, 1);
		setenv("NCCL_SOCKET_IFNAME", net_if, 1);
	}
	if (mpi_launched()) {
		mpi_open(c);
		kind = MPI;
	} else if (tcp_launched()) {
		tcp_open(c);
		kind = TCP;
	}
}

void comm_close(const struct comm *c)
{
	(void)c;
	if (kind == MPI)
		mpi_close();
	else if (kind == TCP)
		tcp_close();
	kind = ALONE;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sum every collective is made of, timed and counted. */
static void sum(const struct comm *c, void *x, size_t n, int dbl)
{
	if (c->size == 1)
		return;
	double t0 = seconds();
	if (kind == MPI)
		mpi_sum(c, x, n, dbl);
	else
		tcp_sum(c, x, n, dbl);
	stats.seconds += seconds() - t0;
	stats.exposed += seconds() - t0;
	stats.bytes += (double)n * (dbl ? sizeof(double) : sizeof(float));
}

void comm_sum_floats(const struct comm *c, float *x, size_t n)
{
	sum(c, x, n, 0);
}

void comm_shard(const struct comm *c, size_t n, size_t *lo, size_t *hi)
{
	*lo = n / (size_t)c->size * (size_t)c->rank + (n % (size_t)c->size < (size_t)c->rank ? n % (size_t)c->size : (size_t)c->rank);
	*hi = *lo + n / (size_t)c->size + ((size_t)c->rank < n % (size_t)c->size);
}

/* A sharded collective over n floats, timed and counted. */
static void sharded(const struct comm *c, float *x, size_t n, int gather)
{
	if (c->size == 1)
		return;
	double t0 = seconds();
	if (kind == MPI)
		(gather ? mpi_all_gather : mpi_reduce_scatter)(c, x, n);
	else
		(gather ? tcp_all_gather : tcp_reduce_scatter)(c, x, n);
	stats.seconds += seconds() - t0;
	stats.exposed += seconds() - t0;
	stats.bytes += (double)n * sizeof *x / 2;   /* half an all-reduce's traffic */
}

/* Overlapped sums since the last comm_wait_sums: when the first started,
 * and the last time all were seen done (0: not yet). */
static double first_start, all_done;

void comm_start_sum(const struct comm *c, float *x, size_t n)
{
	if (c->size == 1)
		return;
	if (kind != MPI) {
		sum(c, x, n, 0);
		return;
	}
	if (!first_start)
		first_start = seconds();
	all_done = 0;
	mpi_start_sum(c, x, n);
	stats.bytes += (double)n * sizeof *x;
}

void comm_progress(const struct comm *c)
{
	if (c->size > 1 && kind == MPI && first_start && !all_done && mpi_progress())
		all_done = seconds();
}

void comm_wait_sums(const struct comm *c)
{
	if (c->size == 1 || kind != MPI || !first_start)
		return;
	double t0 = seconds();
	mpi_wait_sums(c);
	double t1 = seconds();
	stats.exposed += t1 - t0;
	stats.seconds += (all_done ? all_done : t1) - first_start;
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
