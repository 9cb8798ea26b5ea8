/* A sweep's parameter space and its jobs: each -p spec names ts-train
 * options and their values, as a list (KEY=V1,V2), a group of options that
 * vary together (K1,K2=A1:B1,A2:B2) or a numeric range to draw from
 * (KEY=LO:HI, KEY=LO:HI:log). Without draws the jobs are the cartesian
 * product of the lists and groups, the first spec varying slowest; with N
 * draws each job takes a random value of every spec (log-uniform on :log,
 * whole numbers between whole ends). */
#ifndef TS_SWEEP_H
#define TS_SWEEP_H
#include <stdint.h>

struct sweep_spec {
	int nkeys;
	char **keys;           /* option names, without dashes */
	int nvals;
	char ***vals;          /* vals[v][k]: value v of key k (lists and groups) */
	int range, log, whole; /* a range LO:HI, drawn log-uniformly, of whole numbers */
	double lo, hi;
};

/* One job: its command (ts-train and the arguments it shares with other
 * jobs) and the options it adds, opts[2i] = key, opts[2i+1] = value. */
struct sweep_job {
	char **cmd;
	int ncmd;
	int nopts;
	char **opts;
};

/* Parses one -p spec; dies with a usage error naming what is wrong. */
void sweep_parse(const char *text, struct sweep_spec *s);
/* The jobs of specs: the grid (draws 0; a range is an error) or that many
 * random draws from seed. Returns how many; dies with a usage error when
 * two specs (or one twice) name an option, or a grid would exceed
 * max_jobs. */
int sweep_jobs(const struct sweep_spec *specs, int nspecs, long draws, uint64_t seed, long max_jobs,
	       struct sweep_job **jobs);
/* The words of a command line as a shell splits them, without expanding
 * anything: blanks part words; '...' keeps all, "..." all but \\ before
 * one of " \\ $ `; \\ outside quotes keeps the next character. Dies with
 * a usage error naming where (a task file's line) on an unclosed quote. */
char **sweep_words(const char *line, int *n, const char *where);
/* The value a ts-train command line argv (NULL-terminated) gives the option
 * --name (--name V, --name=V) or, with a letter, -L (-L V, -LV), or else a
 * config file it names (-c FILE) gives the key name, as ts-train takes it:
 * the command line wins, then the last; malloc'd, NULL: none. */
char *sweep_option(char **argv, const char *name, char letter);
/* Whether argv gives the option, as sweep_option finds it. */
int sweep_gives(char **argv, const char *name, char letter);
/* The -j of a job when slots jobs share this machine's cores (those this
 * process may use): at least 1. */
int sweep_threads(int slots);
#endif
