/* Choosing a backend by name ("cpu", "cuda" (cuda:0) or "cuda:N"). */
#include "device/device.h"
#include "util/err.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef TS_GPU
#include "cuda_api.h"
#endif

enum { MAX_GPU_INDEX = 1023 };

/* N of "cuda:N", or -1 when name is not a CUDA device. */
static int cuda_index(const char *name)
{
	if (!strcmp(name, "cuda"))
		return 0;
	if (strncmp(name, "cuda:", 5) || !isdigit((unsigned char)name[5]))
		return -1;
	char *end;
	errno = 0;
	long n = strtol(name + 5, &end, 10);
	if (*end || errno || n > MAX_GPU_INDEX)
		return -1;
	return (int)n;
}

static const struct backend *cpu_open(enum precision p)
{
	if (p == PREC_FP32)
		return backend_cpu();
	const char *why;
	const struct backend *be = backend_cpu_bf16(&why);
	if (!be)
		die("--precision bf16 on the CPU: %s; --precision fp32 runs here", why);
	return be;
}

/* The GPU of --device name (not "cpu"), checked against those CUDA sees. */
static int gpu_of(const char *name)
{
	int gpu = cuda_index(name);
	if (gpu < 0)
		die_usage("--device %s: not cpu, cuda or cuda:N (N from 0 to %d)", name,
			  MAX_GPU_INDEX);
#ifdef TS_GPU
	int n = cuda_device_count();
	if (n == 0)
		die("--device %s: CUDA sees no GPU here (nvidia-smi shows what the driver sees)",
		    name);
	if (gpu >= n)
		die("--device %s: CUDA sees %d GPU%s here, cuda:0 to cuda:%d", name, n,
		    n == 1 ? "" : "s", n - 1);
	return gpu;
#else
	die("--device %s: this build has no CUDA backend (make GPU=1 builds one)", name);
#endif
}

int device_sm(const char *name)
{
	if (!strcmp(name, "cpu"))
		return 0;
	int gpu = gpu_of(name);
#ifdef TS_GPU
	return cuda_device_sm(gpu);
#else
	return gpu;   /* not reached: gpu_of dies in a build without CUDA */
#endif
}

const struct backend *backend_open(const char *name, enum precision p)
{
	int sm = device_sm(name);
	const char *why = precision_lacking(p, sm);
	if (why)
		die("--precision %s on --device %s: %s", precision_name(p), name, why);
	if (!sm)
		return cpu_open(p);
#ifdef TS_GPU
	return cuda_backend_open(gpu_of(name), p);
#else
	return NULL;   /* not reached: device_sm dies in a build without CUDA */
#endif
}

const char *backend_default(void)
{
#ifdef TS_GPU
	if (cuda_device_count() > 0)
		return "cuda";
#endif
	return "cpu";
}
