/* A map from byte strings to int32 values: open addressing over XXH3
 * hashes, the keys copied into one arena. For the vocabularies of
 * tokenizer.json models and the tokenizers' word caches. */
#ifndef TS_STRMAP_H
#define TS_STRMAP_H
#include <stddef.h>
#include <stdint.h>

struct strmap;

struct strmap *strmap_new(size_t expect);
void strmap_free(struct strmap *m);
/* Sets the value of key[0..n) to v (v >= 0); returns its previous value,
 * or -1 where it had none. */
int32_t strmap_put(struct strmap *m, const char *key, size_t n, int32_t v);
/* The value of key[0..n), or -1. */
int32_t strmap_get(const struct strmap *m, const char *key, size_t n);
/* Empties the map, keeping its memory. */
void strmap_clear(struct strmap *m);
#endif
