/* cuBLAS and cuBLASLt are loaded when the GPU backend opens (kernels/
 * cuda_gemm.cu), not linked: each function the GEMMs call must be found in
 * the libraries of the toolkit the build was made with, and a command that
 * runs on the CPU must not load them. Needs no GPU, only the toolkit's
 * libraries on the loader's path (the build's run path names them). */
#include "check.h"
#ifdef TS_GPU
#include "cuda_api.h"
#include <stdio.h>
#include <string.h>

/* Whether this process has a library whose file name holds name mapped. */
static int mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		found |= strstr(line, name) != NULL;
	if (f)
		fclose(f);
	return found;
}

int main(void)
{
	CHECK(!mapped("libcublasLt") && !mapped("libcublas.so"), "a process starts without cuBLAS loaded");
	cuda_blas_load();
	CHECK(mapped("libcublasLt") && mapped("libcublas.so"), "cuda_blas_load loads cuBLAS and cuBLASLt, "
	      "finding every function the GEMMs call (it dies naming one it does not)");
	CHECK_DONE();
}
#else
int main(void)
{
	SKIP("cuBLAS's loading: this build has no CUDA backend (GPU=1)");
	CHECK_DONE();
}
#endif
