#include "util/progress.h"
#include "util/clock.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct progress {
	const char *what;
	uint64_t total;
	enum progress_unit unit;
	double start, last;
};

struct progress *progress_new(const char *what, uint64_t total, enum progress_unit unit)
{
	if (!isatty(STDERR_FILENO))
		return NULL;
	struct progress *p = xcalloc(1, sizeof *p);
	p->what = what;
	p->total = total;
	p->unit = unit;
	p->start = clock_seconds();
	return p;
}

void progress_update(struct progress *p, uint64_t done, const char *note)
{
	if (!p)
		return;
	double t = clock_seconds();
	if (t - p->last < 0.1 && done < p->total)
		return;
	p->last = t;
	double scale = p->unit == PROGRESS_BYTES ? 1e-6 : 1, rate = (double)done / (t - p->start + 1e-9);
	const char *u = p->unit == PROGRESS_BYTES ? "MB" : "steps";
	fprintf(stderr, "\r\033[K%s", p->what);
	if (p->total) {
		double f = (double)done / (double)p->total;
		int w = 24, fill = (int)(f * w + 0.5);
		fprintf(stderr, " %5.1f%% [%.*s%*s]", 100 * f, fill, "########################", w - fill, "");
	}
	fprintf(stderr, " %.1f %s, %.1f %s/s", (double)done * scale, u, rate * scale, u);
	if (p->total && rate > 0)
		fprintf(stderr, ", eta %.0fs", (double)(p->total - done) / rate);
	if (note)
		fprintf(stderr, " %s", note);
}

void progress_clear(struct progress *p)
{
	if (p) {
		fprintf(stderr, "\r\033[K");
		p->last = 0;
	}
}

void progress_done(struct progress *p)
{
	progress_clear(p);
	free(p);
}
