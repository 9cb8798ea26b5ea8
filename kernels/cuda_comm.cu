/* The GPU collectives of a run of several processes: NCCL, loaded from
 * libnccl.so.2 when a run first needs it, so that a build needs NCCL only
 * where it trains on several GPUs. A sum that overlaps the backward pass runs
 * on a stream of its own, after the compute stream reaches the point where
 * its bucket is complete; the compute stream waits for all of them at the
 * end. Every wait is bounded: a collective that does not finish within the
 * timeout is aborted, and the caller names the process at fault. */
#include "cuda_api.h"
#include "cuda_check.h"
#include "util/clock.h"
#include "util/err.h"
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The NCCL functions used here, found in the library at run time. */
static struct {
	ncclResult_t (*get_unique_id)(ncclUniqueId *);
	ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
				   cudaStream_t);
	ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
			       cudaStream_t);
	ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*group_start)(void);
	ncclResult_t (*group_end)(void);
	ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
	ncclResult_t (*abort)(ncclComm_t);
	ncclResult_t (*finalize)(ncclComm_t);
	ncclResult_t (*destroy)(ncclComm_t);
	const char *(*error_string)(ncclResult_t);
} nccl;

static ncclComm_t comm;
static double timeout_s;
static cudaStream_t side;                 /* the overlapped sums' stream */
static cudaEvent_t started, finished;     /* on side: the first overlapped sum's start, the last's end */
static int overlapping;                   /* sums started since the last wait */

static void load(void)
{
	if (nccl.all_reduce)
		return;
	void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		die("a run of several processes on GPUs needs NCCL: %s (LD_LIBRARY_PATH may name its dir)", dlerror());
	struct {
		const char *name;
		void **fn;
	} want[] = {
		{"ncclGetUniqueId", (void **)&nccl.get_unique_id}, {"ncclCommInitRankConfig", (void **)&nccl.init_rank},
		{"ncclAllReduce", (void **)&nccl.all_reduce}, {"ncclReduce", (void **)&nccl.reduce},
		{"ncclBroadcast", (void **)&nccl.broadcast}, {"ncclGroupStart", (void **)&nccl.group_start},
		{"ncclGroupEnd", (void **)&nccl.group_end}, {"ncclCommGetAsyncError", (void **)&nccl.async_error},
		{"ncclCommAbort", (void **)&nccl.abort}, {"ncclCommFinalize", (void **)&nccl.finalize},
		{"ncclCommDestroy", (void **)&nccl.destroy},
		{"ncclGetErrorString", (void **)&nccl.error_string},
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		if (!(*want[i].fn = dlsym(lib, want[i].name)))
			die("libnccl.so.2 lacks %s: NCCL 2.14 or later is needed", want[i].name);
}

static void pause_briefly(void)
{
	struct timespec pause = {0, 50000};
	nanosleep(&pause, NULL);
}

/* Gives up on the collectives: they never finish now. */
static int give_up(void)
{
	nccl.abort(comm);
	comm = NULL;
	return 0;
}

/* An NCCL call of the non-blocking communicator: its result r, then its
 * state until the call has taken effect, at most timeout_s. Dies on a wrong
 * use; 0 when the time ran out or a process failed. */
static int settle(ncclResult_t r, const char *what)
{
	double until = clock_seconds() + timeout_s;
	while (r == ncclInProgress) {
		if (clock_seconds() > until)
			return give_up();
		pause_briefly();
		nccl.async_error(comm, &r);
	}
	if (r == ncclSuccess)
		return 1;
	if (r == ncclRemoteError || r == ncclSystemError) {
		warnx("NCCL %s: %s", what, nccl.error_string(r));
		return give_up();
	}
	die("NCCL %s: %s (NCCL_DEBUG=WARN says more)", what, nccl.error_string(r));
}

void cuda_comm_id(unsigned char id[CUDA_COMM_ID_BYTES])
{
	load();
	ncclUniqueId u;
	ncclResult_t r = nccl.get_unique_id(&u);
	if (r != ncclSuccess)
		die("NCCL ncclGetUniqueId: %s (NCCL_DEBUG=WARN says more)", nccl.error_string(r));
	memcpy(id, u.internal, CUDA_COMM_ID_BYTES);
}

/* Waits for stream s, at most timeout_s; 0 when the time ran out or NCCL
 * failed. */
static int wait_for(cudaStream_t s)
{
	double until = clock_seconds() + timeout_s;
	for (;;) {
		cudaError_t e = cudaStreamQuery(s);
		if (e == cudaSuccess)
			return 1;
		if (e != cudaErrorNotReady)
			CUDA_CHECK(e);
		ncclResult_t async = ncclSuccess;
		nccl.async_error(comm, &async);
		if ((async != ncclSuccess && async != ncclInProgress) || clock_seconds() > until)
			return give_up();
		pause_briefly();
	}
}

int cuda_comm_join(const unsigned char id[CUDA_COMM_ID_BYTES], int rank, int size, double timeout)
{
	load();
	ncclUniqueId u;
	memcpy(u.internal, id, CUDA_COMM_ID_BYTES);
	timeout_s = timeout;
	/* non-blocking, so that a process that never joins ends the wait */
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	config.blocking = 0;
	if (!settle(nccl.init_rank(&comm, size, u, rank, &config), "ncclCommInitRankConfig"))
		return 0;
	CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	CUDA_CHECK(cudaEventCreate(&started));
	CUDA_CHECK(cudaEventCreate(&finished));
	/* the first collective sets the connections up: within the timeout too */
	float *one;
	CUDA_CHECK(cudaMallocAsync((void **)&one, sizeof *one, cuda_stream()));
	int ok = cuda_comm_sum(one, 1);
	CUDA_CHECK(cudaFreeAsync(one, cuda_stream()));
	return ok;
}

void cuda_comm_close(void)
{
	/* a non-blocking communicator finishes its work before it is freed */
	if (comm && settle(nccl.finalize(comm), "ncclCommFinalize"))
		nccl.destroy(comm);
	comm = NULL;
}

int cuda_comm_sum(float *x, size_t n)
{
	return settle(nccl.all_reduce(x, x, n, ncclFloat, ncclSum, comm, cuda_stream()), "ncclAllReduce") &&
	       wait_for(cuda_stream());
}

int cuda_comm_sharded(float *x, const size_t *start, int size, int gather)
{
	if (!settle(nccl.group_start(), "ncclGroupStart"))
		return 0;
	for (int r = 0; r < size; r++) {
		float *shard = x + start[r];
		size_t count = start[r + 1] - start[r];
		ncclResult_t e = gather ? nccl.broadcast(shard, shard, count, ncclFloat, r, comm, cuda_stream())
					: nccl.reduce(shard, shard, count, ncclFloat, ncclSum, r, comm, cuda_stream());
		if (e != ncclSuccess && e != ncclInProgress)
			return settle(e, gather ? "ncclBroadcast" : "ncclReduce");
	}
	return settle(nccl.group_end(), "ncclGroupEnd") && wait_for(cuda_stream());
}

int cuda_comm_start_sum(float *x, size_t n)
{
	cudaEvent_t ready;   /* the compute stream up to here: the bucket is complete */
	CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventRecord(ready, cuda_stream()));
	CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
	CUDA_CHECK(cudaEventDestroy(ready));
	if (!overlapping)
		CUDA_CHECK(cudaEventRecord(started, side));
	overlapping = 1;
	return settle(nccl.all_reduce(x, x, n, ncclFloat, ncclSum, comm, side), "ncclAllReduce");
}

int cuda_comm_wait_sums(double *span_s, double *exposed_s)
{
	*span_s = *exposed_s = 0;
	if (!overlapping)
		return 1;
	overlapping = 0;
	CUDA_CHECK(cudaEventRecord(finished, side));
	/* the computation still queued is not the sums' time; what is left of
	 * the sums once it is done is */
	CUDA_CHECK(cudaStreamSynchronize(cuda_stream()));
	double t0 = clock_seconds();
	if (!wait_for(side))
		return 0;
	*exposed_s = clock_seconds() - t0;
	float ms = 0;
	CUDA_CHECK(cudaEventElapsedTime(&ms, started, finished));
	*span_s = ms / 1e3;
	return 1;
}
