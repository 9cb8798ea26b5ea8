/* What ts-cat does to one file: detect its kind and print it as JSON lines,
 * or read JSON lines and write them as msgpack records. */
#ifndef TS_CATFILE_H
#define TS_CATFILE_H
#include "util/afile.h"

struct cat_opts {
	long left;       /* records still to print; -1 for no limit */
	int no_header;   /* leave out stream headers */
};

void cat_to_json(const char *path, struct afile *out, struct cat_opts *co);
void cat_from_json(const char *path, struct afile *out, struct cat_opts *co);
#endif
