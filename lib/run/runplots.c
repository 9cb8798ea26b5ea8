#include "run/runplots.h"
#include "format/plot.h"
#include "format/rec.h"
#include "run/runview.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

/* Points of one quantity over steps. */
struct curve {
	double *x, *y;
	size_t n, cap;
};

/* Adds (step, v); a step at or before the last one starts again from there,
 * as a resume after a crash runs those steps again. */
static void add(struct curve *c, double step, double v)
{
	while (c->n && c->x[c->n - 1] >= step)
		c->n--;
	size_t cap = c->cap;
	grow(&c->x, &cap, c->n + 1, sizeof *c->x);
	grow(&c->y, &c->cap, c->n + 1, sizeof *c->y);
	c->x[c->n] = step, c->y[c->n++] = v;
}


/* A run's curves, from its events. */
struct curves {
	struct curve loss, lr, valid_loss, valid, test;
};

static void read_curves(const char *run, const char *metric, struct curves *c)
{
	char *events = path_join(run, "events.msgpack");
	memset(c, 0, sizeof *c);
	if (access(events, R_OK)) {
		free(events);
		return;
	}
	struct rec_reader *r = rec_open(events);
	rec_allow_torn_tail(r);
	const msgpack_object *o;
	while ((o = rec_next(r))) {
		const msgpack_object *ev = mp_get(o, "event"), *split = mp_get(o, "split");
		double step = mp_number(mp_get(o, "step"));
		if (mp_str_is(ev, "step")) {
			add(&c->loss, step, mp_number(mp_get(o, "loss")));
			add(&c->lr, step, mp_number(mp_get(o, "lr")));
		} else if (mp_str_is(ev, "eval") && mp_str_is(split, "valid")) {
			add(&c->valid_loss, step, mp_number(mp_get(o, "loss")));
			add(&c->valid, step, event_metric(o, metric));
		} else if (mp_str_is(ev, "eval") && mp_str_is(split, "test")) {
			add(&c->test, step, event_metric(o, metric));
		}
	}
	rec_close(r);
	free(events);
}

static void free_curves(struct curves *c)
{
	struct curve *all[] = {&c->loss, &c->lr, &c->valid_loss, &c->valid, &c->test};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		free(all[i]->x), free(all[i]->y);
}

void run_plots(const char *run, const char *metric)
{
	char *dir = path_join(run, "plots");
	struct curves c;
	read_curves(run, metric, &c);
	struct curve loss = c.loss, lr = c.lr, valid_loss = c.valid_loss, valid = c.valid, test = c.test;
	/* smoothed as TensorBoard smooths: an average that forgets 0.9 a step, bias corrected */
	double *smooth = xcalloc(loss.n + 1, sizeof *smooth), acc = 0, w = 0;
	for (size_t i = 0; i < loss.n; i++) {
		if (isfinite(loss.y[i]))
			acc = 0.9 * acc + 0.1 * loss.y[i], w = 0.9 * w + 0.1;
		smooth[i] = w > 0 ? acc / w : NAN;
	}
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		die("cannot create %s:", dir);
	char *path = path_join(dir, "loss.svg"), title[64];
	struct series l[3] = {{"train loss", loss.x, loss.y, loss.n}, {"train loss, smoothed", loss.x, smooth, loss.n},
			      {"valid loss", valid_loss.x, valid_loss.y, valid_loss.n}};
	plot_svg(path, "loss", "step", l, 3);
	free(path);
	path = path_join(dir, "metric.svg");
	snprintf(title, sizeof title, "%s", metric);
	struct series m[2] = {{"valid", valid.x, valid.y, valid.n}, {"test", test.x, test.y, test.n}};
	plot_svg(path, title, "step", m, 2);
	free(path);
	path = path_join(dir, "lr.svg");
	struct series s[1] = {{"learning rate", lr.x, lr.y, lr.n}};
	plot_svg(path, "learning rate", "step", s, 1);
	free(path);
	free_curves(&c);
	free(smooth), free(dir);
}

void runs_plot(const char *path, const char *metric, char *const *runs, char *const *names, int n)
{
	struct curves *c = xcalloc((size_t)n + 1, sizeof *c);
	struct series *s = xcalloc((size_t)n + 1, sizeof *s);
	for (int i = 0; i < n; i++) {
		read_curves(runs[i], metric, &c[i]);
		s[i] = (struct series){names[i], c[i].valid.x, c[i].valid.y, c[i].valid.n};
	}
	char title[64];
	snprintf(title, sizeof title, "valid %s", metric);
	plot_svg(path, title, "step", s, n);
	for (int i = 0; i < n; i++)
		free_curves(&c[i]);
	free(c), free(s);
}
