/* CSV and TSV records per RFC 4180: quoted fields, embedded delimiters,
 * newlines and doubled quotes; CR LF or LF line ends; blank lines skipped. */
#ifndef TS_CSV_H
#define TS_CSV_H
#include <stddef.h>
#include <stdint.h>

struct csv_field { char *s; size_t n; };   /* NUL-terminated, unescaped */

struct csv;
struct csv *csv_open(const char *path, char delim);   /* "-" is standard input */
/* Reads the next record; returns its field count, or -1 at the end. Fields
 * stay valid until the next call. Dies naming the file and line on an
 * unterminated quote, text after a closing quote, a CR that ends no line or a
 * UTF-16 byte order mark. */
int csv_next(struct csv *c, struct csv_field **fields);
/* Line on which the last record began (1-based); bytes consumed so far. */
uint64_t csv_line(const struct csv *c);
uint64_t csv_offset(const struct csv *c);
const char *csv_name(const struct csv *c);
void csv_close(struct csv *c);
#endif
