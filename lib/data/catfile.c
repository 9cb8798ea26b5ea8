#include "data/catfile.h"
#include "data/shard.h"
#include "data/textin.h"
#include "data/tokrec.h"
#include "format/mpjson.h"
#include "format/mpprint.h"
#include "format/safetensors.h"
#include "util/err.h"
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

/* Records print as they are read, in bounded memory. Whether the first is a
 * stream header is known only at its end: where that matters (to leave it
 * out, or not to count it), it is held until then; headers are small. */
static void cat_stream(const char *path, struct afile *out, struct cat_opts *co)
{
	struct mpprint *p = mpprint_open(path);
	mpprint_allow_torn_tail(p);   /* an event log whose trainer was killed mid-append */
	struct strbuf b = {0};
	if (co->left != 0 && mpprint_more(p)) {
		int hold = co->no_header || co->left >= 0;
		int is_header = mpprint_record(p, &b, hold ? NULL : out);
		if (is_header < 0 || (is_header ? co->no_header : !take(co)))
			b.n = 0;
	}
	while (co->left != 0 && mpprint_more(p) && take(co) && mpprint_record(p, &b, out) >= 0)
		;
	emit(&b, out, 1);
	sb_free(&b);
	mpprint_close(p);
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

static void print_line(const char *s, size_t n, struct afile *out, struct cat_opts *co)
{
	if (take(co)) {
		afile_write(out, s, n);
		afile_write(out, "\n", 1);
	}
}

static void print_json(json_t *j, struct afile *out, struct cat_opts *co)
{
	struct strbuf b = {0};
	json_to_text(j, &b);
	print_line(b.s, b.n, out, co);
	sb_free(&b);
}

/* A JSON file (a manifest, a checkpoint's state.json) prints as one compact line. */
static void cat_json(const char *path, struct afile *out, struct cat_opts *co)
{
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err);
	if (!j)
		die("%s: line %d: not JSON: %s", path, err.line, err.text);
	print_json(j, out, co);
	json_decref(j);
}

/* A safetensors file prints as its JSON header: each tensor's dtype, shape
 * and data_offsets, and __metadata__; never the data. */
static void cat_safetensors(const char *path, struct afile *out, struct cat_opts *co)
{
	st_close(st_open(path));   /* dies saying what is wrong with a bad header */
	FILE *f = fopen(path, "rb");
	uint64_t n;
	if (!f || fread(&n, 8, 1, f) != 1)
		die("read %s:", path);
	char *text = xmalloc(n);
	if (fread(text, 1, n, f) != n)
		die("read %s:", path);
	fclose(f);
	json_error_t err;
	json_t *j = json_loadb(text, n, 0, &err);
	if (!j)
		die("%s: header is not JSON: %s", path, err.text);
	print_json(j, out, co);
	json_decref(j);
	free(text);
}

/* Whether s is a JSON number: such a config value prints as it is. */
static int is_json_number(const char *s)
{
	s += *s == '-';
	if (!isdigit((unsigned char)*s))
		return 0;
	if (*s == '0' && isdigit((unsigned char)s[1]))
		return 0;   /* JSON has no leading zeros: 0042 stays a string */
	while (isdigit((unsigned char)*s))
		s++;
	if (*s == '.' && isdigit((unsigned char)s[1]))
		for (s++; isdigit((unsigned char)*s); s++)
			;
	if (*s == 'e' || *s == 'E') {
		s += 1 + (s[1] == '+' || s[1] == '-');
		if (!isdigit((unsigned char)*s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
	}
	return !*s;
}

/* s[0, *n) without the blanks around it. */
static char *trim(char *s, size_t *n)
{
	while (*n && isspace((unsigned char)s[*n - 1]))
		s[--*n] = 0;
	while (*n && isspace((unsigned char)*s))
		s++, --*n;
	return s;
}

/* A config file of "key = value" lines (a run's config) prints as one JSON
 * object; numbers and true/false keep their type, other values are strings. */
static void cat_config(const char *path, struct afile *out, struct cat_opts *co)
{
	struct textin *in = textin_open(path);
	struct strbuf b = {0};
	char *line;
	size_t n;
	sb_addc(&b, '{');
	while ((line = textin_line(in, &n))) {
		char *s = trim(line, &n), *eq = memchr(s, '=', n);
		if (!n || *s == '#')
			continue;
		if (!eq)
			die("%s: line %llu: not 'key = value'", path, (unsigned long long)textin_lineno(in));
		size_t nk = (size_t)(eq - s), nv = n - nk - 1;
		char *key = trim(s, &nk), *val = trim(eq + 1, &nv);
		if (b.n > 1)
			sb_addc(&b, ',');
		sb_add_json_str(&b, key, nk);
		sb_addc(&b, ':');
		if (is_json_number(val) || !strcmp(val, "true") || !strcmp(val, "false"))
			sb_add(&b, val, nv);
		else
			sb_add_json_str(&b, val, nv);
	}
	sb_addc(&b, '}');
	print_line(b.s, b.n, out, co);
	sb_free(&b);
	textin_close(in);
}

/* A safetensors file starts with its header's length (little-endian), and
 * the header with '{'. */
static int is_safetensors(const unsigned char *head, size_t n, off_t size)
{
	uint64_t len = 0;
	for (int i = 7; n > 8 && i >= 0; i--)
		len = len << 8 | head[i];
	return n > 8 && head[8] == '{' && len <= (uint64_t)size - 8;
}

/* A named file's first bytes, read without consuming them; *size gets its
 * size. 0 bytes for an empty file. */
static ssize_t sniff(const char *path, unsigned char *head, size_t n, off_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("cannot open %s:", path);
	struct stat sb;
	ssize_t got = pread(fd, head, n, 0);
	if (got < 0 || fstat(fd, &sb) < 0)
		die("read %s:", path);
	close(fd);
	*size = sb.st_size;
	return got;
}

/* Standard input, a pipe or anything else that is not a regular file can be
 * read only once, so it is taken for a record stream without a look (a
 * directory then fails as a read). */
static int regular_file(const char *path)
{
	struct stat sb;
	if (!strcmp(path, "-"))
		return 0;
	if (stat(path, &sb) < 0)
		die("cannot open %s:", path);
	return S_ISREG(sb.st_mode);
}

void cat_to_json(const char *path, struct afile *out, struct cat_opts *co)
{
	if (!regular_file(path)) {
		cat_stream(path, out, co);
		return;
	}
	unsigned char head[9] = {0};
	off_t size;
	ssize_t n = sniff(path, head, sizeof head, &size);
	if (n == 0)
		return;
	/* msgpack streams start with a map: never '{' (fixint 123), a letter or '#' */
	if (n >= 8 && !memcmp(head, SHARD_MAGIC, 8))
		cat_shard(path, out, co);
	else if (is_safetensors(head, (size_t)n, size))
		cat_safetensors(path, out, co);
	else if (head[0] == '{')
		cat_json(path, out, co);
	else if (isalpha(head[0]) || head[0] == '#')
		cat_config(path, out, co);
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
		/* NUL is allowed: ts-cat writes a string holding one as \u0000 */
		json_t *j = json_loadb(line, n, JSON_ALLOW_NUL, &err);
		if (!j || !json_is_object(j)) {
			afile_write(out, sb.data, sb.size);   /* the records before it go out whole */
			die("%s: line %llu: not %s%s", textin_name(in), (unsigned long long)textin_lineno(in),
			    j ? "a JSON object" : "JSON: ", j ? "" : err.text);
		}
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
