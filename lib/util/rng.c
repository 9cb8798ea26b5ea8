#include "util/rng.h"
#include <math.h>

uint64_t rng_derive(uint64_t seed, uint64_t stream)
{
	return rng_mix64(rng_mix64(seed) ^ rng_mix64(stream + 0x632be59bd9b4e019ULL));
}

void rng_seed(struct rng *r, uint64_t seed)
{
	r->seed = seed;
	r->counter = 0;
}

uint64_t rng_u64(struct rng *r)
{
	return rng_hash(r->seed, r->counter++);
}

float rng_uniform(struct rng *r)
{
	return (float)(rng_u64(r) >> 40) * 0x1p-24f;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	/* Reject the top partial copy of [0, n) so every value is equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = rng_u64(r);
	while (x >= limit);
	return x % n;
}

float rng_normal_at(uint64_t seed, uint64_t counter)
{
	uint64_t x = rng_hash(seed, counter);
	/* u1 in (0, 1] keeps the log finite. */
	double u1 = ((double)(x >> 32) + 1.0) * 0x1p-32;
	double u2 = (double)(x & 0xffffffffu) * 0x1p-32;
	return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

float rng_normal(struct rng *r)
{
	return rng_normal_at(r->seed, r->counter++);
}
