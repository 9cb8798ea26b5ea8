#include "comm/comm_mpi.h"
#include "util/err.h"
#include <stdlib.h>

static int mpi_launched(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

#ifdef TS_MPI
#include "util/clock.h"
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { HUNG_TAG = 7301 };
static const double ROLL_CALL_S = 5;   /* how long the processes that wait answer each other */

static void nap(double s)
{
	struct timespec ts = { 0, (long)(s * 1e9) };
	nanosleep(&ts, NULL);
}

/* The wait of some process has run out: every process still waiting tells
 * every other one so, and the ones not heard from within ROLL_CALL_S are
 * named as the ones that hang (or died without their launcher noticing). */
static void hung(const struct comm *c)
{
	int n = c->size, token = c->rank;
	MPI_Request *sends = xcalloc((size_t)n, sizeof *sends);
	char *heard = xcalloc((size_t)n, 1);
	heard[c->rank] = 1;
	for (int r = 0; r < n; r++)
		if (r != c->rank)
			MPI_Isend(&token, 1, MPI_INT, r, HUNG_TAG, MPI_COMM_WORLD, &sends[r]);
	double t0 = MPI_Wtime();
	while (MPI_Wtime() - t0 < ROLL_CALL_S) {
		int any, from;
		MPI_Status st;
		MPI_Iprobe(MPI_ANY_SOURCE, HUNG_TAG, MPI_COMM_WORLD, &any, &st);
		if (any) {
			MPI_Recv(&from, 1, MPI_INT, st.MPI_SOURCE, HUNG_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			heard[st.MPI_SOURCE] = 1;
		} else {
			nap(1e-3);
		}
	}
	char list[256] = "";
	int silent = 0;
	for (int r = 0; r < n; r++)
		if (!heard[r] && strlen(list) < sizeof list - 16)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", silent++ ? ", " : "", r);
	if (silent)
		die("process %d: no answer from process%s %s in %g s (--comm-timeout); ending the run", c->rank,
		    silent > 1 ? "es" : "", list, c->timeout_s);
	die("process %d: the processes waited %g s for each other (--comm-timeout); ending the run", c->rank,
	    c->timeout_s);
}

/* Waits for req, at most the timeout. */
static void await(const struct comm *c, MPI_Request *req)
{
	double t0 = MPI_Wtime(), pause = 1e-5;
	int done = 0;
	MPI_Test(req, &done, MPI_STATUS_IGNORE);
	while (!done) {
		if (MPI_Wtime() - t0 > c->timeout_s)
			hung(c);
		nap(pause);
		pause = pause < 1e-3 ? pause * 2 : 1e-3;
		MPI_Test(req, &done, MPI_STATUS_IGNORE);
	}
}

static void mpi_open(struct comm *c, const struct transport *under)
{
	(void)under;
	int got;
	/* OpenMP threads compute, only the main thread calls MPI */
	MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &got);
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	MPI_Comm local;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &c->local_rank);
	MPI_Comm_size(local, &c->local_size);
	MPI_Comm_free(&local);
}

static void mpi_close(void)
{
	MPI_Finalize();
}

static void mpi_sum(const struct comm *c, void *x, size_t n, int dbl)
{
	size_t es = dbl ? sizeof(double) : sizeof(float);
	for (size_t at = 0; at < n; at += INT_MAX) {
		size_t k = n - at < INT_MAX ? n - at : INT_MAX;
		MPI_Request req;
		MPI_Iallreduce(MPI_IN_PLACE, (char *)x + at * es, (int)k, dbl ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
			       MPI_COMM_WORLD, &req);
		await(c, &req);
	}
}

enum { MAX_STARTED = 4096 };
static MPI_Request started[MAX_STARTED];
static int nstarted;

static void mpi_start_sum(const struct comm *c, float *x, size_t n)
{
	(void)c;
	for (size_t at = 0; at < n; at += INT_MAX) {
		if (nstarted == MAX_STARTED)
			die("more than %d sums under way", MAX_STARTED);
		size_t k = n - at < INT_MAX ? n - at : INT_MAX;
		MPI_Iallreduce(MPI_IN_PLACE, x + at, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
			       &started[nstarted++]);
	}
}

static int mpi_progress(void)
{
	int done;
	MPI_Testall(nstarted, started, &done, MPI_STATUSES_IGNORE);
	return done;
}

static void mpi_wait_sums(const struct comm *c, struct sum_times *t)
{
	double t0 = clock_seconds();
	for (int i = 0; i < nstarted; i++)
		await(c, &started[i]);
	nstarted = 0;
	sum_times_on_host(t, t0, 0);
}

/* Each process's shard of n as MPI's int counts and offsets. */
static void shards(const struct comm *c, size_t n, int *counts, int *offsets)
{
	if (n > INT_MAX)
		die("%zu parameters are more than MPI's sharded sums take (%d)", n, INT_MAX);
	for (int r = 0; r < c->size; r++) {
		struct comm one = { .rank = r, .size = c->size };
		size_t lo, hi;
		comm_shard(&one, n, &lo, &hi);
		counts[r] = (int)(hi - lo);
		offsets[r] = (int)lo;
	}
}

static void mpi_reduce_scatter(const struct comm *c, float *x, size_t n)
{
	int *counts = xmalloc(2 * sizeof(int) * (size_t)c->size), *offsets = counts + c->size;
	shards(c, n, counts, offsets);
	float *mine = xmalloc(sizeof *mine * ((size_t)counts[c->rank] + 1));
	MPI_Request req;
	MPI_Ireduce_scatter(x, mine, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
	await(c, &req);
	memcpy(x + offsets[c->rank], mine, sizeof *mine * (size_t)counts[c->rank]);
	free(mine);
	free(counts);
}

static void mpi_all_gather(const struct comm *c, float *x, size_t n)
{
	int *counts = xmalloc(2 * sizeof(int) * (size_t)c->size), *offsets = counts + c->size;
	shards(c, n, counts, offsets);
	MPI_Request req;
	MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, offsets, MPI_FLOAT, MPI_COMM_WORLD, &req);
	await(c, &req);
	free(counts);
}
#else
static void mpi_open(struct comm *c, const struct transport *under)
{
	(void)c, (void)under;
	die("started by mpirun or srun, but this build has no MPI (STATIC=1 leaves it out)");
}

static void mpi_close(void)
{
}

static void mpi_sum(const struct comm *c, void *x, size_t n, int dbl)
{
	(void)c, (void)x, (void)n, (void)dbl;
}

static void mpi_reduce_scatter(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static void mpi_all_gather(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static void mpi_start_sum(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

static int mpi_progress(void)
{
	return 1;
}

static void mpi_wait_sums(const struct comm *c, struct sum_times *t)
{
	(void)c, (void)t;
}
#endif

const struct transport mpi_transport = {
	"mpi allreduce", mpi_launched, mpi_open, mpi_close, mpi_sum, mpi_reduce_scatter, mpi_all_gather,
	mpi_start_sum, mpi_progress, mpi_wait_sums,
};
