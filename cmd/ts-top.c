/* ts-top: a live view of training runs and sweeps. */
#include "backend/precision.h"
#include "device/nvml.h"
#include "run/rundir.h"
#include "run/runview.h"
#include "sweep/sweeprun.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/strbuf.h"
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#include <wctype.h>

static int once, as_json;
static long until;

static const struct opt opts[] = {
	{0, "once", OPT_FLAG, &once, NULL, "print a plain-text snapshot and exit", NULL},
	{0, "json", OPT_FLAG, &as_json, NULL, "print a JSON snapshot and exit", NULL},
	{0, "until", OPT_INT, &until, "STEP", "show the runs as they stood after step STEP (with --once or --json)", NULL,
	 .min = 1, .max = LONG_MAX},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-top", "Watch training runs and sweeps live.", "DIR...", "dir", opts,
};

static int utf8;   /* the terminal takes UTF-8: sparklines of blocks, a ± */

/* ---- the runs ---- */

static struct run_view **runs;
static char **real_dirs;   /* each run dir's real path: a dir named twice (a sweep's job and itself) is one run */
static int nruns;

/* The run at real path where, or NULL. */
static struct run_view *run_at_real(const char *where)
{
	for (int r = 0; where && r < nruns; r++)
		if (!strcmp(real_dirs[r], where))
			return runs[r];
	return NULL;
}

/* The run of dir, added unless it is there already, under another name too. */
static struct run_view *add_run(const char *dir)
{
	char *where = realpath(dir, NULL);
	struct run_view *v = run_at_real(where);
	if (v) {
		free(where);
		return v;
	}
	runs = xrealloc(runs, (size_t)(nruns + 1) * sizeof *runs);
	real_dirs = xrealloc(real_dirs, (size_t)(nruns + 1) * sizeof *real_dirs);
	real_dirs[nruns] = where ? where : xstrdup(dir);
	runs[nruns] = run_view_open(dir);
	runs[nruns]->until = until;
	return runs[nruns++];
}

static char **sweeps;   /* the sweep dirs watched: their jobs join as they begin */
static int nsweeps;

/* The jobs of a sweep dir that have begun, each added once, with the
 * state the sweep records for it now. */
static void sync_sweep(const char *dir)
{
	json_t *record, *all = sweep_read(dir, &record);
	for (size_t i = 0; i < json_array_size(all); i++) {
		char *job = sweep_job_dir(dir, (int)i);
		struct run_view *v = access(job, F_OK) == 0 ? add_run(job) : NULL;
		if (v)
			snprintf(v->job_state, sizeof v->job_state, "%s",
				 json_string_value(json_object_get(json_array_get(all, i), "state")));
		free(job);
	}
	json_decref(all), json_decref(record);
}

/* A run dir, or a sweep dir's jobs (those that have begun). */
static void add_dir(const char *dir)
{
	int why = dir_reachable(dir);
	if (why)
		die("cannot open %s: %s", dir, strerror(why));
	char *jobs = path_join(dir, "jobs.msgpack");
	int sweep = access(jobs, F_OK) == 0;
	free(jobs);
	if (!sweep) {
		char *events = path_join(dir, "events.msgpack"), *config = path_join(dir, "config");
		int run = access(events, F_OK) == 0 || access(config, F_OK) == 0;
		free(events), free(config);
		if (!run)
			die("%s: neither a run dir nor a sweep dir", dir);
		add_run(dir);
		return;
	}
	sweeps = xrealloc(sweeps, (size_t)(nsweeps + 1) * sizeof *sweeps);
	sweeps[nsweeps++] = xstrdup(dir);
	sync_sweep(dir);
}

/* ---- text ---- */

#define CLOCK_MAX 1e8   /* seconds: about three years; beyond, a time is shown as "-" */

static void clock_text(char *out, size_t n, double s)
{
	if (!(s >= 0) || s > CLOCK_MAX) {
		snprintf(out, n, "-");
		return;
	}
	long t = (long)(s + 0.5);
	snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* The time of day s seconds after the moment now, or "-" as clock_text. */
static void finish_text(char *out, size_t n, double now, double s)
{
	if (!(s >= 0) || s > CLOCK_MAX) {
		snprintf(out, n, "-");
		return;
	}
	time_t at = (time_t)(now + s);
	strftime(out, n, "%H:%M", localtime(&at));
}

/* x in format, or "-" while it is not known (NAN, before the first step
 * or evaluation). */
static const char *number(char *out, size_t n, const char *format, double x)
{
	if (!isfinite(x))
		snprintf(out, n, "-");
	else if (snprintf(out, n, format, x) >= (int)n)   /* cut short, it would read as another number */
		snprintf(out, n, "%.4g", x);
	return out;
}

/* A sparkline of the last width values of hist[n]. */
static void sparkline(struct strbuf *b, const double *hist, int n, int width)
{
	static const char *blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	static const char ascii[] = "_.-=+*#@";
	int from = n > width ? n - width : 0;
	double lo = INFINITY, hi = -INFINITY;
	for (int i = from; i < n; i++)
		if (isfinite(hist[i]))
			lo = fmin(lo, hist[i]), hi = fmax(hi, hist[i]);
	for (int i = from; i < n; i++) {
		int k = !isfinite(hist[i]) || hi <= lo ? 0 : (int)((hist[i] - lo) / (hi - lo) * 7.999);
		if (utf8)
			sb_add(b, blocks[k], strlen(blocks[k]));
		else
			sb_addc(b, ascii[k]);
	}
}

/* ", MFU x% of NAME's dense P peak" for a run on a GPU this machine's driver
 * names and the table knows at the run's precision P (a step's work taken as
 * 6 FLOPs a parameter and token, every process on a GPU like its first);
 * else "". */
static const char *mfu(const struct run_view *v)
{
	static char text[160];
	char name[96];
	int gpu = !strncmp(v->device, "cuda:", 5) ? atoi(v->device + 5) : -1;
	enum precision p = precision_of_backend(v->device);
	double peak = gpu >= 0 && nvml_name(gpu, name, sizeof name) ? gpu_peak(name, p) : 0;
	text[0] = 0;
	if (peak > 0 && v->processes > 0 && isfinite(v->tokens_per_s))
		snprintf(text, sizeof text, ", MFU %.0f%% of the %s's dense %s peak",
			 100 * 6 * (double)v->params * v->tokens_per_s / (peak * v->processes), name,
			 precision_name(p));
	return text;
}

/* The lines that describe run v, each in lines[]; returns how many. */
static int describe(const struct run_view *v, struct strbuf *lines, int max)
{
	int n = 0;
	double pm, left = run_view_left(v, &pm);
	double elapsed = v->elapsed_s + (v->last_time > v->start_time ? v->last_time - v->start_time : 0);
	const char *state = run_view_state(v);
	char a[32], b[32], c[32];
	sb_addf(&lines[n++], "%s  [%s]  %s, %d process%s, %.1fM parameters", v->dir, state, *v->device ? v->device : "-",
		v->processes, v->processes == 1 ? "" : "es", v->params / 1e6);
	if (*v->error)
		sb_addf(&lines[n++], "%s", v->error);
	double share = v->total_steps > 0 ? (double)v->step / (double)v->total_steps : 0;
	sb_addf(&lines[n], "step %ld/%ld (%.0f%%), epoch %ld  [", v->step, v->total_steps, 100 * share, v->epoch + 1);
	for (int i = 0; i < 30; i++)
		sb_addc(&lines[n], i < (int)(share * 30 + 0.5) ? '#' : '.');
	sb_addc(&lines[n++], ']');
	clock_text(a, sizeof a, elapsed);
	clock_text(b, sizeof b, left);
	clock_text(c, sizeof c, pm);
	if (!strcmp(state, "running") && left >= 0) {
		char when[16];
		finish_text(when, sizeof when, run_view_now(v), left);
		sb_addf(&lines[n++], "elapsed %s  left %s %s %s  finish at %s", a, b, utf8 ? "±" : "+-", c, when);
	} else {
		sb_addf(&lines[n++], "elapsed %s%s", a, !strcmp(state, "running") ? "  left: known after a few steps" : "");
	}
	char d[32];
	sb_addf(&lines[n], "speed %s samples/s, %s tokens/s, %s ms a step%s  ", number(a, sizeof a, "%.1f", v->samples_per_s),
		number(b, sizeof b, "%.0f", v->tokens_per_s), number(c, sizeof c, "%.1f", v->step_ms), mfu(v));
	sparkline(&lines[n++], v->speed_hist, v->nhist, 24);
	sb_addf(&lines[n], "loss %s (smoothed %s), lr %s, grad norm %s  ", number(a, sizeof a, "%.4f", v->loss),
		number(b, sizeof b, "%.4f", v->smooth), number(c, sizeof c, "%.3g", v->lr),
		number(d, sizeof d, "%.3g", v->grad_norm));
	sparkline(&lines[n++], v->loss_hist, v->nhist, 24);
	if (isfinite(v->eval_value))
		sb_addf(&lines[n++], "valid %s %.4f, best %.4f at step %ld", v->metric, v->eval_value, v->best_value,
			v->best_step);
	else
		sb_addf(&lines[n++], "valid %s: not evaluated yet", v->metric);
	if (v->has_comm)
		sb_addf(&lines[n++], "network: collectives %.1f ms a step, %.1f ms exposed, bus %.2f GB/s, slowest process %d",
			v->comm_ms, v->exposed_ms, v->busbw_gbs, v->slowest);
	int gpus = nvml_count();
	for (int g = 0; g < gpus && n < max - 1; g++) {
		struct gpu_usage u;
		if (nvml_usage_at(g, &u))
			sb_addf(&lines[n++], "gpu %d: %.0f%% busy, %.1f of %.1f GiB, %.0f C, %.0f W", g, 100 * u.util,
				u.mem_used / 1073741824.0, u.mem_total / 1073741824.0, u.temp_c, u.power_w);
	}
	char their[HOST_NAME_MAX + 1], host[HOST_NAME_MAX + 1] = "";
	long pid = rundir_holder(v->dir, their);
	gethostname(host, sizeof host);
	if (gpus <= 0 && pid > 0 && !strcmp(host, their)) {   /* its /proc is here */
		char path[64], line[256];
		snprintf(path, sizeof path, "/proc/%ld/status", pid);
		FILE *f = fopen(path, "r");
		long rss = 0;
		while (f && fgets(line, sizeof line, f))
			sscanf(line, "VmRSS: %ld", &rss);
		if (f)
			fclose(f);
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		f = fopen(path, "r");
		unsigned long ut = 0, st = 0;
		if (f && fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
			ut = st = 0;
		if (f)
			fclose(f);
		sb_addf(&lines[n++], "process %ld: %.0f CPU seconds, %.0f MiB resident", pid,
			(double)(ut + st) / (double)sysconf(_SC_CLK_TCK), rss / 1024.0);
	}
	return n;
}

/* Whether a log line is later than the moment now of a view seen as it
 * stood after step until: stamped later (in the trainer's whole seconds
 * and time zone), or naming a later step first (a short run logs many
 * steps in a second). */
static int logged_later(const char *line, long until, double now)
{
	struct tm tm = {.tm_isdst = -1};
	if (strptime(line, "%Y-%m-%d %H:%M:%S", &tm) && (double)mktime(&tm) > now)
		return 1;
	const char *step = strstr(line, "step ");
	return step && strtol(step + 5, NULL, 10) > until;
}

/* The last k (at most 8) lines of the run's log, up to the moment the view
 * shows. */
static int log_tail(const struct run_view *v, struct strbuf *lines, int k)
{
	char *path = path_join(v->dir, "log/rank-0.log");
	FILE *f = fopen(path, "r");
	free(path);
	if (!f)
		return 0;
	char *ring[8] = {0}, *line = NULL;
	size_t cap = 0;
	long n = 0;
	double now = run_view_now(v);
	while (getline(&line, &cap, f) > 0) {
		if (v->frozen && logged_later(line, v->until, now))
			break;   /* the log is in order: the rest is later too */
		free(ring[n % 8]);
		line[strcspn(line, "\n")] = 0;
		ring[n++ % 8] = xstrdup(line);
	}
	fclose(f);
	free(line);
	int m = 0;
	for (long i = n > k ? n - k : 0; i < n; i++)
		sb_addf(&lines[m++], "  %s", ring[i % 8]);
	for (int i = 0; i < 8; i++)
		free(ring[i]);
	return m;
}

static void snapshot_text(void)
{
	if (!nruns)
		printf("no job has begun yet\n");
	for (int r = 0; r < nruns; r++) {
		struct strbuf lines[24] = {{0}};
		int n = describe(runs[r], lines, 20);
		n += log_tail(runs[r], lines + n, 3);
		for (int i = 0; i < n; i++) {
			printf("%s\n", lines[i].s ? lines[i].s : "");
			sb_free(&lines[i]);
		}
		if (r + 1 < nruns)
			printf("\n");
	}
}

static void snapshot_json(void)
{
	json_t *all = json_array();
	for (int r = 0; r < nruns; r++)
		json_array_append_new(all, run_view_json(runs[r]));
	char *text = json_dumps(all, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
	printf("%s\n", text);
	free(text);
	json_decref(all);
}

/* ---- the live view ---- */

static int colour;

/* s with '?' for each byte that is no character in the locale and each
 * character it cannot print, so that every character shown takes the
 * columns wcwidth says (under LANG=C the bytes of a UTF-8 name would reach
 * the terminal as curses makes them out, in columns no count foresees). */
static void printable(struct strbuf *b, const char *s)
{
	mbstate_t st = {0};
	size_t i = 0, n = strlen(s);
	sb_add(b, "", 0);   /* a string, empty too */
	while (i < n) {
		wchar_t wc;
		size_t k = mbrtowc(&wc, s + i, n - i, &st);
		if (k == (size_t)-1 || k == (size_t)-2) {
			memset(&st, 0, sizeof st);
			k = 1, wc = 0;
		}
		if (wc && iswprint((wint_t)wc))
			sb_add(b, s + i, k);
		else
			sb_addc(b, '?');
		i += k;
	}
}

/* The bytes of the character that printable text s[n] begins with, and in
 * *w the columns it takes. */
static size_t next_char(const char *s, size_t n, int *w)
{
	mbstate_t st = {0};
	wchar_t wc;
	size_t k = mbrtowc(&wc, s, n, &st);
	*w = wcwidth(wc);
	return k;
}

/* The bytes of the longest start of printable text s that takes at most
 * cols columns. */
static int fitting(const char *s, int cols)
{
	size_t i = 0, n = strlen(s);
	while (i < n) {
		int w;
		size_t k = next_char(s + i, n - i, &w);
		if (w > cols)
			break;
		cols -= w;
		i += k;
	}
	return (int)i;
}

static int columns(const char *s)
{
	size_t i = 0, n = strlen(s);
	int cols = 0, w;
	while (i < n)
		i += next_char(s + i, n - i, &w), cols += w;
	return cols;
}

/* s, made printable, in cols columns, blanks after it; when longer, its
 * end after a mark that it was cut: a sweep's runs differ at their names'
 * ends. */
static void fit_end(struct strbuf *b, const char *s, int cols)
{
	struct strbuf p = {0};
	printable(&p, s);
	size_t i = 0;
	int left = columns(p.s), w;
	if (left > cols) {
		sb_addf(b, "%s", utf8 ? "…" : "...");
		cols -= utf8 ? 1 : 3;
		while (i < p.n && left > cols)
			i += next_char(p.s + i, p.n - i, &w), left -= w;
	}
	sb_addf(b, "%s%*s", p.s + i, cols - left, "");
	sb_free(&p);
}

static void put(int y, const char *s, int attr)
{
	if (y >= LINES)
		return;
	struct strbuf p = {0};
	printable(&p, s);
	attron(attr);
	mvaddnstr(y, 0, p.s, fitting(p.s, COLS));
	attroff(attr);
	sb_free(&p);
}

static int state_colour(const char *state)
{
	if (!colour)
		return A_BOLD;
	return COLOR_PAIR(!strcmp(state, "running") ? 1 : !strcmp(state, "done") ? 2 : 3) | A_BOLD;
}

/* The terminal given back as it was, before a fatal error's line. */
static void end_screen(void)
{
	if (!isendwin())
		endwin();
}

static volatile sig_atomic_t quit_signal;

static void on_quit_signal(int sig) { quit_signal = sig; }

/* Control-C, SIGTERM and SIGHUP end the view as they end other commands,
 * but with the terminal given back as it was (echo, its own screen, the
 * cursor): the handler notes the signal, and the wait for a key, which it
 * interrupts, gives way to quit_on_signal. */
static void catch_quits(void)
{
	struct sigaction a = {.sa_handler = on_quit_signal};
	int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaction(sigs[i], &a, NULL);
}

static void quit_on_signal(void)
{
	if (!quit_signal)
		return;
	end_screen();
	signal(quit_signal, SIG_DFL);
	raise(quit_signal);
}

/* Whether the user, asked, says to stop the run v. */
static int ask_stop(const struct run_view *v)
{
	put(LINES - 1, "", 0);
	clrtoeol();
	char q[PATH_MAX + 64];
	snprintf(q, sizeof q, "stop %s with a checkpoint? (y/n) ", v->dir);
	put(LINES - 1, q, A_REVERSE);
	refresh();
	timeout(-1);
	int c = getch();
	quit_on_signal();
	timeout(1000);
	return c == 'y' || c == 'Y';
}

/* Runs ts-stop (this ts-top's, else the PATH's) on the run dir; its last
 * line, what it did or why it could not (the run does not run), in note. */
static void run_stop(const char *dir, char *note, size_t n)
{
	char self[PATH_MAX] = "", stop[PATH_MAX + 16];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	self[len > 0 ? len : 0] = 0;
	char *slash = strrchr(self, '/');
	snprintf(stop, sizeof stop, "%.*s/ts-stop", slash ? (int)(slash - self) : 0, self);
	int out[2] = {-1, -1};
	pid_t pid = pipe(out) == 0 ? fork() : -1;
	if (pid == 0) {
		dup2(out[1], 1), dup2(out[1], 2);
		execl(stop, "ts-stop", dir, (char *)NULL);
		execlp("ts-stop", "ts-stop", dir, (char *)NULL);
		fprintf(stderr, "ts-top: cannot run ts-stop: %s\n", strerror(errno));
		_exit(127);
	}
	if (pid < 0) {
		snprintf(note, n, "ts-top: cannot run ts-stop: %s", strerror(errno));
		close(out[0]), close(out[1]);   /* -1 (no pipe) closes nothing */
		return;
	}
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	char line[PATH_MAX + 256];
	while (f && fgets(line, sizeof line, f))
		snprintf(note, n, "%.*s", (int)strcspn(line, "\n"), line);
	if (f)
		fclose(f);
	int status;
	waitpid(pid, &status, 0);
}

/* The first run of the list shown in rows rows, as top was: moved as
 * little as keeps the selected run sel in sight. */
static int list_top(int sel, int top, int rows)
{
	if (sel < top)
		return sel;
	if (sel >= top + rows)
		return sel - rows + 1;
	return top;
}

/* The list of runs from the first one shown, top, in rows rows. */
static void draw_list(int y, int sel, int top, int rows)
{
	for (int r = top; r < nruns && r < top + rows; r++) {
		struct run_view *v = runs[r];
		struct strbuf line = {0};
		sb_addf(&line, "%c ", r == sel ? '>' : ' ');
		fit_end(&line, v->dir, 36);
		char value[32];
		sb_addf(&line, " %-8s %6ld/%-6ld %s %s", run_view_state(v), v->step, v->total_steps, v->metric,
			number(value, sizeof value, "%.4f", v->eval_value));
		put(y++, line.s, r == sel ? A_REVERSE : 0);
		sb_free(&line);
	}
}

/* The view, the list's first run shown at *top, note (if any) on the
 * last line. */
static void draw(int sel, int *top, int details, int help, const char *note)
{
	erase();
	int y = 0;
	char head[128];
	time_t now = time(NULL);
	strftime(head, sizeof head, "ts-top  %H:%M:%S   q quit  tab/arrows select  enter details  s stop  h help",
		 localtime(&now));
	put(y++, head, A_REVERSE);
	if (help) {
		const char *text[] = {"q        quit", "tab, up, down   select a run", "enter    the selected run's details, or all runs",
				      "s        stop the selected run with a checkpoint (asks first)", "h        this help"};
		for (size_t i = 0; i < sizeof text / sizeof *text; i++)
			put(++y, text[i], 0);
		refresh();
		return;
	}
	if (nruns > 1 && !details) {
		int rows = LINES / 2 - y > 1 ? LINES / 2 - y : 1;
		*top = list_top(sel, *top, rows);
		draw_list(y, sel, *top, rows);
		y += (nruns < rows ? nruns : rows) + 1;
	}
	if (!nruns) {   /* a sweep whose first job has not begun */
		put(y, "no job has begun yet", 0);
		refresh();
		return;
	}
	struct strbuf lines[32] = {{0}};
	int n = describe(runs[sel], lines, 24);
	n += log_tail(runs[sel], lines + n, details ? 8 : 3);
	for (int i = 0; i < n && y < LINES; i++) {
		put(y++, lines[i].s ? lines[i].s : "", i == 0 ? state_colour(run_view_state(runs[sel])) : 0);
		sb_free(&lines[i]);
	}
	if (*note)
		put(LINES - 1, note, A_REVERSE);
	refresh();
}

/* Curses on the terminal, or a refusal in a line of ts-top's own where it
 * cannot draw there: a terminal curses does not know, or one that cannot
 * move its cursor (TERM=dumb would run the whole view together on a line). */
static void start_screen(void)
{
	const char *term = getenv("TERM");
	SCREEN *screen = newterm(NULL, stdout, stdin);
	char *cup = screen ? tigetstr("cup") : NULL;
	if (cup && cup != (char *)-1)
		return;
	if (screen)
		endwin(), delscreen(screen);
	die("%s%s: cannot drive this terminal: --once or --json work anywhere",
	    term && *term ? "TERM=" : "TERM unset", term && *term ? term : "");
}

static void live(void)
{
	start_screen();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	colour = has_colors() && !getenv("NO_COLOR");
	if (colour) {
		start_color();
		use_default_colors();
		init_pair(1, COLOR_GREEN, -1);
		init_pair(2, COLOR_CYAN, -1);
		init_pair(3, COLOR_YELLOW, -1);
	}
	timeout(1000);   /* about once a second */
	die_hook(end_screen);
	catch_quits();
	int sel = 0, top = 0, details = 0, help = 0;
	char note[PATH_MAX + 256] = "";   /* what the last stop did, until the next key */
	for (;;) {
		for (int s = 0; s < nsweeps; s++)
			sync_sweep(sweeps[s]);
		for (int r = 0; r < nruns; r++)
			run_view_update(runs[r]);
		draw(sel, &top, details, help, note);
		int c = getch();
		quit_on_signal();
		if (c == 'q' || c == 'Q')
			break;
		if (c != ERR && c != KEY_RESIZE)
			note[0] = 0;
		help = c == 'h' || c == '?' ? !help : c == ERR || c == KEY_RESIZE ? help : 0;
		if (!nruns)
			continue;
		if (c == '\t' || c == KEY_DOWN)
			sel = (sel + 1) % nruns;
		else if (c == KEY_UP || c == KEY_BTAB)
			sel = (sel + nruns - 1) % nruns;
		else if (c == '\n' || c == KEY_ENTER)
			details = !details;
		else if ((c == 's' || c == 'S') && ask_stop(runs[sel]))
			run_stop(runs[sel]->dir, note, sizeof note);
	}
	endwin();
}

int main(int argc, char **argv)
{
	char **dirs;
	int n = opt_parse(&spec, argc, argv, &dirs);
	if (n == 0)
		die_usage("name the run or sweep dirs to watch");
	if (once && as_json)
		die_usage("--once and --json are one at a time: a text or a JSON snapshot");
	if (opt_given(&spec, "until") && !once && !as_json)
		die_usage("--until goes with --once or --json");
	setlocale(LC_ALL, "");
	utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
	for (int i = 0; i < n; i++)
		add_dir(dirs[i]);
	if (once || as_json) {
		for (int r = 0; r < nruns; r++)
			if (run_view_update(runs[r]) < 0)
				die("%s", runs[r]->error);
		if (as_json)
			snapshot_json();
		else
			snapshot_text();
		close_stdout();
		return 0;
	}
	if (!isatty(1))
		die("standard output is not a terminal: --once or --json print a snapshot");
	live();
	close_stdout();
	return 0;
}
