#include "util/copyhash.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#define XXH_INLINE_ALL   /* for XXH3's secret and primes, the library's own */
#include <xxhash.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* XXH3's long inputs: 64-byte stripes, each added into 8 accumulators with
 * 8 bytes more of the secret than the one before; every 16 stripes (a
 * block) the accumulators are scrambled. The stripe that holds the last
 * byte is left to the end, which adds the input's last 64 bytes, then the
 * accumulators are merged twice into the two halves. */
enum { STRIPE = 64, SECRET = sizeof XXH3_kSecret, PER_BLOCK = (SECRET - STRIPE) / 8 };

/* The k stripes at src into acc, the first stripe number at of its block
 * (the others after it, the blocks they end scrambled), copied to dst
 * where dst is not NULL. */
typedef void stripes_fn(uint64_t *acc, unsigned char *dst, const unsigned char *src, size_t k, size_t at);

static uint64_t read64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;   /* little-endian: x86-64 and aarch64 */
}

static const unsigned char *const scrambler = XXH3_kSecret + SECRET - STRIPE;

/* The secret's 64 bytes for each stripe of a block, aligned, so that the
 * vector kernels load them whole. */
static _Alignas(64) unsigned char keys[PER_BLOCK][STRIPE];

static void stripe_c(uint64_t *acc, const unsigned char *src, const unsigned char *secret)
{
	for (int i = 0; i < 8; i++) {
		uint64_t v = read64(src + 8 * i), key = v ^ read64(secret + 8 * i);
		acc[i ^ 1] += v;
		acc[i] += (key & 0xffffffffu) * (key >> 32);
	}
}

static void stripes_c(uint64_t *acc, unsigned char *dst, const unsigned char *src, size_t k, size_t at)
{
	for (size_t j = 0; j < k; j++, src += STRIPE) {
		if (dst) {
			memcpy(dst, src, STRIPE);
			dst += STRIPE;
		}
		stripe_c(acc, src, XXH3_kSecret + 8 * at);
		if (++at == PER_BLOCK) {
			for (int i = 0; i < 8; i++)
				acc[i] = (acc[i] ^ acc[i] >> 47 ^ read64(scrambler + 8 * i)) * XXH_PRIME32_1;
			at = 0;
		}
	}
}

#if defined(__x86_64__)
/* How far ahead of a stripe the vector kernels ask for the input: a copy
 * from the page cache into fresh memory ran 8% slower with its hashing
 * where only the processor's own prefetching brought it in, about as fast
 * as the copy alone with this. */
enum { AHEAD = 2048 };
#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f")))

/* One stripe's half d, its secret's half at key, into a. */
AVX2 static inline __m256i add_avx2(__m256i a, __m256i d, const unsigned char *key)
{
	__m256i k = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)key));
	return _mm256_add_epi64(a, _mm256_add_epi64(_mm256_mul_epu32(k, _mm256_srli_epi64(k, 32)),
						    _mm256_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2))));
}

AVX2 static inline __m256i scramble_avx2(__m256i a, const unsigned char *key)
{
	const __m256i prime = _mm256_set1_epi32((int)XXH_PRIME32_1);
	a = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)), _mm256_loadu_si256((const __m256i *)key));
	return _mm256_add_epi64(_mm256_mul_epu32(a, prime),
				_mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime), 32));
}

AVX2 static void stripes_avx2(uint64_t *acc, unsigned char *dst, const unsigned char *src, size_t k, size_t at)
{
	__m256i a0 = _mm256_loadu_si256((const __m256i *)acc), a1 = _mm256_loadu_si256((const __m256i *)(acc + 4));
	for (size_t j = 0; j < k; j++, src += STRIPE) {
		__m256i d0 = _mm256_loadu_si256((const __m256i *)src), d1 = _mm256_loadu_si256((const __m256i *)(src + 32));
		_mm_prefetch((const char *)src + AHEAD, _MM_HINT_T0);
		if (dst) {
			_mm256_storeu_si256((__m256i *)dst, d0);
			_mm256_storeu_si256((__m256i *)(dst + 32), d1);
			dst += STRIPE;
		}
		a0 = add_avx2(a0, d0, keys[at]);
		a1 = add_avx2(a1, d1, keys[at] + 32);
		if (++at == PER_BLOCK) {
			a0 = scramble_avx2(a0, scrambler);
			a1 = scramble_avx2(a1, scrambler + 32);
			at = 0;
		}
	}
	_mm256_storeu_si256((__m256i *)acc, a0);
	_mm256_storeu_si256((__m256i *)(acc + 4), a1);
}

AVX512 static void stripes_avx512(uint64_t *acc, unsigned char *dst, const unsigned char *src, size_t k, size_t at)
{
	const __m512i prime = _mm512_set1_epi32((int)XXH_PRIME32_1), key = _mm512_loadu_si512(scrambler);
	__m512i a = _mm512_loadu_si512(acc);
	for (size_t j = 0; j < k; j++, src += STRIPE) {
		__m512i d = _mm512_loadu_si512(src);
		_mm_prefetch((const char *)src + AHEAD, _MM_HINT_T0);
		if (dst) {
			_mm512_storeu_si512(dst, d);
			dst += STRIPE;
		}
		__m512i x = _mm512_xor_si512(d, _mm512_load_si512(keys[at]));
		a = _mm512_add_epi64(a, _mm512_add_epi64(_mm512_mul_epu32(x, _mm512_srli_epi64(x, 32)),
							 _mm512_shuffle_epi32(d, (_MM_PERM_ENUM)_MM_SHUFFLE(1, 0, 3, 2))));
		if (++at == PER_BLOCK) {
			a = _mm512_xor_si512(_mm512_xor_si512(a, _mm512_srli_epi64(a, 47)), key);
			a = _mm512_add_epi64(_mm512_mul_epu32(a, prime),
					     _mm512_slli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), prime), 32));
			at = 0;
		}
	}
	_mm512_storeu_si512(acc, a);
}
#endif

static stripes_fn *kernel;

static void fill_keys(void)
{
	for (int i = 0; i < PER_BLOCK; i++)
		memcpy(keys[i], XXH3_kSecret + 8 * i, STRIPE);
}

static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

int copyhash_kernel(int k)
{
	pthread_once(&keys_once, fill_keys);
#if defined(__x86_64__)
	if (k == 2 && __builtin_cpu_supports("avx512f")) {
		kernel = stripes_avx512;
		return 1;
	}
	if (k == 1 && __builtin_cpu_supports("avx2")) {
		kernel = stripes_avx2;
		return 1;
	}
#endif
	if (k == 0)
		kernel = stripes_c;
	return k == 0;
}

static stripes_fn *best(void)
{
	if (!kernel && !copyhash_kernel(2) && !copyhash_kernel(1))
		copyhash_kernel(0);
	return kernel;
}

/* The k whole stripes at src, the first the input's stripe number first,
 * into h's accumulators. */
static void take_stripes(struct copyhash *h, unsigned char *dst, const unsigned char *src, size_t k, uint64_t first)
{
	best()(h->acc, dst, src, k, (size_t)(first % PER_BLOCK));
}

void copyhash_init(struct copyhash *h, uint64_t len)
{
	static const uint64_t init[8] = { XXH_PRIME32_3, XXH_PRIME64_1, XXH_PRIME64_2, XXH_PRIME64_3,
					  XXH_PRIME64_4, XXH_PRIME32_2, XXH_PRIME64_5, XXH_PRIME32_1 };
	memset(h, 0, sizeof *h);
	memcpy(h->acc, init, sizeof init);
	h->len = len;
}

void copyhash_take(struct copyhash *h, void *dst_, const void *src_, size_t n)
{
	unsigned char *dst = dst_;
	const unsigned char *src = src_;
	uint64_t tail = h->len - STRIPE, end = h->pos + n;
	if (end > tail) {   /* the last 64 bytes are added at the end */
		uint64_t from = h->pos > tail ? h->pos : tail;
		memcpy(h->last + (from - tail), src + (from - h->pos), (size_t)(end - from));
	}
	uint64_t whole = (h->len - 1) / STRIPE * STRIPE;   /* the bytes of the stripes added in order */
	while (n) {
		size_t off = (size_t)(h->pos % STRIPE), m;
		if (h->pos >= whole) {
			m = n;
			if (dst)
				memcpy(dst, src, m);
		} else if (!off && n >= STRIPE) {
			uint64_t k = n / STRIPE, left = (whole - h->pos) / STRIPE;
			k = k < left ? k : left;
			take_stripes(h, dst, src, (size_t)k, h->pos / STRIPE);
			m = (size_t)k * STRIPE;
		} else {
			m = STRIPE - off < n ? STRIPE - off : n;
			memcpy(h->stripe + off, src, m);
			if (dst)
				memcpy(dst, src, m);
			if (off + m == STRIPE)
				take_stripes(h, NULL, h->stripe, 1, h->pos / STRIPE);
		}
		h->pos += m;
		src += m;
		if (dst)
			dst += m;
		n -= m;
	}
}

static uint64_t merge(const uint64_t *acc, const unsigned char *secret, uint64_t start)
{
	uint64_t r = start;
	for (int i = 0; i < 4; i++) {
		unsigned __int128 p = (unsigned __int128)(acc[2 * i] ^ read64(secret + 16 * i)) *
				      (acc[2 * i + 1] ^ read64(secret + 16 * i + 8));
		r += (uint64_t)p ^ (uint64_t)(p >> 64);
	}
	r ^= r >> 37;
	r *= 0x165667919E3779F9ULL;
	return r ^ r >> 32;
}

void copyhash_hex(const struct copyhash *h, char hex[33])
{
	uint64_t acc[8];
	memcpy(acc, h->acc, sizeof acc);
	stripe_c(acc, h->last, XXH3_kSecret + SECRET - STRIPE - 7);
	uint64_t low = merge(acc, XXH3_kSecret + 11, h->len * XXH_PRIME64_1);
	uint64_t high = merge(acc, XXH3_kSecret + SECRET - sizeof acc - 11, ~(h->len * XXH_PRIME64_2));
	snprintf(hex, 33, "%016llx%016llx", (unsigned long long)high, (unsigned long long)low);
}
