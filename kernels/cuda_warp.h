/* Reductions across a warp's 32 lanes, the value in every lane: butterflies
 * of commutative operations, so every lane ends with the same bits. */
#ifndef TS_CUDA_WARP_H
#define TS_CUDA_WARP_H

#define FULL 0xffffffffu   /* every lane of the warp takes part */

static __device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL, v, o);
	return v;
}

static __device__ __forceinline__ double warp_sum_double(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL, v, o);
	return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
	return v;
}
#endif
