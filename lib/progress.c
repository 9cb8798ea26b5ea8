#include "progress.h"
#include "err.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct progress {
	const char *what;
	uint64_t total;
	double start, last;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct progress *progress_new(const char *what, uint64_t total)
{
	if (!isatty(STDERR_FILENO))
		return NULL;
	struct progress *p = xcalloc(1, sizeof *p);
	p->what = what;
	p->total = total;
	p->start = now();
	return p;
}

void progress_update(struct progress *p, uint64_t done)
{
	if (!p)
		return;
	double t = now();
	if (t - p->last < 0.1)
		return;
	p->last = t;
	double mb = (double)done / 1e6, rate = mb / (t - p->start + 1e-9);
	if (p->total) {
		double f = (double)done / (double)p->total;
		int w = 30, fill = (int)(f * w + 0.5);
		fprintf(stderr, "\r%s %5.1f%% [%.*s%*s] %.1f MB %.1f MB/s eta %.0fs  ", p->what, 100 * f, fill,
			"##############################", w - fill, "", mb, rate,
			rate > 0 ? ((double)p->total / 1e6 - mb) / rate : 0);
	} else {
		fprintf(stderr, "\r%s %.1f MB %.1f MB/s  ", p->what, mb, rate);
	}
}

void progress_done(struct progress *p)
{
	if (!p)
		return;
	fprintf(stderr, "\r\033[K");
	free(p);
}
