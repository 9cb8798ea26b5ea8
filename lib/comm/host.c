#include "comm/host.h"
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

double host_key(char *name, size_t len)
{
	if (gethostname(name, len) < 0)
		snprintf(name, len, "localhost");
	name[len - 1] = 0;
	uint64_t h = 1469598103934665603ull;
	for (const char *s = name; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (double)(h >> 12) + 1;
}

int host_share(const double *hosts, int size, int rank, int *slot, int *first)
{
	int n = 0;
	*slot = 0, *first = -1;
	for (int r = 0; r < size; r++)
		if (hosts[r] == hosts[rank]) {
			if (*first < 0)
				*first = r;
			if (r < rank)
				++*slot;
			n++;
		}
	return n;
}
