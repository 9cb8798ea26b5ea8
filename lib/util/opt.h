/* One option table per command. It drives parsing of the command line and of
 * config files (-c FILE, "key = value" lines with the long option names; the
 * command line wins), --help, the man page check and the shell completions. */
#ifndef TS_OPT_H
#define TS_OPT_H
#include <stdio.h>

enum opt_type { OPT_FLAG, OPT_INT, OPT_FLOAT, OPT_STR, OPT_LIST };

struct strlist { char **v; int n; };

struct opt {
	char shrt;            /* short letter or 0 */
	const char *name;     /* long name, also the config key */
	enum opt_type type;
	void *dest;           /* int* (flag), long*, double*, char**, struct strlist* */
	const char *arg;      /* value name in --help, e.g. "FILE" */
	const char *help;
	/* "a|b|c" for a fixed set; for completion alone "@file", "@dir", or
	 * "@device" (cpu, cuda and cuda:N for each GPU nvidia-smi lists) */
	const char *choices;
	/* The range a numeric option's value must lie in, both ends included but
	 * for a float's ends that `open` marks. A default outside the range means
	 * "not set": it is never written to a config file. */
	long min, max;        /* OPT_INT */
	double fmin, fmax;    /* OPT_FLOAT */
	int open;             /* OPT_FLOAT: OPEN_MIN, OPEN_MAX or both */
};

enum { OPEN_MIN = 1, OPEN_MAX = 2 };

struct cmd_spec {
	const char *name;       /* ts-xxx */
	const char *summary;    /* one line */
	const char *operands;   /* e.g. "[FILE...]" */
	const char *complete;   /* operand completion: "file", "dir", "command" (after --) or NULL */
	const struct opt *opts; /* ends with an entry whose name is NULL */
	/* --help's usage after the name where it is not "[OPTION]... OPERANDS"
	 * (options that must be given); lines after the first start with the name */
	const char *synopsis;
};

/* Parses config file(s) and argv; dies with exit 2 on bad usage, such as a
 * number out of its option's range or an empty path (an option with choices
 * "@file" or "@dir", or an operand of a command that completes files or dirs).
 * Returns the operands (argv order) in *operands, their count as the result. */
int opt_parse(const struct cmd_spec *spec, int argc, char **argv, char ***operands);
/* Whether the option was given (on the command line or in a config file). */
int opt_given(const struct cmd_spec *spec, const char *name);
/* Whether the command line gave the option (not only a config file). */
int opt_on_line(const struct cmd_spec *spec, const char *name);
/* Where the command line gives option name, which stands instead of others
 * (a NULL-terminated list), those of them that only a config file gave go
 * back to their defaults, as the command line wins: -c RUN/config --epochs 1
 * over the config's max-steps. */
void opt_instead(const struct cmd_spec *spec, const char *name, const char *const *others);
/* Dies (exit 2) naming the first option given but mode and those of allowed,
 * a NULL-terminated list: a mode such as --resume that takes no others. */
void opt_only_with(const struct cmd_spec *spec, const char *mode, const char *const *allowed);
/* Dies (exit 2) naming the first string option whose value a config file
 * cannot give back as it is: one with a blank at either end, or a newline or
 * other control character. A command that writes its options calls it before. */
void opt_check_recordable(const struct cmd_spec *spec);
/* Writes every set option as "key = value" (a config file that reproduces the run). */
void opt_write_config(const struct cmd_spec *spec, FILE *f);
/* Parses a config file into the table (used by opt_parse and by --resume). */
void opt_read_config(const struct cmd_spec *spec, const char *path);
/* The value config file path gives key, the last if it gives it twice,
 * malloc'd; NULL: none. Dies as opt_read_config does on a bad line. */
char *opt_config_value(const char *path, const char *key);
#endif
