/* The backend seam, without a GPU: "sim" is the CPU's ops over memory of its
 * own (host = 0), reached only through upload and download, whose ops check
 * that every buffer they get is sim memory. A model, its optimizer and its
 * checkpoint files on sim must give the CPU's results bit for bit: a host
 * copy not pushed, or a host pointer handed to an op, fails here. */
#include "backend/cpu_ops.h"
#include "check.h"
#include "model/bert.h"
#include "model/modeldir.h"
#include "model/optim.h"
#include "util/err.h"
#include "util/rng.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { B = 3, T = 9, V = 40, MAX_BUFS = 256 };

/* ---- sim: CPU ops on memory the host may not touch directly ---- */

static struct { char *p; size_t n; } bufs[MAX_BUFS];
static int foreign;    /* ops given a pointer outside sim memory */

static void *sim_alloc(size_t bytes)
{
	for (int i = 0; i < MAX_BUFS; i++)
		if (!bufs[i].p) {
			bufs[i].p = xcalloc(1, bytes ? bytes : 1);
			bufs[i].n = bytes;
			return bufs[i].p;
		}
	die("sim: more than %d buffers", MAX_BUFS);
}

static void sim_release(void *p)
{
	for (int i = 0; i < MAX_BUFS; i++)
		if (bufs[i].p == p) {
			free(p);
			bufs[i].p = NULL;
			return;
		}
	foreign++;
}

/* NULL is fine (an optional argument); anything else must lie in a buffer. */
static const void *sim(const void *p)
{
	if (!p)
		return p;
	for (int i = 0; i < MAX_BUFS; i++)
		if (bufs[i].p && (const char *)p >= bufs[i].p && (const char *)p <= bufs[i].p + bufs[i].n)
			return p;
	foreign++;
	return p;
}

static void sim_copy(void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

static void sim_zero(void *p, size_t bytes)
{
	memset((void *)sim(p), 0, bytes);
}

static void sim_embedding_layernorm_forward(float *out, struct act *low, float *sum, float *mean,
					    float *rstd, const struct embedding *e, const float *w,
					    const float *b, float eps, float p, uint64_t seed)
{
	sim(out), sim(sum), sim(mean), sim(rstd), sim(e->ids), sim(e->types), sim(e->positions);
	sim(e->word), sim(e->pos), sim(e->type), sim(w), sim(b);
	backend_cpu()->embedding_layernorm_forward(out, low, sum, mean, rstd, e, w, b, eps, p, seed);
}

static void sim_embedding_backward(float *dword, float *dpos, float *dtype, const float *dout,
				   const int32_t *ids, const int32_t *types,
				   const int32_t *positions, int n, int c, int pad)
{
	sim(dword), sim(dpos), sim(dtype), sim(dout), sim(ids), sim(types), sim(positions);
	embedding_backward(dword, dpos, dtype, dout, ids, types, positions, n, c, pad);
}

static void sim_linear_forward(float *out, const struct act *in, const struct act *w,
			       const float *bias, int n, int cin, int cout)
{
	sim(out), sim(in), sim(w), sim(bias);
	backend_cpu()->linear_forward(out, in, w, bias, n, cin, cout);
}

static void sim_linear_forward_act(struct act *out, const struct act *in, const struct act *w,
				   const float *bias, int n, int cin, int cout)
{
	sim(out), sim(in), sim(w), sim(bias);
	backend_cpu()->linear_forward_act(out, in, w, bias, n, cin, cout);
}

static void sim_linear_backward(float *din, float *dw, float *dbias, const struct act *dout,
				const struct act *in, const struct act *w, int n, int cin, int cout,
				int acc)
{
	sim(din), sim(dw), sim(dbias), sim(dout), sim(in), sim(w);
	backend_cpu()->linear_backward(din, dw, dbias, dout, in, w, n, cin, cout, acc);
}

static void sim_attention(const struct attention *a)
{
	sim(a->q), sim(a->k), sim(a->v), sim(a->kv_start), sim(a->q_start), sim(a->p_start),
		sim(a->mask);
}

static int saw_holes, saw_empty;   /* what the attention's forwards were told */

static void sim_attention_forward(struct act *ctx, float *state, const struct attention *a)
{
	saw_holes |= a->holes, saw_empty |= a->empty;
	sim(ctx), sim(state), sim_attention(a);
	backend_cpu()->attention_forward(ctx, state, a);
}

static void sim_attention_backward(struct act *dq, struct act *dk, struct act *dv,
				   const float *dctx, const float *state, const struct attention *a)
{
	sim(dq), sim(dk), sim(dv), sim(dctx), sim(state), sim_attention(a);
	backend_cpu()->attention_backward(dq, dk, dv, dctx, state, a);
}

static void sim_crossentropy_forward(double *loss, double weight, float *lse, const float *logits,
				     const int32_t *labels, int n, int v, float e)
{
	sim(loss), sim(lse), sim(logits), sim(labels);
	*loss += weight * crossentropy_forward(lse, logits, labels, n, v, e);
}

static void sim_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
				      const int32_t *labels, int n, int v, float e, float scale)
{
	sim(dlogits), sim(logits), sim(lse), sim(labels);
	crossentropy_backward(dlogits, logits, lse, labels, n, v, e, scale);
}

static void sim_gather_rows(float *out, const float *in, const int32_t *rows, int m, int c)
{
	sim(out), sim(in), sim(rows);
	gather_rows(out, in, rows, m, c);
}

static void sim_scatter_add_rows(float *out, const float *in, const int32_t *rows, int m, int c)
{
	sim(out), sim(in), sim(rows);
	scatter_add_rows(out, in, rows, m, c);
}

static double sim_sum_squares(const float *x, size_t n)
{
	return sum_squares(sim(x), n);
}

static void sim_adam_update(const struct adam_tensor *t, int n)
{
	for (int i = 0; i < n; i++) {
		sim(t[i].p), sim(t[i].g), sim(t[i].m), sim(t[i].v);
		adam_update(t[i].p, t[i].g, t[i].m, t[i].v, t[i].n, &t[i].c);
	}
}

static struct backend sim_backend(void)
{
	struct backend s = *backend_cpu();
	s.name = "sim";
	s.host = 0;
	s.alloc = sim_alloc;
	s.release = sim_release;
	s.upload = s.download = sim_copy;
	s.zero = sim_zero;
	s.embedding_layernorm_forward = sim_embedding_layernorm_forward;
	s.embedding_backward = sim_embedding_backward;
	s.linear_forward = sim_linear_forward;
	s.linear_forward_act = sim_linear_forward_act;
	s.linear_backward = sim_linear_backward;
	s.attention_forward = sim_attention_forward;
	s.attention_backward = sim_attention_backward;
	s.crossentropy_forward = sim_crossentropy_forward;
	s.crossentropy_backward = sim_crossentropy_backward;
	s.gather_rows = sim_gather_rows;
	s.scatter_add_rows = sim_scatter_add_rows;
	s.sum_squares = sim_sum_squares;
	s.adam_update = sim_adam_update;
	return s;
}

/* ---- the same run on the CPU and on sim ---- */

struct run {
	struct bert *m;
	struct optim *o;
	double loss[3], norm[3];
	float logits[B * 3];
};

static struct bert_batch batch(enum bert_task task, int32_t *ids, uint8_t *mask, int32_t *labels)
{
	struct rng r;
	rng_seed(&r, 5);
	for (int i = 0; i < B * T; i++) {
		int real = i % T < T - i / T;    /* sequences of 9, 8, 7 tokens */
		ids[i] = real ? 1 + (int32_t)rng_below(&r, V - 1) : 0;
		mask[i] = (uint8_t)real;
		labels[i] = task == TASK_MLM && real && i % 3 == 0 ? ids[i] : -100;
	}
	if (task == TASK_CLS)
		labels[0] = 1, labels[1] = 0, labels[2] = 2;
	struct bert_batch b = { B, T, ids, NULL, mask, labels };
	return b;
}

static struct optim *adamw(struct bert *m)
{
	struct optim_config oc = { OPTIM_ADAMW, 0.01, 0, 0.9, 0.999, 1e-8 };
	int n = bert_tensors(m, NULL);
	struct tensor_ref *t = xcalloc((size_t)n, sizeof *t);
	unsigned char *decays = xcalloc((size_t)n, 1);
	bert_tensors(m, t);
	for (int i = 0; i < n; i++)
		decays[i] = (unsigned char)bert_decays(t[i].name);
	struct optim *o = optim_new(&oc, bert_backend(m), t, decays, n, bert_params(m),
				    bert_backend_params(m), bert_backend_grads(m));
	free(t);
	free(decays);
	return o;
}

/* Three AdamW steps with dropout, clipping the last; then eval logits. */
static void train(struct run *r, const struct backend *be, enum bert_task task)
{
	struct bert_config c = { .vocab = V, .hidden = 16, .layers = 2, .heads = 2, .ffn = 32,
				 .max_pos = 16, .type_vocab = 2, .ln_eps = 1e-12f,
				 .hidden_dropout = 0.1f, .attn_dropout = 0.1f, .cls_dropout = 0.1f, .task = task,
				 .num_labels = 3 };
	int32_t ids[B * T], labels[B * T];
	uint8_t mask[B * T];
	struct bert_batch b = batch(task, ids, mask, labels);
	r->m = bert_new(&c, be);
	bert_init(r->m, 7);
	r->o = adamw(r->m);
	for (int s = 0; s < 3; s++) {
		int64_t count;
		bert_zero_grads(r->m);
		r->loss[s] = bert_forward(r->m, &b, 1, 100 + s, &count);
		bert_backward(r->m, 1.0f / (float)count);
		r->norm[s] = bert_grad_norm(r->m);
		if (s == 2)
			bert_scale_grads(r->m, 0.5f);
		optim_step(r->o, 1e-3, 1);
	}
	int64_t count;
	bert_forward(r->m, &b, 0, 0, &count);
	memcpy(r->logits, bert_logits(r->m), sizeof r->logits);
	bert_pull(r->m);
	optim_pull(r->o);
}

static int same_bits(const void *a, const void *b, size_t n)
{
	return !memcmp(a, b, n);
}

static void test_task(enum bert_task task, const struct backend *s, const char *dir)
{
	const char *name = task == TASK_CLS ? "cls" : "mlm";
	struct run cpu, on_sim;
	train(&cpu, backend_cpu(), task);
	train(&on_sim, s, task);
	size_t n = bert_numel(cpu.m);
	CHECK(same_bits(cpu.loss, on_sim.loss, sizeof cpu.loss) &&
	      same_bits(cpu.norm, on_sim.norm, sizeof cpu.norm),
	      "%s: losses %.6f %.6f %.6f and grad norms the same on sim", name, cpu.loss[0],
	      cpu.loss[1], cpu.loss[2]);
	CHECK(same_bits(bert_params(cpu.m), bert_params(on_sim.m), n * sizeof(float)) &&
	      same_bits(bert_grads(cpu.m), bert_grads(on_sim.m), n * sizeof(float)),
	      "%s: parameters and gradients pulled from sim are the CPU's", name);
	CHECK(same_bits(cpu.logits, on_sim.logits, sizeof cpu.logits),
	      "%s: logits from sim are the CPU's", name);
	int k = optim_state(cpu.o, NULL), same = k == optim_state(on_sim.o, NULL);
	struct tensor_ref *a = xcalloc((size_t)k, sizeof *a), *b = xcalloc((size_t)k, sizeof *b);
	optim_state(cpu.o, a);
	optim_state(on_sim.o, b);
	for (int i = 0; same && i < k; i++)
		same = same_bits(a[i].data, b[i].data, (size_t)tensor_numel(&a[i]) * sizeof(float));
	CHECK(same, "%s: %d optimizer moments pulled from sim are the CPU's", name, k);

	/* saved from sim, loaded onto sim: the loaded model is pushed */
	modeldir_save(dir, on_sim.m, NULL, 0, NULL);
	struct bert *back = modeldir_load(dir, s, task, 0, NULL, NULL, NULL);
	int32_t ids[B * T], labels[B * T];
	uint8_t mask[B * T];
	struct bert_batch bt = batch(task, ids, mask, labels);
	int64_t count;
	bert_forward(back, &bt, 0, 0, &count);
	CHECK(same_bits(bert_logits(back), cpu.logits, sizeof cpu.logits),
	      "%s: a model dir written from sim and read onto sim predicts the same", name);
	bert_free(back);
	optim_free(cpu.o), optim_free(on_sim.o);
	bert_free(cpu.m), bert_free(on_sim.m);
	free(a), free(b);
}

/* What a backend learns of a batch beside its lengths: a padding key
 * inside a sequence (holes), a sequence with no head rows (empty, in the
 * last layer). */
static void test_attention_flags(const struct backend *s)
{
	struct bert_config c = { .vocab = V, .hidden = 16, .layers = 2, .heads = 2, .ffn = 32,
				 .max_pos = 16, .type_vocab = 2, .ln_eps = 1e-12f };
	int32_t ids[B * T], labels[B * T];
	uint8_t mask[B * T];
	int64_t count;
	const enum bert_task tasks[2] = { TASK_CLS, TASK_MLM };
	for (int k = 0; k < 2; k++) {
		enum bert_task task = tasks[k];
		c.task = task, c.num_labels = 3;
		struct bert *m = bert_new(&c, s);
		struct bert_batch b = batch(task, ids, mask, labels);
		saw_holes = saw_empty = 0;
		bert_forward(m, &b, 0, 0, &count);
		int plain = !saw_holes && !saw_empty;
		mask[2] = 0;   /* a hole in the first sequence */
		for (int t = 0; t < T; t++)   /* the second sequence predicts nothing */
			labels[T + t] = task == TASK_MLM ? -100 : labels[T + t];
		saw_holes = saw_empty = 0;
		bert_forward(m, &b, 0, 0, &count);
		CHECK(plain && saw_holes && saw_empty == (task == TASK_MLM),
		      "%s: the attention is told of a padding key inside a sequence, and of a sequence "
		      "with no head rows, and not otherwise", task == TASK_MLM ? "mlm" : "cls");
		bert_free(m);
	}
}

/* A scratch of two padded batches' probabilities, as the CUDA attention's. */
static double probs_scratch(int B_, int T_, int C, int H)
{
	(void)C;
	return 8.0 * B_ * H * T_ * T_;
}

/* The attention's state and scratch, as its backend gives them, are counted
 * before a run starts. */
static void test_batch_bytes(const struct backend *s)
{
	struct bert_config c = { .vocab = V, .hidden = 16, .layers = 2, .heads = 2, .ffn = 32,
				 .max_pos = 16, .type_vocab = 2, .ln_eps = 1e-12f, .task = TASK_CLS,
				 .num_labels = 3 };
	struct backend other = *s;
	other.attention_state = 2;
	other.attention_scratch = probs_scratch;
	double more = bert_batch_bytes(&c, &other, B, T, B, 0) - bert_batch_bytes(&c, s, B, T, B, 0);
	double state = 4.0 * B * T * c.heads * 2;   /* a layer's, carved in 64-byte pieces */
	double want = c.layers * 64 * ceil(state / 64) + probs_scratch(B, T, c.hidden, c.heads) -
		      s->attention_scratch(B, T, c.hidden, c.heads);
	CHECK(more == want && s->attention_state == 0,
	      "the memory check counts the attention's state and scratch (%.0f bytes, %.0f wanted)",
	      more, want);
}

int main(void)
{
	char tmp[] = "/tmp/ts-test-backend.XXXXXX";
	if (!mkdtemp(tmp))
		die("mkdtemp:");
	struct backend s = sim_backend();
	char cls[64], mlm[64];
	snprintf(cls, sizeof cls, "%s/cls", tmp);
	snprintf(mlm, sizeof mlm, "%s/mlm", tmp);
	test_task(TASK_CLS, &s, cls);
	test_task(TASK_MLM, &s, mlm);
	test_batch_bytes(&s);
	test_attention_flags(&s);
	int left = 0;
	for (int i = 0; i < MAX_BUFS; i++)
		left += bufs[i].p != NULL;
	CHECK(foreign == 0, "no op got memory that is not sim's (%d did)", foreign);
	CHECK(left == 0, "every sim buffer is released (%d left)", left);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd))
		die("cannot remove %s", tmp);
	CHECK_DONE();
}
