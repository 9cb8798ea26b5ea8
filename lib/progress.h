/* A progress line on stderr, drawn only when stderr is a terminal. */
#ifndef TS_PROGRESS_H
#define TS_PROGRESS_H
#include <stdint.h>

struct progress;
/* NULL (and every call a no-op) when stderr is not a terminal. total 0: unknown. */
struct progress *progress_new(const char *what, uint64_t total);
void progress_update(struct progress *p, uint64_t done);   /* redraws at most 10 times a second */
void progress_done(struct progress *p);                     /* clears the line; frees p */
#endif
