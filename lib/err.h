/* Errors and logging: one line on stderr, "ts-xxx: what failed: why".
 * A format ending in ':' gets the errno text appended. */
#ifndef TS_ERR_H
#define TS_ERR_H
#include <stddef.h>

extern const char *ts_prog;   /* set by each command's main */

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2 };

/* die: exit 1 after running cleanup hooks; die_usage: exit 2 */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Cleanup run by die() before exit, e.g. removing a half-written temp file. */
void on_die(void (*fn)(void *), void *arg);
void on_die_remove(void (*fn)(void *), void *arg);
/* SIGINT, SIGTERM and SIGHUP run the cleanup hooks before ending the process. */
void cleanup_on_signals(void);

/* Allocation that never returns NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Grow *p (holding *cap elements of size sz) to hold at least need elements. */
void grow(void *p, size_t *cap, size_t need, size_t sz);
#endif
