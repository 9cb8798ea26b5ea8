/* The CUDA backend below fp32 (--precision tf32, bf16 and fp16) against the
 * CPU's fp32 ops. Inputs are rounded to bf16 first: such values are exact in
 * bf16 and in TF32 (and in fp16 but for the tiniest, off by less than
 * 2^-24), so every product is exact, and a result differs from the CPU's by
 * the order of its fp32 sums only (fp32 outputs: fp32's tolerance) and,
 * where it is a half-width act, by one rounding to nearest even more
 * (2^-8 relative). Odd sizes, more than 65535 rows, the GEMM plans made
 * once per product, and the attention both on the own kernels and on
 * cuDNN's. Without the CUDA backend or a GPU every check is
 * reported as skipped. */
#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "check.h"
#include "device/device.h"
#ifdef TS_GPU
#include "cuda_api.h"
#include "gpu_check.h"
#include "groups.h"

static const struct backend *low;   /* under test: tf32, bf16 or fp16 */
static enum precision low_precision;
static const char *low_name;

static const double ATOL = 1e-5, RTOL = 1e-4, BF16_RTOL = 1.0 / 256;

/* The error of fp32 sums over n terms in another order. */
static double sum_atol(int n)
{
	return 1e-4 + 2e-7 * n;
}

/* ---- bf16 on the host ---- */

static float widen(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* x rounded to bf16 in place: exact in either backend's acts. */
static void round_in_place(float *x, size_t n)
{
	uint16_t *h = xmalloc(n * sizeof *h);
	round_bf16(h, x, n);
	for (size_t i = 0; i < n; i++)
		x[i] = widen(h[i]);
	free(h);
}

static float *exact_randoms(size_t n, float scale)
{
	float *x = randoms(n, scale);
	round_in_place(x, n);
	return x;
}

/* x[n] on the GPU as low's acts. */
static struct act *acts_on_gpu(const float *x, size_t n)
{
	if (acts_are_floats(low))
		return on_gpu(x, n * sizeof *x);
	uint16_t *h = xmalloc(n * sizeof *h);
	if (low_precision == PREC_FP16)
		for (size_t i = 0; i < n; i++) {
			_Float16 f = (_Float16)x[i];
			memcpy(h + i, &f, sizeof f);
		}
	else
		round_bf16(h, x, n);
	struct act *d = on_gpu(h, n * sizeof *h);
	free(h);
	return d;
}

/* low's acts d[n] as floats on the host. */
static float *acts_back(const struct act *d, size_t n)
{
	if (acts_are_floats(low))
		return back((const float *)d, n);
	uint16_t *h = xmalloc(n * sizeof *h);
	float *x = xmalloc(n * sizeof *x);
	gpu->download(h, d, n * sizeof *h);
	for (size_t i = 0; i < n; i++) {
		_Float16 f;
		memcpy(&f, h + i, sizeof f);
		x[i] = low_precision == PREC_FP16 ? (float)f : widen(h[i]);
	}
	free(h);
	return x;
}

/* x rounded in place as low's acts hold it. */
static void as_acts_hold(float *x, size_t n)
{
	if (low_precision == PREC_FP16)
		for (size_t i = 0; i < n; i++)
			x[i] = (float)(_Float16)x[i];
	else if (!acts_are_floats(low))
		round_in_place(x, n);
}

/* Acts against the CPU's floats: one rounding more where they are bf16. */
static void expect_acts_close(const char *what, const struct act *d, const float *want, size_t n,
			      double atol, double rtol)
{
	float *got = acts_back(d, n);
	compare(what, got, want, n, atol, acts_are_floats(low) ? rtol : rtol + BF16_RTOL);
	free(got);
}

static void expect_acts_same(const char *what, const struct act *d, const float *want, size_t n)
{
	float *got = acts_back(d, n);
	CHECK(!memcmp(got, want, n * sizeof *got), "%s: %zu values, the CPU's bits", what, n);
	free(got);
}

/* ---- the ops ---- */

/* as_act: the floats themselves, or each rounded to nearest even. */
static void test_as_act(void)
{
	size_t n = 1001;
	float *x = randoms(n, 3), *want = xmalloc(n * sizeof *want);
	memcpy(want, x, n * sizeof *x);
	as_acts_hold(want, n);
	float *d_x = on_gpu(x, n * sizeof *x);
	struct act *space = gpu->alloc(n * low->act_size);
	const struct act *a = low->as_act(space, d_x, n);
	char what[96];
	snprintf(what, sizeof what, "%s as_act", low_name);
	expect_acts_same(what, a, want, n);
	gpu->release(d_x), gpu->release(space);
	free(x), free(want);
}

static void test_linear(int N, int Cin, int Cout)
{
	size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
	float *in = exact_randoms(ni, 1), *w = exact_randoms(nw, 0.1f), *b = randoms(Cout, 1);
	float *dout = exact_randoms(no, 1), *out = xmalloc(no * sizeof *out);
	float *din = randoms(ni, 1), *dw = randoms(nw, 1), *db = randoms(Cout, 1);
	struct act *d_in = acts_on_gpu(in, ni), *d_w = acts_on_gpu(w, nw), *d_dout = acts_on_gpu(dout, no);
	struct act *d_act = gpu->alloc(no * low->act_size);
	float *d_b = on_gpu(b, Cout * 4), *d_out = gpu->alloc(no * 4);
	float *d_din = on_gpu(din, ni * 4), *d_dw = on_gpu(dw, nw * 4), *d_db = on_gpu(db, Cout * 4);
	char what[128], shape[64];
	snprintf(shape, sizeof shape, "%s %d x %d -> %d", low_name, N, Cin, Cout);

	linear_forward(out, in, w, b, N, Cin, Cout);
	low->linear_forward(d_out, d_in, d_w, d_b, N, Cin, Cout);
	snprintf(what, sizeof what, "%s: linear_forward with its bias", shape);
	expect_close(what, d_out, out, no, sum_atol(Cin), RTOL);
	int plans = cuda_gemm_plans();
	low->linear_forward(d_out, d_in, d_w, d_b, N, Cin, Cout);
	snprintf(what, sizeof what, "%s: the same product again takes its plan (%d plans)", shape, plans);
	CHECK(cuda_gemm_plans() == plans, "%s", what);
	low->linear_forward_act(d_act, d_in, d_w, d_b, N, Cin, Cout);
	snprintf(what, sizeof what, "%s: linear_forward_act", shape);
	expect_acts_close(what, d_act, out, no, sum_atol(Cin), RTOL);
	linear_forward(out, in, w, NULL, N, Cin, Cout);
	low->linear_forward(d_out, d_in, d_w, NULL, N, Cin, Cout);
	snprintf(what, sizeof what, "%s: linear_forward without a bias", shape);
	expect_close(what, d_out, out, no, sum_atol(Cin), RTOL);

	linear_backward(din, dw, db, dout, in, w, N, Cin, Cout, 1);
	low->linear_backward(d_din, d_dw, d_db, d_dout, d_in, d_w, N, Cin, Cout, 1);
	snprintf(what, sizeof what, "%s: linear_backward din, accumulated", shape);
	expect_close(what, d_din, din, ni, sum_atol(Cout), RTOL);
	snprintf(what, sizeof what, "%s: linear_backward dw", shape);
	expect_close(what, d_dw, dw, nw, sum_atol(N), RTOL);
	snprintf(what, sizeof what, "%s: linear_backward dbias", shape);
	expect_close(what, d_db, db, Cout, sum_atol(N), RTOL);
	linear_backward(din, dw, NULL, dout, in, w, N, Cin, Cout, 0);
	low->linear_backward(d_din, d_dw, NULL, d_dout, d_in, d_w, N, Cin, Cout, 0);
	snprintf(what, sizeof what, "%s: linear_backward din, written", shape);
	expect_close(what, d_din, din, ni, sum_atol(Cout), RTOL);

	void *d[] = { d_in, d_w, d_dout, d_act, d_b, d_out, d_din, d_dw, d_db };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(in), free(w), free(b), free(dout), free(out), free(din), free(dw), free(db);
}

/* A bias 4 bytes past a 16-byte boundary cannot ride cuBLASLt's epilogue
 * (it wants 16): the unfused plan must still add it, to an fp32 output and
 * to one in acts. */
static void test_unaligned_bias(int N, int Cin, int Cout)
{
	size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
	float *in = exact_randoms(ni, 1), *w = exact_randoms(nw, 0.1f), *b = randoms(Cout + 1, 1);
	float *out = xmalloc(no * sizeof *out);
	struct act *d_in = acts_on_gpu(in, ni), *d_w = acts_on_gpu(w, nw);
	struct act *d_act = gpu->alloc(no * low->act_size);
	float *d_b = on_gpu(b, (Cout + 1) * 4), *d_out = gpu->alloc(no * 4);
	char what[128];
	linear_forward(out, in, w, b + 1, N, Cin, Cout);
	low->linear_forward(d_out, d_in, d_w, d_b + 1, N, Cin, Cout);
	snprintf(what, sizeof what, "%s %d x %d -> %d, a bias aligned to 4 bytes: linear_forward adds it",
		 low_name, N, Cin, Cout);
	expect_close(what, d_out, out, no, sum_atol(Cin), RTOL);
	low->linear_forward_act(d_act, d_in, d_w, d_b + 1, N, Cin, Cout);
	snprintf(what, sizeof what, "%s %d x %d -> %d, a bias aligned to 4 bytes: linear_forward_act adds it",
		 low_name, N, Cin, Cout);
	expect_acts_close(what, d_act, out, no, sum_atol(Cin), RTOL);
	void *d[] = { d_in, d_w, d_act, d_b, d_out };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(in), free(w), free(b), free(out);
}

/* Plans by bucket: sizes up to 64 each their own, then eight buckets an
 * octave (1000 and 1001 rows share 1024's); a call in a plan made for
 * another size of its bucket still computes its own. */
static void test_plans(void)
{
	enum { PN = 1001, PC = 40, PF = 24 };
	float *in = exact_randoms(PN * PC, 1), *w = exact_randoms(PF * PC, 1), *out = xmalloc(PN * PF * 4);
	struct act *d_in = acts_on_gpu(in, PN * PC), *d_w = acts_on_gpu(w, PF * PC);
	float *d_out = gpu->alloc(PN * PF * 4);
	int before = cuda_gemm_plans();
	low->linear_forward(d_out, d_in, d_w, NULL, 33, PC, PF);
	low->linear_forward(d_out, d_in, d_w, NULL, 32, PC, PF);
	low->linear_forward(d_out, d_in, d_w, NULL, 33, PC, PF);
	CHECK(cuda_gemm_plans() == before + 2, "%s: 33 and 32 rows make two plans (%d, then %d)", low_name,
	      before, cuda_gemm_plans());
	low->linear_forward(d_out, d_in, d_w, NULL, 1000, PC, PF);
	low->linear_forward(d_out, d_in, d_w, NULL, PN, PC, PF);
	CHECK(cuda_gemm_plans() == before + 3, "%s: 1000 and 1001 rows share one plan (%d plans)", low_name,
	      cuda_gemm_plans() - before);
	linear_forward(out, in, w, NULL, PN, PC, PF);
	char what[96];
	snprintf(what, sizeof what, "%s: 1001 rows in the plan made for 1000", low_name);
	expect_close(what, d_out, out, (size_t)PN * PF, sum_atol(PC), RTOL);
	gpu->release(d_in), gpu->release(d_w), gpu->release(d_out);
	free(in), free(w), free(out);
}

/* The residual LayerNorm's bf16 copy of its output beside the fp32 one. */
static void test_layernorm(int rows, int cols, float p)
{
	size_t n = (size_t)rows * cols;
	float *sum = randoms(n, 2), *res = randoms(n, 1), *w = randoms(cols, 1), *b = randoms(cols, 1);
	float *bias = randoms(cols, 1), *out = xmalloc(n * 4), *mean = xmalloc(rows * 4);
	float *rstd = xmalloc(rows * 4);
	float *d_sum = on_gpu(sum, n * 4), *d_res = on_gpu(res, n * 4), *d_w = on_gpu(w, cols * 4);
	float *d_b = on_gpu(b, cols * 4), *d_bias = on_gpu(bias, cols * 4), *d_out = gpu->alloc(n * 4);
	float *d_mean = gpu->alloc(rows * 4), *d_rstd = gpu->alloc(rows * 4);
	struct act *d_low = gpu->alloc(n * low->act_size);
	residual_layernorm_forward(out, sum, mean, rstd, res, bias, w, b, rows, cols, 1e-12f, p, 42);
	low->residual_layernorm_forward(d_out, acts_are_floats(low) ? (struct act *)d_out : d_low, d_sum,
					d_mean, d_rstd, d_res, d_bias, d_w, d_b, rows, cols, 1e-12f, p, 42);
	char what[128];
	snprintf(what, sizeof what, "%s residual_layernorm_forward %dx%d p %.1f: the output", low_name, rows,
		 cols, p);
	expect_close(what, d_out, out, n, ATOL, RTOL);
	snprintf(what, sizeof what, "%s residual_layernorm_forward %dx%d p %.1f: the sum", low_name, rows, cols,
		 p);
	expect_close(what, d_sum, sum, n, ATOL, RTOL);
	if (!acts_are_floats(low)) {
		snprintf(what, sizeof what, "%s residual_layernorm_forward %dx%d p %.1f: its acts", low_name,
			 rows, cols, p);
		expect_acts_close(what, d_low, out, n, ATOL, RTOL);
	}
	void *d[] = { d_sum, d_res, d_w, d_b, d_bias, d_out, d_mean, d_rstd, d_low };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(sum), free(res), free(w), free(b), free(bias), free(out), free(mean), free(rstd);
}

/* The fused row ops' outputs in acts: a residual LayerNorm backward's
 * branch gradient through its dropout, and the embeddings' LayerNorm. */
static void test_fused_rows(int rows, int cols, float p)
{
	enum { WORDS = 50, TYPES = 2, POSITIONS = 64 };
	size_t n = (size_t)rows * cols;
	const struct backend *cpu = backend_cpu();
	float *x = randoms(n, 2), *dout = randoms(n, 1), *w = randoms(cols, 1), *b = randoms(cols, 1);
	float *out = xmalloc(n * 4), *branch = xmalloc(n * 4), *mean = xmalloc(rows * 4);
	float *rstd = xmalloc(rows * 4), *dw = xcalloc(cols, 4), *db = xcalloc(cols, 4);
	layernorm_forward(out, mean, rstd, x, w, b, rows, cols, 1e-12f);
	float *d_x = on_gpu(x, n * 4), *d_dout = on_gpu(dout, n * 4), *d_w = on_gpu(w, cols * 4);
	float *d_b = on_gpu(b, cols * 4), *d_mean = on_gpu(mean, rows * 4), *d_rstd = on_gpu(rstd, rows * 4);
	float *d_dw = gpu->alloc(cols * 4), *d_db = gpu->alloc(cols * 4), *d_out = gpu->alloc(n * 4);
	struct act *d_low = gpu->alloc(n * low->act_size);
	cpu->residual_layernorm_backward(dout, (struct act *)branch, dw, db, dout, x, mean, rstd, w, rows,
					 cols, p, 7);
	low->residual_layernorm_backward(d_dout, d_low, d_dw, d_db, d_dout, d_x, d_mean, d_rstd, d_w, rows,
					 cols, p, 7);
	char what[128];
	snprintf(what, sizeof what, "%s residual_layernorm_backward %dx%d p %.1f: din", low_name, rows, cols,
		 p);
	expect_close(what, d_dout, dout, n, 1e-3, RTOL);
	snprintf(what, sizeof what, "%s residual_layernorm_backward %dx%d p %.1f: the branch in acts",
		 low_name, rows, cols, p);
	expect_acts_close(what, d_low, branch, n, 1e-3, RTOL);

	int32_t *ids = xmalloc(rows * 4), *types = xmalloc(rows * 4), *positions = xmalloc(rows * 4);
	for (int r = 0; r < rows; r++) {
		ids[r] = (int32_t)rng_below(&gen, WORDS);
		types[r] = r % TYPES;
		positions[r] = r % POSITIONS;
	}
	float *word = randoms(WORDS * cols, 1), *pos = randoms(POSITIONS * cols, 1);
	float *type = randoms(TYPES * cols, 1);
	struct embedding e = { ids, types, positions, word, pos, type, rows, cols };
	struct embedding de = { on_gpu(ids, rows * 4), on_gpu(types, rows * 4), on_gpu(positions, rows * 4),
				on_gpu(word, WORDS * cols * 4), on_gpu(pos, POSITIONS * cols * 4),
				on_gpu(type, TYPES * cols * 4), rows, cols };
	cpu->embedding_layernorm_forward(out, NULL, x, mean, rstd, &e, w, b, 1e-12f, p, 9);
	low->embedding_layernorm_forward(d_out, d_low, d_x, d_mean, d_rstd, &de, d_w, d_b, 1e-12f, p, 9);
	snprintf(what, sizeof what, "%s embedding_layernorm_forward %dx%d p %.1f: the output", low_name,
		 rows, cols, p);
	expect_close(what, d_out, out, n, 1e-4, RTOL);
	if (!acts_are_floats(low)) {
		snprintf(what, sizeof what, "%s embedding_layernorm_forward %dx%d p %.1f: its acts",
			 low_name, rows, cols, p);
		expect_acts_close(what, d_low, out, n, 1e-4, RTOL);
	}
	const void *d[] = { d_x, d_dout, d_w, d_b, d_mean, d_rstd, d_dw, d_db, d_out, d_low, de.ids,
			    de.types, de.positions, de.word, de.pos, de.type };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release((void *)d[i]);
	free(x), free(dout), free(w), free(b), free(out), free(branch), free(mean), free(rstd);
	free(dw), free(db), free(ids), free(types), free(positions), free(word), free(pos), free(type);
}

/* bias + GELU with pre in acts, kept rounded as the acts hold it, GELU taken
 * of that; GELU's backward into acts. */
static void test_gelu(int rows, int F)
{
	size_t n = (size_t)rows * F;
	float *pre = exact_randoms(n, 2), *bias = randoms(F, 1), *zero = xcalloc(F, 4);
	float *kept = xmalloc(n * 4), *out = xmalloc(n * 4), *dout = randoms(n, 1), *dpre = xmalloc(n * 4);
	for (size_t i = 0; i < n; i++)
		kept[i] = pre[i] + bias[i % F];
	as_acts_hold(kept, n);
	bias_gelu_forward(out, kept, zero, rows, F);   /* GELU of pre as kept */
	gelu_backward(dpre, dout, kept, rows, F);
	struct act *d_pre = acts_on_gpu(pre, n), *d_pre2 = acts_on_gpu(pre, n);
	struct act *d_low = gpu->alloc(n * low->act_size), *d_dpre = gpu->alloc(n * low->act_size);
	float *d_bias = on_gpu(bias, F * 4), *d_out = gpu->alloc(n * 4), *d_dout = on_gpu(dout, n * 4);
	char what[128];
	low->bias_gelu_forward(d_out, NULL, d_pre, d_bias, rows, F);
	snprintf(what, sizeof what, "%s bias_gelu_forward %dx%d: pre + bias as kept", low_name, rows, F);
	expect_acts_same(what, d_pre, kept, n);
	snprintf(what, sizeof what, "%s bias_gelu_forward %dx%d: GELU in fp32", low_name, rows, F);
	expect_close(what, d_out, out, n, ATOL, RTOL);
	low->bias_gelu_forward(NULL, d_low, d_pre2, d_bias, rows, F);
	snprintf(what, sizeof what, "%s bias_gelu_forward %dx%d: GELU in acts", low_name, rows, F);
	expect_acts_close(what, d_low, out, n, ATOL, RTOL);
	low->gelu_backward(d_dpre, d_dout, d_pre, rows, F);
	snprintf(what, sizeof what, "%s gelu_backward %dx%d", low_name, rows, F);
	expect_acts_close(what, d_dpre, dpre, n, ATOL, RTOL);
	void *d[] = { d_pre, d_pre2, d_low, d_dpre, d_bias, d_out, d_dout };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(pre), free(bias), free(zero), free(kept), free(out), free(dout), free(dpre);
}

enum { AB = 3 };

/* Which kernels run an attention test: the own ones; cuDNN's (bf16 and fp16
 * acts, where it takes the shape); cuDNN's forward and the own backward from
 * its state. */
enum attention_path { OWN, CUDNN, CUDNN_THEN_OWN };
static const char *const path_names[] = { "own kernel", "cuDNN", "cuDNN forward, own backward" };

/* One forward and backward of the attention test's inputs on the GPU. */
struct attention_run {
	struct attention a;
	struct act *ctx, *dq, *dk, *dv;
	const float *dctx;
	float *state;
};

/* d[n] acts filled with NaN: what a kernel leaves unwritten shows. */
static void poison(struct act *d, size_t n)
{
	void *nan = xmalloc(n * low->act_size);
	memset(nan, 0xff, n * low->act_size);
	gpu->upload(d, nan, n * low->act_size);
	free(nan);
}

/* x[n] as acts on the GPU, then tail acts of NaN: a kernel that reads past
 * the rows it was given multiplies NaN (even by 0), which shows. */
static struct act *acts_with_tail(const float *x, size_t n, size_t tail)
{
	struct act *src = acts_on_gpu(x, n), *d = gpu->alloc((n + tail) * low->act_size);
	void *h = xmalloc(n * low->act_size);
	poison(d, n + tail);
	gpu->download(h, src, n * low->act_size);
	gpu->upload(d, h, n * low->act_size);
	gpu->release(src);
	free(h);
	return d;
}

/* The attention calls cuDNN ran so far. */
static long cudnn_runs(void)
{
	return cuda_attention_runs(ATT_CUDNN_UNIFIED) + cuda_attention_runs(ATT_CUDNN_COMPOSITE);
}

static void run_attention(const struct attention_run *r, enum attention_path path)
{
	cuda_sdpa_use(path != OWN);
	low->attention_forward(r->ctx, r->state, &r->a);
	cuda_sdpa_use(path == CUDNN);
	low->attention_backward(r->dq, r->dk, r->dv, r->dctx, r->state, &r->a);
	cuda_sdpa_use(1);
}

/* The attention on acts, laid out as bert_graph.c does: q|k|v fused [N, 3C],
 * or (the last layer's head rows, the first sequence asking for none) q
 * apart and k|v [N, 2C]. Against the CPU, but cuDNN's dropout (its own
 * random numbers): run twice, the same bits. cuDNN rounds the probabilities
 * to the acts' type before their product with V: a looser tolerance for it.
 * The gradients start as NaN, so a row no kernel writes shows, and NaN
 * follows the last row of q, k, v and ctx, so a read past them shows too.
 * masked 2: a padding key inside the first sequence, which cuDNN's lengths
 * cannot say: the own kernel must run it; masked 3: a hole of 2 band + 1
 * keys there, so that the band of the row in its middle holds no real key. */
static int band;   /* of the attentions test_attention runs: a local band (ModernBERT's), 0 none */

static void test_attention(int T, int H, int C, int masked, int head_rows, float p, enum attention_path path)
{
	if (path != OWN && acts_are_floats(low))
		return;   /* cuDNN's attention is for bf16 and fp16 acts */
	if (path == CUDNN_THEN_OWN && p > 0)
		return;   /* cuDNN's dropout is not the own kernel's: with dropout, both or neither */
	/* a sequence without a real key is uniform on the CPU and the own kernel; cuDNN has none */
	int lengths[AB] = { T, T / 2 + 1, T / 3 + 1 }, real[AB] = { T, T / 2 - 1, path == OWN ? 0 : 1 };
	int32_t kv_start[AB + 1] = { 0 }, q_start[AB + 1] = { 0 }, q_at[AB * AB];
	for (int b = 0; b < AB; b++)
		kv_start[b + 1] = kv_start[b] + lengths[b];
	int NT = kv_start[AB], R = NT;
	uint8_t *mask = xmalloc((size_t)NT);
	int holes = masked >= 2, hole = masked == 3 ? 2 * band + 1 : 1;   /* keys 1.. of the first */
	for (int b = 0; b < AB; b++)
		for (int t = 0; t < lengths[b]; t++)
			mask[kv_start[b] + t] = t < real[b] && !(holes && b == 0 && t >= 1 && t <= hole);
	if (head_rows) {   /* sequence b asks for b query rows, at its last keys */
		for (int b = 0; b < AB; b++) {
			q_start[b + 1] = q_start[b] + b;
			for (int i = 0; i < b; i++)
				q_at[q_start[b] + i] = kv_start[b + 1] - b + i;
		}
		R = q_start[AB];
	}
	int64_t p_start[AB + 1];
	attention_probs(p_start, kv_start, head_rows ? q_start : NULL, AB, H);
	int ldq = head_rows ? C : 3 * C, ldkv = head_rows ? 2 * C : 3 * C;
	size_t kv_n = (size_t)NT * ldkv, q_n = (size_t)R * ldq, ctx_n = (size_t)R * C;
	float *kv = exact_randoms(kv_n, 1), *q = head_rows ? exact_randoms(q_n, 1) : kv;
	float *ctx = xcalloc(ctx_n, 4), *dctx = randoms(ctx_n, 1);
	float *dkv = xcalloc(kv_n, 4), *dq = head_rows ? xcalloc(q_n, 4) : dkv;
	enum { TAIL = 128 };   /* rows: a tile of cuDNN's */
	struct act *d_kv = acts_with_tail(kv, kv_n, TAIL * ldkv);
	struct act *d_q = head_rows ? acts_with_tail(q, q_n, TAIL * ldq) : d_kv;
	struct act *d_ctx = gpu->alloc((ctx_n + TAIL * C) * low->act_size);
	struct act *d_dkv = gpu->alloc(kv_n * low->act_size);
	poison(d_ctx, ctx_n + TAIL * C);
	struct act *d_dq = head_rows ? gpu->alloc(q_n * low->act_size) : d_dkv;
	float *d_dctx = on_gpu(dctx, ctx_n * 4);
	float *d_state = gpu->alloc((size_t)R * H * low->attention_state * 4);
	uint8_t *d_mask = masked ? on_gpu(mask, (size_t)NT) : NULL;
	int32_t *d_kv_start = on_gpu(kv_start, sizeof kv_start), *d_q_start = on_gpu(q_start, sizeof q_start);
	int32_t *d_q_at = on_gpu(q_at, sizeof q_at);
	int64_t *d_p_start = on_gpu(p_start, sizeof p_start);
	size_t k_at = head_rows ? 0 : (size_t)C;   /* k's column in the kv rows */
	const float *k = kv + k_at;
	struct attention cpu_a = { AB, T, C, H, float_acts(q), float_acts(k), float_acts(k + C), ldq, ldkv,
				   kv_start, head_rows ? q_start : NULL, p_start, masked ? mask : NULL, p,
				   99, R, NULL };
	struct attention_run run = {
		{ AB, T, C, H, d_q, act_at(low, d_kv, k_at), act_at(low, d_kv, k_at + C), ldq, ldkv,
		  d_kv_start, head_rows ? d_q_start : NULL, d_p_start, d_mask, p, 99, R, d_ctx, holes,
		  head_rows },
		d_ctx, d_dq, act_at(low, d_dkv, k_at), act_at(low, d_dkv, k_at + C), d_dctx, d_state };
	cpu_a.band = run.a.band = band;
	cpu_a.q_at = head_rows ? q_at : NULL;
	run.a.q_at = head_rows ? d_q_at : NULL;
	char what[256], shape[160];
	snprintf(shape, sizeof shape, "%s attention (%s) T %d, %s, %d heads of %d, %s, p %.1f, band %d", low_name,
		 path_names[path], T, head_rows ? "head rows" : "all rows", H, C / H, masked == 3 ? "a hole past the band" : masked ? "masked" : "no mask",
		 p, band);
	long before = cudnn_runs();
	poison(d_dkv, kv_n);
	if (head_rows)
		poison(d_dq, q_n);
	run_attention(&run, path);
	int on_cudnn = cudnn_runs() > before, refused;
	const char *why = cuda_sdpa_declined(&refused);
	if (holes) {
		snprintf(what, sizeof what, "%s: a padding key inside a sequence: the own kernel's", shape);
		CHECK(!on_cudnn, "%s", what);
	}
	/* heads past 128 wide, padding keys inside a sequence and local bands
	 * are the own kernel's by design; any other shape is cuDNN's where this
	 * machine has it, and its refusal a failure that names cuDNN's reason */
	if (band) {
		snprintf(what, sizeof what, "%s: a local band: the own kernel's", shape);
		CHECK(!on_cudnn, "%s", what);
	}
	if (path != OWN && !on_cudnn && !holes && !band && C / H <= 128) {
		if (refused)
			CHECK(0, "%s: cuDNN takes it (it refused: %s)", shape, why);
		else
			SKIP("%s: not on cuDNN here: %s", shape, why);
	}
	if (path == CUDNN && p > 0 && on_cudnn) {
		float *ctx1 = acts_back(d_ctx, ctx_n), *dkv1 = acts_back(d_dkv, kv_n);
		run_attention(&run, path);
		snprintf(what, sizeof what, "%s: its own dropout, run again: ctx", shape);
		expect_acts_same(what, d_ctx, ctx1, ctx_n);
		snprintf(what, sizeof what, "%s: its own dropout, run again: the gradients", shape);
		expect_acts_same(what, d_dkv, dkv1, kv_n);
		free(ctx1), free(dkv1);
	} else {
		int own = !on_cudnn;
		double atol = own ? 1e-4 : 2e-3, rtol = own ? RTOL : 2e-2;
		attention_forward(ctx, NULL, &cpu_a);
		snprintf(what, sizeof what, "%s: ctx", shape);
		expect_acts_close(what, d_ctx, ctx, ctx_n, atol, rtol);
		float *dk = dkv + k_at;
		attention_backward(dq, dk, dk + C, dctx, NULL, &cpu_a);
		snprintf(what, sizeof what, "%s: dk, dv%s", shape, head_rows ? "" : ", dq");
		expect_acts_close(what, d_dkv, dkv, kv_n, atol, rtol);
		if (head_rows) {
			snprintf(what, sizeof what, "%s: dq", shape);
			expect_acts_close(what, d_dq, dq, q_n, atol, rtol);
		}
	}
	if (head_rows)
		gpu->release(d_q), gpu->release(d_dq), free(q), free(dq);
	void *d[] = { d_kv, d_ctx, d_dkv, d_dctx, d_state, d_kv_start, d_q_start, d_q_at, d_p_start };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	if (d_mask)
		gpu->release(d_mask);
	free(mask), free(kv), free(ctx), free(dctx), free(dkv);
}

static void test_attentions(enum attention_path path)
{
	test_attention(17, 4, 64, 1, 0, 0, path);
	test_attention(17, 4, 64, 1, 1, 0, path);
	test_attention(17, 4, 64, 2, 0, 0, path);
	test_attention(128, 2, 128, 1, 0, 0, path);     /* BERT's heads, 64 wide */
	test_attention(128, 2, 128, 1, 0, 0.1f, path);
	test_attention(77, 2, 128, 0, 1, 0.1f, path);
	test_attention(200, 12, 768, 1, 0, 0, path);   /* BERT-base's, past one 64-key tile of cuDNN's */
	test_attention(40, 1, cuda_attention_widest(), 1, 0, 0.1f, path);  /* the widest head: the own kernel's */
	band = 3;   /* ModernBERT's local band, narrower than the sequences and than a 32-key tile */
	test_attention(17, 4, 64, 1, 0, 0, path);
	test_attention(17, 4, 64, 2, 1, 0.1f, path);
	test_attention(17, 4, 64, 3, 0, 0.1f, path);
	band = 40;  /* wider than a tile */
	test_attention(200, 2, 128, 1, 0, 0.1f, path);
	band = 0;
}

/* The precision under test, low: its backend's table. */
/* Rotary embeddings and GeGLU in acts: the CPU's over the same values as
 * the acts hold them, one rounding more. */
static void test_rotary_geglu(int rows, int C, int heads, int F)
{
	size_t n = (size_t)rows * 3 * C, m = (size_t)rows * 2 * F;
	int32_t *pos = xmalloc(sizeof *pos * (size_t)rows);
	for (int r = 0; r < rows; r++)
		pos[r] = 31 * r % 8192;
	float *x = exact_randoms(n, 2), *in = exact_randoms(m, 2), *dout = randoms((size_t)rows * F, 1);
	float *out = xmalloc(sizeof *out * (size_t)rows * F), *din = xmalloc(sizeof *din * m);
	struct act *d_x = acts_on_gpu(x, n), *d_in = acts_on_gpu(in, m);
	struct act *d_out = gpu->alloc((size_t)rows * F * low->act_size), *d_din = gpu->alloc(m * low->act_size);
	int32_t *d_pos = on_gpu(pos, sizeof *pos * (size_t)rows);
	float *d_dout = on_gpu(dout, sizeof *dout * (size_t)rows * F);
	as_acts_hold(x, n);
	as_acts_hold(in, m);
	rotary_rows(x, 0, 3 * C, 2, C, heads, pos, rows, 160000.0f, 0);
	geglu_rows(out, in, rows, F);
	geglu_backward_rows(din, dout, in, rows, F);
	low->rotary(d_x, 3 * C, 2, C, heads, d_pos, rows, 160000.0f, 0);
	low->geglu_forward(d_out, d_in, rows, F);
	low->geglu_backward(d_din, d_dout, d_in, rows, F);
	char what[128];
	snprintf(what, sizeof what, "%s rotary %dx%d, %d heads", low_name, rows, C, heads);
	expect_acts_close(what, d_x, x, n, 1e-4, RTOL);
	float *turned = acts_back(d_x, n);   /* turned back (a local layer's theta), both from the GPU's */
	rotary_rows(turned, 0, 3 * C, 2, C, heads, pos, rows, 10000.0f, 1);
	low->rotary(d_x, 3 * C, 2, C, heads, d_pos, rows, 10000.0f, 1);
	snprintf(what, sizeof what, "%s rotary's inverse %dx%d, %d heads", low_name, rows, C, heads);
	expect_acts_close(what, d_x, turned, n, 1e-4, RTOL);
	free(turned);
	snprintf(what, sizeof what, "%s geglu_forward %dx%d", low_name, rows, F);
	expect_acts_close(what, d_out, out, (size_t)rows * F, ATOL, RTOL);
	snprintf(what, sizeof what, "%s geglu_backward %dx%d", low_name, rows, F);
	expect_acts_close(what, d_din, din, m, ATOL, RTOL);
	void *d[] = { d_x, d_in, d_out, d_din, d_pos, d_dout };
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		gpu->release(d[i]);
	free(pos), free(x), free(in), free(dout), free(out), free(din);
}

static void use(enum precision p)
{
	low = backend_open("cuda", p);
	low_precision = p;
	low_name = low->name;
}

static void test_ops(void)
{
	test_as_act();
	test_linear(67, 96, 384);
	test_linear(128, 768, 2304);        /* BERT-base's QKV product */
	test_linear(70001, 37, 5);          /* odd sizes, more rows than a grid's y */
	test_linear(5, 3, 1);
	test_unaligned_bias(67, 96, 384);
	test_unaligned_bias(5, 3, 2);
	test_plans();
	test_layernorm(67, 96, 0);
	test_layernorm(300, 768, 0.1f);
	test_layernorm(70001, 37, 0.1f);
	test_fused_rows(67, 96, 0);
	test_fused_rows(300, 768, 0.1f);
	test_fused_rows(70001, 37, 0.1f);
	test_gelu(67, 384);
	test_gelu(70001, 5);
	test_rotary_geglu(67, 96, 6, 192);
	test_rotary_geglu(4099, 64, 1, 5);
}

static void test_every_attention(void)
{
	test_attentions(OWN);
	test_attentions(CUDNN);
	test_attentions(CUDNN_THEN_OWN);
}

static int sm;   /* the GPU's compute capability */

/* Runs test, a group's checks, at precision p where this GPU has it. */
static void at(enum precision p, void (*test)(void))
{
	const char *lacking = precision_lacking(p, sm);
	if (lacking) {
		SKIP("the CUDA backend's %s against the CPU: %s", precision_name(p), lacking);
		return;
	}
	use(p);
	test();
}

static void tf32_ops(void) { at(PREC_TF32, test_ops); }
static void tf32_attention(void) { at(PREC_TF32, test_every_attention); }
static void bf16_ops(void) { at(PREC_BF16, test_ops); }
static void bf16_attention(void) { at(PREC_BF16, test_every_attention); }
static void fp16_ops(void) { at(PREC_FP16, test_ops); }
static void fp16_attention(void) { at(PREC_FP16, test_every_attention); }

static const struct group groups[] = {
	{ "tf32", tf32_ops }, { "tf32_attention", tf32_attention }, { "bf16", bf16_ops },
	{ "bf16_attention", bf16_attention }, { "fp16", fp16_ops }, { "fp16_attention", fp16_attention },
};

static int open_gpu(void)
{
	if (cuda_device_count() == 0) {
		SKIP("the CUDA backend's tf32, bf16 and fp16 against the CPU: no GPU here");
		return 0;
	}
	sm = device_sm("cuda");
	gpu = backend_open("cuda", PREC_FP32);
	rng_seed(&gen, 23);
	return 1;
}
#endif

int main(int argc, char **argv)
{
#ifndef TS_GPU
	(void)argc, (void)argv;
	SKIP("the CUDA backend's tf32, bf16 and fp16 against the CPU: this build has no CUDA backend (GPU=1)");
	return check_failed;
#else
	return run_groups(argc, argv, groups, sizeof groups / sizeof *groups, open_gpu);
#endif
}
