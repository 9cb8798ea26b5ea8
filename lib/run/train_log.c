/* ts-train's records of a run as it trains: each process's log, process
 * 0's events (with their numbers for TensorBoard too), and a failed event
 * from a process that dies. */
#include "run/trainer.h"
#include "run/train.h"
#include "util/err.h"
#include <stdarg.h>
#include <string.h>
#include <time.h>

void trainer_log(struct trainer *t, const char *fmt, ...)
{
	time_t now_t = time(NULL);
	char stamp[32];
	strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime(&now_t));
	fprintf(t->log, "%s ", stamp);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(t->log, fmt, ap);
	va_end(ap);
	fputc('\n', t->log);
	if (fflush(t->log) || ferror(t->log))
		die("%s/log/rank-%d.log: cannot write:", t->c->run, t->comm->rank);
}

/* Process 0's events while it trains, so that a run that dies says so. */
static struct events *dying_events;

static void record_failure(void)
{
	struct events *ev = dying_events;
	dying_events = NULL;   /* once, and not again if this write fails */
	if (ev)
		events_add(ev, "failed", json_object());
}

void trainer_record_failures(struct events *ev)
{
	dying_events = ev;
	die_hook(ev ? record_failure : NULL);
}

/* An event for the log of events, its numbers for TensorBoard too. */
void trainer_event(struct trainer *t, const char *type, json_t *fields)
{
	if (!t->lead) {
		json_decref(fields);
		return;
	}
	int step = !strcmp(type, "step");
	if (step || !strcmp(type, "eval")) {
		const char *split = json_string_value(json_object_get(fields, "split"));
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		tb_fields(t->tb, step ? "train" : split ? split : "eval", fields, (double)now.tv_sec + now.tv_nsec * 1e-9);
		tb_flush(t->tb);
	}
	events_add(t->ev, type, fields);
}
