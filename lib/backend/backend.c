/* The host side of the ops' descriptions. */
#include "backend/backend.h"

int64_t attention_probs(int64_t *p_start, const int32_t *kv_start, const int32_t *q_start,
			int B, int H)
{
	const int32_t *q = q_start ? q_start : kv_start;
	p_start[0] = 0;
	for (int b = 0; b < B; b++) {
		int64_t n = kv_start[b + 1] - kv_start[b], nq = q[b + 1] - q[b];
		p_start[b + 1] = p_start[b] + H * nq * n;
	}
	return p_start[B];
}
