/* util/copyhash.h against libxxhash: the same XXH3-128 for every length
 * about the stripe (64 bytes) and block (1 KiB) bounds and for large
 * inputs, taken in pieces of every size (none, a byte, a stripe's part,
 * many stripes, the whole), copied or not, with each kernel this CPU has;
 * and the copy byte for byte. */
#include "check.h"
#include "util/copyhash.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void library_hex(const void *p, size_t n, char hex[33])
{
	XXH128_hash_t h = XXH3_128bits(p, n);
	snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

static unsigned long long rng = 88172645463325252ull;
static unsigned long long next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The digest of n bytes at p taken in pieces: of one size where piece is
 * not 0, else of random sizes; copied to out where out is not NULL. */
static void pieces_hex(const unsigned char *p, size_t n, size_t piece, unsigned char *out, char hex[33])
{
	struct copyhash h;
	copyhash_init(&h, n);
	for (size_t at = 0; at < n;) {
		size_t k = piece ? piece : (size_t)(next() % 5 == 0 ? next() % 5000 : next() % 130);
		k = k < n - at ? k : n - at;
		copyhash_take(&h, out ? out + at : NULL, p + at, k);
		at += k;
	}
	copyhash_hex(&h, hex);
}

int main(void)
{
	static const size_t lengths[] = { 241, 255, 256, 257, 319, 320, 321, 1023, 1024, 1025, 1087, 1088, 1089,
					  2048, 4096 + 63, 65536 + 13, (1 << 20) + 7, (3 << 20) + 64 };
	static const char *const names[] = { "portable C", "AVX2", "AVX-512" };
	size_t most = (3 << 20) + 64;
	unsigned char *in = xmalloc(most), *out = xmalloc(most);
	for (size_t i = 0; i < most; i++)
		in[i] = (unsigned char)next();
	for (int k = 0; k < 3; k++) {
		if (!copyhash_kernel(k)) {
			printf("PASS %s: this CPU lacks it, the others are checked\n", names[k]);
			continue;
		}
		int same = 1, copied = 1, whole = 1;
		size_t first_bad = 0;
		for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
			size_t n = lengths[l];
			char want[33], got[33];
			library_hex(in, n, want);
			static const size_t sizes[] = { 0, 0, 1, 7, 64, 100, 1000, 1 << 16 };
			for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
				memset(out, 0, n);
				pieces_hex(in, n, sizes[s], s % 2 ? NULL : out, got);
				if (strcmp(want, got) && same) {
					same = 0;
					first_bad = n;
				}
				copied &= s % 2 || !memcmp(in, out, n);
			}
			pieces_hex(in, n, n, NULL, got);
			whole &= !strcmp(want, got);
		}
		CHECK(same, "%s: XXH3-128 as libxxhash's, every length and piece size (the first length that differs: %zu; 0, none)",
		      names[k], first_bad);
		CHECK(whole, "%s: taken whole, as libxxhash's", names[k]);
		CHECK(copied, "%s: the copy is the input", names[k]);
	}
	char hex[33];
	struct copyhash h;
	memset(in, 'a', 300);
	copyhash_init(&h, 300);
	copyhash_take(&h, NULL, in, 300);
	copyhash_hex(&h, hex);
	CHECK(!strcmp(hex, "5e563f2cb28d2005c1d17581d8eb7e21"), "300 times 'a': %s, as xxhsum -H2 prints it", hex);
	free(in);
	free(out);
	CHECK_DONE();
}
