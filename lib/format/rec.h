/* Record streams: a sequence of msgpack maps over a file descriptor, read
 * and written incrementally (token records and their stream header are data/tokrec.h's). */
#ifndef TS_REC_H
#define TS_REC_H
#include <msgpack.h>
#include <stdint.h>

struct rec_reader;
/* path "-" is standard input. */
struct rec_reader *rec_open(const char *path);
/* The next record, or NULL at a clean end of stream. Dies naming the file and
 * record number on truncated or malformed input, or a record that is not a map. */
const msgpack_object *rec_next(struct rec_reader *r);
/* 1-based number of the record last returned, and the stream's name. */
uint64_t rec_number(const struct rec_reader *r);
const char *rec_name(const struct rec_reader *r);
/* For append-only logs, whose writer may die mid-append: a cut-short last
 * record ends the stream with a warning instead of an error. */
void rec_allow_torn_tail(struct rec_reader *r);
/* Where that torn record begins (bytes from the start), or -1 for none. */
int64_t rec_torn_at(const struct rec_reader *r);
void rec_close(struct rec_reader *r);
/* Dies with "NAME: record N: why". */
_Noreturn void rec_die(const struct rec_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An append-only file of records read as it grows, like tail -f: which
 * file, and how far its whole records have been read. */
struct rec_tail {
	long long read;           /* bytes */
	long records;
	unsigned long long dev, ino;
	unsigned char head[64];   /* its first bytes: an inode number freed by a delete is soon another file's */
	int nhead;
};
/* Hands take each whole record appended to path since the last call (none
 * while path does not exist), until take returns nonzero; a record cut short
 * at the end is read again from its start by a later call. Returns 0; 1,
 * having read nothing, when path is no longer the file read so far (gone,
 * made again, or cut shorter than what was read), so that the caller forgets
 * what it took and the next call reads the new file from its start; or -1
 * with why in err when path cannot be read or holds a record that is not
 * msgpack or not a map. */
int rec_tail_read(const char *path, struct rec_tail *t, int (*take)(void *ctx, const msgpack_object *o), void *ctx,
		  char *err, size_t errlen);

struct rec_writer;
/* Writes to path atomically (temp + rename on rec_commit), or to stdout for "-". */
struct rec_writer *rec_create(const char *path);
msgpack_packer *rec_packer(struct rec_writer *w);
/* Flushes, and for a file renames it into place; frees w. */
void rec_commit(struct rec_writer *w);

/* Lookup of a key in a msgpack map (NULL allowed, as is another type);
 * NULL if absent. */
const msgpack_object *mp_get(const msgpack_object *map, const char *key);
/* Whether o (NULL allowed) is the string s. */
int mp_str_is(const msgpack_object *o, const char *s);
/* o (NULL allowed) as a number; NAN when it is none. */
double mp_number(const msgpack_object *o);
void mp_pack_str(msgpack_packer *pk, const char *s);
void mp_pack_strn(msgpack_packer *pk, const char *s, size_t n);
/* Packs s, a decimal integer from INT64_MIN to UINT64_MAX (a numeric id), as
 * a msgpack integer: negative as int64, else as uint64. */
void mp_pack_decimal(msgpack_packer *pk, const char *s);

#endif
