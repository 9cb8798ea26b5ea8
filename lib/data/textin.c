#include "data/textin.h"
#include "data/utf8.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct textin {
	FILE *f;
	char *name;
	char *line;
	size_t cap;
	uint64_t lineno;
};

struct textin *textin_open(const char *path)
{
	struct textin *t = xcalloc(1, sizeof *t);
	if (!strcmp(path, "-")) {
		t->f = stdin;
		t->name = xstrdup("standard input");
	} else {
		t->f = fopen(path, "r");
		if (!t->f)
			die("cannot open %s:", path);
		t->name = xstrdup(path);
	}
	return t;
}

char *textin_line(struct textin *t, size_t *n)
{
	ssize_t len = getline(&t->line, &t->cap, t->f);
	if (len < 0) {
		if (ferror(t->f))
			die("read %s:", t->name);
		return NULL;
	}
	if (!t->lineno++) {
		size_t bom = utf8_bom(t->name, t->line, (size_t)len);
		memmove(t->line, t->line + bom, (size_t)(len -= (ssize_t)bom) + 1);
		if (bom && !len)   /* a file of the mark alone holds no line */
			return NULL;
	}
	if (len && t->line[len - 1] == '\n')
		t->line[--len] = 0;
	if (len && t->line[len - 1] == '\r')
		t->line[--len] = 0;
	*n = (size_t)len;
	return t->line;
}

uint64_t textin_lineno(const struct textin *t) { return t->lineno; }
const char *textin_name(const struct textin *t) { return t->name; }

void textin_close(struct textin *t)
{
	if (t->f != stdin)
		fclose(t->f);
	free(t->line);
	free(t->name);
	free(t);
}
