#include "rundir.h"
#include "adir.h"
#include "afile.h"
#include "err.h"
#include "modeldir.h"
#include "safetensors.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("cannot create %s:", path);
}

static void write_text(const char *path, const char *text)
{
	struct afile *f = afile_open(path);
	afile_write(f, text, strlen(text));
	afile_commit(f);
}

/* The lock is held for the life of the process. */
static void take_lock(const char *dir)
{
	char *path = path_join(dir, "lock");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot open %s:", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		char buf[128] = "";
		ssize_t n = read(fd, buf, sizeof buf - 1);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		die("%s is in use by another ts-train (pid %s)", dir, buf[0] ? buf : "unknown");
	}
	char host[HOST_NAME_MAX + 1] = "";
	gethostname(host, sizeof host);
	char text[HOST_NAME_MAX + 32];
	int n = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
		die("cannot write %s:", path);
	free(path);
}

void rundir_create(const char *dir)
{
	char *config = path_join(dir, "config");
	if (access(config, F_OK) == 0)
		die("%s already holds a run; continue it with --resume %s or choose another --run", dir, dir);
	free(config);
	make_parents(dir);
	make_dir(dir);
	take_lock(dir);
	const char *subdirs[] = {"log", "ckpt"};
	for (int i = 0; i < 2; i++) {
		char *p = path_join(dir, subdirs[i]);
		make_dir(p);
		free(p);
	}
}

/* Whether name is a temp file or dir of afile or adir, or an old dir adir
 * moves aside: NAME.tmp.PID or NAME.old.PID. */
static int is_leftover(const char *name)
{
	const char *dot = strrchr(name, '.');
	if (!dot || dot - name < 5 || !dot[1] || dot[strspn(dot + 1, "0123456789") + 1])
		return 0;
	return !strncmp(dot - 4, ".tmp", 4) || !strncmp(dot - 4, ".old", 4);
}

/* Removes what a trainer killed in the middle of a write left in dir: with
 * the lock held, no other process is writing there. */
static void remove_leftovers(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));)
		if (is_leftover(e->d_name)) {
			char *p = path_join(dir, e->d_name);
			remove_tree(p);
			free(p);
		}
	closedir(d);
}

void rundir_attach(const char *dir)
{
	char *config = path_join(dir, "config");
	if (access(config, F_OK) < 0)
		die("%s: not a run dir (no config file)", dir);
	free(config);
	take_lock(dir);
	char *ckpt = path_join(dir, "ckpt");
	remove_leftovers(dir);
	remove_leftovers(ckpt);
	free(ckpt);
}

int rundir_stop_requested(const char *dir)
{
	char *p = path_join(dir, "stop");
	int yes = access(p, F_OK) == 0;
	free(p);
	return yes;
}

void rundir_clear_stop(const char *dir)
{
	char *p = path_join(dir, "stop");
	unlink(p);
	free(p);
}

long rundir_request_stop(const char *dir)
{
	char *lock = path_join(dir, "lock"), *stop = path_join(dir, "stop");
	int fd = open(lock, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0) {
		if (fd >= 0)
			close(fd);
		free(lock);
		free(stop);
		return 0;
	}
	char buf[HOST_NAME_MAX + 32] = "", host[HOST_NAME_MAX + 1] = "", their[HOST_NAME_MAX + 1] = "";
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	long pid = 0;
	sscanf(buf, "%ld %64s", &pid, their);
	write_text(stop, "stop\n");
	gethostname(host, sizeof host);
	if (pid > 0 && !strcmp(host, their) && kill((pid_t)pid, SIGTERM) < 0 && errno != ESRCH)
		die("cannot signal pid %ld:", pid);
	free(lock);
	free(stop);
	return pid > 0 ? pid : 1;
}

static json_t *state_json(const struct train_state *s)
{
	return json_pack("{sI sI sI sI sI sf sI sI sI sI sf sb}", "step", (json_int_t)s->step, "epoch",
			 (json_int_t)s->epoch, "batch", (json_int_t)s->batch, "samples", (json_int_t)s->samples,
			 "tokens", (json_int_t)s->tokens, "best", s->best, "best_step", (json_int_t)s->best_step,
			 "bad_evals", (json_int_t)s->bad_evals, "skipped", (json_int_t)s->skipped, "optim_steps",
			 (json_int_t)s->optim_steps, "elapsed_s", s->elapsed_s, "finished", s->finished);
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

static void state_read(const char *path, long nbatches, struct train_state *s)
{
	static const char *const keys[] = {"step", "epoch", "batch", "samples", "tokens", "best", "best_step",
					   "bad_evals", "skipped", "optim_steps", "elapsed_s", "finished"};
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
	s->batch = state_int(path, j, "batch", 0, nbatches);
	s->samples = state_int(path, j, "samples", 0, LONG_MAX);
	s->tokens = state_int(path, j, "tokens", 0, LONG_MAX);
	s->best = state_real(path, j, "best", -HUGE_VAL);
	s->best_step = state_int(path, j, "best_step", -1, s->step);
	s->bad_evals = state_int(path, j, "bad_evals", 0, s->step);
	s->skipped = state_int(path, j, "skipped", 0, s->step);
	s->optim_steps = state_int(path, j, "optim_steps", 0, s->step);
	s->elapsed_s = state_real(path, j, "elapsed_s", 0);
	v = state_field(path, j, "finished");
	if (!json_is_boolean(v))
		die("%s: 'finished' is not true or false", path);
	s->finished = json_is_true(v);
	json_decref(j);
}

static int step_of(const char *name)
{
	int step, len;
	if (sscanf(name, "step-%d%n", &step, &len) == 1 && name[len] == 0)
		return step;
	return -1;
}

/* Steps of the complete checkpoints, newest first. */
static int list_steps(const char *ckdir, int **steps)
{
	DIR *d = opendir(ckdir);
	int n = 0;
	size_t cap = 0;
	*steps = NULL;
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		int s = step_of(e->d_name);
		if (s < 0)
			continue;
		grow(steps, &cap, (size_t)n + 1, sizeof **steps);
		(*steps)[n++] = s;
	}
	closedir(d);
	for (int i = 1; i < n; i++)   /* insertion sort, newest first */
		for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
			int t = (*steps)[j];
			(*steps)[j] = (*steps)[j - 1];
			(*steps)[j - 1] = t;
		}
	return n;
}

static void prune(const char *ckdir, int keep)
{
	int *steps, n = list_steps(ckdir, &steps);
	for (int i = keep; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "step-%d", steps[i]);
		char *p = path_join(ckdir, name);
		remove_tree(p);
		free(p);
	}
	free(steps);
}

void checkpoint_save(const char *dir, struct bert *m, struct optim *o, const struct train_state *st,
		     char *const *labels, int nlabels, const char *vocab, int keep)
{
	char name[64];
	snprintf(name, sizeof name, "ckpt/step-%ld", st->step);
	char *final = path_join(dir, name);
	struct adir *d = adir_begin(final, 1, "state.json");
	const char *tmp = adir_tmp(d);
	modeldir_write(tmp, m, labels, nlabels, vocab);
	int n = optim_state(o, NULL);
	struct tensor_ref *t = xcalloc((size_t)n, sizeof *t);
	optim_state(o, t);
	char *opt = path_join(tmp, "optimizer.safetensors"), *state = path_join(tmp, "state.json");
	st_write(opt, t, n);
	json_t *j = state_json(st);
	char *text = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	write_text(state, text);
	free(text);
	json_decref(j);
	adir_commit(d);
	char *ck = path_join(dir, "ckpt");
	prune(ck, keep);
	free(ck);
	free(opt);
	free(state);
	free(t);
	free(final);
}

char *checkpoint_latest(const char *dir)
{
	char *ck = path_join(dir, "ckpt");
	int *steps, n = list_steps(ck, &steps);
	char *found = NULL;
	if (n > 0) {
		char name[32];
		snprintf(name, sizeof name, "step-%d", steps[0]);
		found = path_join(ck, name);
	}
	free(steps);
	free(ck);
	return found;
}

void checkpoint_load(const char *ckpt, long nbatches, struct optim *o, struct train_state *st)
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
	state_read(state, nbatches, st);
	optim_set_steps(o, st->optim_steps);
	free(t);
	free(opt);
	free(state);
}
