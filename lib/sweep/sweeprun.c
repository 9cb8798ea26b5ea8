#include "sweep/sweeprun.h"
#include "device/gpulist.h"
#include "device/nvml.h"
#include "eval/metricnames.h"
#include "format/events.h"
#include "format/mpjson.h"
#include "format/rec.h"
#include "run/rundir.h"
#include "sweep/asha.h"
#include "sweep/launch.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char **sweep_argv(const struct sweep_plan *p, int i)
{
	const struct sweep_job *j = &p->jobs[i];
	char **v = xcalloc((size_t)(j->ncmd + j->nopts + 3), sizeof *v);
	int n = 0;
	for (int k = 0; k < j->ncmd; k++)
		v[n++] = xstrdup(j->cmd[k]);
	for (int k = 0; k < j->nopts; k += 2) {
		v[n] = xmalloc(strlen(j->opts[k]) + 3);
		sprintf(v[n++], "--%s", j->opts[k]);
		v[n++] = xstrdup(j->opts[k + 1]);
	}
	v[n++] = xstrdup("--run");
	v[n++] = sweep_job_dir(p->dir, i);
	return v;
}

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* SIGINT, SIGTERM (ts-stop), SIGHUP (its terminal closed) and SIGPIPE
 * (its standard error a pipe nothing reads any more) ask the sweep to stop
 * from the moment it holds its dir, as they ask ts-train; restart: the
 * calls they interrupt go on (the server checks' reads), else a wait ends
 * at once. */
static void catch_stops(int restart)
{
	struct sigaction stop = {.sa_handler = on_stop, .sa_flags = restart ? SA_RESTART : 0};
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGHUP, &stop, NULL);
	sigaction(SIGPIPE, &stop, NULL);
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
	while ((*p & 0xc0) == 0x80)   /* the rest of a character cut off at the start */
		p++;
	json_t *text = json_string(p);
	return text ? text : json_string("(output not UTF-8)");
}

/* Whether record o is an evaluation on the valid split. */
static int valid_eval(const msgpack_object *o)
{
	return mp_str_is(mp_get(o, "event"), "eval") && mp_str_is(mp_get(o, "split"), "valid");
}

/* A record as JSON. */
static json_t *record_json(const msgpack_object *o)
{
	struct strbuf b = {0};
	mp_to_json(o, &b);
	sb_addc(&b, 0);
	json_t *j = json_loads(b.s, 0, NULL);
	sb_free(&b);
	return j ? j : json_object();
}

/* The run's valid evaluation at its best step (its last "best" event or its
 * "done" names it), else its last one; NULL when it has none. *stopped: whether its events end in a
 * stop (on request: it goes on with --resume). */
static json_t *outcome(const char *run, int *stopped)
{
	char *path = path_join(run, "events.msgpack");
	json_t *best = NULL;
	*stopped = 0;
	if (access(path, R_OK) == 0) {
		struct rec_reader *r = rec_open(path);
		rec_allow_torn_tail(r);
		json_t **evals = NULL;
		size_t n = 0, cap = 0;
		long best_step = -1;
		const msgpack_object *o;
		while ((o = rec_next(r))) {
			/* the run's best evaluation: a new best's step (a run stopped or
			 * cut short has no done event), or the step its done event names */
			const msgpack_object *ev = mp_get(o, "event"), *bs = mp_get(o, mp_str_is(ev, "best") ? "step" : "best_step");
			if ((mp_str_is(ev, "best") || mp_str_is(ev, "done")) && bs && bs->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				best_step = (long)bs->via.u64;
			*stopped = mp_str_is(ev, "stop");
			if (!valid_eval(o))
				continue;
			grow(&evals, &cap, n + 1, sizeof *evals);
			evals[n++] = record_json(o);
		}
		rec_close(r);
		for (size_t i = 0; i < n; i++) {
			json_object_del(evals[i], "event");
			json_object_del(evals[i], "time");
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

/* Whether a job that ended with status, while the sweep stopped, died of
 * a stop (its own or, a job of several processes, its processes' exit
 * status 128 plus it) before its trainer could catch it. */
static int died_of_stop(int status)
{
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) - 128 : 0;
	return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

/* The record of job i's end: failed, pruned, stopped (on request: its run
 * ends in a stop, whoever asked, or it died of the sweep's stop) or done. */
static json_t *ended(const char *dir, int i, int status, int pruned, int stopping, double took)
{
	char *run = sweep_job_dir(dir, i), *out = xmalloc(strlen(run) + 5);
	sprintf(out, "%s.out", run);
	int cut = stopping && died_of_stop(status), ok = (WIFEXITED(status) && WEXITSTATUS(status) == 0) || cut, stopped;
	json_t *best = outcome(run, &stopped);
	json_t *rec = json_pack("{sI ss sf}", "job", (json_int_t)i + 1, "state",
				!ok ? "failed" : pruned ? "pruned" : stopped || cut ? "stopped" : "done", "seconds", took);
	if (WIFEXITED(status))
		json_object_set_new(rec, "exit", json_integer(WEXITSTATUS(status)));
	else
		json_object_set_new(rec, "signal", json_integer(WTERMSIG(status)));
	if (best)
		json_object_set_new(rec, "best", best);
	if (!ok)
		json_object_set_new(rec, "tail", tail_of(out, 5));
	free(run), free(out);
	return rec;
}

static json_t *strings_json(char **v)
{
	json_t *a = json_array();
	for (; *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

/* A running job: its pid, where it runs, when it began; with pruning, how
 * far its events have been read and whether it was told to stop. */
struct running {
	pid_t pid;
	int job, place;
	double began;
	struct rec_tail events;
	int pruned;
};

double sweep_metric(const json_t *eval, const char *name)
{
	const char *const *key = metric_path(name);
	const json_t *v = key ? eval : NULL;
	for (; v && *key; key++)
		v = json_object_get(v, *key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The pruning of a schedule: the rungs, made at the first evaluation seen
 * (when the metric is known), and the metric. */
struct pruning {
	struct asha *asha;
	const char *metric;
};

/* What watching a job's events needs. */
struct watching {
	const struct sweep_plan *p;
	struct pruning *pr;
	struct running *r;
	struct events *ev;
};

/* Takes an event of a watched job: an evaluation that ASHA says falls
 * short stops the job, recording why. Returns 1 once it is stopped. */
static int take_eval(void *ctx, const msgpack_object *o)
{
	struct watching *w = ctx;
	struct pruning *pr = w->pr;
	if (!valid_eval(o))
		return 0;
	json_t *eval = record_json(o);
	if (!pr->asha) {
		pr->metric = w->p->metric ? w->p->metric : metric_default(eval_json_task(eval));
		pr->asha = asha_new(w->p->eta, !metric_higher_is_better(pr->metric));
	}
	long step = (long)json_integer_value(json_object_get(eval, "step"));
	double value = sweep_metric(eval, pr->metric), best;
	int rung;
	if (asha_report(pr->asha, w->r->job, step, value, &rung, &best)) {
		w->r->pruned = 1;
		events_add(w->ev, "job", json_pack("{sI ss sI sI ss sf sf}", "job", (json_int_t)w->r->job + 1, "state",
						   "pruning", "rung", (json_int_t)rung, "step", (json_int_t)step, "metric",
						   pr->metric, "value", value, "rung_best", best));
		struct launcher l = {w->p->dir, NULL, w->p->ssh, w->p->nssh};
		launch_stop(&l, &w->p->places[w->r->place], w->r->job, w->r->pid);
	}
	json_decref(eval);
	return w->r->pruned;
}

/* Reads the evaluations job r has added to its events since the last call,
 * and stops it when ASHA says so, recording why in ev. Events that cannot
 * be read prune nothing: the job's outcome tells of them. */
static void watch(const struct sweep_plan *p, struct pruning *pr, struct running *r, struct events *ev)
{
	if (r->pruned)
		return;
	char *run = sweep_job_dir(p->dir, r->job), *path = path_join(run, "events.msgpack"), err[256];
	struct watching w = {p, pr, r, ev};
	rec_tail_read(path, &r->events, take_eval, &w, err, sizeof err);
	free(path);
	free(run);
}

/* Whether job r, whose end is recorded in rec, found its server gone: ssh
 * failed (exit 255) before the job's run began there. Its slot would fail
 * every job left in the queue as fast, so the server is left out, with a
 * warning that says why. */
static int server_lost(const struct sweep_plan *p, const struct running *r, const json_t *rec)
{
	const struct sweep_place *pl = &p->places[r->place];
	if (!pl->host || json_integer_value(json_object_get(rec, "exit")) != 255)
		return 0;
	char *run = sweep_job_dir(p->dir, r->job), *config = path_join(run, "config");
	int lost = access(config, F_OK) != 0;
	if (lost) {   /* ssh's last line, as "ssh: connect to host node2 port 22: Connection refused" */
		const char *tail = json_string_value(json_object_get(rec, "tail")), *why = strrchr(tail, '\n');
		why = why ? why + 1 : tail;
		warnx("server %s left out: job %d could not start there: %.*s", pl->host, r->job + 1,
		      (int)strcspn(why, "\r"), why);
	}
	free(run), free(config);
	return lost;
}

/* Says on standard error that job i, ended with status, failed: how, and
 * where its output is. */
static void say_failed(const char *dir, int i, int status)
{
	char *run = sweep_job_dir(dir, i);
	if (WIFSIGNALED(status))
		warnx("job %d failed: killed by signal %d (%s); its output is in %s.out", i + 1, WTERMSIG(status),
		      strsignal(WTERMSIG(status)), run);
	else
		warnx("job %d failed: exit status %d; its output is in %s.out", i + 1, WEXITSTATUS(status), run);
	free(run);
}

/* Runs the n jobs ids[] (0-based) with their command lines argvs[], to
 * which the place adds its -j where add_j[] says, as many at a time as the
 * places have slots, recording each in ev; returns sweep_run's result. */
static int schedule(const struct sweep_plan *p, const char *cwd, struct events *ev, int n, const int *ids,
		    char ***argvs, const int *add_j)
{
	catch_stops(0);
	struct launcher l = {p->dir, cwd, p->ssh, p->nssh};
	int *busy = xcalloc((size_t)p->nplaces, sizeof *busy), *lost = xcalloc((size_t)p->nplaces, sizeof *lost),
	    slots = 0;
	for (int k = 0; k < p->nplaces; k++)
		slots += p->places[k].slots;
	struct running *run = xcalloc((size_t)slots + 1, sizeof *run);
	int next = 0, running = 0, failed = 0, stopping = 0;
	struct pruning pr = {0};
	while (running || (next < n && !stopping)) {
		if (rundir_stop_requested(p->dir))   /* ts-stop from another machine writes it alone */
			stop_asked = 1;
		for (int k = 0; k < p->nplaces && next < n && !stop_asked; k++)
			while (!lost[k] && busy[k] < p->places[k].slots && next < n) {
				const struct sweep_place *pl = &p->places[k];
				char threads[16], **with = sweep_at(pl, argvs[next], add_j[next], threads);
				struct running *r = &run[running++];
				*r = (struct running){launch_start(&l, pl, ids[next], with), ids[next], k, clock_seconds()};
				json_t *rec = json_pack("{sI ss sI so}", "job", (json_int_t)ids[next] + 1, "state", "running",
							"pid", (json_int_t)r->pid, "argv", strings_json(with));
				if (pl->host)
					json_object_set_new(rec, "host", json_string(pl->host));
				if (pl->gpus)
					json_object_set_new(rec, "gpus", json_string(pl->gpus));
				events_add(ev, "job", rec);
				free(with);
				busy[k]++, next++;
			}
		if (stop_asked && !stopping) {   /* each running job checkpoints and stops */
			stopping = 1;
			for (int i = 0; i < running; i++)
				launch_stop(&l, &p->places[run[i].place], run[i].job, run[i].pid);
		}
		for (int i = 0; p->eta > 1 && !stopping && i < running; i++)
			watch(p, &pr, &run[i], ev);
		if (!running) {   /* stopped before a job began, or no place is left: the jobs left stay queued */
			if (!stopping)
				warnx("no server or GPU is left to run the jobs (see the warnings above)");
			break;
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
		for (int i = 0; i < running; i++)
			if (run[i].pid == pid) {
				json_t *rec = ended(p->dir, run[i].job, status, run[i].pruned, stopping,
							   clock_seconds() - run[i].began);
				int job_failed = !strcmp(json_string_value(json_object_get(rec, "state")), "failed");
				if (!lost[run[i].place] && server_lost(p, &run[i], rec))
					lost[run[i].place] = 1;
				events_add(ev, "job", rec);
				if (job_failed)   /* once recorded: a closed standard error stops the sweep */
					say_failed(p->dir, run[i].job, status), failed = 1;
				busy[run[i].place]--;
				run[i] = run[--running];
				break;
			}
	}
	events_add(ev, stopping ? "stop" : "done", json_pack("{sI}", "started", (json_int_t)next));
	rundir_clear_stop(p->dir);   /* acted on, or come with the last job's end */
	signal(SIGPIPE, SIG_DFL);   /* the board to a closed pipe ends the command, as any output does */
	free(run), free(busy), free(lost);
	if (pr.asha)
		asha_free(pr.asha);
	return failed ? 1 : stopping ? 2 : 0;
}

static struct events *open_records(const char *dir)
{
	char *path = path_join(dir, "jobs.msgpack");
	struct events *ev = events_open(path);
	free(path);
	return ev;
}

/* The jobs' data dirs, each once: as ts-train takes --data, from the
 * command, a config file it names (-c) or a spec. */
static char **data_dirs(const struct sweep_plan *p, int *n)
{
	char **v = xcalloc((size_t)p->njobs + 1, sizeof *v);
	*n = 0;
	for (int i = 0; i < p->njobs; i++) {
		char **argv = sweep_argv(p, i), *d = sweep_option(argv, "data", 0);
		int seen = 0;
		for (int m = 0; d && m < *n; m++)
			seen |= !strcmp(v[m], d);
		if (d && !seen)
			v[(*n)++] = d;
		else
			free(d);
		for (char **a = argv; *a; a++)
			free(*a);
		free(argv);
	}
	return v;
}

/* Checks server pl: what it must reach, its cores and free disk; 0, with a
 * warning, when it falls short. */
static int check_server(const struct sweep_plan *p, struct sweep_place *pl, const char *cwd, const char *abs)
{
	int ndata;
	char **data = data_dirs(p, &ndata);
	struct strbuf b = {0};
	char *q = shell_quote(abs);
	sb_addf(&b, "test -d %s || { echo 'the sweep dir is not shared'; exit 1; };", q);
	free(q);
	for (int i = 0; i < ndata; i++) {
		q = shell_quote(data[i]);
		sb_addf(&b, "test -r %s/manifest.json || { echo 'no data dir %s'; exit 1; };", q, q);
		free(q);
	}
	q = shell_quote(abs);
	sb_addf(&b, "nproc && df -Pk %s | tail -n 1", q);
	free(q);
	sb_addc(&b, 0);
	char *argv[] = {"sh", "-c", b.s, NULL};
	struct launcher l = {p->dir, cwd, p->ssh, p->nssh};
	char **cmd = launch_placed(&l, pl, argv);
	struct strbuf cmdline = {0};
	for (char **a = cmd; *a; a++) {
		char *w = shell_quote(*a);
		sb_addf(&cmdline, "%s%s", a == cmd ? "" : " ", w);
		free(w);
	}
	sb_addf(&cmdline, " </dev/null 2>&1");
	sb_addc(&cmdline, 0);
	FILE *f = popen(cmdline.s, "r");
	char out[512] = "";
	size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[got] = 0;
	int rc = f ? pclose(f) : -1;
	long cores = 0, avail_kb = 0;
	char *line2 = strchr(out, '\n');
	int ok = rc == 0 && sscanf(out, "%ld", &cores) == 1 && line2 &&
		 sscanf(line2, "%*s %*s %*s %ld", &avail_kb) == 1;
	out[strcspn(out, "\n")] = 0;
	if (!ok)
		warnx("server %s left out: %s", pl->host, rc == 0 ? "its answer is not understood" : *out ? out : "ssh failed");
	else if (avail_kb < 1024 * 1024)
		warnx("server %s left out: %ld MiB free for the runs, under 1 GiB", pl->host, avail_kb / 1024), ok = 0;
	if (ok)
		pl->threads = cores / pl->slots > 1 ? (int)(cores / pl->slots) : 1;
	for (int i = 0; i < ndata; i++)
		free(data[i]);
	free(b.s), free(cmdline.s), free(cmd[p->nssh + 2]), free(cmd), free(data);
	return ok;
}

/* Checks the GPUs of place pl: there and free; 0, with a warning, when not. */
static int check_gpus(const struct sweep_place *pl)
{
	int ids[MAX_GPUS], n = gpus_parse(pl->gpus, ids), count = nvml_count();
	for (int i = 0; i < n; i++) {
		struct gpu_usage u;
		if (count < 0)
			warnx("GPUs %s left out: the NVIDIA driver cannot be read here (no libnvidia-ml.so.1)", pl->gpus);
		else if (ids[i] >= count)
			warnx("GPUs %s left out: GPU %d is not here (the driver sees %d)", pl->gpus, ids[i], count);
		else if (!nvml_usage_at(ids[i], &u))
			warnx("GPUs %s left out: GPU %d cannot be read", pl->gpus, ids[i]);
		else if (u.processes)
			warnx("GPUs %s left out: GPU %d is busy (%d processes)", pl->gpus, ids[i], u.processes);
		else
			continue;
		return 0;
	}
	return 1;
}

static json_t *places_json(const struct sweep_plan *p)
{
	json_t *a = json_array();
	for (int k = 0; k < p->nplaces; k++) {
		const struct sweep_place *pl = &p->places[k];
		json_array_append_new(a, json_pack("{so sI sI so sI}", "host", pl->host ? json_string(pl->host) : json_null(),
						   "slots", (json_int_t)pl->slots, "threads", (json_int_t)pl->threads, "gpus",
						   pl->gpus ? json_string(pl->gpus) : json_null(), "procs", (json_int_t)pl->procs));
	}
	return a;
}

/* Reads fd to its end, keeping what fits in buf (size > 0) as a string. */
static void read_all(int fd, char *buf, size_t size)
{
	size_t got = 0;
	char spill[256];
	ssize_t k;
	while ((k = got < size - 1 ? read(fd, buf + got, size - 1 - got) : read(fd, spill, sizeof spill)) > 0 ||
	       (k < 0 && errno == EINTR))
		if (k > 0 && got < size - 1)
			got += (size_t)k;
	buf[got] = 0;
}

/* Dies unless s is UTF-8: the records are JSON, which holds nothing else,
 * and a word left out of them would resume another command. */
static void need_utf8(const char *what, const char *s)
{
	json_t *j = json_string(s);
	if (!j)
		die("%s: '%s' is not UTF-8, which jobs.msgpack cannot record", what, s);
	json_decref(j);
}

/* Asks ts-train --count-params in cwd for job i's model: returns its
 * parameters, or -1 when ts-train cannot tell here (a data dir or a
 * ts-train only the servers have: the job will say why); dies with
 * ts-train's own line when it refuses the job's options, or, when the jobs
 * run here alone, with why its command cannot run, before anything is
 * made. */
static long probe_job(const char *cwd, char **argv, int i, int here_alone)
{
	int len = 0, out[2], err[2];
	while (argv[len])
		len++;
	char **v = xcalloc((size_t)len + 2, sizeof *v);
	memcpy(v, argv, (size_t)len * sizeof *v);
	v[len] = "--count-params";
	if (pipe(out) < 0 || pipe(err) < 0)
		die("cannot make a pipe:");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("cannot start ts-train:");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 || dup2(null, 0) < 0 || chdir(cwd) < 0)
			_exit(127);
		execvp(v[0], v);
		dprintf(2, "cannot run %s: %s\n", v[0], strerror(errno));
		_exit(127);
	}
	close(out[1]), close(err[1]);
	char text[64] = "", why[1024] = "";
	read_all(out[0], text, sizeof text);
	read_all(err[0], why, sizeof why);
	close(out[0]), close(err[0]);
	int status;
	waitpid(pid, &status, 0);
	free(v);
	int unrun = here_alone && WIFEXITED(status) && WEXITSTATUS(status) == 127 && !strncmp(why, "cannot run ", 11);
	if (unrun || (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_USAGE)) {
		why[strcspn(why, "\n")] = 0;
		char *hint = strstr(why, "; see 'ts-train --help'");
		if (hint)
			*hint = 0;
		die_usage("job %d: %s", i + 1, why);
	}
	char *end;
	long n = strtol(text, &end, 10);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && end != text && *end == '\n' ? n : -1;
}

/* What a sweep killed before its records were whole leaves in its dir. */
static int left_unbegun(const char *name)
{
	return !strcmp(name, "lock") || !strcmp(name, "jobs.msgpack.tmp");
}

/* Whether dir is what a sweep killed before its records were whole left:
 * a lock, perhaps their temp file, nothing else. */
static int unbegun(const char *dir)
{
	char *lock = path_join(dir, "lock");
	int yes = access(lock, F_OK) == 0 && dir_empty_but(dir, left_unbegun);
	free(lock);
	return yes;
}

int sweep_run(struct sweep_plan *p)
{
	char *cwd = getcwd(NULL, 0);
	if (!cwd)
		die("cannot name the working dir:");
	need_utf8("the working dir", cwd);
	for (int k = 0; k < p->nssh; k++)
		need_utf8("--ssh", p->ssh[k]);
	int here_alone = 1;
	for (int k = 0; k < p->nplaces; k++)
		if (p->places[k].host)
			need_utf8("--servers", p->places[k].host), here_alone = 0;
	char ***argvs = xcalloc((size_t)p->njobs + 1, sizeof *argvs);
	long *sizes = xcalloc((size_t)p->njobs + 1, sizeof *sizes);
	for (int i = 0; i < p->njobs; i++) {
		char what[32];
		argvs[i] = sweep_argv(p, i);
		snprintf(what, sizeof what, "job %d", i + 1);
		for (char **a = argvs[i]; *a; a++)
			need_utf8(what, *a);
	}
	for (int i = 0; i < p->njobs; i++)
		sizes[i] = probe_job(cwd, argvs[i], i, here_alone);
	make_parents(p->dir);
	if (mkdir(p->dir, 0777) < 0) {
		if (errno != EEXIST)
			die("cannot create %s:", p->dir);
		if (!unbegun(p->dir))
			die("%s exists: a sweep makes its dir (choose another --dir, or --resume it)", p->dir);
	}
	catch_stops(1);   /* a stop while the servers are checked: every job stays queued */
	rundir_lock(p->dir, "ts-sweep");
	cleanup_add(p->dir);   /* until its records are whole, a sweep cut short leaves no dir */
	char *abs = realpath(p->dir, NULL);
	if (!abs)
		die("cannot name %s:", p->dir);
	int kept = 0, slots = 0;
	for (int k = 0; k < p->nplaces; k++) {
		struct sweep_place *pl = &p->places[k];
		if (pl->host ? check_server(p, pl, cwd, abs) : !pl->gpus || check_gpus(pl))
			p->places[kept++] = *pl, slots += pl->slots;
	}
	if (!kept)
		die("no server or GPU is left to run the jobs (see the warnings above)");
	p->nplaces = kept;
	/* the records appear whole: a resume knows every job or finds no sweep */
	char *records = path_join(p->dir, "jobs.msgpack"), *tmp = path_join(p->dir, "jobs.msgpack.tmp");
	unlink(tmp);
	struct events *ev = events_open(tmp);
	json_t *ssh = json_array();
	for (int k = 0; k < p->nssh; k++)
		json_array_append_new(ssh, json_string(p->ssh[k]));
	json_t *rec = json_pack("{sI sI ss so so sI}", "jobs", (json_int_t)p->njobs, "slots", (json_int_t)slots, "cwd",
				cwd, "places", places_json(p), "ssh", ssh, "eta", (json_int_t)p->eta);
	if (p->metric)
		json_object_set_new(rec, "metric", json_string(p->metric));
	events_add(ev, "sweep", rec);
	int *ids = xcalloc((size_t)p->njobs + 1, sizeof *ids), *add_j = xcalloc((size_t)p->njobs + 1, sizeof *add_j);
	int n = 0;
	for (int i = 0; i < p->njobs; i++) {
		char **argv = argvs[i];
		long size = sizes[i];
		json_t *rec = json_pack("{sI ss so so}", "job", (json_int_t)i + 1, "state", "queued", "params",
					params_json(&p->jobs[i]), "argv", strings_json(argv));
		if (size >= 0)
			json_object_set_new(rec, "size", json_integer(size));
		if (p->max_params && size > p->max_params) {   /* too big: never started */
			json_object_set_new(rec, "state", json_string("skipped"));
			warnx("job %d skipped: its model has %ld parameters, over --max-params %ld", i + 1, size, p->max_params);
		} else {
			ids[n] = i, add_j[n] = !sweep_gives(argv, "threads", 'j'), argvs[n++] = argv;
		}
		events_add(ev, "job", rec);
	}
	events_rename(ev, records);
	cleanup_forget(p->dir);
	free(records), free(tmp);
	int rc = schedule(p, cwd, ev, n, ids, argvs, add_j);
	events_close(ev);
	free(cwd), free(abs), free(ids), free(argvs), free(add_j), free(sizes);
	return rc;
}

json_t *sweep_read(const char *dir, json_t **sweep)
{
	char *path = path_join(dir, "jobs.msgpack");
	if (access(path, R_OK))
		die("%s: not a sweep dir (no jobs.msgpack)", dir);
	struct rec_reader *r = rec_open(path);
	rec_allow_torn_tail(r);
	json_t *jobs = json_array();
	*sweep = NULL;
	const msgpack_object *o;
	while ((o = rec_next(r))) {
		json_t *rec = record_json(o);
		const char *ev = json_string_value(json_object_get(rec, "event"));
		json_int_t id = json_integer_value(json_object_get(rec, "job"));
		if (ev && !strcmp(ev, "sweep") && !*sweep)
			*sweep = json_incref(rec);
		else if (ev && !strcmp(ev, "job") && id >= 1 && id <= (json_int_t)json_array_size(jobs) + 1) {
			if (id > (json_int_t)json_array_size(jobs))
				json_array_append_new(jobs, json_object());
			json_t *job = json_array_get(jobs, (size_t)id - 1);
			/* a job's first command line is its own; a resume's goes in its running record */
			if (json_object_get(job, "argv"))
				json_object_del(rec, "argv");
			/* each leg's end records its own time: a resumed job took them all */
			json_t *before = json_object_get(job, "seconds"), *now = json_object_get(rec, "seconds");
			if (before && now)
				json_object_set_new(rec, "seconds",
						    json_real(json_number_value(before) + json_number_value(now)));
			json_object_update(job, rec);
		}
		json_decref(rec);
	}
	rec_close(r);
	free(path);
	if (!*sweep)
		die("%s: jobs.msgpack holds no sweep record", dir);
	json_int_t want = json_integer_value(json_object_get(*sweep, "jobs"));
	if ((json_int_t)json_array_size(jobs) != want)   /* written whole: fewer is a damaged file */
		die("%s: jobs.msgpack: the sweep has %lld jobs, the file records %zu", dir, (long long)want,
		    json_array_size(jobs));
	for (size_t i = 0; i < json_array_size(jobs); i++)
		if (!json_string_value(json_object_get(json_array_get(jobs, i), "state")))
			die("%s: jobs.msgpack: job %zu has no state", dir, i + 1);
	return jobs;
}

/* A string array of a record as a NULL-terminated argv; NULL when it holds
 * anything else. */
static char **argv_of(const json_t *a)
{
	for (size_t i = 0; i < json_array_size(a); i++)
		if (!json_is_string(json_array_get(a, i)))
			return NULL;
	char **v = xcalloc(json_array_size(a) + 1, sizeof *v);
	for (size_t i = 0; i < json_array_size(a); i++)
		v[i] = xstrdup(json_string_value(json_array_get(a, i)));
	return v;
}

/* The places and ssh command a sweep recorded, or slots > 0 on this machine. */
static void recorded_places(struct sweep_plan *p, const json_t *sweep, long slots)
{
	const json_t *places = json_object_get(sweep, "places"), *ssh = json_object_get(sweep, "ssh");
	p->nplaces = (int)json_array_size(places);
	p->places = xcalloc((size_t)p->nplaces + 1, sizeof *p->places);
	int remote = 0;
	for (int k = 0; k < p->nplaces; k++) {
		const json_t *pl = json_array_get(places, (size_t)k);
		const char *host = json_string_value(json_object_get(pl, "host")),
			   *gpus = json_string_value(json_object_get(pl, "gpus"));
		p->places[k] = (struct sweep_place){host ? xstrdup(host) : NULL,
						    (int)json_integer_value(json_object_get(pl, "slots")),
						    (int)json_integer_value(json_object_get(pl, "threads")),
						    gpus ? xstrdup(gpus) : NULL,
						    (int)json_integer_value(json_object_get(pl, "procs"))};
		remote |= host != NULL || gpus != NULL;
		if (p->places[k].slots < 1 || p->places[k].procs < 1)
			die("%s: jobs.msgpack: a place of the sweep has no slots", p->dir);
	}
	if (!p->nplaces)
		die("%s: jobs.msgpack: the sweep record names no place to run", p->dir);
	p->nssh = (int)json_array_size(ssh);
	if (!(p->ssh = argv_of(ssh)))
		die("%s: jobs.msgpack: the sweep record's ssh command is not a list of words", p->dir);
	if (slots && remote)
		die_usage("-P sets the jobs at a time on this machine's cores; the sweep in %s ran on servers or GPUs",
			  p->dir);
	int procs = p->places[0].procs;   /* a job's processes (--per-job) stay as the sweep ran them */
	if (slots)
		p->places[0] = (struct sweep_place){NULL, (int)slots, sweep_threads((int)slots * procs), NULL, procs},
		p->nplaces = 1;
}

/* A job's trainer that a sweep killed outright left behind writes its
 * checkpoint as it stops: its run dir's lock is waited for (a minute at
 * most) before the job goes on, rather than the job failing as in use. */
static void wait_for_trainer(const char *run)
{
	for (int i = 0; i < 600 && rundir_holder(run, NULL); i++)
		usleep(100000);
}

int sweep_resume(const char *dir, long slots, char **ssh, int nssh)
{
	json_t *sweep, *jobs = sweep_read(dir, &sweep);
	catch_stops(1);
	rundir_lock(dir, "ts-sweep");
	rundir_clear_stop(dir);   /* one left by a sweep killed before it acted */
	char *abs = realpath(dir, NULL);   /* the jobs start in the sweep's working dir */
	if (!abs)
		die("%s:", dir);
	const char *cwd = json_string_value(json_object_get(sweep, "cwd"));
	if (!cwd)
		die("%s: jobs.msgpack: the sweep record lacks its working dir", dir);
	if (access(cwd, X_OK) < 0)   /* every job would fail as it starts */
		die("%s: the working dir its jobs start in, %s:", dir, cwd);
	struct sweep_plan p = {.dir = dir, .eta = (int)json_integer_value(json_object_get(sweep, "eta")),
			       .metric = json_string_value(json_object_get(sweep, "metric"))};
	recorded_places(&p, sweep, slots);
	if (nssh)   /* this resume's, over the one recorded */
		p.ssh = ssh, p.nssh = nssh;
	size_t n = json_array_size(jobs);
	int *ids = xcalloc(n + 1, sizeof *ids), *add_j = xcalloc(n + 1, sizeof *add_j), todo = 0;
	char ***argvs = xcalloc(n + 1, sizeof *argvs);
	for (size_t i = 0; i < n; i++) {
		const json_t *job = json_array_get(jobs, i), *argv = json_object_get(job, "argv");
		const char *state = json_string_value(json_object_get(job, "state"));
		if (!strcmp(state, "done") || !strcmp(state, "pruned") || !strcmp(state, "skipped"))
			continue;
		char **words = argv_of(argv);
		if (!words || !words[0])
			die("%s: jobs.msgpack: job %zu has no command line", dir, i + 1);
		/* a run that began goes on from its checkpoint, with its own -j and
		 * the --device it was given, which its config leaves out; the others start */
		char *run = sweep_job_dir(abs, (int)i), *config = path_join(run, "config");
		if (access(config, F_OK) == 0) {
			wait_for_trainer(run);
			char *device = sweep_option(words, "device", 0);
			argvs[todo] = xcalloc(6, sizeof **argvs);
			argvs[todo][0] = words[0];
			argvs[todo][1] = xstrdup("--resume"), argvs[todo][2] = run;
			if (device)
				argvs[todo][3] = xstrdup("--device"), argvs[todo][4] = device;
			for (char **w = words + 1; *w; w++)
				free(*w);
			free(words);
		} else {
			/* a stop asked of it before it made its run (launch.c's
			 * stop_remote) was for the sweep's last leg, not this one */
			rundir_clear_stop(run);
			/* its run dir is in the sweep dir, which may have moved since */
			for (char **w = words; *w; w++)
				if (!strcmp(*w, "--run") && w[1]) {
					free(w[1]);
					w[1] = run, run = NULL;
					break;
				}
			argvs[todo] = words;
			add_j[todo] = !sweep_gives(words, "threads", 'j');
			free(run);
		}
		free(config);
		ids[todo++] = (int)i;
	}
	struct events *ev = open_records(dir);
	events_add(ev, "resume", json_pack("{sI so}", "jobs", (json_int_t)todo, "places", places_json(&p)));
	for (int k = 0; k < todo; k++)   /* those running when a sweep was killed run no more */
		events_add(ev, "job", json_pack("{sI ss}", "job", (json_int_t)ids[k] + 1, "state", "queued"));
	int rc = schedule(&p, cwd, ev, todo, ids, argvs, add_j);
	events_close(ev);
	json_decref(jobs), json_decref(sweep);
	free(ids), free(argvs), free(abs), free(add_j);
	return rc;
}
