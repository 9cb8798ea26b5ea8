/* What every fuzz target shares. lib/ dies on bad input, which is right for a
 * command but would end the fuzzer: here die() jumps back to the target. lib/
 * reads files by name, so the input is written to a file in a private dir. */
#ifndef TS_FUZZ_H
#define TS_FUZZ_H
#include "util/afile.h"
#include "util/err.h"
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Leaks are not checked: see fuzz_survive. A size read from the input may ask
 * for more memory than there is; a command then dies "out of memory" when
 * malloc fails, and so does the target, rather than ASan aborting. */
const char *__asan_default_options(void)
{
	return "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=2048";
}

static jmp_buf fuzz_jb;
static char fuzz_dir[40];

static inline void fuzz_escape(void) { longjmp(fuzz_jb, 1); }

static inline void fuzz_abort(void) { abort(); }

/* Where input was already accepted (writing it back, reading back what was
 * written), a die() is a bug: on 1 it aborts, for the fuzzer to report. */
static inline void fuzz_die_is_bug(int on)
{
	die_hook(on ? fuzz_abort : fuzz_escape);
}

static inline void fuzz_remove_dir(void) { remove_tree(fuzz_dir); }

/* The private dir: made on first use, removed at exit. */
static inline const char *fuzz_tmpdir(void)
{
	if (!fuzz_dir[0]) {
		strcpy(fuzz_dir, "/dev/shm/ts-fuzz-XXXXXX");   /* tmpfs: fsync costs nothing */
		if (!mkdtemp(fuzz_dir))
			abort();
		atexit(fuzz_remove_dir);
	}
	return fuzz_dir;
}

/* Writes size bytes to name in the private dir; returns its path (free it). */
static inline char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
	char *path = path_join(fuzz_tmpdir(), name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	write_all(fd, data, size, path);
	close(fd);
	return path;
}

/* Whether s is in the private dir (never, before there is one: a target
 * that reads no file has none). */
static inline int in_fuzz_dir(const char *s) { return fuzz_dir[0] && !strncmp(s, fuzz_dir, strlen(fuzz_dir)); }

/* A function that dies drops what it had opened; a real command exits and the
 * kernel takes it back, but over millions of inputs the fuzzer would run out
 * of descriptors and mappings. Takes back those of the private dir. */
static inline void fuzz_sweep(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char link[64], target[256];
	while (d && (e = readdir(d))) {
		snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(link, target, sizeof target - 1);
		if (n > 0 && (target[n] = 0, in_fuzz_dir(target)))
			close(atoi(e->d_name));
	}
	if (d)
		closedir(d);
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long lo, hi;
	int at;
	while (maps && fgets(line, sizeof line, maps))
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) == 2 && in_fuzz_dir(line + at))
			munmap((void *)lo, hi - lo);
	if (maps)
		fclose(maps);
}

/* Runs fn(ctx); returns 1 if it died, else 0. Either way release(ctx) then
 * frees what fn left in ctx, so that nothing carries over to the next input.
 * (What a dying lib/ function had allocated itself is lost: run with
 * -detect_leaks=0.) */
static inline int fuzz_survive(void (*fn)(void *), void (*release)(void *), void *ctx)
{
	if (setjmp(fuzz_jb)) {
		release(ctx);
		fuzz_sweep();
		return 1;
	}
	die_hook(fuzz_escape);
	fn(ctx);
	die_hook(NULL);
	release(ctx);
	return 0;
}
#endif
