#include "device/nvml.h"
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* The few NVML types used here, as nvml.h lays them out. */
typedef void *nvml_device;
struct nvml_utilization {
	unsigned gpu, memory;
};
struct nvml_memory {
	unsigned long long total, free, used;
};
enum { NVML_SUCCESS = 0, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

static struct {
	int (*init)(void);
	int (*by_pci)(const char *, nvml_device *);
	int (*by_index)(unsigned, nvml_device *);
	int (*count)(unsigned *);
	int (*utilization)(nvml_device, struct nvml_utilization *);
	int (*memory)(nvml_device, struct nvml_memory *);
	int (*processes)(nvml_device, unsigned *, void *);
	int (*temperature)(nvml_device, int, unsigned *);   /* optional */
	int (*power)(nvml_device, unsigned *);              /* optional, milliwatts */
	int (*name)(nvml_device, char *, unsigned);         /* optional */
} nvml;

/* 1 once NVML is loaded and started, 0 where it cannot be. */
static int ready(void)
{
	static int state = -1;
	if (state >= 0)
		return state;
	state = 0;
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!lib)
		return 0;
	nvml.init = (int (*)(void))dlsym(lib, "nvmlInit_v2");
	nvml.by_pci = (int (*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
	nvml.by_index = (int (*)(unsigned, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	nvml.count = (int (*)(unsigned *))dlsym(lib, "nvmlDeviceGetCount_v2");
	nvml.utilization = (int (*)(nvml_device, struct nvml_utilization *))dlsym(lib, "nvmlDeviceGetUtilizationRates");
	nvml.memory = (int (*)(nvml_device, struct nvml_memory *))dlsym(lib, "nvmlDeviceGetMemoryInfo");
	nvml.processes = (int (*)(nvml_device, unsigned *, void *))dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	nvml.temperature = (int (*)(nvml_device, int, unsigned *))dlsym(lib, "nvmlDeviceGetTemperature");
	nvml.power = (int (*)(nvml_device, unsigned *))dlsym(lib, "nvmlDeviceGetPowerUsage");
	nvml.name = (int (*)(nvml_device, char *, unsigned))dlsym(lib, "nvmlDeviceGetName");
	if (!nvml.init || !nvml.by_pci || !nvml.by_index || !nvml.count || !nvml.utilization || !nvml.memory || !nvml.processes ||
	    nvml.init() != NVML_SUCCESS)
		return 0;
	return state = 1;
}

/* The readings of device d. */
static int usage_of(nvml_device d, struct gpu_usage *u)
{
	struct nvml_utilization ut;
	struct nvml_memory mem;
	unsigned count = 0;
	if (nvml.utilization(d, &ut) != NVML_SUCCESS || nvml.memory(d, &mem) != NVML_SUCCESS)
		return 0;
	/* with no room for them, NVML says only how many there are */
	int rc = nvml.processes(d, &count, NULL);
	if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
		return 0;
	unsigned temp, mw;
	*u = (struct gpu_usage){ ut.gpu / 100.0, (double)mem.used, (double)mem.total, (int)count, NAN, NAN };
	if (nvml.temperature && nvml.temperature(d, 0, &temp) == NVML_SUCCESS)   /* 0: the GPU's own sensor */
		u->temp_c = temp;
	if (nvml.power && nvml.power(d, &mw) == NVML_SUCCESS)
		u->power_w = mw / 1000.0;
	return 1;
}

int nvml_usage(const char *pci_bus_id, struct gpu_usage *u)
{
	nvml_device d;
	return ready() && nvml.by_pci(pci_bus_id, &d) == NVML_SUCCESS && usage_of(d, u);
}

int nvml_usage_at(int index, struct gpu_usage *u)
{
	nvml_device d;
	return ready() && index >= 0 && nvml.by_index((unsigned)index, &d) == NVML_SUCCESS && usage_of(d, u);
}

int nvml_count(void)
{
	unsigned n = 0;
	return ready() && nvml.count(&n) == NVML_SUCCESS ? (int)n : -1;
}

int nvml_name(int index, char *name, int len)
{
	nvml_device d;
	return ready() && nvml.name && index >= 0 && nvml.by_index((unsigned)index, &d) == NVML_SUCCESS &&
	       nvml.name(d, name, (unsigned)len) == NVML_SUCCESS;
}

double gpu_peak(const char *name, enum precision p)
{
	/* dense FLOP/s by precision: fp32 (CUDA cores), tf32, bf16, fp16 (tensor
	 * cores, half the data sheets' sparse figures); 0 where it has none */
	static const struct { const char *model; double flops[4]; } sheet[] = {
		{"H200", {67e12, 494.7e12, 989.4e12, 989.4e12}},
		{"H100 PCIe", {51e12, 378e12, 756e12, 756e12}},
		{"H100", {67e12, 494.7e12, 989.4e12, 989.4e12}},
		{"A100", {19.5e12, 156e12, 312e12, 312e12}},
		{"L40S", {91.6e12, 183e12, 362e12, 362e12}},
		{"A10", {31.2e12, 62.5e12, 125e12, 125e12}},
		{"V100", {15.7e12, 0, 0, 125e12}},
		{"T4", {8.1e12, 0, 0, 65e12}},
	};
	for (size_t i = 0; i < sizeof sheet / sizeof *sheet; i++)
		if (strstr(name, sheet[i].model))
			return sheet[i].flops[p];
	return 0;
}
