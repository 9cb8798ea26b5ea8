#include "comm/transport.h"
#include "util/clock.h"

void comm_shard(const struct comm *c, size_t n, size_t *lo, size_t *hi)
{
	size_t size = (size_t)c->size, rank = (size_t)c->rank;
	*lo = n / size * rank + (n % size < rank ? n % size : rank);
	*hi = *lo + n / size + (rank < n % size);
}

void sum_times_on_host(struct sum_times *t, double t0, double done)
{
	double end = done ? done : t->seen_done ? t->seen_done : clock_seconds();
	t->span = end - t->started;
	t->exposed = end > t0 ? end - t0 : 0;
}
