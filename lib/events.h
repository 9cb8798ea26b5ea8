/* The run's event log: an append-only msgpack stream of maps, each written
 * with one write() so a reader never sees half an event. */
#ifndef TS_EVENTS_H
#define TS_EVENTS_H
#include <jansson.h>
#include <stdint.h>

struct events;
/* Opens path for appending. A resumed run appends after a "resume" event;
 * after a crash, steps past the checkpoint appear again and the later count. */
struct events *events_open(const char *path);
/* Appends {"event": type, "time": unix seconds, ...fields}; steals fields. */
void events_add(struct events *e, const char *type, json_t *fields);
void events_close(struct events *e);
#endif
