/* The run's event log: an append-only msgpack stream of maps, each written
 * with one write() so a reader never sees half an event. */
#ifndef TS_EVENTS_H
#define TS_EVENTS_H
#include <jansson.h>
#include <stdint.h>

struct events;
/* Opens path for appending. A resumed run appends after a "resume" event;
 * after a crash, steps past the checkpoint appear again and the later count.
 * A last record torn by a crash mid-append is cut off first. */
struct events *events_open(const char *path);
/* Appends {"event": type, "time": unix seconds, ...fields}; steals fields. */
void events_add(struct events *e, const char *type, json_t *fields);
/* Whether the last event in the log, old or new, is of this type. */
int events_last_is(const struct events *e, const char *type);
/* Makes the events so far durable (at a checkpoint, which they describe). */
void events_sync(struct events *e);
/* Makes the events so far durable and renames the log to path, so that a
 * log first written under a temp name appears with them all or not at all. */
void events_rename(struct events *e, const char *path);
void events_close(struct events *e);
#endif
