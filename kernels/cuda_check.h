/* Every CUDA runtime and cuBLAS call is checked: a failure dies in one line
 * naming the file, the line, the call and what went wrong, with a hint. */
#ifndef TS_CUDA_CHECK_H
#define TS_CUDA_CHECK_H
#include "cuda_api.h"
#include <cuda_runtime.h>

#define CUDA_CHECK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) \
		cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
	} while (0)

/* Blocks of 256 threads over n items. */
static inline unsigned cuda_blocks(size_t n)
{
	return (unsigned)((n + 255) / 256);
}
#endif
