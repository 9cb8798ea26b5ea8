#include "adir.h"
#include "afile.h"
#include "err.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct adir {
	char *path, *tmp;
	int replace_old;   /* DIR holds an old dir of the same kind */
};

/* Removes the files in dir, then dir; -1 (errno set) if something stays. */
static int remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	return rmdir(dir);
}

static void remove_tmp(void *arg) { remove_dir(((struct adir *)arg)->tmp); }

static int is_empty_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		die("cannot open %s:", path);
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

/* Whether DIR must be replaced (1) or is absent or empty (0); dies if it may not be touched. */
static int check_target(const char *path, int replace, const char *marker)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		die("cannot stat %s:", path);
	}
	if (!S_ISDIR(st.st_mode))
		die("%s exists and is not a directory", path);
	if (is_empty_dir(path))
		return 0;
	if (!replace)
		die("%s exists and is not empty (--force replaces it)", path);
	size_t n = strlen(path) + strlen(marker) + 2;
	char *m = xmalloc(n);
	snprintf(m, n, "%s/%s", path, marker);
	int same_kind = access(m, F_OK) == 0;
	free(m);
	if (!same_kind)
		die("%s is not empty and holds no %s; not replacing it, even with --force", path, marker);
	return 1;
}

struct adir *adir_begin(const char *dir, int replace, const char *marker)
{
	struct adir *d = xcalloc(1, sizeof *d);
	d->path = xstrdup(dir);
	for (size_t n = strlen(d->path); n > 1 && d->path[n - 1] == '/'; n--)
		d->path[n - 1] = 0;
	d->replace_old = check_target(d->path, replace, marker);
	size_t n = strlen(d->path) + 32;
	d->tmp = xmalloc(n);
	snprintf(d->tmp, n, "%s.tmp.%ld", d->path, (long)getpid());
	make_parents(d->tmp);
	if (mkdir(d->tmp, 0755) < 0)
		die("cannot create %s:", d->tmp);
	on_die(remove_tmp, d);
	return d;
}

const char *adir_tmp(const struct adir *d) { return d->tmp; }

void adir_commit(struct adir *d)
{
	size_t n = strlen(d->path) + 32;
	char *old = xmalloc(n);
	snprintf(old, n, "%s.old.%ld", d->path, (long)getpid());
	if (d->replace_old && rename(d->path, old) < 0)
		die("cannot move the old %s aside:", d->path);
	if (rename(d->tmp, d->path) < 0) {
		int e = errno;
		if (d->replace_old)
			rename(old, d->path);
		errno = e;
		die("cannot rename %s to %s:", d->tmp, d->path);
	}
	on_die_remove(remove_tmp, d);
	char *parent = xstrdup(d->path);
	fsync_dir(dirname(parent));
	if (d->replace_old && remove_dir(old) < 0)
		warnx("cannot remove the old data in %s:", old);
	free(parent);
	free(old);
	free(d->tmp);
	free(d->path);
	free(d);
}
