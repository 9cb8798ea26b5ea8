/* XXH3-128 digests of files (as `xxhsum -H2` prints them), and what a
 * process knows of a file without reading it again: the digest of a file it
 * wrote through a digesting afile (util/afile.h), the mapping of a file it
 * has just found intact (or its head, the rest to be checked as it is
 * read), kept for the reader that comes next, and whether that reader found
 * the rest intact.
 * All are known by the file's identity (device, inode, size, modification
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
 * here): a file found intact where want is NULL, else one whose first bytes
 * were found intact and whose whole digest must be want, for its reader to
 * check as it reads (util/copyhash.h). */
void filedigest_keep(const struct stat *sb, void *map, const char *want);
/* The mapping kept of the file sb describes, now the caller's to unmap, and
 * into want the digest it must have ("" where it was found intact); NULL
 * where none is. */
void *filedigest_take(const struct stat *sb, char want[FILEDIGEST_HEX]);
/* Records whether the file sb describes, read whole, had the digest it
 * must have. */
void filedigest_verdict(const struct stat *sb, int intact);
/* That record: 1 intact, 0 not, -1 where there is none. */
int filedigest_verdict_of(const struct stat *sb);
#endif
