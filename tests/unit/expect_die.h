/* Checks that code meant to refuse bad input does: runs it in a child process
 * and passes when the child exits 1 with one stderr line containing a pattern. */
#ifndef TS_EXPECT_DIE_H
#define TS_EXPECT_DIE_H
#include "check.h"
#include "util/err.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(arg) in a child; returns its exit status (or 128+signal) and its
 * stderr in err (NUL-terminated, cut to size). */
static int run_child(void (*fn)(const void *), const void *arg, char *err, size_t size)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* the parent's OpenMP threads are gone here: a parallel region that
		 * waited on them would hang, so the child runs on one thread */
		omp_set_num_threads(1);
		dup2(fds[1], 2);
		close(fds[0]);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < size && (r = read(fds[0], err + n, size - 1 - n)) > 0)
		n += (size_t)r;
	err[n] = 0;
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs fn(arg) in a child and checks that it exits with code and one stderr
 * line containing pattern; the check's line shows the message, any inner
 * newline as "|". */
static inline void expect_exit(const char *what, void (*fn)(const void *), const void *arg,
			       const char *pattern, int code)
{
	char err[4096];
	int rc = run_child(fn, arg, err, sizeof err);
	size_t n = strlen(err);
	int one_line = n > 0 && err[n - 1] == '\n' && !memchr(err, '\n', n - 1);
	int found = strstr(err, pattern) != NULL;
	for (char *p; (p = strchr(err, '\n'));)
		*p = p[1] ? '|' : 0;
	CHECK(rc == code && one_line && found, "%s: exit %d: %s", what, rc, err);
}

/* die(): exit 1. */
static inline void expect_die(const char *what, void (*fn)(const void *), const void *arg,
			      const char *pattern)
{
	expect_exit(what, fn, arg, pattern, EXIT_BAD_INPUT);
}

/* die_usage(): exit 2. */
static inline void expect_usage(const char *what, void (*fn)(const void *), const void *arg,
				const char *pattern)
{
	expect_exit(what, fn, arg, pattern, EXIT_USAGE);
}
#endif
