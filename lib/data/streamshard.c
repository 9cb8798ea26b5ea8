#include "data/streamshard.h"
#include "util/afile.h"
#include "util/cleanup.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A private dir under $TMPDIR (default /tmp), removed if the command dies:
 * a fixed name there could be a symlink another user planted. Malloc'd. */
static char *make_private_dir(void)
{
	const char *tmp = temp_dir();
	char *dir = path_join(tmp, "ts-records-XXXXXX");
	if (!mkdtemp(dir))
		die("cannot create a temporary directory in %s:", tmp);
	cleanup_add(dir);
	return dir;
}

struct shard *shard_from_streams(char **files, int n, char **vocab_sha256, char ***labels, int *nlabels,
				 struct row_origin *origin)
{
	char *dir = make_private_dir(), *path = path_join(dir, "records.shard");
	struct shard_writer *w = shard_create(path);
	struct tokrec t = {0};
	struct stream_header h, acc = {0};
	struct label_union u = {0};
	char *from = NULL;
	uint64_t rows = 0;
	size_t cap_file = 0, cap_rec = 0;
	*origin = (struct row_origin){xcalloc((size_t)n, sizeof *origin->files), NULL, NULL};
	for (int i = 0; i < n; i++) {
		if (shard_file_is(files[i]))
			die("%s: a shard of a data dir, not a token stream: give the dir as --data DIR with --split NAME",
			    files[i]);
		struct rec_reader *r = rec_open(files[i]);
		origin->files[i] = xstrdup(rec_name(r));
		label_union_stream(&u);
		const msgpack_object *o;
		while ((o = rec_next(r))) {
			if (header_unpack(r, o, &h)) {
				header_merge(&acc, &from, r, &h);
				label_union_header(&u, &h);
				header_free(&h);
				continue;
			}
			tokrec_unpack(r, o, &t);
			if (strlen(t.id) > SHARD_MAX_ID)
				rec_die(r, "id is %zu bytes long; shards hold ids of at most %d bytes", strlen(t.id),
					SHARD_MAX_ID);
			label_union_record(&u, r, &t);
			shard_append(w, &t);
			grow(&origin->file, &cap_file, rows + 1, sizeof *origin->file);
			grow(&origin->rec, &cap_rec, rows + 1, sizeof *origin->rec);
			origin->file[rows] = (uint32_t)i;
			origin->rec[rows++] = rec_number(r);
		}
		rec_close(r);
	}
	shard_commit(w);
	struct shard *s = shard_open(path);
	unlink(path);
	rmdir(dir);
	cleanup_forget(dir);
	free(path);
	free(dir);
	*vocab_sha256 = acc.vocab_sha256;
	*labels = u.names;   /* the caller's now */
	*nlabels = u.n;
	free(u.to);
	free(from);
	tokrec_free(&t);
	if (shard_count(s) == 0)
		die("%s: no records", n == 1 ? origin->files[0] : "the inputs");
	return s;
}
