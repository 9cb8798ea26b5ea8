#include "rundir.h"
#include "afile.h"
#include "err.h"
#include "modeldir.h"
#include "safetensors.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
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

void rundir_attach(const char *dir)
{
	char *config = path_join(dir, "config");
	if (access(config, F_OK) < 0)
		die("%s: not a run dir (no config file)", dir);
	free(config);
	take_lock(dir);
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

static void state_read(const char *path, struct train_state *s)
{
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err);
	if (!j)
		die("%s: line %d: %s", path, err.line, err.text);
	json_int_t step, epoch, batch, samples, tokens, best_step, bad, skipped, osteps;
	if (json_unpack_ex(j, &err, JSON_STRICT, "{sI sI sI sI sI sF sI sI sI sI sF sb}", "step", &step, "epoch",
			   &epoch, "batch", &batch, "samples", &samples, "tokens", &tokens, "best", &s->best,
			   "best_step", &best_step, "bad_evals", &bad, "skipped", &skipped, "optim_steps", &osteps,
			   "elapsed_s", &s->elapsed_s, "finished", &s->finished) < 0)
		die("%s: not a training state: %s", path, err.text);
	s->step = (long)step, s->epoch = (long)epoch, s->batch = (long)batch;
	s->samples = samples, s->tokens = tokens, s->best_step = (long)best_step;
	s->bad_evals = (long)bad, s->skipped = (long)skipped;
	s->optim_steps = (long)osteps;
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
	char name[64], tmpname[64];
	snprintf(name, sizeof name, "ckpt/step-%ld", st->step);
	snprintf(tmpname, sizeof tmpname, "ckpt/.step-%ld.tmp", st->step);
	char *final = path_join(dir, name), *tmp = path_join(dir, tmpname);
	remove_tree(tmp);
	modeldir_save(tmp, m, labels, nlabels, vocab);
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
	remove_tree(final);
	if (rename(tmp, final) < 0)
		die("cannot rename %s to %s:", tmp, final);
	char *ck = path_join(dir, "ckpt");
	fsync_dir(ck);
	prune(ck, keep);
	free(ck);
	free(opt);
	free(state);
	free(t);
	free(final);
	free(tmp);
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

void checkpoint_load(const char *ckpt, struct optim *o, struct train_state *st)
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
	state_read(state, st);
	optim_set_steps(o, st->optim_steps);
	free(t);
	free(opt);
	free(state);
}
