/* XXH3-128 digests of files (as `xxhsum -H2` prints them), and what a
 * process knows of a file without reading it again: the digest of a file it
 * wrote through a digesting afile (util/afile.h), and the mapping of a file
 * it has just read whole and found intact, kept for the reader that comes
 * next.
 * Both are known by the file's identity (device, inode, size, modification
 * and change times), so a file changed since is read afresh. */
#ifndef TS_FILEDIGEST_H
#define TS_FILEDIGEST_H
#include <stddef.h>
#include <sys/stat.h>

#define FILEDIGEST_HEX 33   /* 32 hex digits and the NUL */

struct filedigest;

struct filedigest *filedigest_new(void);
void filedigest_add(struct filedigest *d, const void *p, size_t n);
/* Frees d; its digest in hex, where hex is not NULL. */
void filedigest_end(struct filedigest *d, char hex[FILEDIGEST_HEX]);

/* Remembers hex as the digest of the file at path as it is now. */
void filedigest_remember(const char *path, const char hex[FILEDIGEST_HEX]);
/* The remembered digest of the file sb describes into hex: 1, or 0 where
 * none is. */
int filedigest_recall(const struct stat *sb, char hex[FILEDIGEST_HEX]);
/* Keeps map (a read-only mapping of the whole file sb describes, now owned
 * here). */
void filedigest_keep(const struct stat *sb, void *map);
/* The mapping kept of the file sb describes, now the caller's to unmap;
 * NULL where none is. */
void *filedigest_take(const struct stat *sb);
#endif
