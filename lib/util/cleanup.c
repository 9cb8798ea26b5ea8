/* Why signals clean up in the handler instead of setting a flag for the main
 * loops: a command can be blocked in read() on a pipe, sorting, or waiting on
 * worker threads (and any thread may take the signal), so no loop would see a
 * flag promptly. The handler therefore does only async-signal-safe work:
 * removing the registered paths with plain system calls from fixed slots
 * filled in advance, then ending the process by the same signal. ts-train
 * replaces this for SIGINT and SIGTERM with a flag its training loop polls,
 * since it stops with a checkpoint, and that loop never blocks on input. */
#include "util/cleanup.h"
#include "util/err.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

enum { MAX_PATHS = 32, MAX_DEPTH = 16 };
enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };

/* A slot is READY only once its path is complete, so a handler that runs
 * between two statements of cleanup_add never reads half a path. */
static struct {
	atomic_int state;
	char path[PATH_MAX];
} slots[MAX_PATHS];

void cleanup_add(const char *path)
{
	die_on_exit(cleanup_run);
	if (strlen(path) >= PATH_MAX)
		die("%s: path too long for a temporary file", path);
	for (int i = 0; i < MAX_PATHS; i++) {
		int expect = SLOT_FREE;
		if (atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_FILLING)) {
			strcpy(slots[i].path, path);
			atomic_store(&slots[i].state, SLOT_READY);
			return;
		}
	}
	die("%s: more than %d temporary paths at once", path, MAX_PATHS);
}

void cleanup_forget(const char *path)
{
	for (int i = 0; i < MAX_PATHS; i++)
		if (atomic_load(&slots[i].state) == SLOT_READY && !strcmp(slots[i].path, path)) {
			atomic_store(&slots[i].state, SLOT_FREE);
			return;
		}
}

/* Removes name in dirfd, a file or a whole tree, by openat, getdents64,
 * unlinkat and close alone: nftw and opendir allocate, so a handler may not
 * call them. Entries that are not removed are each read once, so reading on
 * while removing visits them all. */
static void remove_at(int dirfd, const char *name, int depth)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno != EISDIR || depth == MAX_DEPTH)
		return;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n;
	while ((n = getdents64(fd, buf, sizeof buf)) > 0)
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			off += e->d_reclen;
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				remove_at(fd, e->d_name, depth + 1);
		}
	close(fd);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

void cleanup_run(void)
{
	int saved = errno;
	for (int i = 0; i < MAX_PATHS; i++)
		if (atomic_load(&slots[i].state) == SLOT_READY)
			remove_at(AT_FDCWD, slots[i].path, 0);
	errno = saved;
}

static void on_fatal_signal(int sig)
{
	cleanup_run();
	signal(sig, SIG_DFL);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
	_exit(128 + sig);   /* not reached: the default action ends the process */
}

void cleanup_on_signals(void)
{
	int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		signal(sigs[i], on_fatal_signal);
}
