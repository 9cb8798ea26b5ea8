#include "util/opt.h"
#include "util/cleanup.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OPTS 128
static unsigned char given[MAX_OPTS];
static char *defaults[MAX_OPTS];   /* each option's value before any was read: --help shows it */
static const char *source;   /* "FILE: line N: " while reading a config file */
static int source_line;      /* its N */
static int set_on[MAX_OPTS]; /* the line of the config file being read that set each option; 0: none */
static unsigned char on_line[MAX_OPTS];   /* given on the command line, not (only) by a config file */
/* each option's value before any was read, for opt_instead to put back */
static union { int flag; long i; double x; char *s; struct strlist l; } initial[MAX_OPTS];

static const struct opt *opts_builtin(void)
{
	static const struct opt b[] = {
		{'h', "help", OPT_FLAG, NULL, NULL, "show this help and exit", NULL},
		{0, "version", OPT_FLAG, NULL, NULL, "show the version and exit", NULL},
		{'c', "config", OPT_STR, NULL, "FILE", "read options from FILE (key = value lines)", "@file"},
		{0, NULL, 0, NULL, NULL, NULL, NULL},
	};
	return b;
}

static _Noreturn void bad(const char *fmt, const char *a, const char *b)
{
	char msg[512];
	snprintf(msg, sizeof msg, fmt, a, b);
	die_usage("%s%s", source ? source : "", msg);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t n = strlen(b), row[64];
	if (n >= 64)
		return 64;
	for (size_t j = 0; j <= n; j++)
		row[j] = j;
	for (size_t i = 1; a[i - 1]; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= n; j++) {
			size_t up = row[j];
			size_t sub = diag + (a[i - 1] != b[j - 1]);
			size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
			row[j] = sub < best ? sub : best;
			diag = up;
		}
	}
	return row[n];
}

static _Noreturn void unknown(const struct cmd_spec *spec, const char *name, const char *what,
			      const char *dashes)
{
	const char *best = NULL;
	size_t bd = 4;
	for (const struct opt *o = spec->opts; o->name; o++) {
		size_t d = edit_distance(name, o->name);
		if (d < bd || (strstr(o->name, name) && strlen(name) >= 3 && bd > 1)) {
			bd = d < bd ? d : 1;
			best = o->name;
		}
	}
	char msg[256];
	if (best)
		snprintf(msg, sizeof msg, "unknown %s '%s%s' (did you mean '%s%s'?)", what, dashes, name, dashes, best);
	else
		snprintf(msg, sizeof msg, "unknown %s '%s%s'", what, dashes, name);
	die_usage("%s%s", source ? source : "", msg);
}

static const struct opt *find_long(const struct cmd_spec *spec, const char *name, size_t len)
{
	for (const struct opt *o = spec->opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

static const struct opt *find_short(const struct cmd_spec *spec, char c)
{
	for (const struct opt *o = spec->opts; o->name; o++)
		if (o->shrt == c)
			return o;
	return NULL;
}

static int parse_bool(const char *v, int *out)
{
	static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]))
			return *out = 1, 1;
		if (!strcasecmp(v, no[i]))
			return *out = 0, 1;
	}
	return 0;
}

static void check_choice(const struct opt *o, const char *v)
{
	if (!o->choices || o->choices[0] == '@')
		return;
	size_t n = strlen(v);
	for (const char *p = o->choices; *p;) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, v, n))
			return;
		p += len + (e != NULL);
	}
	char what[128];
	snprintf(what, sizeof what, "--%s: '%%s' is not one of %%s", o->name);
	bad(what, v, o->choices);
}

static int int_in_range(const struct opt *o, long x)
{
	return x >= o->min && x <= o->max;
}

static int float_in_range(const struct opt *o, double x)
{
	return (o->open & OPEN_MIN ? x > o->fmin : x >= o->fmin) &&
	       (o->open & OPEN_MAX ? x < o->fmax : x <= o->fmax);
}

/* An option's value as a config file holds it (malloc'd), or NULL for a
 * flag, a list, or a value out of range, which means "not set". */
static char *value_text(const struct opt *o)
{
	struct strbuf b = {0};
	if (o->type == OPT_INT && int_in_range(o, *(long *)o->dest))
		sb_addf(&b, "%ld", *(long *)o->dest);
	else if (o->type == OPT_FLOAT && float_in_range(o, *(double *)o->dest))
		sb_add_double(&b, *(double *)o->dest, 0);
	else if (o->type == OPT_STR && *(char **)o->dest)
		sb_addf(&b, "%s", *(char **)o->dest);
	else
		return NULL;
	sb_addc(&b, 0);
	return b.s;
}

/* e.g. "--keep: 4294967296 is out of range (1 to 1000000)" */
static _Noreturn void out_of_range(const struct opt *o, const char *v)
{
	char range[96], what[160];
	if (o->type == OPT_INT)
		snprintf(range, sizeof range, "%ld to %ld", o->min, o->max);
	else
		snprintf(range, sizeof range, "%s%g to %s%g", o->open & OPEN_MIN ? "above " : "", o->fmin,
			 o->open & OPEN_MAX ? "below " : "", o->fmax);
	snprintf(what, sizeof what, "--%s: %%s is out of range (%s)%%s", o->name, range);
	bad(what, v, "");
}

static int names_path(const struct opt *o)
{
	return o->choices && (!strcmp(o->choices, "@file") || !strcmp(o->choices, "@dir"));
}

static void set_value(const struct opt *o, const char *v)
{
	char *end;
	errno = 0;
	switch (o->type) {
	case OPT_FLAG:
		if (!parse_bool(v, o->dest))
			bad("--%s takes true or false, not '%s'", o->name, v);
		break;
	case OPT_INT: {
		long x = strtol(v, &end, 10);
		if (!*v || *end || isspace((unsigned char)*v))
			bad("--%s takes a whole number, not '%s'", o->name, v);
		if (errno || !int_in_range(o, x))
			out_of_range(o, v);
		*(long *)o->dest = x;
		break;
	}
	case OPT_FLOAT: {
		double x = strtod(v, &end);
		if (!*v || *end || isnan(x) || isspace((unsigned char)*v))
			bad("--%s takes a number, not '%s'", o->name, v);
		if (errno || !float_in_range(o, x))
			out_of_range(o, v);
		*(double *)o->dest = x;
		break;
	}
	case OPT_STR:
		if (!*v && names_path(o))
			bad("--%s: the path is empty%s", o->name, "");
		if (!strcmp(v, "-") && !strcmp(o->choices ? o->choices : "", "@dir"))
			bad("--%s: '-' stands for standard input or output, not a dir (name one so: ./%s)", o->name, v);
		check_choice(o, v);
		*(char **)o->dest = xstrdup(v);
		break;
	case OPT_LIST: {
		struct strlist *l = o->dest;
		l->v = xrealloc(l->v, (size_t)(l->n + 1) * sizeof *l->v);
		l->v[l->n++] = xstrdup(v);
		break;
	}
	}
}

static void mark_given(const struct cmd_spec *spec, const struct opt *o, int by_line)
{
	ptrdiff_t i = o - spec->opts;
	if (i >= 0 && i < MAX_OPTS)
		given[i] = 1, on_line[i] |= by_line;
}

static size_t value_size(const struct opt *o)
{
	static const size_t size[] = {
		[OPT_FLAG] = sizeof(int), [OPT_INT] = sizeof(long), [OPT_FLOAT] = sizeof(double),
		[OPT_STR] = sizeof(char *), [OPT_LIST] = sizeof(struct strlist),
	};
	return size[o->type];
}

int opt_given(const struct cmd_spec *spec, const char *name)
{
	const struct opt *o = find_long(spec, name, strlen(name));
	return o && given[o - spec->opts];
}

int opt_on_line(const struct cmd_spec *spec, const char *name)
{
	const struct opt *o = find_long(spec, name, strlen(name));
	return o && on_line[o - spec->opts];
}

void opt_instead(const struct cmd_spec *spec, const char *name, const char *const *others)
{
	const struct opt *o = find_long(spec, name, strlen(name));
	if (!o || !on_line[o - spec->opts])
		return;
	for (int k = 0; others[k]; k++) {
		const struct opt *x = find_long(spec, others[k], strlen(others[k]));
		ptrdiff_t i = x - spec->opts;
		if (given[i] && !on_line[i]) {
			memcpy(x->dest, &initial[i], value_size(x));
			given[i] = 0;
		}
	}
}

void opt_only_with(const struct cmd_spec *spec, const char *mode, const char *const *allowed)
{
	char but[256] = "";
	for (int i = 0; allowed[i]; i++)
		snprintf(but + strlen(but), sizeof but - strlen(but), "%s--%s",
			 !i ? " but " : allowed[i + 1] ? ", " : " and ", allowed[i]);
	for (const struct opt *o = spec->opts; o->name; o++) {
		int ok = !strcmp(o->name, mode);
		for (int i = 0; allowed[i]; i++)
			ok |= !strcmp(o->name, allowed[i]);
		if (opt_given(spec, o->name) && !ok)
			die_usage("--%s takes no other options%s (not --%s)", mode, but, o->name);
	}
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

enum { MAX_CONFIG_BYTES = 1 << 20 };

/* The whole of config file path, NUL-terminated, in a buffer that each call
 * reuses: dying in the middle of parsing it then leaks nothing. */
static char *config_text(const char *path)
{
	static char *buf;
	static size_t cap;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die_usage("cannot open config file %s:", path);
	size_t n = 0;
	for (ssize_t r = 1; r; n += (size_t)r) {
		if (n > MAX_CONFIG_BYTES) {
			close(fd);
			die_usage("config file %s is larger than %d bytes", path, MAX_CONFIG_BYTES);
		}
		grow(&buf, &cap, n + 4097, 1);
		while ((r = read(fd, buf + n, cap - n - 1)) < 0 && errno == EINTR)
			;
		if (r < 0) {
			close(fd);
			die_usage("cannot read config file %s:", path);
		}
	}
	close(fd);
	if (memchr(buf, 0, n))
		die_usage("config file %s holds a NUL byte", path);
	buf[n] = 0;
	if (n >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))   /* a byte order mark is no part of the first key */
		memmove(buf, buf + 3, n - 2);
	return buf;
}

/* Calls use(ctx, key, value) for each "key = value" line of config file
 * path, in order; dies in one line on any other line but a blank or a
 * comment. */
static void each_setting(const char *path, void (*use)(void *ctx, const char *key, const char *val),
			 void *ctx)
{
	if (!*path)
		die_usage("--config: the path is empty");
	char where[PATH_MAX + 32], *next;
	int ln = 1;
	for (char *line = config_text(path); line; line = next, ln++) {
		if ((next = strchr(line, '\n')))
			*next++ = 0;
		snprintf(where, sizeof where, "%s: line %d: ", path, ln);
		source = where, source_line = ln;
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq || eq == s)
			bad("expected 'key = value', got '%s'%s", s, "");
		*eq = 0;
		use(ctx, trim(s), trim(eq + 1));
	}
	source = NULL;
}

static void set_setting(void *spec_, const char *key, const char *val)
{
	const struct cmd_spec *spec = spec_;
	const struct opt *o = find_long(spec, key, strlen(key));
	if (!o)
		unknown(spec, key, "key", "");
	ptrdiff_t i = o - spec->opts;   /* a list takes a line a value; any other option, one line */
	if (o->type != OPT_LIST && i < MAX_OPTS && set_on[i]) {
		char first[32];
		snprintf(first, sizeof first, "%d", set_on[i]);
		bad("'%s' is set again; line %s set it first", key, first);
	}
	if (i < MAX_OPTS)
		set_on[i] = source_line;
	set_value(o, val);
	mark_given(spec, o, 0);
}

void opt_read_config(const struct cmd_spec *spec, const char *path)
{
	memset(set_on, 0, sizeof set_on);
	each_setting(path, set_setting, (void *)spec);
}

struct wanted {
	const char *key;
	char *val;
};

static void keep_setting(void *w_, const char *key, const char *val)
{
	struct wanted *w = w_;
	if (!strcmp(key, w->key)) {
		free(w->val);
		w->val = xstrdup(val);
	}
}

char *opt_config_value(const char *path, const char *key)
{
	struct wanted w = {key, NULL};
	each_setting(path, keep_setting, &w);
	return w.val;
}

/* The length of the longest start of p[0..n) that ends in '|' and has at
 * most room characters; 0 when there is none. */
static int last_bar_before(const char *p, int n, int room)
{
	for (int k = n < room ? n : room; k > 0; k--)
		if (p[k - 1] == '|')
			return k;
	return 0;
}

/* Prints words from column `at` on, breaking lines before column 80 and
 * starting each new one at column `indent`; a word too long for a line (a
 * list of choices) breaks after a '|'. */
static void print_wrapped(const char *text, int at, int indent)
{
	int start = at;
	for (const char *p = text + strspn(text, " "); *p; p += strspn(p, " ")) {
		int n = (int)strcspn(p, " ");
		if (at > start && at + 1 + n > 80) {
			printf("\n%*s", indent, "");
			at = start = indent;
		}
		for (int k; at + n > 80 && (k = last_bar_before(p, n, 80 - at - (at > start))) > 0; p += k, n -= k) {
			printf("%s%.*s\n%*s", at > start ? " " : "", k, p, indent, "");
			at = indent, start = indent + 1;   /* the rest of the word follows on without a space */
		}
		at += printf("%s%.*s", at > start ? " " : "", n, p);
		p += n;
	}
	printf("\n");
}

/* Whether text holds the len characters at w as a word of its own. */
static int has_word(const char *text, const char *w, size_t len)
{
	for (const char *at = text; *at; at++)
		if (!strncmp(at, w, len) && (at == text || !isalnum((unsigned char)at[-1])) &&
		    !isalnum((unsigned char)at[len]))
			return 1;
	return 0;
}

/* Whether text names every one of choices ("a|b|c"). */
static int names_all(const char *text, const char *choices)
{
	for (const char *p = choices; *p; p += strcspn(p, "|") + (p[strcspn(p, "|")] == '|'))
		if (!has_word(text, p, strcspn(p, "|")))
			return 0;
	return 1;
}

static void print_help(const struct cmd_spec *spec)
{
	if (spec->synopsis)
		printf("usage: %s %s\n", spec->name, spec->synopsis);
	else
		printf("usage: %s [OPTION]...%s%s\n", spec->name, *spec->operands ? " " : "", spec->operands);
	print_wrapped(spec->summary, 0, 0);
	printf("\n");
	for (int pass = 0; pass < 2; pass++)
		for (const struct opt *o = pass ? opts_builtin() : spec->opts; o->name; o++) {
			char left[96], text[512];
			int n = snprintf(left, sizeof left, "  %s%c%s--%s", o->shrt ? "-" : " ",
					 o->shrt ? o->shrt : ' ', o->shrt ? ", " : "  ", o->name);
			if (o->arg)
				snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
			/* the choices, where the help does not name them all already */
			int has_choices = o->choices && o->choices[0] != '@' && !names_all(o->help, o->choices);
			const char *def = pass || strstr(o->help, "(default") ? NULL : defaults[o - spec->opts];
			snprintf(text, sizeof text, "%s%s%s%s%s%s%s", o->help, has_choices ? " (" : "",
				 has_choices ? o->choices : "", has_choices ? ")" : "", def ? " (default " : "",
				 def ? def : "", def ? ")" : "");
			print_wrapped(text, printf("%-28s ", left), 29);
		}
	printf("\nSee %s(1).\n", spec->name);
}

/* Hidden: one line per option for completions/generate and the man page check. */
static void print_table(const struct cmd_spec *spec)
{
	printf("operands\t%s\n", spec->complete ? spec->complete : "");
	for (int pass = 0; pass < 2; pass++)
		for (const struct opt *o = pass ? opts_builtin() : spec->opts; o->name; o++)
			printf("%c\t%s\t%s\t%s\t%s\n", o->shrt ? o->shrt : '-', o->name, o->arg ? o->arg : "",
			       o->choices ? o->choices : "", o->help);
}

static int builtin(const struct cmd_spec *spec, const char *name)
{
	if (!strcmp(name, "help"))
		print_help(spec);
	else if (!strcmp(name, "version"))
		printf("%s %s\n", spec->name, TS_VERSION);
	else if (!strcmp(name, "ts-options"))
		print_table(spec);
	else
		return 0;
	close_stdout();
	exit(0);
}

/* Config files come first so that the command line wins. */
static void read_configs(const struct cmd_spec *spec, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return;
		const char *a = argv[i];
		if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
			if (i + 1 >= argc || !strcmp(argv[i + 1], "--"))
				bad("%s needs a value%s", a, i + 1 < argc ? " (-- ends the options)" : "");
			opt_read_config(spec, argv[++i]);
		} else if (!strncmp(a, "--config=", 9)) {
			opt_read_config(spec, a + 9);
		} else if (!strncmp(a, "-c", 2) && a[2]) {
			opt_read_config(spec, a + 2);
		}
	}
}

static int take_value(const struct opt *o, const char *inline_val, int *i, int argc, char **argv,
		      const char *shown)
{
	if (o->type == OPT_FLAG && !inline_val)
		return *(int *)o->dest = 1, 0;
	if (inline_val)
		return set_value(o, inline_val), 0;
	if (*i + 1 >= argc || !strcmp(argv[*i + 1], "--"))   /* a value does not take the end of the options */
		bad("%s needs a value%s", shown, *i + 1 < argc ? " (-- ends the options)" : "");
	set_value(o, argv[++*i]);
	return 0;
}

/* A numeric option without a range is a mistake in the table. */
static void check_ranges(const struct cmd_spec *spec)
{
	for (const struct opt *o = spec->opts; o->name; o++)
		if ((o->type == OPT_INT && !(o->min < o->max)) || (o->type == OPT_FLOAT && !(o->fmin < o->fmax)))
			die("option table: --%s has no range", o->name);
}

int opt_parse(const struct cmd_spec *spec, int argc, char **argv, char ***operands)
{
	ts_prog = spec->name;
	open_std_fds();
	check_ranges(spec);
	for (int i = 0; spec->opts[i].name; i++) {
		defaults[i] = value_text(&spec->opts[i]);
		memcpy(&initial[i], spec->opts[i].dest, value_size(&spec->opts[i]));
	}
	cleanup_on_signals();
	read_configs(spec, argc, argv);
	char **ops = *operands = xcalloc((size_t)argc + 1, sizeof *ops);
	int nops = 0, only_ops = 0;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (only_ops || a[0] != '-' || !a[1]) {
			if (!*a && spec->complete && strcmp(spec->complete, "command"))
				die_usage("an argument is an empty path");
			ops[nops++] = a;
		} else if (!strcmp(a, "--")) {
			only_ops = 1;
		} else if (a[1] == '-') {
			char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			char name[128];
			snprintf(name, sizeof name, "%.*s", (int)len, a + 2);
			if (builtin(spec, name))
				continue;
			if (!strcmp(name, "config")) {
				i += !eq;
				continue;
			}
			const struct opt *o = find_long(spec, name, len);
			if (!o)
				unknown(spec, name, "option", "--");
			take_value(o, eq ? eq + 1 : NULL, &i, argc, argv, a);
			mark_given(spec, o, 1);
		} else {
			for (char *p = a + 1; *p; p++) {
				if (*p == 'h')
					builtin(spec, "help");
				if (*p == 'c') {
					i += !p[1];
					break;
				}
				const struct opt *o = find_short(spec, *p);
				if (!o) {
					char s[3] = {'-', *p, 0};
					bad("unknown option '%s'%s", s, "");
				}
				char shown[3] = {'-', *p, 0};
				if (o->type != OPT_FLAG) {
					take_value(o, p[1] ? p + 1 : NULL, &i, argc, argv, shown);
					mark_given(spec, o, 1);
					break;
				}
				*(int *)o->dest = 1;
				mark_given(spec, o, 1);
			}
		}
	}
	*operands = ops;
	return nops;
}

/* Whether a config file's line gives v back as it is: opt_read_config trims
 * the blanks around a value, and a newline ends the line. */
static int config_holds(const char *v)
{
	size_t n = strlen(v);
	if (n && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1])))
		return 0;
	for (; *v; v++)
		if (iscntrl((unsigned char)*v))
			return 0;
	return 1;
}

void opt_check_recordable(const struct cmd_spec *spec)
{
	for (const struct opt *o = spec->opts; o->name; o++)
		if (o->type == OPT_STR && *(char **)o->dest && !config_holds(*(char **)o->dest))
			die_usage("--%s: a config file cannot hold a value with a blank at either end or a control character",
				  o->name);
}

void opt_write_config(const struct cmd_spec *spec, FILE *f)
{
	for (const struct opt *o = spec->opts; o->name; o++) {
		if (o->type == OPT_FLAG) {
			fprintf(f, "%s = %s\n", o->name, *(int *)o->dest ? "true" : "false");
		} else if (o->type == OPT_LIST) {
			const struct strlist *l = o->dest;
			for (int k = 0; k < l->n; k++)
				fprintf(f, "%s = %s\n", o->name, l->v[k]);
		} else {
			char *v = value_text(o);
			if (v)
				fprintf(f, "%s = %s\n", o->name, v);
			free(v);
		}
	}
}
