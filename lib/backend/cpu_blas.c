/* OpenBLAS's kernels fitted to the processor. Debian 12's OpenBLAS (0.3.21,
 * built with a set of kernels for every x86-64 core) picks its set by the
 * processor's model number, and takes its oldest (Prescott's, SSE3) for a
 * model newer than itself: Intel's Emerald Rapids (family 6, model 207) is
 * one, where sgemm then runs 7 times slower than with the AVX-512 set. Where
 * it has so fallen back on a processor with AVX-512 or AVX2, the set is
 * chosen again by what the processor can do, as OPENBLAS_CORETYPE would (and
 * as that OpenBLAS chooses for the models it knows); a core type the user
 * set is left as it is. */
#include "backend/backend.h"
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own, in its builds with every core's kernels (DYNAMIC_ARCH):
 * the set is chosen in _init, from OPENBLAS_CORETYPE where that is set. */
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The kernels OpenBLAS would take for what this processor can do; NULL where
 * its fallback is as good. */
static const char *fitting_core(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
	return NULL;
}

static void fit(void)
{
	const char *core = fitting_core();
	if (!core || getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit ||
	    strcmp(openblas_get_corename(), "Prescott"))
		return;
	setenv("OPENBLAS_CORETYPE", core, 1);
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
}

const char *backend_cpu_blas(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fit);
	return openblas_get_corename();
}
