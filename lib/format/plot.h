/* Line plots as SVG files: one or more series of (x, y) points over shared
 * axes with round-numbered ticks, a title and a legend. */
#ifndef TS_PLOT_H
#define TS_PLOT_H
#include <stddef.h>

struct series {
	const char *name;
	const double *x, *y;
	size_t n;
};

/* Writes the plot to path (atomically); series with no points are left
 * out, and a plot of none says so. */
void plot_svg(const char *path, const char *title, const char *xlabel, const struct series *s, int ns);
#endif
