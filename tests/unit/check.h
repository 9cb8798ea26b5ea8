/* Minimal unit-test vocabulary: each CHECK prints one PASS/FAIL line that
 * tests/run counts. A test binary exits 1 when any check failed. */
#ifndef TS_CHECK_H
#define TS_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_failed;

#define CHECK(cond, ...) do { \
	if (cond) { printf("PASS "); printf(__VA_ARGS__); printf("\n"); } \
	else { check_failed = 1; printf("FAIL "); printf(__VA_ARGS__); \
	       printf("  (%s:%d: %s)\n", __FILE__, __LINE__, #cond); } \
	fflush(stdout); } while (0)

/* Only where a GPU is needed and missing: tests/run fails any other skip. */
#define SKIP(...) do { printf("SKIP "); printf(__VA_ARGS__); printf("\n"); } while (0)

/* |a-b| <= atol + rtol*|b| */
static inline int close_enough(double a, double b, double atol, double rtol)
{
	return fabs(a - b) <= atol + rtol * fabs(b);
}

#define CHECK_DONE() return check_failed
#endif
