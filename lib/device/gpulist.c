#include "device/gpulist.h"
#include "util/err.h"
#include <errno.h>
#include <stdlib.h>

/* One number of a --gpus list, at *s; moves *s past it. */
static int list_number(const char *list, const char **s)
{
	char *end;
	errno = 0;
	long v = strtol(*s, &end, 10);
	if (end == *s || *s[0] == '-' || *s[0] == '+' || errno || v < 0 || v >= MAX_GPUS)
		die_usage("--gpus %s: GPU numbers from 0 to %d, such as 0,2,5-7", list, MAX_GPUS - 1);
	*s = end;
	return (int)v;
}

int gpus_parse(const char *list, int *ids)
{
	int n = 0;
	const char *s = list;
	for (;;) {
		int lo = list_number(list, &s), hi = lo;
		if (*s == '-')
			s++, hi = list_number(list, &s);
		if (hi < lo)
			die_usage("--gpus %s: the range %d-%d runs backwards", list, lo, hi);
		for (int g = lo; g <= hi; g++) {
			for (int i = 0; i < n; i++)
				if (ids[i] == g)
					die_usage("--gpus %s: GPU %d is named twice", list, g);
			ids[n++] = g;
		}
		if (!*s)
			return n;
		if (*s++ != ',')
			die_usage("--gpus %s: GPU numbers from 0 to %d, such as 0,2,5-7", list, MAX_GPUS - 1);
	}
}

