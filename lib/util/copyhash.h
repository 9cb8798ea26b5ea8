/* XXH3-128 (xxHash's, as util/filedigest.h and `xxhsum -H2` compute it) of
 * an input of known length, taken in order in pieces and copied as it is
 * hashed: each 64 bytes are hashed while in registers on their way to the
 * copy, so a load that must copy a file anyway checks it for no second pass
 * over memory (a pass costs a load from the page cache 15% or more:
 * tests/bench/checkpoint). AVX-512 or AVX2 where the CPU has them. */
#ifndef TS_COPYHASH_H
#define TS_COPYHASH_H
#include <stddef.h>
#include <stdint.h>

#define COPYHASH_MIN 241   /* shorter inputs are hashed otherwise by XXH3 */

struct copyhash {
	uint64_t acc[8];
	uint64_t len, pos;            /* the input's length, and the bytes taken */
	unsigned char stripe[64];     /* a stripe taken in parts, so far */
	unsigned char last[64];       /* the input's last 64 bytes, as they come */
};

/* Starts h on an input of len bytes (at least COPYHASH_MIN). */
void copyhash_init(struct copyhash *h, uint64_t len);
/* Takes the next n bytes of the input from src, copying them to dst where
 * dst is not NULL (dst and src must not overlap). */
void copyhash_take(struct copyhash *h, void *dst, const void *src, size_t n);
/* The digest in hex (32 digits and the NUL) once all len bytes are taken. */
void copyhash_hex(const struct copyhash *h, char hex[33]);
/* For tests: hash with kernel k from now on (0 portable C, 1 AVX2, 2
 * AVX-512); 0 where this CPU lacks it, which leaves the kernel as it was. */
int copyhash_kernel(int k);
#endif
