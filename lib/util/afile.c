#include "util/afile.h"
#include "util/cleanup.h"
#include "util/err.h"
#include "util/filedigest.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pthread.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_stdout(const struct afile *f) { return !strcmp(f->path, "-"); }

/* The path a symlink names, relative to the link's own dir. Malloc'd. */
static char *link_target(const char *link)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(link, buf, sizeof buf - 1);
	if (n < 0)
		die("cannot read the link %s:", link);
	buf[n] = 0;
	if (buf[0] == '/')
		return xstrdup(buf);
	char *d = xstrdup(link), *p = path_join(dirname(d), buf);
	free(d);
	return p;
}

char *resolve_links(const char *path)
{
	char *p = xstrdup(path);
	struct stat st;
	for (int hops = 0; lstat(p, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		if (hops == 40) {
			errno = ELOOP;
			die("cannot resolve %s:", path);
		}
		char *next = link_target(p);
		free(p);
		p = next;
	}
	return p;
}

/* The descriptor N that a name such as /dev/stdout, /dev/fd/N or
 * /proc/self/fd/N gives this process, where s is one; else -1. */
static int fd_name(const char *s)
{
	static const char *const std[] = { "/dev/stdin", "/dev/stdout", "/dev/stderr" };
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, std[i]))
			return i;
	char pid[40];
	snprintf(pid, sizeof pid, "/proc/%ld/fd/", (long)getpid());
	const char *dirs[] = { "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", pid }, *n = NULL;
	for (int i = 0; i < 4 && !n; i++)
		if (!strncmp(s, dirs[i], strlen(dirs[i])))
			n = s + strlen(dirs[i]);
	if (!n || !*n || strspn(n, "0123456789") != strlen(n) || strlen(n) > 9)
		return -1;
	return atoi(n);
}

/* The descriptor of this process that path names, itself or through the
 * links on its way (/dev/stdout is one to /proc/self/fd/1); -1: none. */
static int named_fd(const char *path)
{
	char *p = xstrdup(path);
	struct stat st;
	int fd = fd_name(p);
	for (int hops = 0; fd < 0 && hops < 40 && lstat(p, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		char *next = link_target(p);
		free(p);
		p = next;
		fd = fd_name(p);
	}
	free(p);
	return fd;
}

/* A FIFO, pipe, device or socket is written in place, through the path as
 * given: a rename would replace it, and the text of a link such as
 * /proc/self/fd/1 ("pipe:[N]") names no file. */
static void open_in_place(struct afile *f, const char *path)
{
	f->path = xstrdup(path);
	f->fd = open(path, O_WRONLY | O_CLOEXEC);
	if (f->fd < 0)
		die("cannot open %s:", path);
}

struct afile *afile_open(const char *path)
{
	struct afile *f = xcalloc(1, sizeof *f);
	if (!strcmp(path, "-")) {
		f->path = xstrdup(path);
		f->fd = STDOUT_FILENO;
		return f;
	}
	int fd = named_fd(path);
	if (fd >= 0) {   /* written through the descriptor, where the shell's > or >> put it */
		f->path = xstrdup(path);
		f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (f->fd < 0)
			die("cannot write %s:", path);
		return f;
	}
	struct stat st;
	int exists = stat(path, &st) == 0;   /* the kernel follows every link */
	if (exists && !S_ISREG(st.st_mode)) {
		open_in_place(f, path);
		return f;
	}
	f->path = resolve_links(path);
	if (exists && access(f->path, W_OK) < 0)   /* a read-only file is not replaced, as > would not */
		die("cannot write %s:", path);
	f->tmp = beside(f->path, "tmp");
	cleanup_add(f->tmp);   /* first, so that no signal can come between */
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (f->fd < 0)   /* named as the user named it: the temp file is ours */
		die("cannot create %s:", f->path);
	if (exists && fchmod(f->fd, st.st_mode & 0777) < 0)   /* the file it replaces keeps its permissions */
		die("cannot set the permissions of %s:", f->tmp);
	return f;
}

char *beside(const char *path, const char *tag)
{
	char suffix[48];
	size_t ns = (size_t)snprintf(suffix, sizeof suffix, ".%s.%ld", tag, (long)getpid());
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	size_t keep = strlen(base);
	if (keep + ns > NAME_MAX)   /* cut, a character whole */
		for (keep = NAME_MAX - ns; keep && (base[keep] & 0xc0) == 0x80; keep--)
			;
	size_t head = (size_t)(base - path) + keep;
	char *s = xmalloc(head + ns + 1);
	memcpy(s, path, head);
	memcpy(s + head, suffix, ns + 1);
	return s;
}

void check_not_input(const char *output, const char *what, const char *input)
{
	struct stat o, i;
	if (!strcmp(output, "-") || !strcmp(input, "-") || stat(output, &o) < 0 || stat(input, &i) < 0)
		return;
	if (S_ISREG(o.st_mode) && o.st_dev == i.st_dev && o.st_ino == i.st_ino)
		die("cannot write %s: it is %s %s", output, what, input);
}

int lies_in(const char *path, const char *dir)
{
	char *p = resolve_links(path), *in = realpath(dirname(p), NULL), *d = realpath(dir, NULL);
	size_t n = d ? strlen(d) : 0;
	int lies = in && d && !strncmp(in, d, n) && (in[n] == '/' || !in[n] || n == 1);
	free(p);
	free(in);
	free(d);
	return lies;
}

const char *temp_dir(void)
{
	const char *dir = getenv("TMPDIR");
	return dir && *dir ? dir : "/tmp";
}

FILE *temp_file(void)
{
	char *path = path_join(temp_dir(), "ts-XXXXXX");
	int fd = mkstemp(path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w+");
	if (!f)
		die("cannot create a temporary file in %s:", temp_dir());
	unlink(path);
	free(path);
	return f;
}

int open_regular(const char *path, off_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO: no wait for a writer */
	if (fd < 0)
		die("cannot open %s:", path);
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		die("cannot stat %s:", path);
	if (!S_ISREG(sb.st_mode))
		die("%s: not a regular file", path);
	*size = sb.st_size;
	return fd;
}

/* Writes the n bytes of buf to fd: 0, or the errno of the write that failed. */
static int write_out(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Dies for the errno err of a write of what, where there is one. */
static void check_write(int err, const char *what)
{
	if (err) {
		errno = err;
		die("write %s:", what);
	}
}

void write_all(int fd, const void *buf, size_t n, const char *what)
{
	check_write(write_out(fd, buf, n), what);
}

void append_whole(int fd, const void *buf, size_t n, const char *what)
{
	off_t end = lseek(fd, 0, SEEK_END);
	int err = write_out(fd, buf, n);
	if (err && end >= 0 && ftruncate(fd, end) < 0)
		warnx("cannot cut the end of %s off: %s", what, strerror(errno));
	check_write(err, what);
}

void afile_digest(struct afile *f)
{
	if (f->tmp && !f->digest)
		f->digest = filedigest_new();
}

/* A large write's bytes, hashed on a thread of its own. */
struct hashing {
	struct filedigest *d;
	const void *buf;
	size_t n;
};

static void *hash_bytes(void *arg)
{
	struct hashing *h = arg;
	filedigest_add(h->d, h->buf, h->n);
	return NULL;
}

void afile_write(struct afile *f, const void *buf, size_t n)
{
	const char *what = is_stdout(f) ? "standard output" : f->path;
	struct hashing h = { f->digest, buf, n };
	pthread_t helper;
	/* a large write is hashed on a core the write leaves idle; a thread,
	 * not OpenMP, which the commands that do not compute do not load */
	int beside = f->digest && n >= 1 << 20 && !pthread_create(&helper, NULL, hash_bytes, &h);
	if (f->digest && !beside)
		filedigest_add(f->digest, buf, n);
	int err = write_out(f->fd, buf, n);
	if (beside)
		pthread_join(helper, NULL);
	check_write(err, what);
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
	if (f->digest)
		filedigest_end(f->digest, NULL);
	free(f->path);
	free(f->tmp);
	free(f);
}

/* The temp file on disk and closed, before it takes the target's name. */
static void flush_tmp(struct afile *f)
{
	if (fsync(f->fd) < 0)
		die("cannot write %s:", f->path);
	if (close(f->fd) < 0)
		die("cannot write %s:", f->path);
}

static void fsync_parent(const char *path)
{
	char *d = xstrdup(path);
	fsync_dir(dirname(d));
	free(d);
}

void afile_commit(struct afile *f)
{
	if (!f->tmp) {
		if (!is_stdout(f) && close(f->fd) < 0)
			die("cannot write %s:", f->path);
		afile_free(f);
		return;
	}
	flush_tmp(f);
	if (rename(f->tmp, f->path) < 0)
		die("cannot rename %s to %s:", f->tmp, f->path);
	cleanup_forget(f->tmp);
	fsync_parent(f->path);
	if (f->digest) {
		char hex[FILEDIGEST_HEX];
		filedigest_end(f->digest, hex);
		f->digest = NULL;
		filedigest_remember(f->path, hex);
	}
	afile_free(f);
}

void afile_abort(struct afile *f)
{
	if (f->tmp) {
		close(f->fd);
		unlink(f->tmp);
		cleanup_forget(f->tmp);
	} else if (!is_stdout(f)) {
		close(f->fd);
	}
	afile_free(f);
}

/* An afile of text, ending in a newline, to commit. */
static struct afile *text_file(const char *path, const char *text)
{
	size_t n = strlen(text);
	struct afile *f = afile_open(path);
	afile_write(f, text, n);
	if (!n || text[n - 1] != '\n')
		afile_write(f, "\n", 1);
	return f;
}

void afile_put_text(const char *path, const char *text)
{
	afile_commit(text_file(path, text));
}

/* A link, unlike a rename, never replaces its target. */
int afile_put_new(const char *path, const char *text)
{
	struct stat st;
	if (lstat(path, &st) == 0)
		return 0;
	struct afile *f = text_file(path, text);
	flush_tmp(f);
	int made = link(f->tmp, f->path) == 0;
	if (!made && (errno == EPERM || errno == EOPNOTSUPP))
		made = rename(f->tmp, f->path) == 0;   /* a file system without links (FAT): as afile_commit */
	if (!made && errno != EEXIST)
		die("cannot make %s:", f->path);
	unlink(f->tmp);
	cleanup_forget(f->tmp);
	if (made)
		fsync_parent(f->path);
	afile_free(f);
	return made;
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
		if (mkdir(p, 0777) < 0 && errno != EEXIST)
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
	size_t d = strlen(dir), n = d + strlen(name) + 2;
	char *p = xmalloc(n);
	snprintf(p, n, "%s%s%s", dir, d && dir[d - 1] == '/' ? "" : "/", name);
	return p;
}
