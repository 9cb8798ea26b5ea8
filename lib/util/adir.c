#include "util/adir.h"
#include "util/afile.h"
#include "util/cleanup.h"
#include "util/err.h"
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

int dir_empty_but(const char *path, int (*spare)(const char *name))
{
	DIR *d = opendir(path);
	if (!d)
		die("cannot open %s:", path);
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (spare && spare(e->d_name));
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
	if (dir_empty_but(path, NULL))
		return 0;
	if (!replace)
		die("%s exists and is not empty (--force replaces it)", path);
	if (!marker)
		return 1;
	size_t n = strlen(path) + strlen(marker) + 2;
	char *m = xmalloc(n);
	snprintf(m, n, "%s/%s", path, marker);
	int same_kind = access(m, F_OK) == 0;
	free(m);
	if (!same_kind)
		die("%s is not empty and holds no %s; not replacing it, even with --force", path, marker);
	return 1;
}

/* Whether path ends in a name a dir can be renamed to: not ".", ".." or "/". */
static int has_own_name(const char *path)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	return *name && strcmp(name, ".") && strcmp(name, "..");
}

struct adir *adir_begin(const char *dir, int replace, const char *marker)
{
	struct adir *d = xcalloc(1, sizeof *d);
	char *given = xstrdup(dir);
	for (size_t n = strlen(given); n > 1 && given[n - 1] == '/'; n--)
		given[n - 1] = 0;
	d->path = resolve_links(given);   /* a rename over a link would replace the link */
	free(given);
	if (!has_own_name(d->path))
		die("cannot write a dir as %s: its name must not be ., .. or /", dir);
	d->replace_old = check_target(d->path, replace, marker);
	d->tmp = beside(d->path, "tmp");
	remove_tree(d->tmp);   /* a leftover of a crashed process with our pid */
	make_parents(d->tmp);
	cleanup_add(d->tmp);   /* first, so that no signal can come between */
	if (mkdir(d->tmp, 0777) < 0)
		die("cannot create %s:", d->tmp);
	return d;
}

const char *adir_tmp(const struct adir *d) { return d->tmp; }

/* Puts tmp in path's place: one exchange swaps them where the file system
 * can; elsewhere the old dir steps aside first. The old one is then removed. */
static void replace(const char *tmp, const char *path)
{
	if (!renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE)) {
		remove_tree(tmp);   /* now holds the old dir */
		return;
	}
	if (errno != EINVAL && errno != ENOSYS)
		die("cannot replace %s with %s:", path, tmp);
	char *old = beside(path, "old");
	if (rename(path, old) < 0)
		die("cannot move the old %s aside:", path);
	if (rename(tmp, path) < 0) {
		int e = errno;
		rename(old, path);
		errno = e;
		die("cannot rename %s to %s:", tmp, path);
	}
	remove_tree(old);
	free(old);
}

void adir_commit(struct adir *d)
{
	struct stat st;   /* the dir it replaces, empty or old, keeps its permissions (a private one stays so) */
	if (stat(d->path, &st) == 0 && chmod(d->tmp, st.st_mode & 07777) < 0)
		die("cannot set the permissions of %s:", d->tmp);
	if (d->replace_old)
		replace(d->tmp, d->path);
	else if (rename(d->tmp, d->path) < 0)
		die("cannot rename %s to %s:", d->tmp, d->path);
	cleanup_forget(d->tmp);
	char *parent = xstrdup(d->path);
	fsync_dir(dirname(parent));
	free(parent);
	free(d->tmp);
	free(d->path);
	free(d);
}

int dir_reachable(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return errno;
	if (!S_ISDIR(sb.st_mode))
		return ENOTDIR;
	return access(path, X_OK) < 0 ? errno : 0;
}
