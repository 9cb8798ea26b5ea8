/* How ts-shard divides a data set: named parts given as fractions that sum to
 * 1 ("train=0.8,valid=0.1,test=0.1", or "train=1" for all) or as record counts
 * ("valid=500,test=500"); the last of them may be "rest" (what the others
 * leave). Fractions round down for every part but the last, which takes the
 * remainder. A part may instead be a file of its own, whole ("test=@FILE"):
 * the shares divide the other inputs. */
#ifndef TS_SPLITSPEC_H
#define TS_SPLITSPEC_H
#include <stdint.h>

struct split_part {
	char *text;               /* the part as given ("train=0.8"), for messages */
	char *name;
	int is_rest;
	uint64_t count;           /* a count */
	uint64_t num, den;        /* a fraction num/den (den 0 for a count) */
	char *file;               /* NAME=@FILE: that file whole; NULL for a share */
};

struct splitspec {
	struct split_part *parts;
	int n;
};

/* Dies with a usage error (exit 2) naming what is wrong. */
void splitspec_parse(const char *text, struct splitspec *s);
/* Records for each share out of total (0 for a part of its own file);
 * counts[] has s->n entries. Dies (exit 1) when the counts ask for more
 * records than there are. */
void splitspec_counts(const struct splitspec *s, uint64_t total, uint64_t *counts);
/* The parts that are shares, not files. */
int splitspec_shares(const struct splitspec *s);
void splitspec_free(struct splitspec *s);
#endif
