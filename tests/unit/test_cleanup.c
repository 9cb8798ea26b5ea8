/* Temp paths removed on the way out (cleanup.c), die() from several threads
 * at once, and a fatal signal while the process is blocked in read(). */
#include "check.h"
#include "expect_die.h"
#include "testfiles.h"
#include "util/cleanup.h"
#include "util/err.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void make_tree(const char *root)
{
	char p[512];
	mkdir(root, 0755);
	snprintf(p, sizeof p, "%s/a", root);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/a/b", root);
	mkdir(p, 0755);
	/* enough long names that a directory takes several getdents64 reads */
	for (int i = 0; i < 300; i++) {
		snprintf(p, sizeof p, "%s/a/b/a-rather-long-file-name-to-fill-the-buffer-%04d", root, i);
		write_file(p, "x", 1);
	}
	snprintf(p, sizeof p, "%s/top", root);
	write_file(p, "x", 1);
}

static void test_run(const char *dir)
{
	char tree[256], file[256], kept[256];
	snprintf(tree, sizeof tree, "%s/tree.tmp", dir);
	snprintf(file, sizeof file, "%s/out.tmp", dir);
	snprintf(kept, sizeof kept, "%s/kept.tmp", dir);
	make_tree(tree);
	write_file(file, "x", 1);
	write_file(kept, "x", 1);
	cleanup_add(tree);
	cleanup_add(file);
	cleanup_add(kept);
	cleanup_forget(kept);
	cleanup_run();
	CHECK(!exists(tree), "cleanup_run removes a registered tree of nested dirs and 300 files");
	CHECK(!exists(file), "cleanup_run removes a registered file");
	CHECK(exists(kept), "cleanup_run leaves a path that was forgotten");
	unlink(kept);
}

static void *die_now(void *arg)
{
	die("worker %d failed", (int)(intptr_t)arg);
}

/* Eight threads die at once: one message, exit 1, no crash or hang. */
static void die_on_threads(const void *arg)
{
	(void)arg;
	alarm(20);
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, die_now, (void *)(intptr_t)i);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
}

/* Registers path, then dies: die() removes it on the way out. */
static void die_with_temp(const void *path)
{
	write_file(path, "x", 1);
	cleanup_add(path);
	die("failed with a temp file");
}

/* Registers path, says so on fd, then blocks reading a pipe nobody writes. */
static void block_reading(const char *path, int ready_fd)
{
	cleanup_on_signals();
	write_file(path, "x", 1);
	cleanup_add(path);
	int fds[2];
	if (pipe(fds) < 0)
		_exit(3);
	char c = 1;
	if (write(ready_fd, &c, 1) != 1)
		_exit(3);
	alarm(20);
	(void)!read(fds[0], &c, 1);
	_exit(4);
}

/* The child's status within 10 s, or -1 (and the child killed). */
static int wait_bounded(pid_t pid)
{
	int status;
	for (int i = 0; i < 1000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static void test_signal(const char *dir, int sig, const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "%s/blocked-%s.tmp", dir, name);
	int ready[2];
	if (pipe(ready) < 0)
		die("pipe:");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		block_reading(path, ready[1]);
	}
	close(ready[1]);
	char c;
	int up = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	kill(pid, sig);
	int status = wait_bounded(pid);
	CHECK(up && status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == sig,
	      "%s ends a process blocked in read() by that signal (status %#x)", name, status);
	CHECK(!exists(path), "%s removes the registered temp file", name);
	unlink(path);
}

int main(void)
{
	char dir[] = "/tmp/ts-cleanup.XXXXXX";
	if (!mkdtemp(dir))
		die("mkdtemp:");
	test_run(dir);
	expect_die("die() on eight threads at once prints one line", die_on_threads, NULL, "failed");
	char temp[64];
	snprintf(temp, sizeof temp, "%s/temp", dir);
	expect_die("die() with a registered temp file", die_with_temp, temp, "failed with a temp file");
	CHECK(!exists(temp), "die() removes the registered temp file");
	test_signal(dir, SIGTERM, "SIGTERM");
	test_signal(dir, SIGINT, "SIGINT");
	test_signal(dir, SIGHUP, "SIGHUP");
	rmdir(dir);
	CHECK_DONE();
}
