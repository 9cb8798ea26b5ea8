/* Token streams copied into a temporary shard, for commands that take
 * records from pipes but need random access (ts-eval). */
#ifndef TS_STREAMSHARD_H
#define TS_STREAMSHARD_H
#include "data/shard.h"
#include <stdint.h>

/* Where each row of a shard made from streams came from, for errors. */
struct row_origin {
	char **files;              /* the streams' names */
	uint32_t *file;            /* by row: its stream */
	uint64_t *rec;             /* by row: its record's number there */
};

/* Reads every record of the streams into an unlinked temporary shard and
 * opens it. *vocab_sha256 gets the streams' vocab hash (NULL when none),
 * on which they must agree; *labels and *nlabels the names of their classes
 * (0 when none), one numbering for all (label_union). *origin gets each
 * row's stream and record number, for errors. */
struct shard *shard_from_streams(char **files, int n, char **vocab_sha256, char ***labels, int *nlabels,
				 struct row_origin *origin);
#endif
