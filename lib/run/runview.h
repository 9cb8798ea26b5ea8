/* What ts-top shows of a run: its events (RUN/events.msgpack) read as they
 * are appended, like tail -f, a record cut short read again from its start
 * (still being written, or torn by a crash and written over by the resumed
 * trainer); its config; its state; and the prediction of its finish. */
#ifndef TS_RUNVIEW_H
#define TS_RUNVIEW_H
#include <jansson.h>
#include <msgpack.h>
#include "format/rec.h"

enum { HISTORY = 64 };

struct run_view {
	char *dir;
	/* from the config */
	long eval_every, save_every;
	char metric[16];
	/* from the events */
	double start_time, last_time;   /* unix seconds: the (re)start's, the newest event's */
	long step, total_steps, steps_per_epoch, epoch, params;
	int processes;
	char device[32], last_event[16];
	double loss, smooth, lr, grad_norm, step_ms, tokens_per_s, samples_per_s;   /* NAN: not known yet */
	double samples;                    /* the run's so far, at the last step */
	double loss_hist[HISTORY], speed_hist[HISTORY];
	int nhist;
	double eval_value, best_value;     /* NAN: none yet */
	long best_step;
	double eval_s, ckpt_s;             /* time the evaluations and checkpoints took */
	int nevals, nckpts;
	double recent[32];                 /* the last steps' times, seconds, evaluations and checkpoints apart */
	long nsteps;                       /* steps timed since the (re)start */
	double elapsed_s;                  /* training time before this (re)start */
	int has_comm;
	double comm_ms, exposed_ms, busbw_gbs;
	int slowest;
	char job_state[16];                /* a sweep job's, as its sweep recorded it ("": not a job) */
	long until;                        /* > 0: read no further than step until's events */
	int frozen;
	struct rec_tail tail;              /* where the reading is */
	char error[1024];                  /* why the events cannot be read ("": they can) */
	double last_step_time;
};

/* Opens dir's view (reads nothing yet). */
struct run_view *run_view_open(const char *dir);
void run_view_free(struct run_view *v);
/* Reads what was appended since the last call (nothing when the run dir
 * has no events yet; all again, the view forgotten, when the run dir was
 * deleted or made again): 0, or -1 when the events cannot be read (a record
 * that is not msgpack or not a map, a failed read), error saying why. */
int run_view_update(struct run_view *v);
/* running (its trainer holds the lock), done, stopped (on request or early),
 * failed (its trainer ended on an error; or a sweep's job, as its sweep
 * says, as are pruned and skipped), stale (no trainer holds it, but it
 * neither finished nor stopped: the process is gone), new (no events yet),
 * or unreadable (the last update found its events unreadable). */
const char *run_view_state(const struct run_view *v);
/* The moment the view shows: the time of its last event for a run seen as
 * it stood after an earlier step (until), else now. */
double run_view_now(const struct run_view *v);
/* Seconds left, with *plus_minus its uncertainty: the steps left at the
 * recent step time, and the evaluations and checkpoints left at the time
 * those so far took. Negative when it cannot tell yet. */
double run_view_left(const struct run_view *v, double *plus_minus);
/* The value of metric (accuracy, macro-f1, mcc, loss, ppl) in an
 * evaluation event; NAN when it has none. */
double event_metric(const msgpack_object *eval, const char *metric);
/* Everything shown, as JSON (ts-top --json). */
json_t *run_view_json(const struct run_view *v);
#endif
