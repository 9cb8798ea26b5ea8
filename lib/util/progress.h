/* A progress line on stderr, drawn only when stderr is a terminal. */
#ifndef TS_PROGRESS_H
#define TS_PROGRESS_H
#include <stdint.h>

enum progress_unit { PROGRESS_BYTES, PROGRESS_STEPS };

struct progress;
/* NULL (and every call a no-op) when stderr is not a terminal. total 0: unknown. */
struct progress *progress_new(const char *what, uint64_t total, enum progress_unit unit);
/* Redraws at most 10 times a second; note (may be NULL) ends the line. */
void progress_update(struct progress *p, uint64_t done, const char *note);
/* Clears the line so other output can be written; the next update redraws. */
void progress_clear(struct progress *p);
void progress_done(struct progress *p);   /* clears the line; frees p */
#endif
