/* cuDNN's fused attention (scaled dot-product attention, flash attention on
 * the tensor cores) for bf16 and fp16 acts, through NVIDIA's header-only
 * cudnn-frontend, behind the C functions of cuda_api.h. libcudnn.so.9 is
 * loaded when first wanted; where it is missing, or cuDNN refuses a shape
 * (it takes packed sequences on sm_90 and later), these functions return
 * ATT_OWN and the caller runs the own kernel; a shape cuDNN refuses gets one
 * note on stderr with cuDNN's words. The forward tries cuDNN's unified
 * engine first, then its composite operation graph; the backward has the
 * composite alone. The frontend is told which CUDA runtime to load: this
 * build's.
 *
 * Layout: the model's, unpadded (struct attention): sequence b's queries are
 * rows q_start[b].. of q (row stride ldq), its keys and values rows
 * kv_start[b].. of k and v (ldkv), head h columns h*d..; ctx, dctx likewise
 * with stride C. cuDNN sees them as [B, H, S, d] with ragged offsets (the
 * element offset of each sequence's first row) and per-sequence lengths:
 * S_q the sequence's query rows, S_kv its keys up to the last real one
 * (calls with a padding key before a real one go to the own kernel; one
 * with no real key, which ts-tokenize never makes, would differ from the
 * own kernel's uniform row). Its backward leaves the rows of keys past S_kv,
 * and of sequences with no query rows, alone: a kernel zeroes them after.
 * Dropout on the probabilities is cuDNN's own (Philox, from the call's
 * seed), not the CPU's masks: with dropout a call's forward and backward
 * both run on cuDNN or neither does.
 *
 * The forward keeps per query row and head the softmax's log-sum-exp, as
 * the own kernel's state (maximum, 1/sum) = (lse, 1): without dropout either
 * backward works from it; with dropout cuDNN takes a forward only where it
 * takes its backward too. Operation graphs are built once per shape, B
 * rounded up to a multiple of 8 and T of 64 (the lengths and offsets say
 * the rest), and kept in a table of plans (lib/backend/plans.h). cuDNN takes sequences of
 * length 0 from 9.25 (NVIDIA/cudnn-frontend#943): before, B is not rounded
 * and a call with a sequence of no query rows goes to the own kernel. */
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include "backend/plans.h"
#include "cuda_api.h"
#include "cuda_check.h"
#include "cuda_graph.h"
#include "util/err.h"
#include <cudnn_frontend.h>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <string>
#include <vector>

namespace fe = cudnn_frontend;
void *cudnn_frontend::cudnn_dlhandle = nullptr;

enum { B_ROUND = 8, T_ROUND = 64, PLANS_CAP = 1024 };

/* uids of an operation graph's tensors, for its variant pack */
enum { Q = 1, K, V, O, STATS, DO, DQ, DK, DV, SEQ_Q, SEQ_KV, OFF_Q, OFF_KV, OFF_O, OFF_STATS, SEED, OFFSET };

/* What an operation graph is built for: the key of its plan. */
struct shape {
	int B, T, H, d, ldq, ldkv, C, half, backward;
	float p;                 /* dropout on the probabilities */
};

struct plan {
	shape s;
	std::shared_ptr<fe::graph::Graph> g;   /* NULL: cuDNN refused the shape */
	int64_t workspace;
	enum attention_kernel kernel;          /* the implementation that took it */
	std::string refusal;                   /* where g is NULL: cuDNN's words */
};

static cudnnHandle_t handle;
static int loaded = -1;              /* -1: not tried; 0: no cuDNN; 1: ready */
static int empty_ok;                 /* it takes sequences of length 0 */
static int enabled = 1;              /* cuda_sdpa_use */
static int hopper;                   /* sm_90 on: cuDNN takes ragged offsets */
static struct plans table;   /* struct shape -> plan *, made on the first call */
static char declined[512];           /* why the last call went to the own kernel */
static int by_cudnn;                 /* that cuDNN itself refused it */

static void *workspace, *lens;       /* grown, kept */
static size_t workspace_cap, lens_cap;

static int ready(void)
{
	if (loaded >= 0)
		return loaded;
	loaded = 0;
	int dev = 0;
	CUDA_CHECK(cudaGetDevice(&dev));
	hopper = cuda_device_sm(dev) >= 90;
	/* the frontend loads a CUDA runtime of its own, libcudart.so.12 before .13
	 * where both are: this build's, unless the user named one */
	char cudart[32];
	snprintf(cudart, sizeof cudart, "libcudart.so.%d", CUDART_VERSION / 1000);
	setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart, 0);
	cudnn_frontend::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
	if (!cudnn_frontend::cudnn_dlhandle) {
		warnx("cuDNN (libcudnn.so.9) not found: the attention runs on TopSpin's own kernel");
		return 0;
	}
	try {
		if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS ||
		    fe::detail::set_stream(handle, cuda_stream()) != CUDNN_STATUS_SUCCESS) {
			warnx("cuDNN would not start: the attention runs on TopSpin's own kernel");
			return 0;
		}
	} catch (const std::exception &e) {
		warnx("cuDNN would not start (%s): the attention runs on TopSpin's own kernel", e.what());
		return 0;
	}
	empty_ok = fe::detail::get_backend_version() >= 92500;
	loaded = 1;
	return 1;
}

/* [B, H, S, d] over rows of stride ld at a sequence's ragged offset */
static std::shared_ptr<fe::graph::Tensor_attributes> rows(fe::graph::Graph &g, int uid, const char *name,
							  const shape &s, int64_t ld,
							  std::shared_ptr<fe::graph::Tensor_attributes> off)
{
	auto t = g.tensor(fe::graph::Tensor_attributes()
				  .set_name(name)
				  .set_uid(uid)
				  .set_dim({s.B, s.H, s.T, s.d})
				  .set_stride({(int64_t)s.T * ld, s.d, ld, 1}));
	t->set_ragged_offset(off);
	return t;
}

static std::shared_ptr<fe::graph::Tensor_attributes> index_tensor(fe::graph::Graph &g, int uid,
								  const char *name, int64_t n)
{
	return g.tensor(fe::graph::Tensor_attributes()
				.set_name(name)
				.set_uid(uid)
				.set_dim({n, 1, 1, 1})
				.set_stride({1, 1, 1, 1})
				.set_data_type(fe::DataType_t::INT32));
}

static std::shared_ptr<fe::graph::Tensor_attributes> scalar(fe::graph::Graph &g, int uid, const char *name)
{
	return g.tensor(fe::graph::Tensor_attributes()
				.set_name(name)
				.set_uid(uid)
				.set_dim({1, 1, 1, 1})
				.set_stride({1, 1, 1, 1})
				.set_data_type(fe::DataType_t::INT64));
}

/* The operation graph of s: its forward (O and the statistics from Q, K, V) by
 * implementation impl, or its backward (dQ, dK, dV: one implementation);
 * NULL where cuDNN refuses it, with its words in why. */
static std::shared_ptr<fe::graph::Graph> build(const shape &s, fe::AttentionImplementation_t impl,
					       std::string &why)
{
	auto g = std::make_shared<fe::graph::Graph>();
	g->set_io_data_type(s.half ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
		.set_intermediate_data_type(fe::DataType_t::FLOAT)
		.set_compute_data_type(fe::DataType_t::FLOAT);
	auto off_q = index_tensor(*g, OFF_Q, "off_q", s.B + 1);
	auto off_kv = index_tensor(*g, OFF_KV, "off_kv", s.B + 1);
	auto off_o = index_tensor(*g, OFF_O, "off_o", s.B + 1);
	auto off_st = index_tensor(*g, OFF_STATS, "off_stats", s.B + 1);
	auto seq_q = index_tensor(*g, SEQ_Q, "seq_q", s.B), seq_kv = index_tensor(*g, SEQ_KV, "seq_kv", s.B);
	auto q = rows(*g, Q, "q", s, s.ldq, off_q), k = rows(*g, K, "k", s, s.ldkv, off_kv);
	auto v = rows(*g, V, "v", s, s.ldkv, off_kv);
	float scale = 1.0f / sqrtf((float)s.d);
	if (!s.backward) {
		auto o_opts = fe::graph::SDPA_attributes()
				      .set_name("attention")
				      .set_generate_stats(true)
				      .set_attn_scale(scale)
				      .set_padding_mask(true)
				      .set_seq_len_q(seq_q)
				      .set_seq_len_kv(seq_kv)
				      .set_implementation(impl);
		if (s.p > 0)
			o_opts.set_dropout(s.p, scalar(*g, SEED, "seed"), scalar(*g, OFFSET, "offset"));
		auto [o, stats] = g->sdpa(q, k, v, o_opts);
		o->set_output(true).set_uid(O).set_dim({s.B, s.H, s.T, s.d}).set_stride(
			{(int64_t)s.T * s.C, s.d, s.C, 1});
		o->set_ragged_offset(off_o);
		stats->set_output(true).set_uid(STATS).set_data_type(fe::DataType_t::FLOAT).set_dim(
			{s.B, s.H, s.T, 1}).set_stride({(int64_t)s.T * s.H, 1, s.H, 1});
		stats->set_ragged_offset(off_st);
	} else {
		auto o = rows(*g, O, "o", s, s.C, off_o), dout = rows(*g, DO, "do", s, s.C, off_o);
		auto stats = g->tensor(fe::graph::Tensor_attributes()
					       .set_name("stats")
					       .set_uid(STATS)
					       .set_dim({s.B, s.H, s.T, 1})
					       .set_stride({(int64_t)s.T * s.H, 1, s.H, 1})
					       .set_data_type(fe::DataType_t::FLOAT));
		stats->set_ragged_offset(off_st);
		auto opts = fe::graph::SDPA_backward_attributes()
				    .set_name("attention_backward")
				    .set_attn_scale(scale)
				    .set_padding_mask(true)
				    .set_seq_len_q(seq_q)
				    .set_seq_len_kv(seq_kv)
				    .set_deterministic_algorithm(true);
		if (s.p > 0)
			opts.set_dropout(s.p, scalar(*g, SEED, "seed"), scalar(*g, OFFSET, "offset"));
		auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
		dq->set_output(true).set_uid(DQ).set_dim({s.B, s.H, s.T, s.d}).set_stride(
			{(int64_t)s.T * s.ldq, s.d, s.ldq, 1});
		dq->set_ragged_offset(off_q);
		dk->set_output(true).set_uid(DK).set_dim({s.B, s.H, s.T, s.d}).set_stride(
			{(int64_t)s.T * s.ldkv, s.d, s.ldkv, 1});
		dk->set_ragged_offset(off_kv);
		dv->set_output(true).set_uid(DV).set_dim({s.B, s.H, s.T, s.d}).set_stride(
			{(int64_t)s.T * s.ldkv, s.d, s.ldkv, 1});
		dv->set_ragged_offset(off_kv);
	}
	fe::error_t e = g->validate();
	if (e.is_good())
		e = g->build_operation_graph(handle);
	if (e.is_good())
		e = g->create_execution_plans({ fe::HeurMode_t::A });
	if (e.is_good())
		e = g->check_support(handle);
	if (e.is_good())
		e = g->build_plans(handle);
	if (e.is_good())
		return g;
	why = e.get_message();
	return nullptr;
}

/* g built for p's shape by impl, with its workspace; else a line of why
 * not added to p's refusal. */
static void try_build(plan *p, fe::AttentionImplementation_t impl, const char *name)
{
	std::string why;
	try {
		p->g = build(p->s, impl, why);
	} catch (const std::exception &e) {
		p->g = nullptr, why = e.what();
	}
	if (p->g && p->g->get_workspace_size(p->workspace).is_bad())
		p->g = nullptr, why = "no workspace size";
	if (!p->g)
		p->refusal += std::string(p->refusal.empty() ? "" : "; ") + name + ": " +
			      (why.empty() ? "no reason given" : why);
}

/* The plan of s: found, or built now (a refusal is kept too, with a note). */
static const plan &plan_of(const shape &s)
{
	int made;
	if (!table.slots)
		plans_init(&table, sizeof s, sizeof(plan *), PLANS_CAP);
	plan **slot = (plan **)plans_get(&table, &s, &made, "cuDNN attention shapes");
	if (!made)
		return **slot;
	plan *p = *slot = new plan{ s, nullptr, 0, ATT_OWN, "" };
	/* the forward's unified engine first, then its composite operation
	 * graph (which some cuDNN versions take where they refuse the other);
	 * the backward has only the composite */
	if (!s.backward) {
		try_build(p, fe::AttentionImplementation_t::UNIFIED, "unified");
		p->kernel = ATT_CUDNN_UNIFIED;
	}
	if (!p->g) {
		try_build(p, fe::AttentionImplementation_t::COMPOSITE, "composite");
		p->kernel = ATT_CUDNN_COMPOSITE;
	}
	if (!p->g)
		warnx("cuDNN's attention refuses %s of %d sequences up to %d long, %d heads of %d (%s): the "
		      "own kernel runs them", s.backward ? "the backward" : "the forward", s.B, s.T, s.H, s.d,
		      p->refusal.c_str());
	return *p;
}

/* The call goes to the own kernel, for why (cuDNN's own refusal or not). */
static enum attention_kernel decline(int cudnn, const char *why)
{
	by_cudnn = cudnn;
	snprintf(declined, sizeof declined, "%s", why);
	return ATT_OWN;
}

static int round_up(int x, int to)
{
	return (x + to - 1) / to * to;
}

/* Why cuDNN cannot take a call, or NULL: turned off, no rows given, heads
 * of another width than its flash attention takes, offsets past int32, a
 * padding key before a real one, no cuDNN, a GPU before sm_90 (cuDNN's
 * ragged offsets are Hopper's), a sequence of no query rows before cuDNN
 * 9.25. */
static const char *not_for_cudnn(const struct attention *a)
{
	int d = a->C / a->H;
	int64_t ld = a->ldq > a->ldkv ? a->ldq : a->ldkv;   /* offsets are int32 */
	if (!enabled)
		return "turned off";
	if (a->B <= 0 || !a->rows)
		return "no rows given";
	if (d % 8 || d > 128)
		return "heads other than 8 to 128 wide by 8";
	if ((int64_t)a->B * a->T * ld >= INT32_MAX)
		return "offsets past int32";
	if (a->holes)
		return "a padding key inside a sequence";
	if (!ready())
		return "no cuDNN";
	if (!hopper)
		return "a GPU before sm_90 (cuDNN's packed sequences need sm_90)";
	if (a->empty && !empty_ok)
		return "a sequence of no query rows (cuDNN takes them from 9.25)";
	return NULL;
}

/* The shape of a call that cuDNN can take, the key of its plan. */
static void shape_of(const struct attention *a, int half, int backward, shape *s)
{
	int d = a->C / a->H;
	memset(s, 0, sizeof *s);   /* a key, compared bytewise */
	s->B = empty_ok ? round_up(a->B, B_ROUND) : a->B, s->T = round_up(a->T, T_ROUND), s->H = a->H, s->d = d;
	s->ldq = a->ldq, s->ldkv = a->ldkv, s->C = a->C, s->p = a->p, s->half = half;
	s->backward = backward;
}

/* The index tensors of a call, in one grown buffer, each at a multiple of
 * 64 bytes (index_stride ints): seq_q, seq_kv, then the four offsets
 * (cuda_sdpa_indices). */
static size_t index_stride(const shape &s)
{
	return ((size_t)s.B + 1 + 15) & ~(size_t)15;
}

static int32_t *index_tensors(const struct attention *a, const shape &s)
{
	int32_t *idx = (int32_t *)cuda_grow(&lens, &lens_cap, 6 * index_stride(s) * sizeof(int32_t));
	cuda_sdpa_indices(idx, index_stride(s), a, s.B);
	return idx;
}

/* Scratch for the statistics (rows x H floats) and dO in acts (rows x C). */
static void *scratch_of(size_t bytes)
{
	static void *p;
	static size_t cap;
	return cuda_grow(&p, &cap, bytes);
}

/* the seed and offset of the call's dropout, which cuDNN reads on the device
 * (written by a kernel, which a CUDA graph's replay patches) */
static void *dropout_rng(const struct attention *a)
{
	static void *d;
	static size_t cap;
	int64_t *rng = (int64_t *)cuda_grow(&d, &cap, 2 * sizeof(int64_t));
	cuda_sdpa_seed(rng, a->seed);
	return rng;
}

typedef std::unordered_map<int64_t, void *> pack_t;

/* Runs plan p of shape s on the call a, with what pack holds beside what
 * every call gives (the index tensors, Q, K, V, dropout's seed); dies where
 * cuDNN fails on a shape it had taken. Returns the index tensors. */
static const int32_t *execute(const plan &p, const shape &s, const struct attention *a, pack_t &pack)
{
	int32_t *idx = index_tensors(a, s);
	size_t at = index_stride(s);
	pack[SEQ_Q] = idx, pack[SEQ_KV] = idx + at;
	pack[OFF_Q] = idx + 2 * at, pack[OFF_KV] = idx + 3 * at, pack[OFF_O] = idx + 4 * at;
	pack[OFF_STATS] = idx + 5 * at;
	pack[Q] = (void *)a->q, pack[K] = (void *)a->k, pack[V] = (void *)a->v;
	if (s.p > 0) {
		int64_t *rng = (int64_t *)dropout_rng(a);
		pack[SEED] = rng, pack[OFFSET] = rng + 1;
	}
	void *ws = cuda_grow(&workspace, &workspace_cap, (size_t)p.workspace);
	/* what the call reads, for a CUDA graph's replay to check: the plan, the
	 * tensors by uid, the workspace */
	std::vector<std::pair<int64_t, void *>> reads(pack.begin(), pack.end());
	std::sort(reads.begin(), reads.end());
	reads.push_back({ -1, (void *)p.g.get() });
	reads.push_back({ -2, ws });
	if (cuda_graph_call("cuDNN attention", reads.data(), reads.size() * sizeof reads[0])) {
		int ok = 0;
		try {
			ok = p.g->execute(handle, pack, ws).is_good();
		} catch (const std::exception &e) {
			ok = 0;
		}
		if (!ok && !cuda_graph_capture_failed("cuDNN's attention failed in the capture"))
			die("cuDNN's attention %s failed on a shape it had taken: CUDNN_LOGLEVEL_DBG=3 "
			    "CUDNN_LOGDEST_DBG=stderr shows cuDNN's own words",
			    s.backward ? "backward" : "forward");
	}
	return idx;
}

/* The plan for call a, or NULL, the call declined, where it has none; with
 * dropout, where the other direction has none either (the own kernel's
 * masks are not cuDNN's: both on cuDNN or neither). */
static const plan *plan_for(const struct attention *a, int half, int backward, shape *s)
{
	const char *why = not_for_cudnn(a);
	if (why) {
		decline(0, why);
		return NULL;
	}
	shape_of(a, half, backward, s);
	const plan &p = plan_of(*s);
	const plan *refused = p.g ? NULL : &p;
	if (!refused && s->p > 0) {
		shape other = *s;
		other.backward = !backward;
		const plan &q = plan_of(other);
		refused = q.g ? NULL : &q;
	}
	if (refused) {
		decline(1, refused->refusal.c_str());
		return NULL;
	}
	return &p;
}

enum attention_kernel cuda_sdpa_forward(struct act *ctx, float *state, const struct attention *a, int half)
{
	shape s;
	const plan *p = plan_for(a, half, 0, &s);
	if (!p)
		return ATT_OWN;
	size_t n = (size_t)a->rows * (size_t)a->H;
	float *lse = (float *)scratch_of(n * sizeof(float));
	pack_t pack = { { O, ctx }, { STATS, lse } };
	execute(*p, s, a, pack);
	cuda_state_from_lse(state, lse, n);
	return p->kernel;
}

enum attention_kernel cuda_sdpa_backward(struct act *dq, struct act *dk, struct act *dv, const float *dctx,
					 const float *state, const struct attention *a, int half)
{
	shape s;
	if (!a->out)
		return decline(0, "no forward output given");
	const plan *p = plan_for(a, half, 1, &s);
	if (!p)
		return ATT_OWN;
	size_t n = (size_t)a->rows * (size_t)a->H, nd = (size_t)a->rows * (size_t)a->C;
	size_t at = (n * sizeof(float) + 255) & ~(size_t)255;   /* dO aligned as cuDNN wants it */
	char *buf = (char *)scratch_of(at + nd * 2);
	float *lse = (float *)buf;
	void *dout = buf + at;
	cuda_lse_from_state(lse, state, n);
	if (half)
		cuda_as_fp16((struct act *)dout, dctx, nd);
	else
		cuda_as_bf16((struct act *)dout, dctx, nd);
	pack_t pack = { { O, (void *)a->out }, { DO, dout }, { STATS, lse }, { DQ, dq }, { DK, dk }, { DV, dv } };
	const int32_t *idx = execute(*p, s, a, pack);
	cuda_sdpa_zero_skipped(dk, dv, idx, idx + index_stride(s), a);
	return p->kernel;
}

void cuda_sdpa_use(int on)
{
	enabled = on;
}

const char *cuda_sdpa_declined(int *cudnn)
{
	*cudnn = by_cudnn;
	return declined;
}
