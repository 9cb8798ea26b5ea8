/* A named view of an fp32 tensor owned elsewhere: how the model, safetensors
 * and checkpoints talk about parameters. Names are Hugging Face's. */
#ifndef TS_TENSOR_H
#define TS_TENSOR_H
#include <stdint.h>

#define TENSOR_MAX_DIMS 4

struct tensor_ref {
	const char *name;
	int ndim;
	int64_t shape[TENSOR_MAX_DIMS];
	float *data;
};

static inline int64_t tensor_numel(const struct tensor_ref *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}
#endif
