/* A directory made atomically: its files are written into DIR.tmp.PID beside
 * it, which is renamed to DIR at the end. If the program dies first, the temp
 * dir is removed, so DIR appears whole or not at all. */
#ifndef TS_ADIR_H
#define TS_ADIR_H

struct adir;
/* Refuses (exit 1) a DIR named ., .. or / (nothing can be renamed to it),
 * and an existing DIR that is not an empty directory, unless replace is set
 * and DIR holds a file named marker (a dir of the same kind, never some
 * other directory given by mistake), or marker is NULL (a dir only the
 * program makes, such as a run's checkpoint, whole or damaged). */
struct adir *adir_begin(const char *dir, int replace, const char *marker);
/* The temp dir to write into. */
const char *adir_tmp(const struct adir *d);
/* Renames the temp dir to DIR, replacing the old DIR where allowed; frees d. */
void adir_commit(struct adir *d);
/* Whether the directory at path holds nothing, or nothing but entries
 * whose names spare accepts (NULL: nothing at all). */
int dir_empty_but(const char *path, int (*spare)(const char *name));
/* 0 when path is a directory whose files can be reached, else why not as an
 * errno (ENOENT, ENOTDIR, EACCES...). */
int dir_reachable(const char *path);
#endif
