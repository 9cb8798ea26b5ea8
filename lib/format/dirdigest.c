#include "format/dirdigest.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/filedigest.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEX = FILEDIGEST_HEX };

/* How a file named in keep is read: whole, or its first DIGESTS_HEAD bytes
 * only, the rest left to its reader (util/copyhash.h). */
enum keep { KEEP_NOT, KEEP_WHOLE, KEEP_HEAD };

/* A file of the dir: its name, size, digest and the digest of its head
 * (where it has more than DIGESTS_HEAD bytes); err, the errno where it
 * could not be read; with keep, its mapping (and the identity it is kept by
 * where the dir checks). */
struct entry {
	char *name;
	long long bytes;
	char hex[HEX], head[HEX];
	int err;
	enum keep keep;
	void *content;
	struct stat sb;
};

static void digest_of(const void *p, size_t n, char hex[HEX])
{
	struct filedigest *d = filedigest_new();
	filedigest_add(d, p, n);
	filedigest_end(d, hex);
}

/* The digest of the first DIGESTS_HEAD bytes of fd's file into e->head, where
 * it has more; -1 (errno set) where they cannot be read. */
static int head_of(int fd, struct entry *e)
{
	if (e->bytes <= DIGESTS_HEAD)
		return 0;
	char *buf = xmalloc(DIGESTS_HEAD);
	ssize_t k = 0;
	size_t n = 0;
	while (n < DIGESTS_HEAD && ((k = pread(fd, buf + n, DIGESTS_HEAD - n, (off_t)n)) > 0 || (k < 0 && errno == EINTR)))
		n += k > 0 ? (size_t)k : 0;
	if (n == DIGESTS_HEAD)
		digest_of(buf, n, e->head);
	free(buf);
	if (n < DIGESTS_HEAD && !k)
		errno = EIO;   /* cut short since it was measured */
	return n == DIGESTS_HEAD ? 0 : -1;
}

/* The digest of e's file at path as hex, and its size: as remembered where
 * this process just wrote it and recall says so; else, where e->keep and it
 * has the size expected, mapped whole into e->content (the mapping its
 * reader would make) and hashed there, only its head where e->keep says so;
 * else read in pieces (a mapping counts in the process's resident memory,
 * and a checkpoint's files are large). Where recall (the dir's digests
 * being written), then the digest of its head. -1 (errno set) where it
 * cannot be read. */
static int digest_file(const char *path, struct entry *e, int recall)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &e->sb)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (recall && filedigest_recall(&e->sb, e->hex)) {
		e->bytes = (long long)e->sb.st_size;
		int r = head_of(fd, e);
		close(fd);
		return r;
	}
	struct filedigest *d = filedigest_new();
	long long n = 0, k = 0;
	size_t size = (size_t)e->sb.st_size;
	void *map = e->keep && size > 0 && e->sb.st_size == e->bytes ?
		    mmap(NULL, size, PROT_READ, MAP_PRIVATE | (e->keep == KEEP_WHOLE ? MAP_POPULATE : 0), fd, 0) :
		    MAP_FAILED;
	if (map == MAP_FAILED && e->keep == KEEP_HEAD)
		e->keep = KEEP_WHOLE;   /* read whole after all */
	if (map != MAP_FAILED) {
		filedigest_add(d, map, e->keep == KEEP_HEAD ? DIGESTS_HEAD : size);
		e->content = map;
		n = (long long)size;
	} else {
		enum { PIECE = 1 << 20 };
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		char *buf = xmalloc(PIECE);
		while ((k = read(fd, buf, PIECE)) > 0 || (k < 0 && errno == EINTR))
			if (k > 0) {
				filedigest_add(d, buf, (size_t)k);
				n += k;
			}
		free(buf);
	}
	int err = k < 0 ? errno : 0;
	filedigest_end(d, e->keep == KEEP_HEAD ? e->head : e->hex);
	e->bytes = n;
	if (!err && recall && head_of(fd, e))
		err = errno;
	close(fd);
	errno = err;
	return err ? -1 : 0;
}

static int larger_first(const void *a, const void *b)
{
	long long x = (*(struct entry *const *)a)->bytes, y = (*(struct entry *const *)b)->bytes;
	return (x < y) - (x > y);
}

/* Digests of the n files of dir in e (their bytes as expected, for the
 * order), the largest first, on every core: a checkpoint's optimizer state
 * is three quarters of it. Those this process wrote are recalled where
 * recall says so. */
static void digest_all(const char *dir, struct entry *e, size_t n, int recall)
{
	struct entry **order = xmalloc((n ? n : 1) * sizeof *order);
	for (size_t i = 0; i < n; i++)
		order[i] = e + i;
	qsort(order, n, sizeof *order, larger_first);
#pragma omp parallel for schedule(dynamic, 1)
	for (size_t i = 0; i < n; i++) {
		char *path = path_join(dir, order[i]->name);
		order[i]->err = digest_file(path, order[i], recall) ? errno : 0;
		free(path);
	}
	free(order);
}

void dirdigest_write(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		die("cannot open %s:", dir);
	struct entry *e = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; (de = readdir(d));) {
		char *path = path_join(dir, de->d_name);
		struct stat sb;
		if (strcmp(de->d_name, DIGESTS_FILE) && !lstat(path, &sb) && S_ISREG(sb.st_mode)) {
			grow(&e, &cap, n + 1, sizeof *e);
			e[n++] = (struct entry){ .name = xstrdup(de->d_name), .bytes = (long long)sb.st_size };
		}
		free(path);
	}
	closedir(d);
	digest_all(dir, e, n, 1);
	json_t *files = json_object();
	for (size_t i = 0; i < n; i++) {
		if (e[i].err)
			die("cannot read %s/%s: %s", dir, e[i].name, strerror(e[i].err));
		json_t *entry = json_pack("{sI ss}", "bytes", (json_int_t)e[i].bytes, "xxh3_128", e[i].hex);
		if (e[i].head[0])
			json_object_set_new(entry, "head_xxh3_128", json_string(e[i].head));
		json_object_set_new(files, e[i].name, entry);
		free(e[i].name);
	}
	free(e);
	json_t *j = json_pack("{so}", "files", files);
	char *text = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	char *out = path_join(dir, DIGESTS_FILE);
	afile_put_text(out, text);
	free(out);
	free(text);
	json_decref(j);
}

static enum digests bad(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static enum digests bad(char **why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(why, fmt, ap) < 0)
		die("out of memory");
	va_end(ap);
	return DIGESTS_BAD;
}

static int is_hex(json_t *hex)
{
	return json_is_string(hex) && strlen(json_string_value(hex)) == HEX - 1;
}

/* Whether a file's entry in digests.json is a file name, a size and a
 * digest, and the digest of its head where it has one. */
static int well_formed(const char *name, json_t *entry)
{
	json_t *bytes = json_object_get(entry, "bytes"), *head = json_object_get(entry, "head_xxh3_128");
	return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") && json_is_integer(bytes) &&
	       json_integer_value(bytes) >= 0 && is_hex(json_object_get(entry, "xxh3_128")) && (!head || is_hex(head));
}

/* The entries of files in e (names in the record's order, sizes as
 * recorded, those named in keep to be kept: where heads says so and the
 * record has its head's digest, only that checked); DIGESTS_BAD where one is
 * not well formed. */
static enum digests entries(json_t *files, const char *const *keep, int heads, struct entry *e, char **why)
{
	const char *name;
	json_t *entry;
	size_t i = 0;
	json_object_foreach(files, name, entry) {
		if (!well_formed(name, entry))
			return bad(why, "%s: the entry of '%s' is not a file's size and digest", DIGESTS_FILE, name);
		e[i] = (struct entry){ .name = (char *)name,
				       .bytes = (long long)json_integer_value(json_object_get(entry, "bytes")) };
		for (const char *const *k = keep; k && *k; k++)
			if (!strcmp(*k, name))
				e[i].keep = heads && json_object_get(entry, "head_xxh3_128") && e[i].bytes > DIGESTS_HEAD ?
					    KEEP_HEAD : KEEP_WHOLE;
		i++;
	}
	return DIGESTS_OK;
}

/* The digest called field of the file name in the record files. */
static const char *recorded(json_t *files, const char *name, const char *field)
{
	return json_string_value(json_object_get(json_object_get(files, name), field));
}

/* The files of dir against the record files: the first that differs, by
 * name; the bytes of those named in keep kept where all are intact. */
static enum digests check_files(const char *dir, json_t *files, const char *const *keep, int heads, char **why)
{
	size_t n = json_object_size(files);
	struct entry *e = xcalloc(n, sizeof *e);
	enum digests r = entries(files, keep, heads, e, why);
	if (r == DIGESTS_OK)
		digest_all(dir, e, n, 0);
	for (size_t i = 0; i < n && r == DIGESTS_OK; i++) {
		json_t *entry = json_object_get(files, e[i].name);
		long long want = (long long)json_integer_value(json_object_get(entry, "bytes"));
		if (e[i].err)
			r = bad(why, "%s: %s", e[i].name, strerror(e[i].err));
		else if (e[i].bytes != want)
			r = bad(why, "%s has %lld bytes where %lld were written", e[i].name, e[i].bytes, want);
		else if (e[i].keep == KEEP_HEAD ? strcmp(e[i].head, recorded(files, e[i].name, "head_xxh3_128"))
						: strcmp(e[i].hex, recorded(files, e[i].name, "xxh3_128")))
			r = bad(why, "%s differs from what was written (its digest does not match)", e[i].name);
	}
	for (size_t i = 0; i < n; i++)
		if (r == DIGESTS_OK && e[i].content)
			filedigest_keep(&e[i].sb, e[i].content,
					e[i].keep == KEEP_HEAD ? recorded(files, e[i].name, "xxh3_128") : NULL);
		else if (e[i].content)
			munmap(e[i].content, (size_t)e[i].sb.st_size);
	free(e);
	return r;
}

enum digests dirdigest_check(const char *dir, const char *const *keep, int heads, char **why)
{
	char *path = path_join(dir, DIGESTS_FILE);
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err), *files = json_object_get(j, "files");
	int missing = !j && access(path, F_OK) && errno == ENOENT;
	free(path);
	*why = NULL;
	if (missing)
		return DIGESTS_NONE;
	enum digests r;
	if (!j)
		r = bad(why, "%s: line %d: %s", DIGESTS_FILE, err.line, err.text);
	else if (!json_is_object(files) || !json_object_size(files))
		r = bad(why, "%s names no files", DIGESTS_FILE);
	else
		r = check_files(dir, files, keep, heads, why);
	json_decref(j);
	return r;
}

enum digests dirdigest_confirm(const char *dir, const char *const *keep, char **why)
{
	*why = NULL;
	for (const char *const *k = keep; *k; k++) {
		char *path = path_join(dir, *k);
		struct stat sb;
		int v = stat(path, &sb) ? -1 : filedigest_verdict_of(&sb);
		free(path);
		if (!v)
			return bad(why, "%s differs from what was written (its digest does not match)", *k);
		if (v < 0)   /* not read whole since its check: the dir checked whole now */
			return dirdigest_check(dir, NULL, 0, why);
	}
	return DIGESTS_OK;
}
