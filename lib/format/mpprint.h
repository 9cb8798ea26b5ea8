/* msgpack records printed as JSON lines while they are read, a token at a
 * time: memory is bounded by a read buffer and the nesting depth, not by the
 * size of a record (a record of millions of ids would take gigabytes as a
 * msgpack_object tree). The JSON is that of mp_to_json. */
#ifndef TS_MPPRINT_H
#define TS_MPPRINT_H
#include "util/afile.h"
#include "util/strbuf.h"

struct mpprint;
/* path "-" is standard input. */
struct mpprint *mpprint_open(const char *path);
/* Whether another record follows (0 at a clean end of input). */
int mpprint_more(struct mpprint *p);
/* A last record cut short (a writer killed mid-append) ends the stream with a
 * warning, where none of it has gone to out yet. */
void mpprint_allow_torn_tail(struct mpprint *p);
/* Prints the next record and a newline into b, moving b's bytes to out as
 * they pile up; with out NULL, b keeps them all. Returns whether the record
 * is a stream header (a map with a "kind" key), or -1 for a torn last record
 * (nothing of it printed) where those are allowed. Dies with "NAME: record N:
 * why" on a record that is truncated, malformed or not a map. */
int mpprint_record(struct mpprint *p, struct strbuf *b, struct afile *out);
void mpprint_close(struct mpprint *p);
#endif
