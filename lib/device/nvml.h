/* What the NVIDIA driver's NVML says of a GPU's load, read through
 * libnvidia-ml.so.1, loaded at run time: a machine without the driver
 * simply has no readings. */
#ifndef TS_NVML_H
#define TS_NVML_H
#include "backend/backend.h"

struct gpu_usage {
	double util;          /* share of the last sample period a kernel ran, 0..1 */
	double mem_used, mem_total;   /* bytes */
	int processes;        /* compute processes on it */
	double temp_c, power_w;   /* NAN where the driver does not say */
};

/* The readings of the GPU at PCI bus id ("0000:3b:00.0"); 0 where NVML or
 * the GPU cannot be read. */
int nvml_usage(const char *pci_bus_id, struct gpu_usage *u);
/* The same for GPU index as the driver counts them (nvidia-smi's, and
 * CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID). */
int nvml_usage_at(int index, struct gpu_usage *u);
/* How many GPUs the driver sees; -1 without NVML. */
int nvml_count(void);
/* The name of GPU index ("NVIDIA H100 80GB HBM3"); 0 where unknown. */
int nvml_name(int index, char *name, int len);
/* The dense FLOP/s of a GPU of that name at precision p (fp32 on its CUDA
 * cores, the others on its tensor cores), from its maker's data sheet; 0
 * for a GPU not in the table or a precision it lacks. */
double gpu_peak(const char *name, enum precision p);
#endif
