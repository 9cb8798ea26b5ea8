/* Options and config files (lib/util/opt.c) over a table with every option type:
 * the input is a config file, then after a NUL the command line's words,
 * NUL-separated. What was parsed must write as a config file (as ts-train
 * writes a run's config) that reads back to the same values (--resume). */
#include "fuzz.h"
#include "util/opt.h"
#include <ctype.h>

enum { MAX_WORDS = 64 };

static int flag;
static long num;
static double real;
static char *mode, *name;
static struct strlist list;

static const struct opt opts[] = {
	{'f', "flag", OPT_FLAG, &flag, NULL, "a flag", NULL},
	{'n', "num", OPT_INT, &num, "N", "a number", NULL, -1000000, 1000000000000},
	{'r', "real", OPT_FLOAT, &real, "X", "a real", NULL, .fmin = -1e6, .fmax = 1e6, .open = OPEN_MAX},
	{'m', "mode", OPT_STR, &mode, "M", "a choice", "fast|slow|exact"},
	{0, "name", OPT_STR, &name, "S", "a string", "@file"},
	{'p', "param", OPT_LIST, &list, "K=V", "a list", NULL},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};
static const struct cmd_spec spec = {"ts-fuzz", "fuzzes options", "[FILE...]", NULL, opts};

struct values {
	int flag;
	long num;
	double real;
	char *mode, *name;
	struct strlist list;
};

struct ctx {
	char *config, *written;
	char *argv[MAX_WORDS + 4];
	int argc;
	char **ops;
	struct values first;
};

/* Moves the table's values into v, leaving the table at its defaults. */
static void take_values(struct values *v)
{
	*v = (struct values){flag, num, real, mode, name, list};
	flag = 0, num = 0, real = 0, mode = name = NULL, list = (struct strlist){0};
}

static void free_values(struct values *v)
{
	free(v->mode);
	free(v->name);
	for (int i = 0; i < v->list.n; i++)
		free(v->list.v[i]);
	free(v->list.v);
}

static int same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static int same_values(const struct values *a, const struct values *b)
{
	if (a->flag != b->flag || a->num != b->num || memcmp(&a->real, &b->real, sizeof a->real) ||
	    !same_str(a->mode, b->mode) || !same_str(a->name, b->name) || a->list.n != b->list.n)
		return 0;
	for (int i = 0; i < a->list.n; i++)
		if (strcmp(a->list.v[i], b->list.v[i]))
			return 0;
	return 1;
}

static void run(void *arg)
{
	struct ctx *c = arg;
	opt_parse(&spec, c->argc, c->argv, &c->ops);
	fuzz_die_is_bug(1);
	FILE *f = fopen(c->written, "w");
	opt_write_config(&spec, f);
	fclose(f);
	take_values(&c->first);
	opt_read_config(&spec, c->written);
	fuzz_die_is_bug(0);
	struct values back;
	take_values(&back);
	int same = same_values(&c->first, &back);
	free_values(&back);
	if (!same)
		abort();
}

static void release(void *arg)
{
	struct ctx *c = arg;
	struct values rest;
	take_values(&rest);
	free_values(&rest);
	free_values(&c->first);
	free(c->ops);
}

/* Words that would end the process (--help) or read other files (-c), or
 * hold a value a "key = value" line cannot (spaces at its ends, newlines). */
static int usable(const char *w)
{
	if (!strncmp(w, "-c", 2) || !strncmp(w, "--config", 8) || !strncmp(w, "--help", 6) ||
	    !strncmp(w, "--version", 9) || !strncmp(w, "--ts-options", 12) ||
	    (w[0] == '-' && w[1] != '-' && strchr(w, 'h')))
		return 0;
	for (const char *p = w; *p; p++)
		if (isspace((unsigned char)*p))
			return 0;
	return 1;
}

/* The table itself must be accepted, or every input would die before
 * reaching the parser and the fuzzer would report no crash, having tried
 * nothing. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	static const uint8_t empty_config[] = "";
	struct ctx c = {.config = fuzz_file("config", empty_config, 0),
			.written = path_join(fuzz_tmpdir(), "written"),
			.argv = {"ts-fuzz", "-c"}, .argc = 3};
	c.argv[2] = c.config;
	if (fuzz_survive(run, release, &c))
		abort();
	free(c.config);
	free(c.written);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t cfg_len = nul ? (size_t)(nul - data) : size;
	struct ctx c = {.config = fuzz_file("config", data, cfg_len),
			.written = path_join(fuzz_tmpdir(), "written"),
			.argv = {"ts-fuzz", "-c"}, .argc = 3};
	c.argv[2] = c.config;
	size_t words_len = nul ? size - cfg_len - 1 : 0;
	char *words = xmalloc(words_len + 1);
	memcpy(words, data + size - words_len, words_len);
	words[words_len] = 0;
	int ok = 1;
	for (char *w = words; w < words + words_len; w += strlen(w) + 1) {
		if (c.argc == MAX_WORDS || !usable(w))
			ok = 0;
		else
			c.argv[c.argc++] = w;
	}
	if (ok)
		fuzz_survive(run, release, &c);
	free(words);
	free(c.config);
	free(c.written);
	return 0;
}
