#include "util/digest.h"
#include <nettle/sha2.h>
#include <stdio.h>

void sha256_hex(const void *p, size_t n, char hex[SHA256_HEX_SIZE])
{
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	sha256_init(&ctx);
	sha256_update(&ctx, n, p);
	sha256_digest(&ctx, sizeof digest, digest);
	for (size_t i = 0; i < sizeof digest; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}
