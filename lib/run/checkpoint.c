#include "run/checkpoint.h"
#include "data/utf8.h"
#include "format/dirdigest.h"
#include "format/safetensors.h"
#include "model/modeldir.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *state_json(const struct train_state *s)
{
	return json_pack("{sI sI sI sI sI sf sI sI sI sI sf sb sI sI sI sf sf sI sI}", "step", (json_int_t)s->step,
			 "epoch", (json_int_t)s->epoch, "record", (json_int_t)s->record, "samples",
			 (json_int_t)s->samples, "tokens", (json_int_t)s->tokens, "best", s->best, "best_step",
			 (json_int_t)s->best_step, "bad_evals", (json_int_t)s->bad_evals, "skipped",
			 (json_int_t)s->skipped, "optim_steps", (json_int_t)s->optim_steps, "elapsed_s",
			 s->elapsed_s, "finished", s->finished, "processes", (json_int_t)s->processes,
			 "sched_processes", (json_int_t)s->sched_processes, "sched_step", (json_int_t)s->sched_step,
			 "sched_pos", s->sched_pos, "loss_scale", s->ls.scale, "scale_clean", (json_int_t)s->ls.clean,
			 "overflows", (json_int_t)s->overflows);
}

static json_t *state_field(const char *path, json_t *j, const char *key)
{
	json_t *v = json_object_get(j, key);
	if (!v)
		die("%s: no '%s'", path, key);
	return v;
}

/* A count in state.json, which indexes the data and the schedule: out of
 * range, a tampered or corrupt file would read past them. */
static long state_int(const char *path, json_t *j, const char *key, long min, long max)
{
	json_t *v = state_field(path, j, key);
	if (!json_is_integer(v))
		die("%s: '%s' is not a whole number", path, key);
	json_int_t x = json_integer_value(v);
	if (x < min || x > max)
		die("%s: '%s' is %lld, outside [%ld, %ld]", path, key, (long long)x, min, max);
	return (long)x;
}

static double state_real(const char *path, json_t *j, const char *key, double min)
{
	json_t *v = state_field(path, j, key);
	if (!json_is_number(v))
		die("%s: '%s' is not a number", path, key);
	double x = json_number_value(v);
	if (x < min)
		die("%s: '%s' is %g, below %g", path, key, x, min);
	return x;
}

static void state_read(const char *path, int64_t records, struct train_state *s)
{
	static const char *const keys[] = {"step", "epoch", "record", "samples", "tokens", "best", "best_step",
					   "bad_evals", "skipped", "optim_steps", "elapsed_s", "finished",
					   "processes", "sched_processes", "sched_step", "sched_pos", "loss_scale",
					   "scale_clean", "overflows"};
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err);
	if (!j)
		die("%s: line %d: %s", path, err.line, err.text);
	if (!json_is_object(j))
		die("%s: not a training state (a JSON object)", path);
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		size_t i = 0;
		while (i < sizeof keys / sizeof *keys && strcmp(key, keys[i]))
			i++;
		if (i == sizeof keys / sizeof *keys)
			die("%s: unknown field '%s'", path, key);
	}
	s->step = state_int(path, j, "step", 0, LONG_MAX);
	s->epoch = state_int(path, j, "epoch", 0, s->step);
	s->record = state_int(path, j, "record", 0, records);
	s->samples = state_int(path, j, "samples", 0, LONG_MAX);
	s->tokens = state_int(path, j, "tokens", 0, LONG_MAX);
	s->best = state_real(path, j, "best", -HUGE_VAL);
	s->best_step = state_int(path, j, "best_step", -1, s->step);
	s->bad_evals = state_int(path, j, "bad_evals", 0, s->step);
	s->skipped = state_int(path, j, "skipped", 0, s->step);
	s->optim_steps = state_int(path, j, "optim_steps", 0, s->step);
	s->elapsed_s = state_real(path, j, "elapsed_s", 0);
	s->processes = (int)state_int(path, j, "processes", 1, INT_MAX);
	/* absent from the checkpoints of older versions: a schedule never moved */
	s->sched_processes = json_object_get(j, "sched_processes") ?
		(int)state_int(path, j, "sched_processes", 1, INT_MAX) : s->processes;
	s->sched_step = json_object_get(j, "sched_step") ? state_int(path, j, "sched_step", 0, s->step) : 0;
	s->sched_pos = json_object_get(j, "sched_pos") ? state_real(path, j, "sched_pos", 0) : 0;
	/* absent before fp16: no loss scale */
	s->ls.scale = json_object_get(j, "loss_scale") ? state_real(path, j, "loss_scale", 0) : 0;
	double ls = s->ls.scale;
	if (ls && (ls < 1 || ls > LOSS_SCALE_MAX || ls != ldexp(1, ilogb(ls))))
		die("%s: 'loss_scale' is %g, not 0 or a power of two from 1 to 2^24", path, ls);
	s->ls.clean = json_object_get(j, "scale_clean") ?
		state_int(path, j, "scale_clean", 0, LOSS_SCALE_WINDOW - 1) : 0;
	s->overflows = json_object_get(j, "overflows") ? state_int(path, j, "overflows", 0, s->step) : 0;
	v = state_field(path, j, "finished");
	if (!json_is_boolean(v))
		die("%s: 'finished' is not true or false", path);
	s->finished = json_is_true(v);
	json_decref(j);
}

/* The step of a checkpoint's dir name, "step-N" with N as checkpoint_save
 * writes it (no sign, blank or leading zero), a long; -1 for another name. */
static long step_of(const char *name)
{
	const char *digits = name + 5;
	if (strncmp(name, "step-", 5) || !isdigit((unsigned char)*digits) || (*digits == '0' && digits[1]))
		return -1;
	char *end;
	errno = 0;
	long step = strtol(digits, &end, 10);
	return *end || errno == ERANGE ? -1 : step;
}

/* Steps of the complete checkpoints, newest first. */
static int list_steps(const char *ckdir, long **steps)
{
	DIR *d = opendir(ckdir);
	int n = 0;
	size_t cap = 0;
	*steps = NULL;
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		long s = step_of(e->d_name);
		if (s < 0)
			continue;
		grow(steps, &cap, (size_t)n + 1, sizeof **steps);
		(*steps)[n++] = s;
	}
	closedir(d);
	for (int i = 1; i < n; i++)   /* insertion sort, newest first */
		for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
			long t = (*steps)[j];
			(*steps)[j] = (*steps)[j - 1];
			(*steps)[j - 1] = t;
		}
	return n;
}

/* Removes all but the newest keep checkpoints. Each is renamed aside
 * first, so that a kill in the middle of its removal leaves a leftover for
 * --resume to remove, not a checkpoint with files missing. */
static void prune(const char *ckdir, int keep)
{
	long *steps;
	int n = list_steps(ckdir, &steps);
	for (int i = keep; i < n; i++) {
		char name[32], aside[64];
		snprintf(name, sizeof name, "step-%ld", steps[i]);
		snprintf(aside, sizeof aside, "%s.old.%ld", name, (long)getpid());
		char *p = path_join(ckdir, name), *q = path_join(ckdir, aside);
		if (rename(p, q) == 0)
			remove_tree(q);
		free(p);
		free(q);
	}
	free(steps);
}

void checkpoint_save(const char *dir, struct bert *m, struct optim *o, const struct train_state *st,
		     char *const *labels, int nlabels, const char *vocab, const char *config, int keep)
{
	char name[64];
	snprintf(name, sizeof name, "ckpt/step-%ld", st->step);
	char *final = path_join(dir, name);
	struct adir *d = adir_begin(final, 1, NULL);
	const char *tmp = adir_tmp(d);
	modeldir_write(tmp, m, labels, nlabels, vocab);
	int n = optim_state(o, NULL);
	struct tensor_ref *t = xcalloc((size_t)n, sizeof *t);
	optim_state(o, t);
	optim_pull(o);
	char *opt = path_join(tmp, "optimizer.safetensors"), *state = path_join(tmp, "state.json");
	char *options = path_join(tmp, "run.config");
	st_write(opt, t, n);
	afile_put_text(options, config);
	free(options);
	json_t *j = state_json(st);
	char *text = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	afile_put_text(state, text);
	free(text);
	json_decref(j);
	dirdigest_write(tmp);
	adir_commit(d);
	optim_unstage(o);
	char *ck = path_join(dir, "ckpt");
	prune(ck, keep);
	free(ck);
	free(opt);
	free(state);
	free(t);
	free(final);
}

static const char *const loaded[] = { "model.safetensors", "optimizer.safetensors", NULL };

/* Why the checkpoint dir ck cannot be resumed from (malloc'd), or NULL
 * where it can; where heads, the loads check the rest of its large files. */
static char *damage(const char *ck, int heads)
{
	char *why;
	enum digests d = dirdigest_check(ck, loaded, heads, &why);
	if (d == DIGESTS_NONE)
		return xstrdup("no " DIGESTS_FILE ": it was cut short before it was complete");
	return d == DIGESTS_OK ? NULL : why;
}

char *checkpoint_intact(const char *dir, json_t *skipped, const char *after)
{
	char *ck = path_join(dir, "ckpt"), *found = NULL;
	long *steps, below = after ? step_of(strrchr(after, '/') + 1) : LONG_MAX;
	int n = list_steps(ck, &steps);
	for (int i = 0; i < n && !found; i++) {
		char name[32];
		snprintf(name, sizeof name, "step-%ld", steps[i]);
		char *path = path_join(ck, name), *why = steps[i] < below ? damage(path, !after) : NULL;
		if (steps[i] < below && !why)
			found = path;
		else if (why)
			json_array_append_new(skipped, json_pack("{so ss}", "checkpoint", utf8_json(path), "why", why));
		if (!found)
			free(path);
		free(why);
	}
	if ((n > 0 || after) && !found) {
		struct strbuf all = {0};
		size_t i;
		json_t *p;
		json_array_foreach(skipped, i, p)
			sb_addf(&all, "%s%s (%s)", i ? ", " : "", json_string_value(json_object_get(p, "checkpoint")),
				json_string_value(json_object_get(p, "why")));
		die("%s: no intact checkpoint to resume from: %s", dir, all.s);
	}
	free(steps);
	free(ck);
	return found;
}

char *checkpoint_confirm(const char *ckpt)
{
	char *why;
	return dirdigest_confirm(ckpt, loaded, &why) == DIGESTS_OK ? NULL : why;
}

void checkpoint_load(const char *ckpt, int64_t records, struct optim *o, struct train_state *st)
{
	char *opt = path_join(ckpt, "optimizer.safetensors"), *state = path_join(ckpt, "state.json");
	struct st_file *f = st_open(opt);
	int n = optim_state(o, NULL);
	struct tensor_ref *t = xcalloc((size_t)n, sizeof *t);
	optim_state(o, t);
	for (int i = 0; i < n; i++) {
		const struct st_tensor *s = st_find(f, t[i].name);
		if (!s || s->dtype != ST_F32 || (int64_t)s->nbytes != tensor_numel(&t[i]) * 4)
			die("%s: optimizer state '%s' is missing or mis-shaped", opt, t[i].name);
		st_to_f32(s, t[i].data);
	}
	st_close(f);
	optim_push(o);
	optim_unstage(o);
	state_read(state, records, st);
	optim_set_steps(o, st->optim_steps);
	free(t);
	free(opt);
	free(state);
}
