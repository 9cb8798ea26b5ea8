/* Every kernel launch and library call of the CUDA backend goes through
 * here, so that a training pass can be captured as a CUDA graph and
 * replayed (cuda_graph.cu; what is kept, lib/backend/graphs.h). Outside a
 * graph's walk each runs at once, as a plain launch would. */
#ifndef TS_CUDA_GRAPH_H
#define TS_CUDA_GRAPH_H
#include "cuda_api.h"
#include <cuda_runtime.h>
#include <string.h>
#include <tuple>
#include <utility>

/* Launches fn (or, replaying, patches its node where its arguments
 * changed); args point at the arguments, bytes/n are their bytes. A
 * failure dies naming file, line and kernel. */
void cuda_graph_kernel(const char *file, int line, const char *name, const void *fn, dim3 grid,
		       dim3 block, size_t smem, void **args, const void *bytes, size_t n);
/* Whether the caller makes the library call tagged tag, reading what its n
 * bytes say (every pointer and value it reads, padding zeroed), now: yes
 * outside a walk and while capturing; no while replaying, where the call's
 * node stands in the graph already. */
int cuda_graph_call(const char *tag, const void *bytes, size_t n);
/* Something a graph cannot hold came in a walk (an upload, a download, an
 * allocation, a buffer freed): the walk's work is given up and done again
 * eagerly; in a capture, the walk's key runs eagerly from then on. */
void cuda_graph_spoil(const char *why);
/* A buffer grew in a walk: the walk is given up and done again eagerly, and
 * its key captured again when it next comes. */
void cuda_graph_grew(void);
/* Whether a failed call (why) came in a capture, which is then given up and
 * the pass walked again eagerly; else the caller dies as it would. */
int cuda_graph_capture_failed(const char *why);
/* cuda_graph_grew, and runs what is launched until cuda_graph_eager_end(the
 * value returned) at once: a grown buffer's one-time fill, which a given-up
 * walk must not leave undone. */
int cuda_graph_eager_begin(void);
void cuda_graph_eager_end(int held);

/* The arguments' bytes, each at a multiple of 8, and pointers to them. */
template <typename Tuple, size_t... I>
static inline size_t cuda_pack_args(Tuple &t, void **ptrs, unsigned char *bytes,
				    std::index_sequence<I...>)
{
	size_t at = 0;
	((at = (at + 7) & ~(size_t)7, memcpy(bytes + at, &std::get<I>(t), sizeof(std::get<I>(t))),
	  ptrs[I] = (void *)&std::get<I>(t), at += sizeof(std::get<I>(t))), ...);
	return at;
}

template <typename... P, typename... A>
static inline void cuda_launch(const char *file, int line, const char *name, void (*fn)(P...),
			       dim3 grid, dim3 block, size_t smem, A... args)
{
	static_assert(sizeof...(P) == sizeof...(A), "a kernel launched with the wrong argument count");
	std::tuple<P...> values(static_cast<P>(args)...);
	void *ptrs[sizeof...(P) + 1];
	unsigned char bytes[sizeof(values) + 8 * sizeof...(P) + 1] = { 0 };
	size_t n = cuda_pack_args(values, ptrs, bytes, std::index_sequence_for<P...>{});
	cuda_graph_kernel(file, line, name, (const void *)fn, grid, block, smem, ptrs, bytes, n);
}

/* cuda_graph_call for a call that reads values (pointers, sizes, scalars) */
template <typename... T>
static inline int cuda_graph_call_of(const char *tag, T... v)
{
	std::tuple<T...> values(v...);
	void *ptrs[sizeof...(T) + 1];
	unsigned char bytes[sizeof(values) + 8 * sizeof...(T) + 1] = { 0 };
	size_t n = cuda_pack_args(values, ptrs, bytes, std::index_sequence_for<T...>{});
	return cuda_graph_call(tag, bytes, n);
}

/* A stream call of a walk (a memset, a copy), checked: a failure in a
 * capture gives the capture up, elsewhere it dies naming the call. */
#define CUDA_CHECK_WALK(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess && !cuda_graph_capture_failed(#call " failed in the capture")) \
		cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
	} while (0)

/* kernel<<<grid, block, smem, cuda_stream()>>>(args...), checked */
#define CUDA_LAUNCH(fn, grid, block, smem, ...) \
	cuda_launch(__FILE__, __LINE__, #fn, fn, grid, block, smem, __VA_ARGS__)
#endif
