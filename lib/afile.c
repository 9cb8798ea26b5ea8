#include "afile.h"
#include "err.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void remove_tmp(void *arg)
{
	struct afile *f = arg;
	if (f->tmp)
		unlink(f->tmp);
}

struct afile *afile_open(const char *path)
{
	struct afile *f = xcalloc(1, sizeof *f);
	f->path = xstrdup(path);
	if (!strcmp(path, "-")) {
		f->fd = STDOUT_FILENO;
		return f;
	}
	size_t n = strlen(path) + 32;
	f->tmp = xmalloc(n);
	snprintf(f->tmp, n, "%s.tmp.%ld", path, (long)getpid());
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0)
		die("cannot create %s:", f->tmp);
	on_die(remove_tmp, f);
	return f;
}

void write_all(int fd, const void *buf, size_t n, const char *what)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die("write %s:", what);
		p += w;
		n -= (size_t)w;
	}
}

void afile_write(struct afile *f, const void *buf, size_t n)
{
	write_all(f->fd, buf, n, f->tmp ? f->path : "standard output");
}

void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("cannot open directory %s:", dir);
	fsync(fd);   /* some file systems refuse fsync on directories; not an error */
	close(fd);
}

static void afile_free(struct afile *f)
{
	free(f->path);
	free(f->tmp);
	free(f);
}

void afile_commit(struct afile *f)
{
	if (!f->tmp) {
		afile_free(f);
		return;
	}
	if (fsync(f->fd) < 0)
		die("cannot write %s:", f->path);
	if (close(f->fd) < 0)
		die("cannot write %s:", f->path);
	if (rename(f->tmp, f->path) < 0)
		die("cannot rename %s to %s:", f->tmp, f->path);
	on_die_remove(remove_tmp, f);
	char *d = xstrdup(f->path);
	fsync_dir(dirname(d));
	free(d);
	afile_free(f);
}

void afile_abort(struct afile *f)
{
	if (f->tmp) {
		close(f->fd);
		unlink(f->tmp);
		on_die_remove(remove_tmp, f);
	}
	afile_free(f);
}

void afile_copy(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		die("cannot open %s:", from);
	struct afile *f = afile_open(to);
	char buf[1 << 16];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		afile_write(f, buf, (size_t)n);
	if (n < 0)
		die("read %s:", from);
	close(in);
	afile_commit(f);
}

void make_parents(const char *path)
{
	char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			die("cannot create %s:", p);
		*s = '/';
	}
	free(p);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

void remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = xmalloc(n);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}
