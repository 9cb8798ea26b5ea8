#include "device/gpus.h"
#include "comm/host.h"
#include "util/err.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef TS_GPU
#include "cuda_api.h"
#endif

static const struct gpu_usage *load_of;

/* Busier GPUs sort later. */
static int by_load(const void *a, const void *b)
{
	const struct gpu_usage *x = &load_of[*(const int *)a], *y = &load_of[*(const int *)b];
	if ((x->processes > 0) != (y->processes > 0))
		return x->processes > 0 ? 1 : -1;
	if (x->util != y->util)
		return x->util > y->util ? 1 : -1;
	if (x->mem_used != y->mem_used)
		return x->mem_used > y->mem_used ? 1 : -1;
	return *(const int *)a - *(const int *)b;
}

void gpus_by_load(const struct gpu_usage *u, int n, int *order)
{
	for (int i = 0; i < n; i++)
		order[i] = i;
	load_of = u;
	qsort(order, (size_t)n, sizeof *order, by_load);
}

void gpus_enough(int share, int have, const char *host, const char *list)
{
	if (share <= have)
		return;
	if (list)
		die("cannot give the %d processes on %s a GPU each: --gpus %s names %d (name %d, or give --device cpu)",
		    share, host, list, have, share);
	die("cannot give the %d processes on %s a GPU each: %d GPU%s here (--device cpu trains them on the cores)",
	    share, host, have, have == 1 ? "" : "s");
}

#ifdef TS_GPU
/* This machine's candidate GPUs in the order its processes take them. */
static int candidates(const char *list, int count, int *ids)
{
	if (list) {
		int n = gpus_parse(list, ids);
		for (int i = 0; i < n; i++)
			if (ids[i] >= count)
				die("--gpus %s: CUDA sees %d GPU%s here, 0 to %d", list, count, count == 1 ? "" : "s",
				    count - 1);
		return n;
	}
	int n = count < MAX_GPUS ? count : MAX_GPUS, order[MAX_GPUS], known = 1;
	struct gpu_usage u[MAX_GPUS];
	for (int i = 0; i < n; i++) {
		char bus[32];
		cuda_pci_bus_id(i, bus, sizeof bus);
		known &= nvml_usage(bus, &u[i]);
	}
	if (known)
		gpus_by_load(u, n, order);
	for (int i = 0; i < n; i++)
		ids[i] = known ? order[i] : i;
	return n;
}

const char *gpus_pick(const struct comm *c, void (*sum)(const struct comm *c, double *x, int n),
		      const char *device, const char *list)
{
	static char name[24];
	int ids[MAX_GPUS], count = cuda_device_count();
	if (list) {
		gpus_parse(list, ids);
		if (count == 0)
			die("--gpus %s: CUDA sees no GPU here (nvidia-smi shows what the driver sees)", list);
	}
	if (strncmp(device, "cuda", 4) || count == 0) {   /* cpu, a bad name, no GPU: backend_open says */
		if (list)
			die_usage("--gpus chooses GPUs for --device cuda, not --device %s", device);
		return device;
	}
	if (strcmp(device, "cuda") && list)
		die_usage("--gpus chooses GPUs for --device cuda; --device %s names one", device);
	enum { ROW = 1 + MAX_GPUS };
	char host[256];
	double *table = xcalloc((size_t)c->size * ROW, sizeof *table), *row = table + (size_t)c->rank * ROW;
	row[0] = host_key(host, sizeof host);
	int n = !strcmp(device, "cuda") ? candidates(list, count, ids) : 0;
	for (int i = 0; i < n; i++)
		row[1 + i] = ids[i] + 1;
	if (c->size > 1)
		sum(c, table, c->size * ROW);
	double *hosts = xcalloc((size_t)c->size, sizeof *hosts);
	for (int r = 0; r < c->size; r++)
		hosts[r] = table[(size_t)r * ROW];
	int slot, first, share = host_share(hosts, c->size, c->rank, &slot, &first);
	free(hosts);
	if (n == 0) {    /* cuda:N */
		free(table);
		if (share > 1)
			die_usage("--device %s would give the %d processes on %s one GPU; --device cuda gives each its own",
				  device, share, host);
		return device;
	}
	const double *lead = table + (size_t)first * ROW;
	int have = 0;
	while (have < MAX_GPUS && lead[1 + have])
		have++;
	gpus_enough(share, have, host, list);
	int gpu = (int)lead[1 + slot] - 1;
	free(table);
	char bus[32];
	struct gpu_usage u;
	cuda_pci_bus_id(gpu, bus, sizeof bus);
	if (nvml_usage(bus, &u) && u.processes)
		warnx("cuda:%d already runs %d other process%s", gpu, u.processes, u.processes == 1 ? "" : "es");
	snprintf(name, sizeof name, "cuda:%d", gpu);
	return name;
}
#else
const char *gpus_pick(const struct comm *c, void (*sum)(const struct comm *c, double *x, int n),
		      const char *device, const char *list)
{
	(void)c, (void)sum;
	int ids[MAX_GPUS];
	if (list) {
		gpus_parse(list, ids);
		die("--gpus %s: this build has no CUDA backend (make GPU=1 builds one)", list);
	}
	return device;
}
#endif
