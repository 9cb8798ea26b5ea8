/* The choice of GPUs: --gpus lists, the order by load, and which processes
 * share a machine. */
#include "check.h"
#include "device/gpus.h"
#include "comm/host.h"
#include "expect_die.h"
#include "util/err.h"

static void parse(const void *list)
{
	int ids[MAX_GPUS];
	gpus_parse(list, ids);
}

static void expect_refused(const char *list, const char *pattern)
{
	char what[64];
	snprintf(what, sizeof what, "--gpus '%s' is refused", list);
	expect_usage(what, parse, list, pattern);
}

static void test_parse(void)
{
	int ids[MAX_GPUS];
	int n = gpus_parse("0,2,5-7", ids);
	CHECK(n == 5 && ids[0] == 0 && ids[1] == 2 && ids[2] == 5 && ids[3] == 6 && ids[4] == 7,
	      "0,2,5-7 is 0 2 5 6 7 (%d GPUs)", n);
	n = gpus_parse("3,1", ids);
	CHECK(n == 2 && ids[0] == 3 && ids[1] == 1, "3,1 keeps its order");
	n = gpus_parse("0-63", ids);
	CHECK(n == 64 && ids[63] == 63, "0-63 is all 64");
	expect_refused("", "GPU numbers from 0 to 63");
	expect_refused("1,", "GPU numbers");
	expect_refused("a", "GPU numbers");
	expect_refused("-1", "GPU numbers");
	expect_refused("64", "GPU numbers");
	expect_refused("1;2", "GPU numbers");
	expect_refused("3-1", "runs backwards");
	expect_refused("1,0-2", "GPU 1 is named twice");
	expect_refused("99999999999999999999", "GPU numbers");
}

static void test_by_load(void)
{
	struct gpu_usage u[5] = {
		{0.9, 1e9, 8e10, 1},   /* busy */
		{0.0, 5e8, 8e10, 0},   /* free, some memory held */
		{0.5, 0, 8e10, 0},     /* free but computing: another user's kernels */
		{0.0, 5e8, 8e10, 0},   /* as 1: the lower number first */
		{0.0, 0, 8e10, 2},     /* idle, but two processes hold it */
	};
	int order[5];
	gpus_by_load(u, 5, order);
	CHECK(order[0] == 1 && order[1] == 3 && order[2] == 2 && order[3] == 4 && order[4] == 0,
	      "free and idle first, then by utilisation, memory and number: %d %d %d %d %d", order[0],
	      order[1], order[2], order[3], order[4]);
}

static void test_host_share(void)
{
	/* a hostfile of 3 slots on host A and 1 on host B, mapped round robin */
	double hosts[4] = {11, 22, 11, 11};
	int slot, first;
	int n = host_share(hosts, 4, 2, &slot, &first);
	CHECK(n == 3 && slot == 1 && first == 0, "process 2 is the second of 3 on its machine (%d, slot %d)", n, slot);
	n = host_share(hosts, 4, 1, &slot, &first);
	CHECK(n == 1 && slot == 0 && first == 1, "process 1 is alone on its machine");
	n = host_share(hosts, 4, 3, &slot, &first);
	CHECK(n == 3 && slot == 2 && first == 0, "process 3 is the third on its machine");
}

/* share processes on a machine of have GPUs, from --gpus list (NULL: the machine's) */
struct machine {
	int share, have;
	const char *list;
};

static void enough(const void *m)
{
	const struct machine *x = m;
	gpus_enough(x->share, x->have, "node1", x->list);
}

static void test_enough(void)
{
	char err[256];
	struct machine fit = {2, 2, NULL};
	CHECK(run_child(enough, &fit, err, sizeof err) == 0 && !*err, "2 processes on 2 GPUs go on: %s", err);
	/* each process of the machine asks with the same numbers: all stop, none waits for the others */
	expect_die("3 processes on 1 GPU: the line names --device cpu", enough, &(struct machine){3, 1, NULL},
		   "cannot give the 3 processes on node1 a GPU each: 1 GPU here (--device cpu trains them on the cores)");
	expect_die("2 processes on --gpus 3: the line names both ways out", enough, &(struct machine){2, 1, "3"},
		   "cannot give the 2 processes on node1 a GPU each: --gpus 3 names 1 (name 2, or give --device cpu)");
}

static void test_peaks(void)
{
	CHECK(gpu_peak("NVIDIA H100 80GB HBM3", PREC_FP32) == 67e12, "H100 SXM: 67 TFLOP/s fp32");
	CHECK(gpu_peak("NVIDIA H100 PCIe", PREC_FP32) == 51e12, "H100 PCIe: 51, not the SXM's");
	CHECK(gpu_peak("NVIDIA H200", PREC_FP32) == 67e12, "H200: 67");
	CHECK(gpu_peak("NVIDIA A100-SXM4-80GB", PREC_FP32) == 19.5e12, "A100: 19.5");
	CHECK(gpu_peak("NVIDIA H100 80GB HBM3", PREC_BF16) == 989.4e12, "H100 SXM: 989.4 dense bf16");
	CHECK(gpu_peak("NVIDIA H200", PREC_TF32) == 494.7e12, "H200: 494.7 dense tf32");
	CHECK(gpu_peak("NVIDIA A100-SXM4-80GB", PREC_BF16) == 312e12, "A100: 312 dense bf16");
	CHECK(gpu_peak("Tesla T4", PREC_FP16) == 65e12 && gpu_peak("Tesla T4", PREC_BF16) == 0,
	      "T4: 65 dense fp16, no bf16");
	CHECK(gpu_peak("Some Other GPU", PREC_FP32) == 0, "a GPU not in the table: 0, no MFU");
}

int main(void)
{
	ts_prog = "test_gpus";
	test_peaks();
	test_parse();
	test_by_load();
	test_host_share();
	test_enough();
	CHECK_DONE();
}
