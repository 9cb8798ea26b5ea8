/* The element types of the CUDA backend's acts, as the kernels read and
 * write them: floats (fp32, tf32), bf16 or fp16. Kernels templated on an act
 * type compute in float and round once when they store, to nearest even (a
 * float past fp16's range becomes infinite, which fp16's loss scaling
 * catches in the gradient). */
#ifndef TS_CUDA_TYPES_H
#define TS_CUDA_TYPES_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef __nv_bfloat16 bf16;
typedef __half f16;

static __device__ __forceinline__ float as_float(float x)
{
	return x;
}

static __device__ __forceinline__ float as_float(bf16 x)
{
	return __bfloat162float(x);
}

static __device__ __forceinline__ float as_float(f16 x)
{
	return __half2float(x);
}

/* x as the type of *p, into *p */
static __device__ __forceinline__ void store(float *p, float x)
{
	*p = x;
}

static __device__ __forceinline__ void store(bf16 *p, float x)
{
	*p = __float2bfloat16_rn(x);
}

static __device__ __forceinline__ void store(f16 *p, float x)
{
	*p = __float2half_rn(x);
}

/* x as it reads back once stored as an A */
template <typename A> static __device__ __forceinline__ float rounded(float x)
{
	A a;
	store(&a, x);
	return as_float(a);
}
#endif
