#include "catfile.h"
#include "err.h"
#include "mpjson.h"
#include "rec.h"
#include "shard.h"
#include "textin.h"
#include "tokrec.h"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

enum { FLUSH_AT = 1 << 16 };

static void emit(struct strbuf *b, struct afile *out, int force)
{
	if (b->n >= FLUSH_AT || (force && b->n)) {
		afile_write(out, b->s, b->n);
		b->n = 0;
	}
}

static int take(struct cat_opts *co)
{
	if (co->left == 0)
		return 0;
	if (co->left > 0)
		co->left--;
	return 1;
}

static void cat_stream(const char *path, struct afile *out, struct cat_opts *co)
{
	struct rec_reader *r = rec_open(path);
	struct strbuf b = {0};
	const msgpack_object *o;
	while (co->left != 0 && (o = rec_next(r))) {
		int is_header = rec_number(r) == 1 && mp_get(o, "kind");
		if (is_header ? co->no_header : !take(co))
			continue;
		mp_to_json(o, &b);
		sb_addc(&b, '\n');
		emit(&b, out, 0);
	}
	emit(&b, out, 1);
	sb_free(&b);
	rec_close(r);
}

/* A shard prints as the token records it holds. */
static void cat_shard(const char *path, struct afile *out, struct cat_opts *co)
{
	struct shard *s = shard_open(path);
	struct tokrec t = {0};
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	struct strbuf b = {0};
	for (uint64_t i = 0; i < shard_count(s) && take(co); i++) {
		shard_get(s, i, &t);
		sb.size = 0;
		tokrec_pack(&pk, &t);
		msgpack_unpack_next(&u, sb.data, sb.size, NULL);
		mp_to_json(&u.data, &b);
		sb_addc(&b, '\n');
		emit(&b, out, 0);
	}
	emit(&b, out, 1);
	sb_free(&b);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	tokrec_free(&t);
	shard_close(s);
}

/* A JSON file (a manifest) prints as one compact line. */
static void cat_json(const char *path, struct afile *out, struct cat_opts *co)
{
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err);
	if (!j)
		die("%s: line %d: not JSON: %s", path, err.line, err.text);
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (take(co)) {
		afile_write(out, s, strlen(s));
		afile_write(out, "\n", 1);
	}
	free(s);
	json_decref(j);
}

void cat_to_json(const char *path, struct afile *out, struct cat_opts *co)
{
	char magic[8] = {0};
	if (strcmp(path, "-")) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("cannot open %s:", path);
		ssize_t n = read(fd, magic, sizeof magic);
		close(fd);
		if (n == 0)
			return;
	}
	if (!memcmp(magic, SHARD_MAGIC, 8))
		cat_shard(path, out, co);
	else if (magic[0] == '{')   /* msgpack streams never start with '{' (fixint 123) */
		cat_json(path, out, co);
	else
		cat_stream(path, out, co);
}

void cat_from_json(const char *path, struct afile *out, struct cat_opts *co)
{
	struct textin *in = textin_open(path);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	char *line;
	size_t n;
	while (co->left != 0 && (line = textin_line(in, &n))) {
		if (strspn(line, " \t") == n)
			continue;
		json_error_t err;
		json_t *j = json_loadb(line, n, 0, &err);
		if (!j)
			die("%s: line %llu: not JSON: %s", textin_name(in), (unsigned long long)textin_lineno(in), err.text);
		if (!json_is_object(j))
			die("%s: line %llu: not a JSON object", textin_name(in), (unsigned long long)textin_lineno(in));
		if (json_object_get(j, "kind") || take(co)) {
			json_to_mp(j, &pk);
			if (sb.size >= FLUSH_AT) {
				afile_write(out, sb.data, sb.size);
				sb.size = 0;
			}
		}
		json_decref(j);
	}
	afile_write(out, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	textin_close(in);
}
