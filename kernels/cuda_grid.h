/* What the op kernels share (cuda_rows.cu, cuda_layernorm.cu,
 * cuda_elementwise.cu, cuda_losses.cu): block and grid shapes, and one
 * scratch buffer, grown and kept, whose users the stream orders. */
#ifndef TS_CUDA_GRID_H
#define TS_CUDA_GRID_H
#include "cuda_check.h"
#include <stddef.h>
#include <stdint.h>

enum {
	THREADS = 256,          /* elementwise and per-column kernels */
	GRID_MAX = 16384,       /* blocks of a grid-stride kernel */
	ROWS_MAX = 65535,       /* grid rows of a row-strided kernel */
	CHUNK_MIN = 64,         /* rows of a column-sum chunk, at least */
	CHUNKS_MAX = 1024,      /* column-sum chunks, at most */
};

static inline unsigned grid_1d(size_t n)
{
	unsigned b = cuda_blocks(n);
	return b > (unsigned)GRID_MAX ? (unsigned)GRID_MAX : b;
}

/* Column tiles of THREADS across, rows strided over the grid's y. */
static inline dim3 grid_rows(int cols, int rows)
{
	return dim3((unsigned)((cols + THREADS - 1) / THREADS),
		    (unsigned)(rows < (int)ROWS_MAX ? rows : (int)ROWS_MAX));
}

/* Rows per chunk of a two-pass column sum over n >= 1 rows. */
static inline int chunk_rows(int n)
{
	int rows = (int)(((int64_t)n + CHUNKS_MAX - 1) / CHUNKS_MAX);
	return rows < (int)CHUNK_MIN ? (int)CHUNK_MIN : rows;
}

static inline int div_up(int a, int b)
{
	return (int)(((int64_t)a + b - 1) / b);
}

/* n rounded up to 256 bytes, where the parts of a scratch buffer start. */
static inline size_t align_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* The ops' scratch memory (cuda_backend.cu), at least bytes, until the
 * next call. */
void *cuda_op_scratch(size_t bytes);
#endif
