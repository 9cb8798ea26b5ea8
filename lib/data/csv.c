#include "data/csv.h"
#include "data/utf8.h"
#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { CHUNK = 1 << 20 };

enum scan_state { START, PLAIN, QUOTED, QUOTE };

struct csv {
	int fd, eof, begun;   /* begun: the byte order mark looked for */
	char *name;
	char delim;
	char *buf;
	size_t cap, pos, end;     /* unparsed bytes are buf[pos, end) */
	uint64_t line, rec_line, consumed;
	/* How far the record at buf[pos] has been scanned for its end: kept
	 * across refills, so that a long record read in small pieces (from a
	 * pipe) is scanned once, not once per piece. */
	size_t scanned;
	enum scan_state st;
	uint64_t lines;       /* newlines inside quotes so far */
	struct csv_field *f;
	size_t fcap;
};

static int refill(struct csv *c);

/* A byte order mark is no part of the first column's name. */
static void skip_bom(struct csv *c)
{
	while (c->end < 3 && refill(c))
		;
	c->pos = c->consumed = utf8_bom(c->name, c->buf, c->end);
}

struct csv *csv_open(const char *path, char delim)
{
	struct csv *c = xcalloc(1, sizeof *c);
	c->delim = delim;
	c->line = 1;
	if (!strcmp(path, "-")) {
		c->fd = STDIN_FILENO;
		c->name = xstrdup("standard input");
	} else if ((c->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		die("cannot open %s:", path);
	} else {
		c->name = xstrdup(path);
	}
	c->cap = CHUNK;
	c->buf = xmalloc(c->cap + 1);
	return c;
}

/* Moves the unparsed tail to the front and reads more; 0 at end of input. */
static int refill(struct csv *c)
{
	if (c->eof)
		return 0;
	if (c->pos) {
		memmove(c->buf, c->buf + c->pos, c->end - c->pos);
		c->end -= c->pos;
		c->pos = 0;
	}
	if (c->end == c->cap) {
		c->cap *= 2;
		c->buf = xrealloc(c->buf, c->cap + 1);
	}
	ssize_t got;
	do
		got = read(c->fd, c->buf + c->end, c->cap - c->end);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		die("read %s:", c->name);
	if (got == 0)
		c->eof = 1;
	c->end += (size_t)got;
	return got > 0;
}

static void add_field(struct csv *c, int *nf, char *s, size_t n)
{
	grow(&c->f, &c->fcap, (size_t)*nf + 1, sizeof *c->f);
	c->f[*nf].s = s;
	c->f[*nf].n = n;
	(*nf)++;
}

/* Finds the newline that ends the record at buf[pos] (outside quotes) without
 * changing the buffer, going on from where the last call stopped. Returns its
 * offset, or end when the input ends first (*complete says whether that is
 * the true end), counting newlines inside quotes in c->lines. */
static size_t record_end(struct csv *c, int *complete)
{
	enum scan_state st = c->st;
	for (size_t i = c->pos + c->scanned; i < c->end; i++) {
		char ch = c->buf[i];
		switch (st) {
		case START:
		case PLAIN:
			if (ch == '\n')
				return *complete = 1, i;
			st = ch == c->delim ? START : (st == START && ch == '"') ? QUOTED : PLAIN;
			break;
		case QUOTED:
			c->lines += ch == '\n';
			if (ch == '"')
				st = QUOTE;
			break;
		case QUOTE:   /* a doubled quote, or the closing one */
			if (ch == '\n')
				return *complete = 1, i;
			st = ch == '"' ? QUOTED : ch == c->delim ? START : PLAIN;
			break;
		}
	}
	if (st == QUOTED && c->eof)
		die("%s: line %llu: unterminated quote", c->name, (unsigned long long)c->line);
	*complete = c->eof;
	c->st = st;
	c->scanned = c->end - c->pos;
	return c->end;
}

/* Splits the complete record buf[pos, e) into fields, unescaping in place. */
static int split(struct csv *c, size_t e)
{
	char *p = c->buf + c->pos, *end = c->buf + e;
	if (end > p && end[-1] == '\r')
		end--;
	*end = 0;
	int nf = 0;
	for (;;) {
		char *start = p, *w = p;
		if (*p == '"') {
			for (p++; p < end; p++) {
				if (*p == '"' && (p + 1 >= end || p[1] != '"'))
					break;
				*w++ = *p;
				p += *p == '"';
			}
			p++;
			if (p < end && *p != c->delim && *p != '\r')
				die("%s: line %llu: text after a closing quote", c->name, (unsigned long long)c->line);
		} else {
			while (p < end && *p != c->delim && *p != '\r')
				p++;
			w = p;
		}
		/* as a line end before LF only: else old Mac line ends made one
		 * record, and a doubled CR a label 'pos\r' beside 'pos' */
		if (p < end && *p == '\r')
			die("%s: line %llu: a CR outside quotes that ends no line (line ends are LF or CR LF)", c->name,
			    (unsigned long long)c->line);
		add_field(c, &nf, start, (size_t)(w - start));
		if (p >= end)
			break;
		p++;
	}
	for (int i = 0; i < nf; i++)
		c->f[i].s[c->f[i].n] = 0;
	return nf;
}

/* Parses one record, or returns 0 when it is not complete in the buffer. */
static int parse(struct csv *c)
{
	int complete;
	size_t e = record_end(c, &complete);
	if (!complete)
		return 0;
	int nf = split(c, e);
	c->rec_line = c->line;
	c->line += c->lines + (e < c->end);
	c->st = START, c->scanned = 0, c->lines = 0;
	size_t next = e < c->end ? e + 1 : e;
	c->consumed += next - c->pos;
	c->pos = next;
	return nf;
}

int csv_next(struct csv *c, struct csv_field **fields)
{
	if (!c->begun) {   /* here, not in csv_open: a reader that dies there is lost to csv_close */
		c->begun = 1;
		skip_bom(c);
	}
	for (;;) {
		while (c->pos < c->end && (c->buf[c->pos] == '\n' || c->buf[c->pos] == '\r')) {
			c->line += c->buf[c->pos] == '\n';
			c->pos++;
			c->consumed++;
		}
		if (c->pos < c->end) {
			int nf = parse(c);
			if (nf > 0) {
				*fields = c->f;
				return nf;
			}
		}
		if (!refill(c) && c->pos >= c->end)
			return -1;
	}
}

uint64_t csv_line(const struct csv *c) { return c->rec_line; }
uint64_t csv_offset(const struct csv *c) { return c->consumed; }
const char *csv_name(const struct csv *c) { return c->name; }

void csv_close(struct csv *c)
{
	if (c->fd != STDIN_FILENO)
		close(c->fd);
	free(c->buf);
	free(c->f);
	free(c->name);
	free(c);
}
