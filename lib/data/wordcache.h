/* A thread's cache of the ids of words a model has already encoded (text
 * repeats its words: most lookups hit); emptied when it grows too large. */
#ifndef TS_WORDCACHE_H
#define TS_WORDCACHE_H
#include "data/ids.h"

struct wordcache;

struct wordcache *wordcache_new(void);
void wordcache_free(struct wordcache *c);
/* Appends word[0..n)'s ids to out where the cache has them; returns whether
 * it had. */
int wordcache_get(const struct wordcache *c, const char *word, size_t n, struct ids *out);
/* Keeps out->v[from..out->n) as word[0..n)'s ids. */
void wordcache_put(struct wordcache *c, const char *word, size_t n, const struct ids *out, size_t from);
#endif
