/* A small counter-based random number generator (splitmix64 mixing).
 * Draw n of a seed is rng_hash(seed, n): any thread can compute any draw on
 * its own, so parallel code (init, dropout masks, MLM masking) gives the same
 * numbers whatever the thread count. The stateful form just walks n. */
#ifndef TS_RNG_H
#define TS_RNG_H
#include <stdint.h>

/* What the CUDA kernels share with the CPU is compiled for both. */
#ifdef __CUDACC__
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif

struct rng {
	uint64_t seed, counter;    /* the next draw is rng_hash(seed, counter) */
};

/* The splitmix64 output function: a bijection with full avalanche. */
static inline TS_HOST_DEVICE uint64_t rng_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Draw number counter of the stream of seed (splitmix64 at that position). */
static inline uint64_t rng_hash(uint64_t seed, uint64_t counter)
{
	return rng_mix64(seed + (counter + 1) * 0x9e3779b97f4a7c15ULL);
}

/* A seed for an independent sub-stream, e.g. one per layer or tensor. */
uint64_t rng_derive(uint64_t seed, uint64_t stream);

void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_u64(struct rng *r);
/* Uniform in [0, 1) with 24 random bits. */
float rng_uniform(struct rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(struct rng *r, uint64_t n);
/* Standard normal, one draw per call (Box-Muller on its two 32-bit halves). */
float rng_normal(struct rng *r);
/* The same from a stateless draw, for parallel loops. */
float rng_normal_at(uint64_t seed, uint64_t counter);
#endif
