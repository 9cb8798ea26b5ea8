/* ts-tokenize's readers (lib/data/tokinput.c over lib/data/csv.c and lib/data/textin.c):
 * the first byte picks the format and the columns asked for, the rest is the
 * file. Every field of every record is read through, for ASan to check. */
#include "data/csv.h"
#include "data/tokinput.h"
#include "fuzz.h"

struct ctx {
	char *path;
	enum in_format fmt;
	unsigned pick;
	struct csv *head;
	struct in_cols cols;
	struct tokinput *in;
	unsigned sum;
};

/* The i-th name of the header, or name where the header is shorter. */
static const char *column(struct csv_field *f, int nf, int i, const char *name)
{
	return i < nf ? f[i].s : name;
}

/* A CSV's columns are asked for by the names its header gives them, so that
 * most inputs get past the header; a short header still lacks some. The
 * header is read here first because a reader that dies inside tokinput_open
 * is lost with its 1 MiB buffer, and those would fill the memory. */
static void pick_columns(struct ctx *c)
{
	struct csv_field *f = NULL;
	int nf = 0;
	if (c->fmt == FMT_CSV || c->fmt == FMT_TSV) {
		c->head = csv_open(c->path, c->fmt == FMT_CSV ? ',' : '\t');
		nf = csv_next(c->head, &f);
	}
	c->cols = (struct in_cols){column(f, nf, 0, "text"), c->pick & 4 ? column(f, nf, 1, "pair") : NULL,
				   c->pick & 8 ? column(f, nf, 2, "label") : NULL,
				   c->pick & 16 ? column(f, nf, 3, "id") : NULL};
}

static void touch(struct ctx *c, const char *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		c->sum += (unsigned char)s[i];
}

static void run(void *arg)
{
	struct ctx *c = arg;
	pick_columns(c);
	c->in = tokinput_open(c->path, c->fmt, &c->cols);
	struct in_record r;
	while (tokinput_next(c->in, &r)) {
		touch(c, r.text, r.text_n + 1);   /* + 1: the NUL the field promises */
		touch(c, r.pair, r.pair_n);
		touch(c, r.id, r.id_n);
		touch(c, r.label, r.label_n);
		for (size_t i = 0; i < r.label_list_n; i++)   /* label_list_n counts either list */
			if (r.label_kind == IN_LABEL_LIST)
				c->sum += (unsigned)r.label_list[i];
			else
				touch(c, r.label_names[i].s, r.label_names[i].n);
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->in)
		tokinput_close(c->in);
	if (c->head)
		csv_close(c->head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct ctx c = {.path = fuzz_file("in.txt", data + 1, size - 1), .fmt = (enum in_format)(data[0] & 3),
			.pick = data[0]};
	fuzz_survive(run, release, &c);
	free(c.path);
	return 0;
}
