/* Plans made once and looked up by key: a hash table of fixed-size keys,
 * compared byte for byte (a key's padding must be zeroed), each with a
 * value of fixed size the caller fills when the plan is new. The CUDA
 * backend keeps its cuBLASLt GEMM plans and cuDNN attention plans here;
 * size_class is how it keys sizes that change from batch to batch. */
#ifndef TS_PLANS_H
#define TS_PLANS_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

struct plans {
	size_t key_size, value_size, cap, n;
	unsigned char *slots;      /* cap slots: key, value, used (plans.c) */
};

/* A table of up to cap / 2 plans (cap a power of two). */
void plans_init(struct plans *p, size_t key_size, size_t value_size, size_t cap);
void plans_free(struct plans *p);
/* The value of key, aligned for any type: found, or a new zeroed one
 * (*made set); dies in one line naming what when the table is full. */
void *plans_get(struct plans *p, const void *key, int *made, const char *what);

/* A size's class: itself up to 64, then rounded up to an eighth of its
 * octave (at most 1/8 more). */
int size_class(int x);
#ifdef __cplusplus
}
#endif
#endif
