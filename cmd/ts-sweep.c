/* ts-sweep: run ts-train over a grid or random draws of options, and show
 * the leaderboard. */
#include "afile.h"
#include "err.h"
#include "opt.h"
#include "rec.h"
#include "mpjson.h"
#include "strbuf.h"
#include "sweep.h"
#include "sweeprun.h"
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct strlist params;
static long draws, seed, slots = 1;
static char *dir, *show, *format = "table", *metric;
static int print;

static const struct opt opts[] = {
	{'p', "param", OPT_LIST, &params, "SPEC", "KEY=V1,V2 | K1,K2=A1:B1,A2:B2 | KEY=LO:HI[:log] (repeatable)", NULL},
	{0, "random", OPT_INT, &draws, "N", "N random draws instead of the grid", NULL, .min = 0, .max = 100000},
	{0, "seed", OPT_INT, &seed, "N", "seed of the random draws (default 0)", NULL, .min = 0, .max = LONG_MAX},
	{'P', "jobs", OPT_INT, &slots, "N", "jobs at a time on this machine, sharing its cores (default 1)", NULL,
	 .min = 1, .max = 1024},
	{0, "dir", OPT_STR, &dir, "DIR", "sweep dir to create: jobs.msgpack, job-NNN run dirs and outputs", "@dir"},
	{0, "print", OPT_FLAG, &print, NULL, "print the jobs' command lines instead of running them", NULL},
	{0, "show", OPT_STR, &show, "DIR", "print the leaderboard of a sweep dir", "@dir"},
	{0, "format", OPT_STR, &format, "FMT", "leaderboard as table, tsv or json (default table)", "table|tsv|json"},
	{0, "metric", OPT_STR, &metric, "NAME", "rank by this valid metric (default accuracy, else loss)",
	 "accuracy|macro-f1|mcc|loss|ppl"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-sweep", "Run ts-train over a grid of options and rank the jobs.", "-- ts-train ARGS...", NULL, opts,
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

/* A metric's value in an evaluation record; NAN when absent. */
static double metric_of(const json_t *best, const char *name)
{
	const json_t *v = !strcmp(name, "macro-f1") ? json_object_get(json_object_get(best, "macro"), "f1")
						    : json_object_get(best, name);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The sweep's records: its first ("sweep") and each job's, merged in order. */
static json_t *read_jobs(const char *d, json_t **sweep)
{
	char *path = path_join(d, "jobs.msgpack");
	if (access(path, R_OK))
		die("%s: not a sweep dir (no jobs.msgpack)", d);
	struct rec_reader *r = rec_open(path);
	rec_allow_torn_tail(r);
	json_t *jobs = json_array();
	*sweep = NULL;
	const msgpack_object *o;
	while ((o = rec_next(r))) {
		struct strbuf b = {0};
		mp_to_json(o, &b);
		sb_addc(&b, 0);
		json_t *rec = json_loads(b.s, 0, NULL);
		sb_free(&b);
		const char *ev = json_string_value(json_object_get(rec, "event"));
		json_int_t id = json_integer_value(json_object_get(rec, "job"));
		if (ev && !strcmp(ev, "sweep") && !*sweep)
			*sweep = json_incref(rec);
		else if (ev && !strcmp(ev, "job") && id >= 1 && id <= (json_int_t)json_array_size(jobs) + 1) {
			if (id > (json_int_t)json_array_size(jobs))
				json_array_append_new(jobs, json_object());
			json_object_update(json_array_get(jobs, (size_t)id - 1), rec);
		}
		json_decref(rec);
	}
	rec_close(r);
	free(path);
	if (!*sweep)
		die("%s: jobs.msgpack holds no sweep record", d);
	return jobs;
}

static const char *state_of(const json_t *job)
{
	const char *s = json_string_value(json_object_get(job, "state"));
	return s ? s : "?";
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
	int counts[5] = {0};
	const char *names[5] = {"done", "failed", "running", "queued", "stopped"};
	double sum = 0;
	int timed = 0;
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < 5; k++)
			counts[k] += !strcmp(state_of(rows[i].job), names[k]);
		if (!strcmp(state_of(rows[i].job), "done"))
			sum += json_number_value(json_object_get(rows[i].job, "seconds")), timed++;
	}
	printf("%zu jobs:", n);
	for (int k = 0, first = 1; k < 5; k++)
		if (counts[k])
			printf("%s %d %s", first ? "" : ",", counts[k], names[k]), first = 0;
	int left = counts[2] + counts[3];
	if (left && timed)
		printf("; about %.1f min left (%d left, a job %.1f min on average, %ld at a time)",
		       sum / timed * ceil((double)left / (double)nslots) / 60, left, sum / timed / 60, nslots);
	printf("\n");
}

static void print_board(const char *d)
{
	json_t *sweep, *jobs = read_jobs(d, &sweep);
	size_t n = json_array_size(jobs);
	struct row *rows = xcalloc(n ? n : 1, sizeof *rows);
	json_t *keys = json_array();
	int any_accuracy = 0;
	for (size_t i = 0; i < n; i++) {
		rows[i].job = json_array_get(jobs, i);
		any_accuracy |= json_object_get(json_object_get(rows[i].job, "best"), "accuracy") != NULL;
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
	const char *name = metric ? metric : any_accuracy ? "accuracy" : "loss";
	lower_is_better = !strcmp(name, "loss") || !strcmp(name, "ppl");
	for (size_t i = 0; i < n; i++)
		rows[i].value = metric_of(json_object_get(rows[i].job, "best"), name);
	qsort(rows, n, sizeof *rows, by_metric);
	if (!strcmp(format, "json")) {
		json_t *out = json_array();
		for (size_t i = 0; i < n; i++) {
			json_t *o = json_deep_copy(rows[i].job);
			json_object_del(o, "event");
			json_object_del(o, "time");
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

/* The ts-train command after --: no --run or --resume of its own. */
static int check_command(char **cmd, int n)
{
	char *name = xstrdup(cmd[0]);
	if (strcmp(basename(name), "ts-train"))
		die_usage("ts-sweep runs ts-train: -- ts-train ARGS..., not %s", cmd[0]);
	free(name);
	int own_threads = 0;
	for (int i = 1; i < n; i++) {
		if (!strcmp(cmd[i], "--"))
			break;
		if (!strcmp(cmd[i], "--run") || !strncmp(cmd[i], "--run=", 6) || !strcmp(cmd[i], "--resume") ||
		    !strncmp(cmd[i], "--resume=", 9))
			die_usage("ts-sweep gives each job its own run dir: drop %s from the ts-train arguments", cmd[i]);
		own_threads |= !strcmp(cmd[i], "-j") || !strncmp(cmd[i], "--threads", 9) ||
			       (!strncmp(cmd[i], "-j", 2) && cmd[i][2]);
	}
	return own_threads;
}

int main(int argc, char **argv)
{
	char **cmd;
	int ncmd = opt_parse(&spec, argc, argv, &cmd);
	if (show) {
		if (ncmd || params.n || dir || print)
			die_usage("--show DIR takes only --format and --metric");
		print_board(show);
		close_stdout();
		return 0;
	}
	if (ncmd == 0)
		die_usage("name the command to sweep: ts-sweep -p KEY=V1,V2 -- ts-train ARGS...");
	int own_threads = check_command(cmd, ncmd);
	if (!dir)
		die_usage("a sweep dir is required: --dir DIR");
	if (!params.n)
		die_usage("no parameter to sweep: -p KEY=V1,V2");
	struct sweep_spec *specs = xcalloc((size_t)params.n, sizeof *specs);
	for (int i = 0; i < params.n; i++)
		sweep_parse(params.v[i], &specs[i]);
	struct sweep_plan plan = {.dir = dir, .cmd = cmd, .ncmd = ncmd, .slots = (int)slots};
	plan.njobs = sweep_jobs(specs, params.n, draws, (uint64_t)seed, 100000, &plan.jobs);
	cpu_set_t mine;   /* the cores this process may use, as taskset or a container allows */
	int cores = (sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 1) / (int)slots;
	plan.threads = own_threads ? 0 : cores > 1 ? cores : 1;
	if (print) {
		for (int i = 0; i < plan.njobs; i++) {
			char **v = sweep_argv(&plan, i);
			for (char **a = v; *a; a++) {
				char *q = sweep_quote(*a);
				printf("%s%s", a == v ? "" : " ", q);
				free(q), free(*a);
			}
			printf("\n");
			free(v);
		}
		close_stdout();
		return 0;
	}
	int rc = sweep_run(&plan);
	print_board(dir);
	close_stdout();
	return rc == 1;
}
