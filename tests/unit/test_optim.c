/* Optimizers against PyTorch: AdamW, Adam and SGD as torch.optim 1.13 runs
 * them, LAMB as apex FusedLAMB (written out in torch ops by the generator),
 * for 6 steps with varying lr on tensors with and without weight decay.
 * Also: checkpoint state round trip, and thread-count independence.
 * usage: test_optim [FIXTURE_DIR]   (default tests/fixtures/optim, made by
 * tests/fixtures/gen-optim.py) */
#include "backend/cpu_ops.h"
#include "check.h"
#include "model/optim.h"
#include "util/err.h"
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixdir = "tests/fixtures/optim";

/* One fixture: the tensors in a flat buffer, and per step lr, grads, params. */
struct optim_case {
	json_t *root;
	struct optim_config cfg;
	int ntensor, nstep;
	size_t total;
	struct tensor_ref t[8];
	unsigned char decays[8];
	float *params, *grads;
};

static void floats_from(json_t *arr, float *out)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		out[i] = json_number_value(v);
}

static double num(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

static void case_load(struct optim_case *c, const char *name)
{
	char path[512];
	json_error_t err;
	snprintf(path, sizeof path, "%s/%s.json", fixdir, name);
	if (!(c->root = json_load_file(path, 0, &err)))
		die("%s:%d: %s", path, err.line, err.text);
	json_t *tensors = json_object_get(c->root, "tensors");
	c->cfg = (struct optim_config){
		.kind = optim_kind_parse(json_string_value(json_object_get(c->root, "optimizer"))),
		.weight_decay = num(c->root, "weight_decay"), .momentum = num(c->root, "momentum"),
		.beta1 = num(c->root, "beta1"), .beta2 = num(c->root, "beta2"), .eps = num(c->root, "eps"),
	};
	c->ntensor = json_array_size(tensors);
	c->nstep = json_array_size(json_object_get(c->root, "steps"));
	c->total = 0;
	for (int i = 0; i < c->ntensor; i++)
		c->total += json_array_size(json_object_get(json_array_get(tensors, i), "init"));
	c->params = xcalloc(c->total, sizeof(float));
	c->grads = xcalloc(c->total, sizeof(float));
	size_t off = 0;
	for (int i = 0; i < c->ntensor; i++) {
		json_t *t = json_array_get(tensors, i), *shape = json_object_get(t, "shape");
		c->t[i] = (struct tensor_ref){json_string_value(json_object_get(t, "name")),
					      json_array_size(shape), {0}, c->params + off};
		for (int d = 0; d < c->t[i].ndim; d++)
			c->t[i].shape[d] = json_integer_value(json_array_get(shape, d));
		c->decays[i] = json_is_true(json_object_get(t, "decay"));
		floats_from(json_object_get(t, "init"), c->t[i].data);
		off += tensor_numel(&c->t[i]);
	}
}

static void case_free(struct optim_case *c)
{
	json_decref(c->root);
	free(c->params);
	free(c->grads);
}

static json_t *step_field(const struct optim_case *c, int step, const char *key)
{
	return json_object_get(json_array_get(json_object_get(c->root, "steps"), step), key);
}

/* Copies step's gradients into the flat gradient buffer. */
static void load_grads(const struct optim_case *c, int step)
{
	json_t *grads = step_field(c, step, "grads");
	for (int i = 0; i < c->ntensor; i++)
		floats_from(json_array_get(grads, i), c->grads + (c->t[i].data - c->params));
}

static struct optim *case_optim(const struct optim_case *c)
{
	return optim_new(&c->cfg, backend_cpu(), c->t, c->decays, c->ntensor, c->params, c->params,
			 c->grads);
}

/* Steps from..to-1 of the fixture. */
static void run_steps(struct optim *o, const struct optim_case *c, int from, int to)
{
	for (int s = from; s < to; s++) {
		load_grads(c, s);
		optim_step(o, json_number_value(step_field(c, s, "lr")), 1);
	}
}

static void test_against_torch(const char *name)
{
	struct optim_case c;
	case_load(&c, name);
	struct optim *o = case_optim(&c);
	float *want = xmalloc(c.total * sizeof *want);
	double worst = 0;
	int bad = 0;
	for (int s = 0; s < c.nstep; s++) {
		run_steps(o, &c, s, s + 1);
		json_t *params = step_field(&c, s, "params");
		for (int i = 0; i < c.ntensor; i++)
			floats_from(json_array_get(params, i), want + (c.t[i].data - c.params));
		for (size_t j = 0; j < c.total; j++) {
			double err = fabs((double)c.params[j] - want[j]);
			worst = err > worst ? err : worst;
			/* Torch rounds some products with FMA: a float ulp or two of the
			 * lr-sized (<= 0.1) steps, so 1e-6 relative plus 1e-7 absolute
			 * for values passing near 0. */
			bad += !close_enough(c.params[j], want[j], 1e-7, 1e-6);
		}
	}
	CHECK(!bad, "%s: %d steps x %zu values match torch within 1e-6 relative + 1e-7 "
	      "(max abs err %.2g, %d values off)", name, c.nstep, c.total, worst, bad);
	CHECK(optim_steps(o) == c.nstep, "%s: counts %ld steps", name, optim_steps(o));
	free(want);
	optim_free(o);
	case_free(&c);
}

/* Save the state after `split` steps, load it into a fresh optimizer, finish:
 * bit for bit the parameters of an uninterrupted run. */
static void test_state_round_trip(const char *name, int nstate_want, const char *first_name)
{
	struct optim_case c;
	case_load(&c, name);
	float *init = xmalloc(c.total * sizeof *init), *straight = xmalloc(c.total * sizeof *straight);
	memcpy(init, c.params, c.total * sizeof *init);
	struct optim *o = case_optim(&c);
	run_steps(o, &c, 0, c.nstep);
	memcpy(straight, c.params, c.total * sizeof *straight);
	optim_free(o);

	int split = c.nstep / 2;
	memcpy(c.params, init, c.total * sizeof *init);
	o = case_optim(&c);
	run_steps(o, &c, 0, split);
	int n = optim_state(o, NULL);
	struct tensor_ref *st = xcalloc(n, sizeof *st);
	optim_state(o, st);
	CHECK(n == nstate_want && (!n || !strcmp(st[0].name, first_name)),
	      "%s: %d state tensors (want %d), first %s", name, n, nstate_want, n ? st[0].name : "-");
	float **saved = xcalloc(n, sizeof *saved);
	for (int i = 0; i < n; i++) {
		size_t bytes = tensor_numel(&st[i]) * sizeof(float);
		saved[i] = memcpy(xmalloc(bytes), st[i].data, bytes);
	}
	long steps = optim_steps(o);
	optim_free(o);

	o = case_optim(&c);
	optim_state(o, st);
	for (int i = 0; i < n; i++)
		memcpy(st[i].data, saved[i], tensor_numel(&st[i]) * sizeof(float));
	optim_set_steps(o, steps);
	run_steps(o, &c, split, c.nstep);
	CHECK(!memcmp(c.params, straight, c.total * sizeof *straight),
	      "%s: resumed after step %d equals the uninterrupted run bit for bit", name, split);
	for (int i = 0; i < n; i++)
		free(saved[i]);
	free(saved);
	free(st);
	free(init);
	free(straight);
	optim_free(o);
	case_free(&c);
}

static void fill_random(float *x, size_t n, unsigned seed)
{
	srand(seed);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((double)rand() / RAND_MAX * 2 - 1);
}

/* LAMB's per-tensor norms are the only reductions in an update: with tensors
 * large enough to be split over threads, 1 and 3 threads must agree exactly. */
static void test_threads(void)
{
	enum { N = 200003 };
	float *p1 = xmalloc(2 * N * sizeof(float)), *p3 = xmalloc(2 * N * sizeof(float));
	float *g = xmalloc(2 * N * sizeof(float));
	fill_random(p1, 2 * N, 1);
	memcpy(p3, p1, 2 * N * sizeof(float));
	struct optim_config cfg = {OPTIM_LAMB, 0.01, 0, 0.9, 0.999, 1e-6};
	float *runs[2] = {p1, p3};
	int threads[2] = {1, 3};
	for (int r = 0; r < 2; r++) {
		struct tensor_ref t[2] = {{"a", 1, {N}, runs[r]}, {"b", 2, {N, 1}, runs[r] + N}};
		unsigned char decays[2] = {1, 0};
		struct optim *o = optim_new(&cfg, backend_cpu(), t, decays, 2, runs[r], runs[r], g);
		omp_set_num_threads(threads[r]);
		for (int s = 0; s < 3; s++) {
			fill_random(g, 2 * N, 100 + s);
			optim_step(o, 1e-2, 1);
		}
		optim_free(o);
	}
	CHECK(!memcmp(p1, p3, 2 * N * sizeof(float)), "lamb: 1 and 3 threads give the same bits");

	fill_random(g, 2 * N, 7);
	long double ss = 0;
	for (size_t i = 0; i < 2 * N; i++)
		ss += (long double)g[i] * g[i];
	omp_set_num_threads(1);
	double n1 = sqrt(sum_squares(g, 2 * N));
	omp_set_num_threads(3);
	double n3 = sqrt(sum_squares(g, 2 * N));
	CHECK(n1 == n3 && close_enough(n1, sqrtl(ss), 0, 1e-12),
	      "sum_squares: norm %.17g, same on 1 and 3 threads, long double sum %.17Lg", n1, sqrtl(ss));
	scale_floats(g, 2 * N, 0.5f);
	double half = sqrt(sum_squares(g, 2 * N));
	CHECK(half == n1 / 2, "scale_floats by 0.5 halves the norm exactly (%.17g)", half);
	free(p1);
	free(p3);
	free(g);
}

/* Learning rates by tensor: a scale of 0.5 moves a tensor as half the
 * learning rate does, bit for bit; 0 leaves it and its moments untouched. */
static void test_lr_scale(void)
{
	struct optim_case a, b;
	case_load(&a, "adamw");
	case_load(&b, "adamw");
	struct optim *oa = case_optim(&a), *ob = case_optim(&b);
	double *scale = xmalloc((size_t)a.ntensor * sizeof *scale);
	for (int i = 0; i < a.ntensor; i++)
		scale[i] = i == 0 ? 0.5 : i == 1 ? 0 : 1;
	optim_set_lr_scale(oa, scale);
	float *frozen = xmalloc((size_t)tensor_numel(&a.t[1]) * sizeof *frozen);
	memcpy(frozen, a.t[1].data, (size_t)tensor_numel(&a.t[1]) * sizeof *frozen);
	for (int s = 0; s < a.nstep; s++) {
		load_grads(&a, s);
		load_grads(&b, s);
		double lr = json_number_value(step_field(&a, s, "lr"));
		optim_step(oa, lr, 1);
		optim_step(ob, lr * 0.5, 1);
	}
	size_t n0 = (size_t)tensor_numel(&a.t[0]), n1 = (size_t)tensor_numel(&a.t[1]);
	CHECK(!memcmp(a.t[0].data, b.t[0].data, n0 * sizeof(float)),
	      "a tensor at lr scale 0.5 moves as at half the learning rate, bit for bit");
	struct tensor_ref *st = xmalloc((size_t)optim_state(oa, NULL) * sizeof *st);
	optim_state(oa, st);
	int still = !memcmp(a.t[1].data, frozen, n1 * sizeof(float));
	for (int k = 0; k < optim_state(oa, NULL); k++)
		if (strstr(st[k].name, a.t[1].name))
			for (size_t j = 0; j < n1; j++)
				still &= st[k].data[j] == 0;
	CHECK(still, "a tensor at lr scale 0 is frozen: no update, no decay, no moments");
	free(st), free(frozen), free(scale);
	optim_free(oa), optim_free(ob);
	case_free(&a), case_free(&b);
}

/* A step's gradient scale (fp16's unscaling, --clip's) gives the bits of
 * scaling the gradients first, and leaves them as they were. */
static void test_grad_scale(const char *name)
{
	struct optim_case a, b;
	case_load(&a, name);
	case_load(&b, name);
	struct optim *oa = case_optim(&a), *ob = case_optim(&b);
	float s = 0.3f;
	int kept = 1;
	for (int k = 0; k < a.nstep; k++) {
		load_grads(&a, k);
		load_grads(&b, k);
		for (size_t j = 0; j < b.total; j++)
			b.grads[j] *= s;
		double lr = json_number_value(step_field(&a, k, "lr"));
		optim_step(oa, lr, s);
		optim_step(ob, lr, 1);
		for (size_t j = 0; j < a.total; j++)
			kept &= a.grads[j] * s == b.grads[j];
	}
	CHECK(!memcmp(a.params, b.params, a.total * sizeof(float)) && kept,
	      "%s: gradients read times %g move the parameters as gradients scaled first, bit for bit, "
	      "and stay unscaled", name, s);
	optim_free(oa), optim_free(ob);
	case_free(&a), case_free(&b);
}

/* --ema: the average follows decay avg + (1 - decay) p after every update,
 * is saved with the moments, and swaps with the parameters. */
static void test_ema(void)
{
	struct optim_case c;
	case_load(&c, "adamw");
	c.cfg.ema = 0.75;
	struct optim *o = case_optim(&c);
	float *avg = xmalloc(c.total * sizeof *avg), *live = xmalloc(c.total * sizeof *live);
	memcpy(avg, c.params, c.total * sizeof *avg);
	for (int s = 0; s < c.nstep; s++) {
		run_steps(o, &c, s, s + 1);
		for (size_t j = 0; j < c.total; j++)
			avg[j] = 0.75f * avg[j] + (1.0f - 0.75f) * c.params[j];
	}
	int n = optim_state(o, NULL);
	struct tensor_ref *st = xmalloc((size_t)n * sizeof *st);
	optim_state(o, st);
	int named = n == 3 * c.ntensor && !strncmp(st[2 * c.ntensor].name, "ema.", 4);
	CHECK(named, "the average is optimizer state: %d tensors, ema.<param> after the moments", n);
	int same = named;
	for (int i = 0; named && i < c.ntensor; i++)
		same &= !memcmp(st[2 * c.ntensor + i].data, avg + (c.t[i].data - c.params),
				(size_t)tensor_numel(&c.t[i]) * sizeof(float));
	CHECK(same, "the average after %d steps, bit for bit", c.nstep);
	memcpy(live, c.params, c.total * sizeof *live);
	optim_swap_ema(o);
	int swapped = !memcmp(c.params, avg, c.total * sizeof *avg);
	optim_swap_ema(o);
	CHECK(swapped && !memcmp(c.params, live, c.total * sizeof *live), "swapped in, and back");
	free(st), free(avg), free(live);
	optim_free(o);
	case_free(&c);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	CHECK(optim_kind_parse("adamw") == OPTIM_ADAMW && optim_kind_parse("lamb") == OPTIM_LAMB &&
	      optim_kind_parse("sgd") == OPTIM_SGD && optim_kind_parse("Adam") == -1 &&
	      !strcmp(optim_kind_name(OPTIM_ADAM), "adam"), "optimizer names parse and print");
	const char *cases[] = {"adamw", "adam", "sgd", "sgd-plain", "lamb"};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		test_against_torch(cases[i]);
	test_state_round_trip("adamw", 10, "exp_avg.dense.weight");
	test_state_round_trip("adam", 10, "exp_avg.dense.weight");
	test_state_round_trip("sgd", 5, "momentum_buffer.dense.weight");
	test_state_round_trip("sgd-plain", 0, "");
	test_state_round_trip("lamb", 10, "exp_avg.dense.weight");
	test_threads();
	test_lr_scale();
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		test_grad_scale(cases[i]);
	test_ema();
	CHECK_DONE();
}
