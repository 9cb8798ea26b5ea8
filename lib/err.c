#include "err.h"
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ts_prog = "topspin";

#define MAX_HOOKS 16
static struct { void (*fn)(void *); void *arg; } hooks[MAX_HOOKS];
static int nhooks;

void on_die(void (*fn)(void *), void *arg)
{
	if (nhooks == MAX_HOOKS)
		abort();
	hooks[nhooks].fn = fn;
	hooks[nhooks++].arg = arg;
}

void on_die_remove(void (*fn)(void *), void *arg)
{
	for (int i = 0; i < nhooks; i++)
		if (hooks[i].fn == fn && hooks[i].arg == arg) {
			hooks[i] = hooks[--nhooks];
			return;
		}
}

static void vmsg(const char *fmt, va_list ap, int err)
{
	char buf[2048];
	vsnprintf(buf, sizeof buf, fmt, ap);
	size_t n = strlen(buf);
	if (n && buf[n - 1] == ':')
		fprintf(stderr, "%s: %s %s\n", ts_prog, buf, strerror(err));
	else
		fprintf(stderr, "%s: %s\n", ts_prog, buf);
}

static void run_hooks(void)
{
	while (nhooks > 0) {
		nhooks--;
		hooks[nhooks].fn(hooks[nhooks].arg);
	}
}

static _Noreturn void finish(int code)
{
	run_hooks();
	exit(code);
}

/* Cleans up as die() does, then lets the signal end the process as usual. */
static void on_signal(int sig)
{
	run_hooks();
	signal(sig, SIG_DFL);
	raise(sig);
}

void cleanup_on_signals(void)
{
	int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		signal(sigs[i], on_signal);
}

void die(const char *fmt, ...)
{
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap, err);
	va_end(ap);
	finish(EXIT_BAD_INPUT);
}

void die_usage(const char *fmt, ...)
{
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap, err);
	va_end(ap);
	fprintf(stderr, "Try '%s --help' for more information.\n", ts_prog);
	finish(EXIT_USAGE);
}

void warnx(const char *fmt, ...)
{
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap, err);
	va_end(ap);
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

void grow(void *pp, size_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return;
	size_t c = *cap ? *cap : 16;
	while (c < need)
		c *= 2;
	*(void **)pp = xrealloc(*(void **)pp, c * sz);
	*cap = c;
}
