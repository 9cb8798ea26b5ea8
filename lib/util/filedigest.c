#include "util/filedigest.h"
#include "util/err.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>
#ifdef TS_XXH_DISPATCH   /* the shared libxxhash's XXH3 on AVX2 or AVX-512 where the CPU has them */
#include <xxh_x86dispatch.h>
#endif

struct filedigest {
	XXH3_state_t *st;
};

struct filedigest *filedigest_new(void)
{
	struct filedigest *d = xmalloc(sizeof *d);
	d->st = XXH3_createState();
	if (!d->st)
		die("out of memory");
	XXH3_128bits_reset(d->st);
	return d;
}

void filedigest_add(struct filedigest *d, const void *p, size_t n)
{
	XXH3_128bits_update(d->st, p, n);
}

void filedigest_end(struct filedigest *d, char hex[FILEDIGEST_HEX])
{
	if (hex) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(d->st));
		for (size_t i = 0; i < sizeof c.digest; i++)
			snprintf(hex + 2 * i, 3, "%02x", c.digest[i]);
	}
	XXH3_freeState(d->st);
	free(d);
}

/* A file known: its identity, and its digest or its mapping (with the
 * digest it must have where that is still to be checked), or whether it
 * had that digest. */
struct known {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	char hex[FILEDIGEST_HEX];   /* "" where only its bytes are kept */
	void *map;
	char want[FILEDIGEST_HEX];
	int verdict;                /* -1: none */
};

enum { MAX_KNOWN = 16 };   /* a checkpoint's files, and a model dir's */

static struct known known[MAX_KNOWN];
static int nknown, next_slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int same_file(const struct known *k, const struct stat *sb)
{
	return k->dev == sb->st_dev && k->ino == sb->st_ino && k->size == sb->st_size &&
	       k->mtime.tv_sec == sb->st_mtim.tv_sec && k->mtime.tv_nsec == sb->st_mtim.tv_nsec &&
	       k->ctime.tv_sec == sb->st_ctim.tv_sec && k->ctime.tv_nsec == sb->st_ctim.tv_nsec;
}

/* What is known of sb's file (under the lock), or NULL. */
static struct known *lookup(const struct stat *sb)
{
	for (int i = 0; i < nknown; i++)
		if (same_file(&known[i], sb))
			return &known[i];
	return NULL;
}

/* Records sb's file (under the lock), replacing what was known of it, else
 * the oldest entry. */
static struct known *record(const struct stat *sb, const char *hex, void *map)
{
	struct known *k = lookup(sb);
	if (!k) {
		k = &known[next_slot];
		next_slot = (next_slot + 1) % MAX_KNOWN;
		if (nknown < MAX_KNOWN)
			nknown++;
	}
	if (k->map)
		munmap(k->map, (size_t)k->size);
	*k = (struct known){ sb->st_dev, sb->st_ino, sb->st_size, sb->st_mtim, sb->st_ctim, "", map, "", -1 };
	snprintf(k->hex, sizeof k->hex, "%s", hex);
	return k;
}

void filedigest_remember(const char *path, const char hex[FILEDIGEST_HEX])
{
	struct stat sb;
	if (stat(path, &sb))
		return;   /* nothing to remember: the dir's digests will read it */
	pthread_mutex_lock(&lock);
	record(&sb, hex, NULL);
	pthread_mutex_unlock(&lock);
}

int filedigest_recall(const struct stat *sb, char hex[FILEDIGEST_HEX])
{
	pthread_mutex_lock(&lock);
	struct known *k = lookup(sb);
	int found = k && k->hex[0];
	if (found)
		memcpy(hex, k->hex, FILEDIGEST_HEX);
	pthread_mutex_unlock(&lock);
	return found;
}

void filedigest_keep(const struct stat *sb, void *map, const char *want)
{
	pthread_mutex_lock(&lock);
	struct known *k = record(sb, "", map);
	snprintf(k->want, sizeof k->want, "%s", want ? want : "");
	k->verdict = want ? -1 : 1;
	pthread_mutex_unlock(&lock);
}

void *filedigest_take(const struct stat *sb, char want[FILEDIGEST_HEX])
{
	pthread_mutex_lock(&lock);
	struct known *k = lookup(sb);
	void *map = k ? k->map : NULL;
	if (map) {
		k->map = NULL;
		memcpy(want, k->want, FILEDIGEST_HEX);
	}
	pthread_mutex_unlock(&lock);
	return map;
}

void filedigest_verdict(const struct stat *sb, int intact)
{
	pthread_mutex_lock(&lock);
	struct known *k = lookup(sb);
	if (!k)
		k = record(sb, "", NULL);
	k->verdict = intact;
	pthread_mutex_unlock(&lock);
}

int filedigest_verdict_of(const struct stat *sb)
{
	pthread_mutex_lock(&lock);
	struct known *k = lookup(sb);
	int v = k ? k->verdict : -1;
	pthread_mutex_unlock(&lock);
	return v;
}
