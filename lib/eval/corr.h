/* Correlation of predictions with the truth, as scipy.stats computes it:
 * Pearson's r, and Spearman's rho (Pearson's r of the ranks, ties taking
 * their mean rank). Both are NaN when either side is constant, holds a NaN,
 * or n < 2. */
#ifndef TS_CORR_H
#define TS_CORR_H
#include <stddef.h>

double pearson(const double *x, const double *y, size_t n);
double spearman(const double *x, const double *y, size_t n);
#endif
