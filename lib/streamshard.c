#include "streamshard.h"
#include "err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct shard *shard_from_streams(char **files, int n, char **vocab_sha256, char ***labels, int *nlabels)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/ts-records-%ld.shard", tmp && *tmp ? tmp : "/tmp", (long)getpid());
	struct shard_writer *w = shard_create(path);
	struct tokrec t = {0};
	struct stream_header h, acc = {0};
	char *from = NULL;
	for (int i = 0; i < n; i++) {
		struct rec_reader *r = rec_open(files[i]);
		const msgpack_object *o;
		while ((o = rec_next(r))) {
			if (header_unpack(r, o, &h)) {
				header_merge(&acc, &from, r, &h);
				header_free(&h);
				continue;
			}
			tokrec_unpack(r, o, &t);
			shard_append(w, &t);
		}
		rec_close(r);
	}
	shard_commit(w);
	struct shard *s = shard_open(path);
	unlink(path);
	*vocab_sha256 = acc.vocab_sha256;
	*labels = acc.labels;
	*nlabels = acc.nlabels;
	free(from);
	tokrec_free(&t);
	if (shard_count(s) == 0)
		die("%s: no records", n == 1 ? files[0] : "the inputs");
	return s;
}
