#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *ts_prog = "topspin";

static void (*hook)(void);
static void (*teller)(const char *message);
enum { MAX_EXIT_HOOKS = 8 };
static void (*_Atomic exit_hooks[MAX_EXIT_HOOKS])(void);

void die_on_exit(void (*fn)(void))
{
	for (int i = 0; i < MAX_EXIT_HOOKS; i++) {
		void (*none)(void) = NULL;
		if (atomic_load(&exit_hooks[i]) == fn || atomic_compare_exchange_strong(&exit_hooks[i], &none, fn))
			return;
	}
}

void die_hook(void (*fn)(void)) { hook = fn; }
void die_tell(void (*fn)(const char *message)) { teller = fn; }

void escape_controls(const char *s, char *out, size_t n)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < n; p++)
		if (*p == '\n' || *p == '\t')
			out[o++] = '\\', out[o++] = *p == '\n' ? 'n' : 't';
		else if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(out + o, n - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	out[o] = 0;
}

/* A message's room: a few paths of up to PATH_MAX bytes and the words
 * around them, so that a deep path does not cut off the why after it. */
enum { MSG_MAX = 4 * PATH_MAX };

/* One line: "prog: message[: errno text][hint]"; the message (without prog
 * and hint) left in line. On a terminal, the line a progress meter may have
 * left unfinished is cleared first. */
static void vmsg(const char *fmt, va_list ap, int err, const char *hint, char line[MSG_MAX])
{
	char raw[MSG_MAX];
	vsnprintf(raw, sizeof raw, fmt, ap);
	size_t n = strlen(raw);
	if (n && raw[n - 1] == ':')
		snprintf(raw + n, sizeof raw - n, " %s", strerror(err));
	escape_controls(raw, line, MSG_MAX);
	fprintf(stderr, "%s%s: %s%s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", ts_prog, line, hint);
}

/* die() may run on any thread: a failed allocation on a worker, a write error
 * on ts-tokenize's writer thread. The first call wins: it prints its line,
 * removes the temp paths and exits. A later call from another thread waits
 * for that exit, so the process prints one error and exit() runs once; one
 * from the winning thread itself (a failure while exiting) ends at once. */
static atomic_flag ending = ATOMIC_FLAG_INIT;
static atomic_int ender;

static void begin_ending(int code)
{
	if (!atomic_flag_test_and_set(&ending)) {
		atomic_store(&ender, (int)gettid());
		return;
	}
	if (atomic_load(&ender) == (int)gettid())
		_exit(code);
	for (;;)
		pause();
}

/* Tells line to the teller, runs the exit hooks and exits. */
static _Noreturn void finish(int code, const char *line)
{
	if (teller)
		teller(line);
	for (int i = 0; i < MAX_EXIT_HOOKS; i++) {
		void (*fn)(void) = atomic_load(&exit_hooks[i]);
		if (fn)
			fn();
	}
	exit(code);
}

void die(const char *fmt, ...)
{
	int err = errno;
	if (hook)
		hook();
	begin_ending(EXIT_BAD_INPUT);
	va_list ap;
	va_start(ap, fmt);
	char line[MSG_MAX];
	vmsg(fmt, ap, err, "", line);
	va_end(ap);
	finish(EXIT_BAD_INPUT, line);
}

void die_usage(const char *fmt, ...)
{
	int err = errno;
	if (hook)
		hook();
	begin_ending(EXIT_USAGE);
	va_list ap;
	va_start(ap, fmt);
	char hint[128];
	snprintf(hint, sizeof hint, "; see '%s --help'", ts_prog);
	char line[MSG_MAX];
	vmsg(fmt, ap, err, hint, line);
	va_end(ap);
	finish(EXIT_USAGE, line);
}

void warnx(const char *fmt, ...)
{
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	char line[MSG_MAX];
	vmsg(fmt, ap, err, "", line);
	va_end(ap);
}

void open_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd ? O_RDONLY : O_WRONLY) != fd)
			die("cannot open /dev/null in place of descriptor %d:", fd);
}

void close_stdout(void)
{
	if (fflush(stdout) || ferror(stdout) || fclose(stdout))
		die("write standard output:");
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory allocating %zu bytes", n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die("out of memory allocating %zu bytes", n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory allocating %zu bytes", n);
	return p;
}

char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die("out of memory");
	return d;
}

size_t grown(size_t cap, size_t need)
{
	size_t c = cap ? cap : 16;
	while (c < need)
		c *= 2;
	return c;
}

void grow(void *pp, size_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return;
	*cap = grown(*cap, need);
	*(void **)pp = xrealloc(*(void **)pp, *cap * sz);
}
