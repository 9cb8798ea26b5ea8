#include "run/runview.h"
#include "run/rundir.h"
#include "data/utf8.h"
#include "eval/metricnames.h"
#include "format/rec.h"
#include "util/afile.h"
#include "util/err.h"
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* "key = value" lines of RUN/config, the few read here. */
static void read_config(struct run_view *v)
{
	char *path = path_join(v->dir, "config"), line[512];
	FILE *f = fopen(path, "r");
	free(path);
	enum bert_task task = TASK_CLS;
	int multi = 0;
	char metric[sizeof v->metric] = "";
	while (f && fgets(line, sizeof line, f)) {
		char key[64], value[256];
		if (sscanf(line, " %63[a-z0-9-] = %255s", key, value) != 2)
			continue;
		if (!strcmp(key, "eval-every"))
			v->eval_every = atol(value);
		else if (!strcmp(key, "save-every"))
			v->save_every = atol(value);
		else if (!strcmp(key, "metric"))
			snprintf(metric, sizeof metric, "%.15s", value);
		else if (!strcmp(key, "task"))
			task = !strcmp(value, "mlm") ? TASK_MLM : !strcmp(value, "reg") ? TASK_REG
				: !strcmp(value, "tokcls") ? TASK_TOKCLS : TASK_CLS;
		else if (!strcmp(key, "multi-label"))
			multi = !strcmp(value, "true");
	}
	if (f)
		fclose(f);
	if (multi && task == TASK_CLS)
		task = TASK_MULTI;
	snprintf(v->metric, sizeof v->metric, "%s", *metric ? metric : metric_default(task));
}

/* v as before its first event: all but its dir, its sweep's word on it and
 * how far to read. */
static void start_over(struct run_view *v)
{
	struct run_view kept = {.dir = v->dir, .until = v->until};
	memcpy(kept.job_state, v->job_state, sizeof kept.job_state);
	*v = kept;
	/* none of them known before the first step */
	v->loss = v->smooth = v->lr = v->grad_norm = v->step_ms = v->tokens_per_s = v->samples_per_s = NAN;
	v->eval_value = v->best_value = NAN;
	v->best_step = -1;
	read_config(v);
}

struct run_view *run_view_open(const char *dir)
{
	struct run_view *v = xcalloc(1, sizeof *v);
	v->dir = xstrdup(dir);
	start_over(v);
	return v;
}

void run_view_free(struct run_view *v)
{
	free(v->dir);
	free(v);
}

static void str(const msgpack_object *o, char *out, size_t size)
{
	if (o && o->type == MSGPACK_OBJECT_STR)
		snprintf(out, size, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

/* A count in an event: o's value when it is a whole number from 0 to max,
 * else 0 (a damaged or foreign log shows zeros, never casts what no long
 * holds). */
static long count(const msgpack_object *o, long max)
{
	double x = mp_number(o);
	return x >= 0 && x <= (double)max && x == floor(x) ? (long)x : 0;
}

static void push(double *hist, int n, double x)
{
	if (n == HISTORY)
		memmove(hist, hist + 1, (HISTORY - 1) * sizeof *hist);
	hist[n == HISTORY ? HISTORY - 1 : n] = x;
}

static void on_step(struct run_view *v, const msgpack_object *o, double t)
{
	v->step = count(mp_get(o, "step"), LONG_MAX / 2);
	v->epoch = count(mp_get(o, "epoch"), LONG_MAX / 2);
	v->loss = mp_number(mp_get(o, "loss"));
	v->lr = mp_number(mp_get(o, "lr"));
	v->grad_norm = mp_number(mp_get(o, "grad_norm"));
	v->step_ms = mp_number(mp_get(o, "step_ms"));
	v->tokens_per_s = mp_number(mp_get(o, "tokens_per_s"));
	double samples = mp_number(mp_get(o, "samples"));   /* the run's so far */
	v->samples_per_s = samples > v->samples && v->step_ms > 0 ? (samples - v->samples) / (v->step_ms / 1e3) : NAN;
	v->samples = samples;
	if (isfinite(v->loss))
		v->smooth = isnan(v->smooth) ? v->loss : 0.9 * v->smooth + 0.1 * v->loss;
	/* the step's wall time, evaluations and checkpoints apart */
	double s = v->last_step_time > 0 && t > v->last_step_time ? t - v->last_step_time : v->step_ms / 1e3;
	v->last_step_time = t;
	if (isfinite(s))
		v->recent[v->nsteps++ % 32] = s;
	push(v->loss_hist, v->nhist, v->loss);
	push(v->speed_hist, v->nhist, v->tokens_per_s);
	v->nhist += v->nhist < HISTORY;
	const msgpack_object *c = mp_get(o, "comm");
	if ((v->has_comm = c && c->type == MSGPACK_OBJECT_MAP)) {
		v->comm_ms = mp_number(mp_get(c, "ms"));
		v->exposed_ms = mp_number(mp_get(c, "exposed_ms"));
		v->busbw_gbs = mp_number(mp_get(c, "busbw_gbs"));
		v->slowest = (int)count(mp_get(c, "slowest"), INT_MAX);
	}
}

double event_metric(const msgpack_object *eval, const char *metric)
{
	const char *const *key = metric_path(metric);
	const msgpack_object *v = key ? eval : NULL;
	for (; v && *key; key++)
		v = mp_get(v, *key);
	return mp_number(v);
}

static void on_event(struct run_view *v, const msgpack_object *o)
{
	const msgpack_object *ev = mp_get(o, "event");
	double t = mp_number(mp_get(o, "time"));
	str(ev, v->last_event, sizeof v->last_event);
	if (mp_str_is(ev, "start") || mp_str_is(ev, "resume")) {
		/* a resume on another number of processes plans other steps */
		if (mp_get(o, "total_steps")) {
			v->total_steps = count(mp_get(o, "total_steps"), LONG_MAX / 2);
			v->steps_per_epoch = count(mp_get(o, "steps_per_epoch"), LONG_MAX / 2);
			v->processes = (int)count(mp_get(o, "processes"), INT_MAX);
		}
		if (mp_str_is(ev, "start"))
			v->params = count(mp_get(o, "params"), LONG_MAX / 2);
		if (mp_get(o, "device"))   /* a resume may go on on another device */
			str(mp_get(o, "device"), v->device, sizeof v->device);
		/* timing starts again: a stop's pause is no step's time */
		if (v->start_time > 0)
			v->elapsed_s += v->last_time - v->start_time;
		v->start_time = t;
		v->last_step_time = t;
		v->nsteps = 0;
	} else if (mp_str_is(ev, "step")) {
		on_step(v, o, t);
	} else if (mp_str_is(ev, "eval") && mp_str_is(mp_get(o, "split"), "valid")) {
		v->eval_value = event_metric(o, v->metric);
		int lower = !metric_higher_is_better(v->metric);
		if (isnan(v->best_value) || (lower ? v->eval_value < v->best_value : v->eval_value > v->best_value))
			v->best_value = v->eval_value, v->best_step = count(mp_get(o, "step"), LONG_MAX / 2);
		v->eval_s += t - v->last_step_time, v->nevals++;
		v->last_step_time = t;
	} else if (mp_str_is(ev, "eval")) {
		v->eval_s += t - v->last_step_time;
		v->last_step_time = t;
	} else if (mp_str_is(ev, "best")) {   /* saving best/: as often as the metric improves, not foreseen */
		v->last_step_time = t;
	} else if (mp_str_is(ev, "checkpoint")) {
		v->ckpt_s += t - v->last_step_time, v->nckpts++;
		v->last_step_time = t;
	}
	if (isfinite(t))
		v->last_time = t;
}

/* Takes a record, up to step until's. */
static int take_event(void *ctx, const msgpack_object *o)
{
	struct run_view *v = ctx;
	if (v->until > 0 && mp_str_is(mp_get(o, "event"), "step") && mp_number(mp_get(o, "step")) > (double)v->until)
		return v->frozen = 1;
	on_event(v, o);
	return 0;
}

int run_view_update(struct run_view *v)
{
	v->error[0] = 0;
	if (v->frozen)
		return 0;
	char *path = path_join(v->dir, "events.msgpack");
	int rc = rec_tail_read(path, &v->tail, take_event, v, v->error, sizeof v->error);
	if (rc == 1) {   /* the run dir was made again: another run */
		start_over(v);
		rc = rec_tail_read(path, &v->tail, take_event, v, v->error, sizeof v->error);
	}
	free(path);
	return rc < 0 ? -1 : 0;
}

const char *run_view_state(const struct run_view *v)
{
	if (*v->error)
		return "unreadable";
	if (v->frozen)   /* seen as at step until, which later steps followed: it ran then */
		return "running";
	if (rundir_holder(v->dir, NULL))
		return "running";
	if (!strcmp(v->job_state, "failed") || !strcmp(v->job_state, "pruned") || !strcmp(v->job_state, "skipped"))
		return v->job_state;
	if (!*v->last_event)
		return "new";
	if (!strcmp(v->last_event, "done"))
		return "done";
	if (!strcmp(v->last_event, "stop") || !strcmp(v->last_event, "early_stop"))
		return "stopped";
	if (!strcmp(v->last_event, "failed"))
		return "failed";
	return "stale";
}

double run_view_now(const struct run_view *v)
{
	return v->frozen ? v->last_time : (double)time(NULL);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* How many steps in (from, to] are multiples of every (> 0). */
static long multiples(long every, long from, long to)
{
	return to > from ? to / every - from / every : 0;
}

static long gcd(long a, long b)
{
	while (b) {
		long r = a % b;
		a = b, b = r;
	}
	return a;
}

/* The evaluations left after step from, as ts-train places them: at every
 * eval_every-th step, at each epoch's end and at the last step. */
static long evals_left(const struct run_view *v, long from)
{
	long a = v->eval_every, b = v->steps_per_epoch, to = v->total_steps, n = 0;
	if (a > 0)
		n += multiples(a, from, to);
	if (b > 0)
		n += multiples(b, from, to);
	if (a > 0 && b > 0 && a / gcd(a, b) <= to / b)   /* the steps both count, once: multiples of their lcm */
		n -= multiples(a / gcd(a, b) * b, from, to);
	int last_counted = (a > 0 && to % a == 0) || (b > 0 && to % b == 0);
	return n + (to > from && !last_counted);
}

/* The checkpoints left after step from: at every save_every-th step and the
 * last, or else at every evaluation. */
static long ckpts_left(const struct run_view *v, long from)
{
	if (v->save_every <= 0)
		return evals_left(v, from);
	return multiples(v->save_every, from, v->total_steps) +
	       (v->total_steps > from && v->total_steps % v->save_every != 0);
}

double run_view_left(const struct run_view *v, double *plus_minus)
{
	*plus_minus = 0;
	if (v->nsteps < 3 || v->total_steps <= 0)
		return -1;
	/* the step time: the median of the last steps (the first ones after a
	 * start are slow), and the spread of those about it */
	int m = v->nsteps < 32 ? (int)v->nsteps : 32;
	double sorted[32];
	memcpy(sorted, v->recent, (size_t)m * sizeof *sorted);
	qsort(sorted, (size_t)m, sizeof *sorted, by_value);
	double mean = sorted[m / 2], sd = (sorted[m * 3 / 4] - sorted[m / 4]) / 1.35;
	long from = v->step > 0 ? v->step : 0, evals = evals_left(v, from), ckpts = ckpts_left(v, from);
	double eval = v->nevals ? v->eval_s / v->nevals : 0, ckpt = v->nckpts ? v->ckpt_s / v->nckpts : 0;
	long n = v->total_steps - v->step;
	/* the step time's spread over the steps left, and a guess of an
	 * evaluation's time while none has been timed */
	*plus_minus = sd * sqrt((double)n) + (v->nevals ? 0 : 0.1 * mean * (double)n);
	return mean * (double)n + eval * (double)evals + ckpt * (double)ckpts;
}

json_t *run_view_json(const struct run_view *v)
{
	double pm = 0, left = strcmp(run_view_state(v), "running") ? -1 : run_view_left(v, &pm);   /* as the text's */
	json_t *j = json_pack("{so ss sI sI sI si so sI}", "run", utf8_json(v->dir), "state", run_view_state(v), "step",
			      (json_int_t)v->step, "total_steps", (json_int_t)v->total_steps, "epoch", (json_int_t)v->epoch,
			      "processes", v->processes, "device", utf8_json(v->device), "params", (json_int_t)v->params);
	double elapsed = v->elapsed_s + (v->last_time > v->start_time ? v->last_time - v->start_time : 0);
	json_object_set_new(j, "elapsed_s", json_real(elapsed));
	json_object_set_new(j, "left_s", left >= 0 ? json_real(left) : json_null());
	json_object_set_new(j, "left_plus_minus_s", left >= 0 ? json_real(pm) : json_null());
	struct { const char *k; double x; } nums[] = {
		{"loss", v->loss}, {"loss_smoothed", v->smooth}, {"lr", v->lr}, {"grad_norm", v->grad_norm},
		{"step_ms", v->step_ms}, {"tokens_per_s", v->tokens_per_s}, {"samples_per_s", v->samples_per_s},
		{"eval", v->eval_value},
		{"best", v->best_value},
	};
	for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
		json_object_set_new(j, nums[i].k, isfinite(nums[i].x) ? json_real(nums[i].x) : json_null());
	json_object_set_new(j, "metric", utf8_json(v->metric));
	json_object_set_new(j, "best_step", json_integer(v->best_step));
	if (v->has_comm)
		json_object_set_new(j, "comm", json_pack("{sf sf sf si}", "ms", v->comm_ms, "exposed_ms", v->exposed_ms,
							 "busbw_gbs", v->busbw_gbs, "slowest", v->slowest));
	return j;
}
