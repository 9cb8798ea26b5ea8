/* A run's plots, drawn from its events (RUN/events.msgpack) into
 * RUN/plots: loss.svg (the training loss, raw and smoothed, and the valid
 * loss), metric.svg (the chosen metric on valid and test) and lr.svg (the
 * learning rate). Steps that a resume ran again count as they ran last. */
#ifndef TS_RUNPLOTS_H
#define TS_RUNPLOTS_H

void run_plots(const char *run, const char *metric);
/* One plot at path of the valid metric of n runs over their steps, each
 * named as names[] says (ts-sweep --show --plot). */
void runs_plot(const char *path, const char *metric, char *const *runs, char *const *names, int n);
#endif
