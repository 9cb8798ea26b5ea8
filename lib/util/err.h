/* Errors and logging: one line on stderr, "ts-xxx: what failed: why".
 * A format ending in ':' gets the errno text appended. */
#ifndef TS_ERR_H
#define TS_ERR_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {    /* the CUDA kernels die the same way */
#endif

extern const char *ts_prog;   /* set by each command's main */

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2 };

/* die: exit 1 after the exit hooks (die_on_exit: cleanup.h's removal of
 * temp paths); die_usage: exit 2, the line ending with a pointer to --help.
 * Either may run on any thread; the first call ends the process. */
__attribute__((noreturn)) void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A function die() and die_usage() call first (NULL: none): the fuzz
 * targets jump back from it, so that bad input does not end the fuzzer. */
void die_hook(void (*fn)(void));
/* Adds fn to the functions die() and die_usage() call, in the order added,
 * just before the process exits (at most 8; each once, however often added). */
void die_on_exit(void (*fn)(void));
/* A function die() and die_usage() give their message to just before the
 * process exits (NULL: none): a process of a launch tells the others why. */
void die_tell(void (*fn)(const char *message));

/* s with its control characters (a newline or an escape in a name from the
 * input) written as \n, \t or \xHH, so that a message or a table row stays
 * one line and sends the terminal nothing, in out of n bytes (cut to fit). */
void escape_controls(const char *s, char *out, size_t n);

/* Opens a standard descriptor the caller closed (cmd >&-) on /dev/null, the
 * wrong way round, so that using it fails (EBADF), instead of the next file
 * opened taking its number and getting the output or the messages. */
void open_std_fds(void);
/* Flushes and closes standard output; dies if a write to it failed, so a
 * full disk is an error, not silent truncation. Every command calls it last. */
void close_stdout(void);

/* Allocation that never returns NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Grow *p (holding *cap elements of size sz) to hold at least need elements. */
void grow(void *p, size_t *cap, size_t need, size_t sz);
/* The capacity grow gives for need elements, from cap (need > cap). */
size_t grown(size_t cap, size_t need);
#ifdef __cplusplus
}
#endif
#endif
