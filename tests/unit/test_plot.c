/* SVG plots of awkward series end, and stay small: a constant, one that
 * varies in its last bits, huge values, a single point, nothing finite. */
#include "check.h"
#include "format/plot.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The size of the plot of n points (x = 0, 1, ...; y from ys) at path; -1 on failure. */
static long plot_of(const char *path, const double *ys, size_t n)
{
	double x[8];
	for (size_t i = 0; i < n; i++)
		x[i] = (double)i;
	struct series s = {"s", x, ys, n};
	plot_svg(path, "t", "step", &s, 1);
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int main(void)
{
	char path[] = "/tmp/test_plot.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	double constant[4] = {0.5, 0.5, 0.5, 0.5};
	double last_bits[4] = {0.6931471805599453, 0.6931471805599454, 0.6931471805599453, 0.6931471805599455};
	double huge[3] = {1e300, -1e300, 3e299};
	double one[1] = {2.5};
	double none[3] = {NAN, INFINITY, NAN};
	struct { const char *what; const double *y; size_t n; } cases[] = {
		{"a constant", constant, 4}, {"values that differ in their last bits", last_bits, 4},
		{"huge values", huge, 3}, {"a single point", one, 1}, {"nothing finite", none, 3},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		long size = plot_of(path, cases[i].y, cases[i].n);
		CHECK(size > 0 && size < 20000, "%s: a plot of %ld bytes", cases[i].what, size);
	}
	unlink(path);
	CHECK_DONE();
}
