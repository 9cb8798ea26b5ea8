/* The regexes of tokenizer.json (Split, Replace, ByteLevel's), compiled by
 * PCRE2 with Unicode properties and JIT. One compiled regex serves every
 * thread; each thread brings its own match space (struct regex_space). */
#ifndef TS_REGEX_H
#define TS_REGEX_H
#include <stddef.h>

struct regex;
struct regex_space;   /* a thread's: where a match's offsets land */

/* The regex of pattern, or NULL with PCRE2's reason in why[0..n). With
 * literal, pattern is a plain string matched as it is. */
struct regex *regex_new(const char *pattern, size_t len, int literal, char *why, size_t n);
void regex_free(struct regex *r);
struct regex_space *regex_space_new(void);
void regex_space_free(struct regex_space *m);
/* The first match in s[from..len) (valid UTF-8): 1 with [*start, *end),
 * else 0. An empty match is returned as such; the caller steps past it. */
int regex_find(const struct regex *r, struct regex_space *m, const char *s, size_t len, size_t from, size_t *start, size_t *end);
#endif
