/* The NCCL collectives (kernels/cuda_comm.cu) in a world of one process,
 * the most one GPU holds: each must leave the data as it is, the overlapped
 * sums too, with their times measured; and a world whose other process
 * never comes is given up at the timeout. Needs libnccl.so.2 on the
 * loader's path. */
#include "check.h"
#include "device/device.h"
#include "util/err.h"
#ifdef TS_GPU
#include "backend/backend.h"
#include "cuda_api.h"
#include "groups.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 1 << 20 };

/* Whether the GPU buffer d holds what want does. */
static int holds(const struct backend *gpu, const float *d, const float *want, size_t n)
{
	float *got = xmalloc(n * sizeof *got);
	gpu->download(got, d, n * sizeof *got);
	int same = !memcmp(got, want, n * sizeof *got);
	free(got);
	return same;
}

static void test_world_of_one(void)
{
	const struct backend *gpu = backend_open("cuda", PREC_FP32);
	unsigned char id[CUDA_COMM_ID_BYTES];
	cuda_comm_id(id);
	CHECK(cuda_comm_join(id, 0, 1, 60), "one process joins an NCCL world");
	float *x = xmalloc(N * sizeof *x);
	for (size_t i = 0; i < N; i++)
		x[i] = (float)i * 0.25f - 7;
	float *d = gpu->alloc(N * sizeof *d), *busy = gpu->alloc(N * sizeof *busy);
	gpu->upload(d, x, N * sizeof *d);
	CHECK(cuda_comm_sum(d, N) && holds(gpu, d, x, N), "an all-reduce of one process keeps the data");
	size_t start[2] = {0, N};
	CHECK(cuda_comm_sharded(d, start, 1, 0) && holds(gpu, d, x, N), "a reduce-scatter keeps it");
	CHECK(cuda_comm_sharded(d, start, 1, 1) && holds(gpu, d, x, N), "an all-gather keeps it");
	/* three buckets, each started after work queued on the compute stream */
	double span = -1, exposed = -1;
	int started = 1;
	for (int b = 0; b < 3; b++) {
		gpu->scale(busy, N, 0.5f);
		started &= cuda_comm_start_sum(d + b * (N / 4), N / 4);
	}
	gpu->scale(busy, N, 0.5f);
	CHECK(started && cuda_comm_wait_sums(&span, &exposed) && holds(gpu, d, x, N),
	      "overlapped sums keep the data and finish");
	CHECK(span >= 0 && exposed >= 0 && span < 60 && exposed < 60, "their times: %.3g ms on the GPU, %.3g ms waited",
	      span * 1e3, exposed * 1e3);
	cuda_comm_close();
	gpu->release(d), gpu->release(busy);
	free(x);
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every wait is bounded: a world of two that the other process never joins
 * is given up at the timeout, not waited for. */
static void test_nobody_joins(void)
{
	unsigned char id[CUDA_COMM_ID_BYTES];
	cuda_comm_id(id);
	double t0 = seconds();
	int joined = cuda_comm_join(id, 0, 2, 3);
	double took = seconds() - t0;
	CHECK(!joined && took < 30,
	      "a world of two that no other process joins: given up after %.1f s (timeout 3 s)", took);
}

static const struct group groups[] = {
	{ "world_of_one", test_world_of_one }, { "nobody_joins", test_nobody_joins },
};

static int any_gpu(void)
{
	if (cuda_device_count() > 0)
		return 1;
	SKIP("NCCL collectives: no GPU here");
	return 0;
}
#endif

int main(int argc, char **argv)
{
	ts_prog = "test_cuda_comm";
#ifndef TS_GPU
	(void)argc, (void)argv;
	SKIP("NCCL collectives: this build has no CUDA backend (GPU=1)");
	CHECK_DONE();
#else
	return run_groups(argc, argv, groups, sizeof groups / sizeof *groups, any_gpu);
#endif
}
