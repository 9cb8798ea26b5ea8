/* Shard files: token records in a fixed little-endian layout that is read
 * through mmap with O(1) random access.
 *
 *   header (64 bytes): magic "TSSHARD1", u32 version, u32 flags (0), u64 count,
 *                      u64 index_offset, u64 data_offset (64), zero padding
 *   records, back to back from data_offset, each starting 4-byte aligned
 *   index at index_offset (8-byte aligned): per record u64 offset, u32 ntokens,
 *   u32 reserved (0); the file ends with the index.
 *
 * A record: u32 ntok, u16 id_len, u8 flags, u8 reserved, i32 fold (-1: none),
 * the label (int: i32; float: f64; list: u32 count + i32[count]; none: nothing),
 * id_len bytes of id, zero padding to 4 bytes, i32 ids[ntok], u8 types[ntok]
 * when present, zero padding to 4 bytes. Flags: bit 0 has types, bit 1 the id
 * is a number, bits 2-3 the label kind (enum label_kind). */
#ifndef TS_SHARD_H
#define TS_SHARD_H
#include "data/tokrec.h"
#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC "TSSHARD1"
enum { SHARD_VERSION = 1, SHARD_HEADER_SIZE = 64, SHARD_INDEX_ENTRY = 16, SHARD_MAX_ID = 65535 };

struct shard;
/* Maps the file and checks its header; dies naming the file if it is not a
 * valid shard. A record found corrupt later dies naming the file and record. */
struct shard *shard_open(const char *path);
/* Whether path is a regular file that begins as a shard does: given where
 * a token stream belongs, it gets a line that says what it is. */
int shard_file_is(const char *path);
uint64_t shard_count(const struct shard *s);
/* Token count of record i, from the index. */
uint32_t shard_ntokens(const struct shard *s, uint64_t i);
/* Copies record i into out (into its own buffers, as tokrec_unpack does).
 * Threads may read one shard at once, each into its own out. */
void shard_get(const struct shard *s, uint64_t i, struct tokrec *out);
/* From now on shard_get gives each record's labels as tokrec_relabel makes
 * them with to[0..n) (kept by the caller). */
void shard_relabel(struct shard *s, const int32_t *to, int n);
void shard_close(struct shard *s);

struct shard_writer;
/* Writes path atomically: nothing appears there before shard_commit. */
struct shard_writer *shard_create(const char *path);
/* Dies if the id is longer than SHARD_MAX_ID bytes. */
void shard_append(struct shard_writer *w, const struct tokrec *t);
/* Writes the index and header, then renames the file into place; frees w. */
void shard_commit(struct shard_writer *w);

/* The record encoding on its own, for other files that carry records (the
 * runs of ts-shard's external sort). Sizes are multiples of 4; buffers need
 * no alignment. */
size_t shard_rec_size(const struct tokrec *t);
void shard_rec_encode(const struct tokrec *t, void *buf);
/* Fills out from len bytes at buf; returns NULL, or why they are not a record. */
const char *shard_rec_decode(const void *buf, size_t len, struct tokrec *out);
#endif
