/* A run as ts-top watches it (lib/run/runview.c over rec_tail_read): byte 0
 * picks where the events are cut, byte 1 the step to read up to (0: all);
 * then RUN/config, and after a NUL RUN/events.msgpack. The events read in
 * two appends, the first cut anywhere (a record being written), must show
 * what they show read whole, and every view must give its JSON
 * (ts-top --json). */
#include "fuzz.h"
#include "run/runview.h"
#include <math.h>
#include <sys/stat.h>

struct ctx {
	const uint8_t *events;
	size_t nevents, cut;
	long until;
	char *dir, *path;
	struct run_view *whole, *parts;
};

static void write_events(const struct ctx *c, size_t from, size_t to)
{
	int fd = open(c->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	write_all(fd, c->events + from, to - from, c->path);
	close(fd);
}

static int same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* What ts-top shows of a and b is the same. */
static int same_view(const struct run_view *a, const struct run_view *b)
{
	return !strcmp(a->error, b->error) && a->step == b->step && a->total_steps == b->total_steps &&
	       a->epoch == b->epoch && a->params == b->params && !strcmp(a->device, b->device) &&
	       !strcmp(a->last_event, b->last_event) && same_num(a->loss, b->loss) && same_num(a->smooth, b->smooth) &&
	       same_num(a->eval_value, b->eval_value) && same_num(a->best_value, b->best_value) &&
	       a->best_step == b->best_step && a->nhist == b->nhist && a->nsteps == b->nsteps &&
	       a->nevals == b->nevals && a->nckpts == b->nckpts && a->frozen == b->frozen;
}

static void check_json(const struct run_view *v)
{
	json_t *j = run_view_json(v);
	char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) : NULL;
	if (!text)
		abort();
	free(text);
	json_decref(j);
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->whole = run_view_open(c->dir);
	c->parts = run_view_open(c->dir);
	c->whole->until = c->parts->until = c->until;
	write_events(c, 0, c->cut);
	run_view_update(c->parts);
	write_events(c, c->cut, c->nevents);
	run_view_update(c->parts);
	run_view_update(c->whole);
	if (!same_view(c->whole, c->parts))
		abort();
	double pm;
	run_view_left(c->whole, &pm);
	check_json(c->whole);
}

static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->whole)
		run_view_free(c->whole);
	if (c->parts)
		run_view_free(c->parts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const uint8_t *text = data + 2, *nul = memchr(text, 0, size - 2);
	struct ctx c = {.until = data[1], .dir = path_join(fuzz_tmpdir(), "run")};
	mkdir(c.dir, 0700);
	char *config = path_join(c.dir, "config");
	int fd = open(config, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	write_all(fd, text, nul ? (size_t)(nul - text) : size - 2, config);
	close(fd);
	c.events = nul ? nul + 1 : data + size;
	c.nevents = (size_t)(data + size - c.events);
	c.cut = c.nevents * data[0] / 255;
	c.path = path_join(c.dir, "events.msgpack");
	unlink(c.path);
	fuzz_survive(run, release, &c);
	free(config), free(c.path), free(c.dir);
	return 0;
}
