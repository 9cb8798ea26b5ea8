/* A growable byte buffer. */
#ifndef TS_STRBUF_H
#define TS_STRBUF_H
#include <stddef.h>
#include <stdint.h>

struct strbuf { char *s; size_t n, cap; };

void sb_add(struct strbuf *b, const void *p, size_t n);
void sb_addc(struct strbuf *b, char c);
void sb_addf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends v in decimal (sb_addf's %llu, without its cost: a shard's ids are most of what ts-cat prints). */
void sb_add_uint(struct strbuf *b, uint64_t v);
/* Appends s as a JSON string literal (quotes, escapes; bad UTF-8 becomes U+FFFD). */
void sb_add_json_str(struct strbuf *b, const char *s, size_t n);
/* The same without the quotes: a piece of a string literal. */
void sb_add_json_chars(struct strbuf *b, const char *s, size_t n);
/* Appends the shortest decimal text that reads back as v (as float when is_f32). */
void sb_add_double(struct strbuf *b, double v, int is_f32);
/* Appends the whole file at path: 0, or -1 with errno set where it cannot be
 * opened; dies where it cannot be read. */
int sb_add_file(struct strbuf *b, const char *path);
void sb_free(struct strbuf *b);
/* A value for a command line: as it is when the shell would take it so,
 * else in single quotes; malloc'd. */
char *shell_quote(const char *s);
#endif
