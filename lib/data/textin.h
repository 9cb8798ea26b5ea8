/* Buffered line input from a file or standard input, for JSON lines, CSV and
 * plain text readers. Lines keep no trailing newline; CR LF is accepted. */
#ifndef TS_TEXTIN_H
#define TS_TEXTIN_H
#include <stddef.h>
#include <stdint.h>

struct textin;
struct textin *textin_open(const char *path);   /* "-" is standard input */
/* The next line (NUL-terminated, len in *n), or NULL at the end. */
char *textin_line(struct textin *t, size_t *n);
/* 1-based number of the line last returned. */
uint64_t textin_lineno(const struct textin *t);
const char *textin_name(const struct textin *t);
void textin_close(struct textin *t);
#endif
