#include "format/rec.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { READ_CHUNK = 1 << 16, WRITE_BUF = 1 << 20 };

struct rec_reader {
	int fd;
	char *name;
	msgpack_unpacker up;
	msgpack_unpacked res;
	uint64_t n;
	int eof;
	int torn_ok;        /* a torn last record ends the stream */
	int64_t read, torn_at;
};

struct rec_reader *rec_open(const char *path)
{
	struct rec_reader *r = xcalloc(1, sizeof *r);
	if (!strcmp(path, "-")) {
		r->fd = STDIN_FILENO;
		r->name = xstrdup("standard input");
	} else {
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (r->fd < 0)
			die("cannot open %s:", path);
		r->name = xstrdup(path);
	}
	if (!msgpack_unpacker_init(&r->up, READ_CHUNK))
		die("out of memory");
	msgpack_unpacked_init(&r->res);
	r->torn_at = -1;
	return r;
}

void rec_allow_torn_tail(struct rec_reader *r) { r->torn_ok = 1; }
int64_t rec_torn_at(const struct rec_reader *r) { return r->torn_at; }

void rec_die(const struct rec_reader *r, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	die("%s: record %llu: %s", r->name, (unsigned long long)r->n, msg);
}

static void fill(struct rec_reader *r)
{
	if (!msgpack_unpacker_reserve_buffer(&r->up, READ_CHUNK))
		die("out of memory");
	ssize_t got;
	do
		got = read(r->fd, msgpack_unpacker_buffer(&r->up), msgpack_unpacker_buffer_capacity(&r->up));
	while (got < 0 && errno == EINTR);
	if (got < 0)
		die("read %s:", r->name);
	if (got == 0)
		r->eof = 1;
	else
		msgpack_unpacker_buffer_consumed(&r->up, (size_t)got);
	r->read += got;
}

/* The length of the whole msgpack object that starts p[0..n), 0 while those
 * bytes do not hold all of it, or NOT_MSGPACK. Found without allocating: a
 * header that claims 4 billion entries costs nothing until they come. */
enum { NOT_MSGPACK = -1 };
enum { MP_MAX_DEPTH = 32 };   /* msgpack-c's MSGPACK_EMBED_STACK_SIZE, in no header of its API */
static int64_t whole_object(const unsigned char *p, size_t n)
{
	size_t at = 0;
	uint64_t items = 1;   /* objects still to come */
	while (items--) {
		if (at >= n)
			return 0;
		unsigned c = p[at++];
		if (c <= 0x7f || c >= 0xe0)   /* fixints, most token ids: the fast way */
			continue;
		if (c >= 0xcc && c <= 0xd3) {   /* (u)int8..64 */
			size_t w = 1u << ((c - 0xcc) & 3);
			if (n - at < w)
				return 0;
			at += w;
			continue;
		}
		uint64_t len = 0, skip = 0;
		int k = 0;       /* bytes of a big-endian length after c */
		int times = 0;   /* what len counts: 0 bytes to skip, 1 objects, 2 pairs */
		if (c == 0xc0 || c == 0xc2 || c == 0xc3)   /* nil, false, true */
			;
		else if (c <= 0x8f)
			len = c & 0xf, times = 2;
		else if (c <= 0x9f)
			len = c & 0xf, times = 1;
		else if (c <= 0xbf)
			skip = c & 0x1f;
		else if (c == 0xc4 || c == 0xd9 || c == 0xc5 || c == 0xda || c == 0xc6 || c == 0xdb)
			k = c == 0xc4 || c == 0xd9 ? 1 : c == 0xc5 || c == 0xda ? 2 : 4;
		else if (c >= 0xc7 && c <= 0xc9)   /* ext 8/16/32: the length, a type byte */
			k = 1 << (c - 0xc7), skip = 1;
		else if (c == 0xca || c == 0xcb)   /* float32, float64 */
			skip = c == 0xca ? 4 : 8;
		else if (c >= 0xd4 && c <= 0xd8)   /* fixext 1..16: a type byte and the data */
			skip = 1 + (1u << (c - 0xd4));
		else if (c >= 0xdc && c <= 0xdf)
			k = c & 1 ? 4 : 2, times = c >= 0xde ? 2 : 1;
		else
			return NOT_MSGPACK;   /* 0xc1 */
		if (n - at < (size_t)k)
			return 0;
		for (int i = 0; i < k; i++)
			len = len << 8 | p[at++];
		if (times)
			items += len * (uint64_t)times;
		else
			skip += len;
		if (n - at < skip)
			return 0;
		at += skip;
	}
	return (int64_t)at;
}

/* msgpack_unpacker_next, once the bytes up holds make a whole object:
 * MSGPACK_UNPACK_CONTINUE until then. */
static msgpack_unpack_return next_whole(msgpack_unpacker *up, msgpack_unpacked *u)
{
	int64_t len = whole_object((const unsigned char *)up->buffer + up->off, up->used - up->off);
	if (len == NOT_MSGPACK)
		return MSGPACK_UNPACK_PARSE_ERROR;
	return len ? msgpack_unpacker_next(up, u) : MSGPACK_UNPACK_CONTINUE;
}

/* Whether the first record is a byte of ASCII, as a msgpack int: a file of
 * text (CSV, JSON lines) given where records belong. */
static int starts_as_text(const struct rec_reader *r)
{
	const msgpack_object *o = &r->res.data;
	return r->n == 1 && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= '\t' && o->via.u64 < 0x7f;
}

const msgpack_object *rec_next(struct rec_reader *r)
{
	for (;;) {
		msgpack_unpack_return ret = next_whole(&r->up, &r->res);
		if (ret == MSGPACK_UNPACK_SUCCESS) {
			r->n++;
			if (r->res.data.type != MSGPACK_OBJECT_MAP)
				rec_die(r, "not a map%s", starts_as_text(r) ? ": it looks like text, not msgpack records" : "");
			return &r->res.data;
		}
		if (ret == MSGPACK_UNPACK_PARSE_ERROR) {
			r->n++;
			rec_die(r, "malformed msgpack");
		}
		if (ret == MSGPACK_UNPACK_NOMEM_ERROR) {   /* or its stack of open maps and lists is full */
			r->n++;
			rec_die(r, "nested deeper than %d levels, or out of memory", MP_MAX_DEPTH);
		}
		if (r->eof) {
			size_t tail = msgpack_unpacker_message_size(&r->up);
			if (tail > 0 && !r->torn_ok) {
				r->n++;
				rec_die(r, "truncated stream");
			}
			if (tail > 0) {
				r->torn_at = r->read - (int64_t)tail;
				warnx("%s: record %llu is cut short (a torn write); ignoring it", r->name,
				      (unsigned long long)r->n + 1);
			}
			return NULL;
		}
		fill(r);
	}
}

uint64_t rec_number(const struct rec_reader *r) { return r->n; }
const char *rec_name(const struct rec_reader *r) { return r->name; }

void rec_close(struct rec_reader *r)
{
	if (r->fd != STDIN_FILENO)
		close(r->fd);
	msgpack_unpacked_destroy(&r->res);
	msgpack_unpacker_destroy(&r->up);
	free(r->name);
	free(r);
}

/* Hands take each complete record in the unpacker's buffer, counting it
 * and moving the file offset past it (the buffer holds the file's bytes up
 * to offset at). Returns 1 when take asks to stop, 0 when the buffer ends
 * (nothing left, or a record cut short), -1 on a record that is not a map
 * or not msgpack. */
static int take_whole(struct rec_tail *t, msgpack_unpacker *up, long long at,
		      int (*take)(void *ctx, const msgpack_object *o), void *ctx, const char *path, char *err,
		      size_t errlen)
{
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	int ret, rc = 0;
	while (!rc && (ret = next_whole(up, &u)) == MSGPACK_UNPACK_SUCCESS) {
		if (u.data.type != MSGPACK_OBJECT_MAP) {
			snprintf(err, errlen, "%s: record %ld: not a map", path, t->records + 1);
			rc = -1;
			break;
		}
		t->records++;
		t->read = at - (long long)msgpack_unpacker_message_size(up);
		rc = take(ctx, &u.data) ? 1 : 0;
	}
	if (!rc && ret != MSGPACK_UNPACK_CONTINUE) {
		snprintf(err, errlen, "%s: record %ld: malformed msgpack", path, t->records + 1);
		rc = -1;
	}
	msgpack_unpacked_destroy(&u);
	return rc;
}

/* Whether the file open as fd (-1: none there) is not the one t has read
 * from: a run dir deleted and made again holds a new file, whose records
 * do not begin where the old one's left off. */
static int tail_replaced(const struct rec_tail *t, int fd)
{
	struct stat st;
	unsigned char head[sizeof t->head];
	if (t->read == 0)
		return 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		return 1;
	return st.st_dev != t->dev || st.st_ino != t->ino || st.st_size < t->read ||
	       pread(fd, head, (size_t)t->nhead, 0) != t->nhead || memcmp(head, t->head, (size_t)t->nhead);
}

/* Notes which file t begins to read: fd's, whose first bytes are buf[n]. */
static void tail_begin(struct rec_tail *t, int fd, const void *buf, size_t n)
{
	struct stat st;
	if (fstat(fd, &st) == 0)
		t->dev = st.st_dev, t->ino = st.st_ino;
	t->nhead = n < sizeof t->head ? (int)n : (int)sizeof t->head;
	memcpy(t->head, buf, (size_t)t->nhead);
}

int rec_tail_read(const char *path, struct rec_tail *t, int (*take)(void *ctx, const msgpack_object *o), void *ctx,
		  char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	if (fd < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (tail_replaced(t, fd)) {
		*t = (struct rec_tail){0};
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (fd < 0)
		return 0;
	msgpack_unpacker *up = msgpack_unpacker_new(1 << 16);
	long long at = t->read;
	while (!rc) {
		if (!up || !msgpack_unpacker_reserve_buffer(up, 1 << 16))
			die("out of memory");
		ssize_t got = pread(fd, msgpack_unpacker_buffer(up), msgpack_unpacker_buffer_capacity(up), (off_t)at);
		if (got < 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
			rc = -1;
		}
		if (got <= 0)
			break;
		if (at == 0)
			tail_begin(t, fd, msgpack_unpacker_buffer(up), (size_t)got);
		at += got;
		msgpack_unpacker_buffer_consumed(up, (size_t)got);
		rc = take_whole(t, up, at, take, ctx, path, err, errlen);
	}
	close(fd);
	msgpack_unpacker_free(up);
	return rc < 0 ? -1 : 0;
}

struct rec_writer {
	struct afile *f;
	char *buf;
	size_t len;
	msgpack_packer pk;
};

static void wflush(struct rec_writer *w)
{
	afile_write(w->f, w->buf, w->len);
	w->len = 0;
}

static int wappend(void *data, const char *p, size_t n)
{
	struct rec_writer *w = data;
	if (w->len + n > WRITE_BUF)
		wflush(w);
	if (n > WRITE_BUF) {
		afile_write(w->f, p, n);
		return 0;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

struct rec_writer *rec_create(const char *path)
{
	struct rec_writer *w = xcalloc(1, sizeof *w);
	w->f = afile_open(path);
	w->buf = xmalloc(WRITE_BUF);
	msgpack_packer_init(&w->pk, w, wappend);
	return w;
}

msgpack_packer *rec_packer(struct rec_writer *w) { return &w->pk; }

void rec_commit(struct rec_writer *w)
{
	wflush(w);
	afile_commit(w->f);
	free(w->buf);
	free(w);
}

const msgpack_object *mp_get(const msgpack_object *map, const char *key)
{
	if (!map || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	size_t n = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && !memcmp(k->via.str.ptr, key, n))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

int mp_str_is(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       !memcmp(o->via.str.ptr, s, o->via.str.size);
}

double mp_number(const msgpack_object *o)
{
	if (!o)
		return NAN;
	switch (o->type) {
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
	default: return NAN;
	}
}

void mp_pack_strn(msgpack_packer *pk, const char *s, size_t n)
{
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

void mp_pack_str(msgpack_packer *pk, const char *s) { mp_pack_strn(pk, s, strlen(s)); }

void mp_pack_decimal(msgpack_packer *pk, const char *s)
{
	if (*s == '-')
		msgpack_pack_int64(pk, strtoll(s, NULL, 10));
	else
		msgpack_pack_uint64(pk, strtoull(s, NULL, 10));
}
