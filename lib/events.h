/* The run's event log: an append-only msgpack stream of maps, each written
 * with one write() so a reader never sees half an event. */
#ifndef TS_EVENTS_H
#define TS_EVENTS_H
#include <jansson.h>
#include <stdint.h>

struct events;
/* Opens path for appending, first cutting it to size bytes when size is not
 * -1 (a resumed run drops events written after its checkpoint). */
struct events *events_open(const char *path, int64_t size);
/* Appends {"event": type, "time": unix seconds, ...fields}; steals fields. */
void events_add(struct events *e, const char *type, json_t *fields);
/* Bytes written so far (what a checkpoint records). */
int64_t events_size(const struct events *e);
void events_close(struct events *e);
#endif
