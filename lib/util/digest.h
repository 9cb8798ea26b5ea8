/* SHA-256 digests as hex text (nettle's SHA-256). */
#ifndef TS_DIGEST_H
#define TS_DIGEST_H
#include <stddef.h>

#define SHA256_HEX_SIZE 65   /* 64 hex digits and the NUL */

/* The SHA-256 of the n bytes at p, in lowercase hex. */
void sha256_hex(const void *p, size_t n, char hex[SHA256_HEX_SIZE]);
#endif
