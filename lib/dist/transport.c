#include "dist/transport.h"

void comm_shard(const struct comm *c, size_t n, size_t *lo, size_t *hi)
{
	size_t size = (size_t)c->size, rank = (size_t)c->rank;
	*lo = n / size * rank + (n % size < rank ? n % size : rank);
	*hi = *lo + n / size + (rank < n % size);
}
