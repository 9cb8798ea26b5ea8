/* Atomic file writes: data goes to a temp file beside the target, which is
 * fsynced and renamed over it on commit. If the program dies first, the temp
 * file is removed and the target is untouched. A file replaced keeps its
 * permission bits; a symlink is followed and its target written so; a FIFO,
 * pipe, device or socket is written directly, and a name of an open
 * descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N) through it, at its
 * offset, as the shell's > or >> left it. */
#ifndef TS_AFILE_H
#define TS_AFILE_H
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

struct afile {
	char *path;   /* final name, symlinks followed; as given when written directly */
	char *tmp;    /* temp name, beside it; NULL when written directly */
	int fd;
	struct filedigest *digest;   /* of what is written, where afile_digest asked */
};

/* Opens a temp file for path ("-" means stdout: no temp, nothing to rename). */
struct afile *afile_open(const char *path);
/* The path with every symlink along its last component followed, also to a
 * target that does not exist yet (malloc'd). */
char *resolve_links(const char *path);
/* Digests what f writes, and on commit remembers the digest of the file it
 * made (util/filedigest.h): for a large file whose digest a dir records, so
 * that it is not read back; a large write is hashed on a second core while
 * it goes out. Nothing for a file written in place. */
void afile_digest(struct afile *f);
/* Writes all of buf or dies naming the file (a full disk is an error). */
void afile_write(struct afile *f, const void *buf, size_t n);
/* fsync, close, rename over path, fsync the directory; dies on failure,
 * leaving the old target in place. Frees f. */
void afile_commit(struct afile *f);
/* Removes the temp file. Frees f. */
void afile_abort(struct afile *f);
/* Writes text, ending in a newline, as the whole of path. */
void afile_put_text(const char *path, const char *text);
/* The same for a path that does not exist: returns 0, writing nothing, when
 * it does. Of two processes writing one path so, one makes it, whole. */
int afile_put_new(const char *path, const char *text);

/* DIR/name, malloc'd: one slash between them, whether dir ends in one or not. */
char *path_join(const char *dir, const char *name);
/* Removes a file or a directory and everything in it; errors are ignored. */
void remove_tree(const char *path);
/* Creates the directories leading to path (not path itself), as mkdir -p. */
void make_parents(const char *path);
/* Copies a file atomically. */
void afile_copy(const char *from, const char *to);

/* PATH.TAG.PID, beside path: its name cut where the whole would pass NAME_MAX
 * (malloc'd). */
char *beside(const char *path, const char *tag);
/* Dies "cannot write OUTPUT: it is WHAT INPUT" where output names the file
 * input, itself, through a link or as a hard link: writing it would destroy
 * an input. "-" names no file. */
void check_not_input(const char *output, const char *what, const char *input);
/* Whether path, its links followed, lies in dir or in a dir below it (path's
 * own dir and dir exist). */
int lies_in(const char *path, const char *dir);

/* The dir for temporary files: $TMPDIR, or /tmp. */
const char *temp_dir(void);
/* A temporary file of no name in temp_dir, open for reading and writing;
 * dies naming the dir. */
FILE *temp_file(void);

/* Opens path for reading, *size its bytes; dies "cannot open PATH: why", or
 * "PATH: not a regular file" for a directory, FIFO or device. */
int open_regular(const char *path, off_t *size);
/* Writes all of buf to fd or dies with "what:" (errno appended). */
void write_all(int fd, const void *buf, size_t n, const char *what);
/* Appends the n bytes at buf to the file open at fd (O_APPEND) whole, or
 * dies with the file as it was: a write cut short (a full disk) is cut off
 * again, so that what is appended next follows whole records. */
void append_whole(int fd, const void *buf, size_t n, const char *what);
/* fsyncs a directory so a rename in it is durable. */
void fsync_dir(const char *dir);
#endif
