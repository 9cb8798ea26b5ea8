/* The digests of a dir's files (a checkpoint, a model dir), written last as
 * DIR/digests.json, so that a dir damaged on disk or cut short by a crash is
 * found before any byte of it is used (trained on, evaluated). Each file gets its size and its
 * XXH3-128 (xxHash's, as `xxhsum -H2` prints it), which hashes at memory
 * speed, the files on every core; SHA-256 would add a second or more to a
 * BERT-base checkpoint (tests/bench/checkpoint). The large files are
 * hashed as they are written (util/filedigest.h), not read back. */
#ifndef TS_DIRDIGEST_H
#define TS_DIRDIGEST_H

#define DIGESTS_FILE "digests.json"
#define DIGESTS_HEAD (1 << 20)   /* a large file's head, whose digest is recorded too */

enum digests { DIGESTS_OK, DIGESTS_NONE, DIGESTS_BAD };

/* Writes DIR/digests.json: the size and digest of every regular file in DIR
 * as it is now. */
void dirdigest_write(const char *dir);
/* DIR's files against DIR/digests.json: DIGESTS_OK where each file it names
 * has its size and digest, DIGESTS_NONE where DIR has no digests.json, and
 * DIGESTS_BAD, with *why (malloc'd) naming the first file that differs and
 * how, else. The files named in keep (NULL-terminated, or NULL), read whole
 * for their digests, are kept as read when all check, for the reader that
 * comes next (st_open takes them): so a file is read once, and what is used
 * is what was checked. Where heads is not 0, of a kept file larger than
 * DIGESTS_HEAD only the head is checked (a safetensors file's header is
 * in it), and its reader checks the rest as it copies it, for no second
 * pass over it: dirdigest_confirm then says whether all was intact. */
enum digests dirdigest_check(const char *dir, const char *const *keep, int heads, char **why);
/* After a check with heads and the reads of the files named in keep: as
 * dirdigest_check, the files that were read whole as they were checked
 * then, the others checked now. */
enum digests dirdigest_confirm(const char *dir, const char *const *keep, char **why);
#endif
