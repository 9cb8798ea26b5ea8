#include "eval/corr.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>

double pearson(const double *x, const double *y, size_t n)
{
	if (n < 2)
		return NAN;
	double mx = 0, my = 0;
	for (size_t i = 0; i < n; i++)
		mx += x[i], my += y[i];
	mx /= (double)n, my /= (double)n;
	double sxy = 0, sxx = 0, syy = 0;
	for (size_t i = 0; i < n; i++) {
		double dx = x[i] - mx, dy = y[i] - my;
		sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
	}
	if (sxx == 0 || syy == 0)
		return NAN;
	double r = sxy / sqrt(sxx * syy);
	return r > 1 ? 1 : r < -1 ? -1 : r;
}

static const double *rank_base;

static int by_value(const void *a, const void *b)
{
	double x = rank_base[*(const size_t *)a], y = rank_base[*(const size_t *)b];
	return (x > y) - (x < y);
}

/* The 1-based ranks of v, equal values sharing the mean of their ranks. */
static double *ranks(const double *v, size_t n)
{
	size_t *order = xmalloc((n ? n : 1) * sizeof *order);
	double *r = xmalloc((n ? n : 1) * sizeof *r);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	rank_base = v;
	qsort(order, n, sizeof *order, by_value);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && v[order[j + 1]] == v[order[i]])
			j++;
		double mean = (double)(i + j) / 2 + 1;
		for (size_t k = i; k <= j; k++)
			r[order[k]] = mean;
		i = j + 1;
	}
	free(order);
	return r;
}

static int any_nan(const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (isnan(v[i]))
			return 1;
	return 0;
}

/* A NaN has no rank: scipy's default propagates it. */
double spearman(const double *x, const double *y, size_t n)
{
	if (any_nan(x, n) || any_nan(y, n))
		return NAN;
	double *rx = ranks(x, n), *ry = ranks(y, n);
	double rho = pearson(rx, ry, n);
	free(rx);
	free(ry);
	return rho;
}
