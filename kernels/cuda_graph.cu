/* CUDA graphs of a training pass (struct backend's graph_begin and
 * graph_end). A walk is the host running the pass's ops once; how its work
 * reaches the GPU depends on what the cache (lib/backend/graphs.h) plans
 * for its key:
 *   eager    each kernel and call runs as it comes;
 *   capture  the stream is captured, each kernel's node and arguments and
 *            each call's bytes traced, and at the end the graph made and
 *            launched;
 *   check    nothing runs: each kernel and call is matched against the
 *            trace, a kernel whose arguments changed (every dropout seed
 *            does, each step) has its node patched, and at the end the
 *            graph is launched, one launch for the pass;
 *   skip     the walk cannot be a graph (it differed from the trace, or
 *            something a graph cannot hold came): nothing more runs, and
 *            graph_end asks the caller to walk again, eagerly.
 * Uploads, downloads, allocations and frees spoil a walk (cuda_graph_spoil:
 * in a capture the key runs eagerly from then on, in a check it is a miss);
 * a buffer that grows only sends the pass back (cuda_graph_grew, a miss:
 * captured again when its key next comes). A pass is meant to be free of
 * all of them once its shapes came before. A library call or launch that
 * fails in a capture gives the capture up rather than the run. */
#include "cuda_check.h"
#include "cuda_graph.h"
#include "backend/graphs.h"

static enum walk { EAGER, CAPTURE, CHECK, SKIP } walk;
static struct graph_cache cache;
static struct graph_slot *slot;
static const char *note;      /* for graph_end to hand on */

static void drop(struct graph_slot *s)
{
	CUDA_CHECK(cudaStreamSynchronize(cuda_stream()));   /* a launch of it may be running */
	CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)s->exec));
	CUDA_CHECK(cudaGraphDestroy((cudaGraph_t)s->graph));
}

/* Ends a capture that failed, leaving the stream as it was. */
static void abandon_capture(void)
{
	cudaGraph_t g = NULL;
	cudaStreamEndCapture(cuda_stream(), &g);
	cudaGetLastError();
	if (g)
		cudaGraphDestroy(g);
}

static void capture_failed(const char *why)
{
	abandon_capture();
	note = graph_failed(&cache, slot, why);
	walk = SKIP;
}

static void replay_missed(void)
{
	graph_missed(&cache, slot);
	walk = SKIP;
}

void cuda_graph_spoil(const char *why)
{
	if (walk == CAPTURE)
		capture_failed(why);
	else if (walk == CHECK)
		replay_missed();
}

void cuda_graph_grew(void)
{
	if (walk == CAPTURE)
		abandon_capture();
	if (walk == CAPTURE || walk == CHECK)
		replay_missed();
}

int cuda_graph_capture_failed(const char *why)
{
	if (walk != CAPTURE)
		return 0;
	capture_failed(why);
	return 1;
}

int cuda_graph_eager_begin(void)
{
	cuda_graph_grew();
	int held = walk;
	walk = EAGER;
	return held;
}

void cuda_graph_eager_end(int held)
{
	walk = (enum walk)held;
}

void cuda_graph_kernel(const char *file, int line, const char *name, const void *fn, dim3 grid,
		       dim3 block, size_t smem, void **args, const void *bytes, size_t n)
{
	struct trace_item it = { fn, 1, { grid.x, grid.y, grid.z, block.x, block.y, block.z,
					  (unsigned)smem }, NULL, 0, n };
	if (walk == EAGER || walk == CAPTURE) {
		cudaError_t e = cudaLaunchKernel(fn, grid, block, args, smem, cuda_stream());
		if (e != cudaSuccess && !cuda_graph_capture_failed("a kernel's launch failed in the capture"))
			cuda_fail(file, line, name, cudaGetErrorString(e));
	}
	if (walk == CAPTURE) {
		cudaStreamCaptureStatus st;
		const cudaGraphNode_t *deps = NULL;
		size_t nd = 0;
#if CUDART_VERSION >= 13000
		cudaError_t e = cudaStreamGetCaptureInfo(cuda_stream(), &st, NULL, NULL, &deps, NULL, &nd);
#else
		cudaError_t e = cudaStreamGetCaptureInfo(cuda_stream(), &st, NULL, NULL, &deps, &nd);
#endif
		if (e != cudaSuccess || st != cudaStreamCaptureStatusActive || nd != 1) {
			capture_failed("a kernel's node was not the stream's last");
			return;
		}
		it.node = deps[0];
		trace_append(&slot->trace, &it, bytes);
	} else if (walk == CHECK) {
		void *node = NULL;
		enum trace_verdict v = trace_match(&slot->trace, &it, bytes, &node);
		if (v == TRACE_PATCHED) {
			cudaKernelNodeParams p = { (void *)fn, grid, block, (unsigned)smem, args, NULL };
			if (cudaGraphExecKernelNodeSetParams((cudaGraphExec_t)slot->exec,
							     (cudaGraphNode_t)node, &p) == cudaSuccess)
				return;
			cudaGetLastError();
		}
		if (v != TRACE_SAME)
			replay_missed();
	}
}

int cuda_graph_call(const char *tag, const void *bytes, size_t n)
{
	struct trace_item it = { tag, 0, { 0 }, NULL, 0, n };
	void *node;
	switch (walk) {
	case EAGER:
		return 1;
	case CAPTURE:
		trace_append(&slot->trace, &it, bytes);
		return 1;
	case CHECK:
		if (trace_match(&slot->trace, &it, bytes, &node) != TRACE_SAME)
			replay_missed();
		return 0;
	default:
		return 0;
	}
}

void cuda_graph_begin(uint64_t key)
{
	if (!cache.drop)
		graph_cache_init(&cache, drop);
	note = NULL;
	switch (graph_plan(&cache, key, &slot)) {
	case GRAPH_WALK_CAPTURE:
		trace_clear(&slot->trace);
		/* relaxed: a spoiling allocation may come before the capture ends */
		CUDA_CHECK(cudaStreamBeginCapture(cuda_stream(), cudaStreamCaptureModeRelaxed));
		walk = CAPTURE;
		break;
	case GRAPH_WALK_REPLAY:
		trace_rewind(&slot->trace);
		walk = CHECK;
		break;
	default:
		walk = EAGER;
	}
}

/* The capture's graph, made and launched; 0 where CUDA refused it. */
static int launch_capture(void)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	if (cudaStreamEndCapture(cuda_stream(), &g) != cudaSuccess || !g ||
	    cudaGraphInstantiate(&x, g, 0) != cudaSuccess) {
		cudaGetLastError();
		if (g)
			cudaGraphDestroy(g);
		note = graph_failed(&cache, slot, "CUDA did not make the captured graph");
		return 0;
	}
	slot->graph = g, slot->exec = x;
	graph_captured(slot);
	CUDA_CHECK(cudaGraphLaunch(x, cuda_stream()));
	return 1;
}

enum graph_done cuda_graph_end(const char **why)
{
	enum graph_done done = GRAPH_AGAIN;
	if (walk == EAGER)
		done = GRAPH_EAGER;
	else if (walk == CAPTURE && launch_capture())
		done = GRAPH_CAPTURED;
	else if (walk == CHECK && !trace_complete(&slot->trace))
		replay_missed();   /* the walk stopped short of the trace */
	else if (walk == CHECK) {
		CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)slot->exec, cuda_stream()));
		graph_replayed(slot);
		done = GRAPH_REPLAYED;
	}
	walk = EAGER;
	*why = note;
	note = NULL;
	return done;
}
