#include "sweeprun.h"
#include "afile.h"
#include "err.h"
#include "events.h"
#include "mpjson.h"
#include "rec.h"
#include "rundir.h"
#include "strbuf.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *sweep_job_dir(const char *dir, int i)
{
	char name[32];
	snprintf(name, sizeof name, "job-%03d", i + 1);
	return path_join(dir, name);
}

char **sweep_argv(const struct sweep_plan *p, int i)
{
	const struct sweep_job *j = &p->jobs[i];
	char **v = xcalloc((size_t)(p->ncmd + j->nopts + 6), sizeof *v);
	int n = 0;
	for (int k = 0; k < p->ncmd; k++)
		v[n++] = xstrdup(p->cmd[k]);
	for (int k = 0; k < j->nopts; k += 2) {
		v[n] = xmalloc(strlen(j->opts[k]) + 3);
		sprintf(v[n++], "--%s", j->opts[k]);
		v[n++] = xstrdup(j->opts[k + 1]);
	}
	v[n++] = xstrdup("--run");
	v[n++] = sweep_job_dir(p->dir, i);
	if (p->threads) {
		v[n++] = xstrdup("-j");
		v[n] = xmalloc(16);
		snprintf(v[n++], 16, "%d", p->threads);
	}
	return v;
}

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Job i's options as {"key": "value"}. */
static json_t *params_json(const struct sweep_job *j)
{
	json_t *o = json_object();
	for (int k = 0; k < j->nopts; k += 2)
		json_object_set_new(o, j->opts[k], json_string(j->opts[k + 1]));
	return o;
}

/* The last lines of a job's output, for the record of a failure. */
static json_t *tail_of(const char *path, int lines)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return json_string("");
	char buf[4096];
	fseek(f, 0, SEEK_END);
	long end = ftell(f), from = end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0;
	fseek(f, from, SEEK_SET);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	char *p = buf + n;
	for (int seen = 0; p > buf; p--)
		if (p[-1] == '\n' && ++seen == lines)
			break;
	return json_string(p);
}

/* The run's valid evaluation at its best step ("done" names it), else its
 * last one; NULL when it has none. */
static json_t *best_eval(const char *run)
{
	char *path = path_join(run, "events.msgpack");
	json_t *best = NULL;
	if (access(path, R_OK) == 0) {
		struct rec_reader *r = rec_open(path);
		rec_allow_torn_tail(r);
		json_t **evals = NULL;
		size_t n = 0, cap = 0;
		long best_step = -1;
		const msgpack_object *o;
		while ((o = rec_next(r))) {
			const msgpack_object *ev = mp_get(o, "event"), *split = mp_get(o, "split"), *bs;
			if (!ev || ev->type != MSGPACK_OBJECT_STR)
				continue;
			if (!strncmp(ev->via.str.ptr, "done", ev->via.str.size) && (bs = mp_get(o, "best_step")) &&
			    bs->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				best_step = (long)bs->via.u64;
			if (strncmp(ev->via.str.ptr, "eval", ev->via.str.size) || !split ||
			    split->type != MSGPACK_OBJECT_STR || strncmp(split->via.str.ptr, "valid", split->via.str.size))
				continue;
			struct strbuf b = {0};
			mp_to_json(o, &b);
			sb_addc(&b, 0);
			grow(&evals, &cap, n + 1, sizeof *evals);
			evals[n++] = json_loads(b.s, 0, NULL);
			sb_free(&b);
		}
		rec_close(r);
		for (size_t i = 0; i < n; i++) {
			json_t *step = json_object_get(evals[i], "step");
			if (!best || (best_step >= 0 && json_integer_value(step) == best_step) ||
			    (best_step < 0 && i == n - 1)) {
				json_decref(best);
				best = json_incref(evals[i]);
			}
			json_decref(evals[i]);
		}
		free(evals);
	}
	free(path);
	return best;
}

/* Starts job i, its output into its .out file; returns its pid. */
static pid_t start(const struct sweep_plan *p, int i)
{
	char **argv = sweep_argv(p, i);
	char *dir = sweep_job_dir(p->dir, i), *out = xmalloc(strlen(dir) + 5);
	sprintf(out, "%s.out", dir);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create %s:", out);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("cannot start a job:");
	if (pid == 0) {
		signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		dprintf(2, "ts-sweep: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv), free(dir), free(out);
	return pid;
}

/* The record of job i's end. */
static json_t *ended(const struct sweep_plan *p, int i, int status, int stopping, double took)
{
	char *dir = sweep_job_dir(p->dir, i), *out = xmalloc(strlen(dir) + 5);
	sprintf(out, "%s.out", dir);
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	json_t *rec = json_pack("{sI ss sf}", "job", (json_int_t)i + 1,
				"state", ok ? (stopping ? "stopped" : "done") : "failed", "seconds", took);
	if (WIFEXITED(status))
		json_object_set_new(rec, "exit", json_integer(WEXITSTATUS(status)));
	else
		json_object_set_new(rec, "signal", json_integer(WTERMSIG(status)));
	json_t *best = best_eval(dir);
	if (best)
		json_object_set_new(rec, "best", best);
	if (!ok)
		json_object_set_new(rec, "tail", tail_of(out, 5));
	free(dir), free(out);
	return rec;
}

int sweep_run(const struct sweep_plan *p)
{
	make_parents(p->dir);
	if (mkdir(p->dir, 0755) < 0) {
		if (errno == EEXIST)
			die("%s exists: a sweep makes its dir (choose another --dir)", p->dir);
		die("cannot create %s:", p->dir);
	}
	rundir_lock(p->dir, "ts-sweep");
	char *path = path_join(p->dir, "jobs.msgpack");
	struct events *ev = events_open(path);
	free(path);
	json_t *cmd = json_array();
	for (int k = 0; k < p->ncmd; k++)
		json_array_append_new(cmd, json_string(p->cmd[k]));
	events_add(ev, "sweep", json_pack("{sI sI so}", "jobs", (json_int_t)p->njobs, "slots", (json_int_t)p->slots,
					   "command", cmd));
	for (int i = 0; i < p->njobs; i++)
		events_add(ev, "job", json_pack("{sI ss so}", "job", (json_int_t)i + 1, "state", "queued", "params",
						params_json(&p->jobs[i])));
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	pid_t *pids = xcalloc((size_t)p->njobs, sizeof *pids);
	double *began = xcalloc((size_t)p->njobs, sizeof *began);
	int next = 0, running = 0, failed = 0, stopping = 0;
	while (running || (next < p->njobs && !stopping)) {
		while (running < p->slots && next < p->njobs && !stop_asked) {
			pids[next] = start(p, next);
			began[next] = now();
			events_add(ev, "job", json_pack("{sI ss sI}", "job", (json_int_t)next + 1, "state", "running", "pid",
							(json_int_t)pids[next]));
			next++, running++;
		}
		if (stop_asked && !stopping) {   /* each running job checkpoints and stops */
			stopping = 1;
			for (int i = 0; i < next; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGTERM);
		}
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0 && errno != EINTR)
			die("waiting for the jobs:");
		if (pid <= 0) {   /* a stop request is seen within a tenth of a second */
			struct timespec pause = {0, 100 * 1000 * 1000};
			nanosleep(&pause, NULL);
			continue;
		}
		for (int i = 0; i < next; i++)
			if (pids[i] == pid) {
				json_t *rec = ended(p, i, status, stopping, now() - began[i]);
				failed |= !strcmp(json_string_value(json_object_get(rec, "state")), "failed");
				events_add(ev, "job", rec);
				pids[i] = 0;
				running--;
			}
	}
	events_add(ev, stopping ? "stop" : "done", json_pack("{sI}", "started", (json_int_t)next));
	events_close(ev);
	if (stopping)
		rundir_clear_stop(p->dir);
	free(pids), free(began);
	return stopping ? 2 : failed;
}
