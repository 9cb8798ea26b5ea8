/* The dropout mask, the same bits on the CPU and in the CUDA kernels: a
 * function of (seed, element index) alone. */
#ifndef TS_DROPOUT_H
#define TS_DROPOUT_H
#include "util/rng.h"
#include <stdint.h>

/* Dropout masks hash a 32-bit element counter with a key from the seed
 * (Wellons's triple32 mixer): 32-bit multiplies vectorise 8 wide where the
 * 64-bit ones of rng_hash do not. Masks would repeat after 2^32 elements of
 * one tensor, 16 GiB of floats. */
static inline TS_HOST_DEVICE uint32_t dropout_key(uint64_t seed)
{
	return (uint32_t)(rng_mix64(seed) >> 32);
}

static inline TS_HOST_DEVICE uint32_t dropout_hash(uint32_t key, uint32_t i)
{
	uint32_t x = i * 0x9e3779b9u + key;
	x ^= x >> 17;
	x *= 0xed5ad4bbu;
	x ^= x >> 11;
	x *= 0xac4c1b51u;
	x ^= x >> 15;
	x *= 0x31848babu;
	return x ^ (x >> 14);
}

/* Element i is kept when its hash reaches p * 2^32. */
static inline TS_HOST_DEVICE uint32_t dropout_threshold(float p)
{
	return (uint32_t)((double)p * 4294967296.0);
}
#endif
