/* ts-sweep: run ts-train over a grid or random draws of options, and show
 * the leaderboard. */
#include "device/gpulist.h"
#include "eval/metricnames.h"
#include "format/mpjson.h"
#include "format/rec.h"
#include "run/rundir.h"
#include "run/runplots.h"
#include "sweep/sweep.h"
#include "sweep/sweeprun.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/strbuf.h"
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct strlist params;
static long draws, seed, slots = 1, eta = 3, max_params, per_job = 1;
static char *prune, *gpus, *plot, *dir, *show, *resume, *tasks, *servers, *ssh = "ssh -o BatchMode=yes", *format = "table", *metric;
static int print;

static const struct opt opts[] = {
	{'p', "param", OPT_LIST, &params, "SPEC", "KEY=V1,V2 | K1,K2=A1:B1,A2:B2 | KEY=LO:HI[:log] (repeatable)", NULL},
	{0, "tasks", OPT_STR, &tasks, "FILE", "ts-train command lines, one a line, each a job (and the grid's for each)", "@file"},
	{0, "random", OPT_INT, &draws, "N", "N random draws instead of the grid; 0 for the grid", NULL, .min = 0, .max = 100000},
	{0, "seed", OPT_INT, &seed, "N", "seed of the random draws", NULL, .min = 0, .max = LONG_MAX},
	{'P', "jobs", OPT_INT, &slots, "N", "jobs at a time on this machine, sharing its cores", NULL,
	 .min = 1, .max = 1024},
	{0, "max-params", OPT_INT, &max_params, "N", "skip the jobs whose models have more than N parameters; 0 for no limit", NULL,
	 .min = 0, .max = LONG_MAX},
	{0, "prune", OPT_STR, &prune, "HOW", "asha: stop the worse jobs at rungs of their evaluations", "asha"},
	{0, "eta", OPT_INT, &eta, "N", "with --prune asha, keep 1 job in N at each rung, at N times the steps", NULL,
	 .min = 2, .max = 100},
	{0, "gpus", OPT_STR, &gpus, "LIST", "run on these GPUs of this machine (such as 0-7), --per-job of them a job", NULL},
	{0, "per-job", OPT_INT, &per_job, "K", "processes (and GPUs) a job: a distributed run of K", NULL,
	 .min = 1, .max = 64},
	{0, "servers", OPT_STR, &servers, "FILE", "run on the servers of FILE, 'HOST [SLOTS]' a line, reached by --ssh", "@file"},
	{0, "ssh", OPT_STR, &ssh, "CMD", "the command that reaches a server (default: ssh -o BatchMode=yes)", NULL},
	{0, "dir", OPT_STR, &dir, "DIR", "sweep dir to create: jobs.msgpack, job-NNN run dirs and outputs", "@dir"},
	{0, "resume", OPT_STR, &resume, "DIR", "run a sweep's jobs that are not done, from their checkpoints", "@dir"},
	{0, "print", OPT_FLAG, &print, NULL, "print the jobs' command lines instead of running them", NULL},
	{0, "show", OPT_STR, &show, "DIR", "print the leaderboard of a sweep dir", "@dir"},
	{0, "plot", OPT_STR, &plot, "FILE", "with --show, also plot every job's valid metric over its steps in FILE (SVG)", "@file"},
	{0, "format", OPT_STR, &format, "FMT", "leaderboard as table, tsv or json", "table|tsv|json"},
	{0, "metric", OPT_STR, &metric, "NAME", "rank by this valid metric (default: ts-train's default for the jobs' task)",
	 "accuracy|macro-f1|mcc|micro-f1|exact-match|pearson|spearman|entity-f1|loss|ppl"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-sweep", "Run ts-train over a grid of options and rank the jobs.", "[-- ts-train ARGS...]", "command", opts,
};

/* ---- the leaderboard ---- */

struct row {
	json_t *job;     /* the job's records merged */
	double value;    /* its metric, NAN when it has none */
};

static int lower_is_better;

static int by_metric(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (isnan(x->value) != isnan(y->value))
		return isnan(x->value) ? 1 : -1;
	if (!isnan(x->value) && x->value != y->value)
		return (x->value < y->value) == lower_is_better ? -1 : 1;
	return (int)(json_integer_value(json_object_get(x->job, "job")) - json_integer_value(json_object_get(y->job, "job")));
}

static int live;   /* whether a ts-sweep runs the sweep shown */

/* A job's state; one running in a sweep that no ts-sweep runs (killed)
 * is stopped. */
static const char *state_of(const json_t *job)
{
	const char *s = json_string_value(json_object_get(job, "state"));
	return !s ? "?" : !live && !strcmp(s, "running") ? "stopped" : s;
}

/* The table's cells of a row, in columns order. */
static char **cells(const struct row *r, int rank, json_t *keys)
{
	size_t nk = json_array_size(keys);
	char **c = xcalloc(nk + 6, sizeof *c);
	const json_t *best = json_object_get(r->job, "best"), *p = json_object_get(r->job, "params");
	char buf[64];
	snprintf(buf, sizeof buf, "%d", rank);
	c[0] = xstrdup(isnan(r->value) ? "-" : buf);
	snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(json_object_get(r->job, "job")));
	c[1] = xstrdup(buf);
	c[2] = xstrdup(state_of(r->job));
	snprintf(buf, sizeof buf, "%.4f", r->value);
	c[3] = xstrdup(isnan(r->value) ? "-" : buf);
	snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(json_object_get(best, "step")));
	c[4] = xstrdup(best ? buf : "-");
	snprintf(buf, sizeof buf, "%.1f", json_number_value(json_object_get(r->job, "seconds")));
	c[5] = xstrdup(json_object_get(r->job, "seconds") ? buf : "-");
	for (size_t k = 0; k < nk; k++) {
		const char *v = json_string_value(json_object_get(p, json_string_value(json_array_get(keys, k))));
		c[6 + k] = xstrdup(v ? v : "");
	}
	return c;
}

/* What is left of the queue: about how long, from the finished jobs' mean time. */
static void print_finish(const struct row *rows, size_t n, long nslots)
{
	enum { STATES = 7 };
	int counts[STATES] = {0};
	const char *names[STATES] = {"done", "pruned", "failed", "running", "queued", "stopped", "skipped"};
	double sum = 0;
	int timed = 0;
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < STATES; k++)
			counts[k] += !strcmp(state_of(rows[i].job), names[k]);
		if (!strcmp(state_of(rows[i].job), "done"))
			sum += json_number_value(json_object_get(rows[i].job, "seconds")), timed++;
	}
	printf("%zu jobs:", n);
	for (int k = 0, first = 1; k < STATES; k++)
		if (counts[k])
			printf("%s %d %s", first ? "" : ",", counts[k], names[k]), first = 0;
	int left = counts[3] + counts[4];
	if (left && timed && live)
		printf("; about %.1f min left (%d left, a job %.1f min on average, %ld at a time)",
		       sum / timed * ceil((double)left / (double)nslots) / 60, left, sum / timed / 60, nslots);
	printf("\n");
}

/* Every job's valid metric in one SVG, the best first. */
static void plot_jobs(const char *d, const char *name, const struct row *rows, size_t n)
{
	char **runs = xcalloc(n + 1, sizeof *runs), **names = xcalloc(n + 1, sizeof *names);
	for (size_t i = 0; i < n; i++) {
		int job = (int)json_integer_value(json_object_get(rows[i].job, "job"));
		struct strbuf b = {0};
		sb_addf(&b, "job %d", job);
		const char *k;
		json_t *v;
		json_object_foreach(json_object_get(rows[i].job, "params"), k, v) sb_addf(&b, " %s=%s", k, json_string_value(v));
		sb_addc(&b, 0);
		runs[i] = sweep_job_dir(d, job - 1), names[i] = b.s;
	}
	runs_plot(plot, name, runs, names, (int)n);
	for (size_t i = 0; i < n; i++)
		free(runs[i]), free(names[i]);
	free(runs), free(names);
}

/* The board of the sweep in d; over: the one this ts-sweep ran has ended. */
static void print_board(const char *d, int over)
{
	json_t *sweep, *jobs = sweep_read(d, &sweep);
	live = !over && rundir_holder(d, NULL) != 0;
	size_t n = json_array_size(jobs);
	struct row *rows = xcalloc(n ? n : 1, sizeof *rows);
	json_t *keys = json_array();
	const char *name = metric ? metric : json_string_value(json_object_get(sweep, "metric"));   /* the sweep's */
	for (size_t i = 0; i < n; i++) {
		rows[i].job = json_array_get(jobs, i);
		const json_t *best = json_object_get(rows[i].job, "best");
		if (!name && best)
			name = metric_default(eval_json_task(best));
		const char *k;
		json_t *v;
		json_object_foreach(json_object_get(rows[i].job, "params"), k, v) {
			size_t j;
			json_t *have;
			int seen = 0;
			json_array_foreach(keys, j, have) seen |= !strcmp(json_string_value(have), k);
			if (!seen)
				json_array_append_new(keys, json_string(k));
		}
	}
	if (!name)
		name = "loss";   /* no job has evaluated: no values to rank */
	lower_is_better = !metric_higher_is_better(name);
	for (size_t i = 0; i < n; i++)
		rows[i].value = sweep_metric(json_object_get(rows[i].job, "best"), name);
	qsort(rows, n, sizeof *rows, by_metric);
	if (plot)
		plot_jobs(d, name, rows, n);
	if (!strcmp(format, "json")) {
		json_t *out = json_array();
		for (size_t i = 0; i < n; i++) {
			json_t *o = json_deep_copy(rows[i].job);
			json_object_del(o, "event");
			json_object_del(o, "time");
			json_object_set_new(o, "state", json_string(state_of(rows[i].job)));
			json_object_set_new(o, "metric", json_string(name));
			json_object_set_new(o, "value", isnan(rows[i].value) ? json_null() : json_real(rows[i].value));
			json_array_append_new(out, o);
		}
		char *text = json_dumps(out, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
		printf("%s\n", text);
		free(text);
		json_decref(out);
	} else {
		size_t nk = json_array_size(keys), ncol = nk + 6;
		char ***table = xcalloc(n + 1, sizeof *table);
		table[0] = xcalloc(ncol, sizeof **table);
		const char *head[6] = {"rank", "job", "state", name, "step", "seconds"};
		for (size_t c = 0; c < ncol; c++)
			table[0][c] = xstrdup(c < 6 ? head[c] : json_string_value(json_array_get(keys, c - 6)));
		for (size_t i = 0; i < n; i++)
			table[i + 1] = cells(&rows[i], (int)i + 1, keys);
		size_t *width = xcalloc(ncol, sizeof *width);
		for (size_t i = 0; i <= n; i++)
			for (size_t c = 0; c < ncol; c++)
				if (strlen(table[i][c]) > width[c])
					width[c] = strlen(table[i][c]);
		int tsv = !strcmp(format, "tsv");
		for (size_t i = 0; i <= n; i++) {
			for (size_t c = 0; c < ncol; c++)
				if (tsv || c == ncol - 1)
					printf("%s%s", c ? (tsv ? "\t" : "  ") : "", table[i][c]);
				else
					printf("%s%-*s", c ? "  " : "", (int)width[c], table[i][c]);
			printf("\n");
			for (size_t c = 0; c < ncol; c++)
				free(table[i][c]);
			free(table[i]);
		}
		free(table), free(width);
		if (!tsv)
			print_finish(rows, n, (long)json_integer_value(json_object_get(sweep, "slots")));
	}
	free(rows);
	json_decref(keys), json_decref(jobs), json_decref(sweep);
}

/* ---- running ---- */

/* A job's command: ts-train, with no --run or --resume of its own; where
 * says where it came from (a task file's line), NULL: the command line. */
static void check_command(char **cmd, int n, const char *where)
{
	char *name = xstrdup(cmd[0]);
	const char *sep = where ? ": " : "";
	where = where ? where : "";
	if (strcmp(basename(name), "ts-train"))
		die_usage("%s%sts-sweep runs ts-train, not %s", where, sep, cmd[0]);
	free(name);
	for (int i = 1; i < n && strcmp(cmd[i], "--"); i++)
		if (!strcmp(cmd[i], "--run") || !strncmp(cmd[i], "--run=", 6) || !strcmp(cmd[i], "--resume") ||
		    !strncmp(cmd[i], "--resume=", 9))
			die_usage("%s%sts-sweep gives each job its own run dir: drop %s from the ts-train arguments", where,
				  sep, cmd[i]);
}

/* A line of a --tasks or --servers file: its words and where it is. */
struct line {
	char **w;
	int n;
	char *where;   /* "--OPT FILE: line N" */
};

/* The lines of the file given to --opt, split into words as a shell would,
 * but for blank lines and # comments. */
static struct line *read_lines(const char *opt, const char *path, int *count)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die("%s:", path);
	struct line *v = NULL;
	size_t cap = 0;
	char *text = NULL;
	size_t len = 0;
	*count = 0;
	for (long no = 1; getline(&text, &len, f) > 0; no++) {
		struct line l;
		struct strbuf where = {0};
		sb_addf(&where, "--%s %s: line %ld", opt, path, no);
		sb_addc(&where, 0);
		l.where = where.s;
		l.w = sweep_words(text, &l.n, l.where);
		if (!l.n || l.w[0][0] == '#') {
			sb_free(&where);
			continue;
		}
		grow(&v, &cap, (size_t)*count + 1, sizeof *v);
		v[(*count)++] = l;
	}
	if (ferror(f))
		die("%s:", path);
	fclose(f);
	free(text);
	if (!*count)
		die_usage("--%s %s has no line", opt, path);
	return v;
}

/* The commands to sweep: the one after --, or each line of the task file;
 * each checked, with its length in lens. */
static char ***commands(char **cmd, int ncmd, int *n, int **lens)
{
	struct line *l = NULL;
	*n = 1;
	if (tasks)
		l = read_lines("tasks", tasks, n);
	char ***all = xcalloc((size_t)*n, sizeof *all);
	*lens = xcalloc((size_t)*n, sizeof **lens);
	for (int i = 0; i < *n; i++) {
		all[i] = l ? l[i].w : cmd;
		(*lens)[i] = l ? l[i].n : ncmd;
		check_command(all[i], (*lens)[i], l ? l[i].where : NULL);
	}
	free(l);
	return all;
}

/* The GPU groups of --gpus, --per-job GPUs each. */
static void gpu_places(struct sweep_place **v, size_t *cap, int *n)
{
	int ids[MAX_GPUS], k = (int)per_job, count = gpus_parse(gpus, ids);
	if (count % k)
		die_usage("--gpus %s names %d GPUs, not a multiple of --per-job %d", gpus, count, k);
	for (int g = 0; g < count; g += k) {
		char group[MAX_GPUS * 4] = "";
		for (int i = g; i < g + k; i++)
			snprintf(group + strlen(group), sizeof group - strlen(group), "%s%d", i > g ? "," : "", ids[i]);
		grow(v, cap, (size_t)*n + 1, sizeof **v);
		(*v)[(*n)++] = (struct sweep_place){NULL, 1, sweep_threads(count), xstrdup(group), k};
	}
}

/* This machine's -P slots (unless only GPUs or servers are named, and -P
 * is not given), its GPU groups, and the servers of --servers FILE. */
static struct sweep_place *places(int *n)
{
	struct sweep_place *v = NULL;
	size_t cap = 0;
	*n = 0;
	if ((!servers && !gpus) || opt_given(&spec, "jobs")) {
		grow(&v, &cap, 1, sizeof *v);
		v[(*n)++] = (struct sweep_place){NULL, (int)slots, sweep_threads((int)(slots * per_job)), NULL, (int)per_job};
	}
	if (gpus)
		gpu_places(&v, &cap, n);
	if (!servers)
		return v;
	int nl;
	struct line *l = read_lines("servers", servers, &nl);
	for (int i = 0; i < nl; i++) {
		char *end = NULL;
		long k = l[i].n > 1 ? strtol(l[i].w[1], &end, 10) : 1;
		if (l[i].n > 2 || (end && (*end || end == l[i].w[1])) || k < 1 || k > 1024)
			die_usage("%s: not HOST [SLOTS] with SLOTS from 1 to 1024", l[i].where);
		if (l[i].w[0][0] == '-')   /* ssh would read it as an option */
			die_usage("%s: '%s' is not a host name", l[i].where, l[i].w[0]);
		grow(&v, &cap, (size_t)*n + 1, sizeof *v);
		v[(*n)++] = (struct sweep_place){l[i].w[0], (int)k, 0, NULL, 1};
	}
	free(l);
	return v;
}

static void print_jobs(const struct sweep_plan *plan)
{
	const struct sweep_place here = {NULL, (int)slots, sweep_threads((int)slots), NULL, 1};
	for (int i = 0; i < plan->njobs; i++) {
		char **job = sweep_argv(plan, i), threads[16];
		char **v = sweep_at(&here, job, !sweep_gives(job, "threads", 'j'), threads);
		for (char **a = v; *a; a++) {
			char *q = shell_quote(*a);
			printf("%s%s", a == v ? "" : " ", q);
			free(q);
		}
		printf("\n");
		for (char **a = job; *a; a++)
			free(*a);
		free(job), free(v);
	}
}

int main(int argc, char **argv)
{
	char **cmd;
	int ncmd = opt_parse(&spec, argc, argv, &cmd);
	if (plot && !show)
		die_usage("--plot goes with --show");
	if (opt_given(&spec, "eta") && !prune)
		die_usage("--eta goes with --prune asha");
	if (opt_given(&spec, "seed") && !draws)
		die_usage("--seed goes with --random: a grid draws nothing");
	if (show) {
		opt_only_with(&spec, "show", (const char *const[]){ "format", "metric", "plot", NULL });
		if (ncmd)
			die_usage("--show DIR takes no command");
		if (plot && lies_in(plot, show))   /* its job log or a job's files, written over */
			die("cannot write %s: it is in the sweep dir %s", plot, show);
		print_board(show, 0);
		close_stdout();
		return 0;
	}
	if (resume) {
		opt_only_with(&spec, "resume", (const char *const[]){ "jobs", "format", "metric", "ssh", NULL });
		if (ncmd)
			die_usage("--resume DIR takes no command: its jobs keep theirs");
		int nssh = 0;
		char **words = opt_given(&spec, "ssh") ? sweep_words(ssh, &nssh, "--ssh") : NULL;
		if (words && !nssh)
			die_usage("--ssh names no command");
		int rc = sweep_resume(resume, opt_given(&spec, "jobs") ? slots : 0, words, nssh);
		print_board(resume, 1);
		close_stdout();
		return rc == 1;
	}
	if (ncmd == 0 && !tasks)
		die_usage("name the command to sweep: ts-sweep -p KEY=V1,V2 -- ts-train ARGS..., or --tasks FILE");
	if (ncmd && tasks)
		die_usage("--tasks FILE names the commands: no command after --");
	if (!dir)
		die_usage("a sweep dir is required: --dir DIR");
	if (print)   /* where the jobs run and which are stopped is for what runs the lines to say */
		opt_only_with(&spec, "print", (const char *const[]){ "param", "tasks", "random", "seed", "jobs", "dir", NULL });
	if (per_job > 1 && servers && !opt_given(&spec, "jobs") && !gpus)
		die_usage("--per-job runs jobs of several processes on this machine's cores or GPUs: not with only --servers");
	if (!params.n && !tasks)
		die_usage("no parameter to sweep: -p KEY=V1,V2");
	struct sweep_spec *specs = xcalloc((size_t)params.n + 1, sizeof *specs);
	for (int i = 0; i < params.n; i++)
		sweep_parse(params.v[i], &specs[i]);
	struct sweep_job *grid;
	int ngrid = sweep_jobs(specs, params.n, draws, (uint64_t)seed, 100000, &grid);
	int ncmds, *lens;
	char ***cmds = commands(cmd, ncmd, &ncmds, &lens);
	if ((long)ncmds * ngrid > 100000)
		die_usage("the sweep has more than 100000 jobs");
	struct sweep_plan plan = {.dir = dir, .njobs = ncmds * ngrid};
	plan.jobs = xcalloc((size_t)plan.njobs, sizeof *plan.jobs);
	for (int c = 0; c < ncmds; c++)
		for (int g = 0; g < ngrid; g++) {
			struct sweep_job *j = &plan.jobs[c * ngrid + g];
			*j = grid[g];
			j->cmd = cmds[c], j->ncmd = lens[c];
		}
	if (print) {
		print_jobs(&plan);
		close_stdout();
		return 0;
	}
	plan.places = places(&plan.nplaces);
	plan.eta = prune ? (int)eta : 0;
	plan.metric = metric;
	plan.max_params = max_params;
	plan.ssh = sweep_words(ssh, &plan.nssh, "--ssh");
	if (!plan.nssh)
		die_usage("--ssh names no command");
	int rc = sweep_run(&plan);
	print_board(dir, 1);
	close_stdout();
	return rc == 1;
}
