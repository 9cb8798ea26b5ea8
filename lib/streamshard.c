#include "streamshard.h"
#include "err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void take_header(const struct rec_reader *r, const struct stream_header *h, char **sha, char ***labels,
			int *nlabels)
{
	if (h->vocab_sha256) {
		if (*sha && strcmp(*sha, h->vocab_sha256))
			rec_die(r, "vocab sha256 %.12s… differs from the other inputs' %.12s…", h->vocab_sha256, *sha);
		if (!*sha)
			*sha = xstrdup(h->vocab_sha256);
	}
	if (h->nlabels && !*nlabels) {
		*nlabels = h->nlabels;
		*labels = xcalloc((size_t)h->nlabels, sizeof **labels);
		for (int i = 0; i < h->nlabels; i++)
			(*labels)[i] = xstrdup(h->labels[i]);
	}
}

struct shard *shard_from_streams(char **files, int n, char **vocab_sha256, char ***labels, int *nlabels)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/ts-records-%ld.shard", tmp && *tmp ? tmp : "/tmp", (long)getpid());
	*vocab_sha256 = NULL;
	*labels = NULL;
	*nlabels = 0;
	struct shard_writer *w = shard_create(path);
	struct tokrec t = {0};
	struct stream_header h;
	for (int i = 0; i < n; i++) {
		struct rec_reader *r = rec_open(files[i]);
		const msgpack_object *o;
		while ((o = rec_next(r))) {
			if (header_unpack(r, o, &h)) {
				take_header(r, &h, vocab_sha256, labels, nlabels);
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
	tokrec_free(&t);
	if (shard_count(s) == 0)
		die("%s: no records", n == 1 ? files[0] : "the inputs");
	return s;
}
