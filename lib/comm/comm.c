#include "comm/comm.h"
#include "comm/comm_mpi.h"
#include "comm/comm_nccl.h"
#include "comm/comm_tcp.h"
#include "comm/host.h"
#include "util/clock.h"
#include "util/err.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct transport *via;      /* the launcher's; NULL: a world of one */
/* the sums of the model's floats, sharded or overlapped: via, or NCCL's
 * on GPUs */
static const struct transport *floats;
static struct comm_stats stats;   /* since comm_take_stats */

void comm_take_stats(struct comm_stats *out)
{
	*out = stats;
	memset(&stats, 0, sizeof stats);
}

const char *comm_algorithm(void)
{
	return floats ? floats->algorithm : "none";
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
	floats = via;
	if (via)
		via->open(c, NULL);
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
	if (floats != via)
		floats->close();
	if (via)
		via->close();
	via = floats = NULL;
}

void comm_use_gpu(const struct comm *c)
{
	if (c->size == 1)
		return;
	struct comm joined = *c;   /* NCCL's open changes nothing of it */
	nccl_transport.open(&joined, via);
	floats = &nccl_transport;
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

/* A sharded collective over n floats, timed and counted. */
static void sharded(const struct comm *c, float *x, size_t n, int gather)
{
	if (c->size == 1)
		return;
	double t0 = clock_seconds();
	(gather ? floats->all_gather : floats->reduce_scatter)(c, x, n);
	stats.seconds += clock_seconds() - t0;
	stats.exposed += clock_seconds() - t0;
	stats.bytes += (double)n * sizeof *x / 2;   /* half an all-reduce's traffic */
}

/* The overlapped sums since the last comm_wait_sums (started 0: none). */
static struct sum_times overlap;

void comm_start_sum(const struct comm *c, float *x, size_t n)
{
	if (c->size == 1)
		return;
	stats.bytes += (double)n * sizeof *x;
	if (!overlap.started)
		overlap.started = clock_seconds();
	overlap.seen_done = 0;
	floats->start_sum(c, x, n);
}

void comm_progress(const struct comm *c)
{
	if (c->size > 1 && overlap.started && !overlap.seen_done && floats->progress())
		overlap.seen_done = clock_seconds();
}

void comm_wait_sums(const struct comm *c)
{
	if (c->size == 1 || !overlap.started)
		return;
	floats->wait_sums(c, &overlap);
	stats.seconds += overlap.span;
	stats.exposed += overlap.exposed;
	overlap = (struct sum_times){ 0 };
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
