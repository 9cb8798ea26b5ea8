#include "data/shard.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Records are read in place (ids as int32_t through the map), so the host
 * byte order must be the file's. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shard files are little-endian and read in place"
#endif

enum {
	REC_FIXED = 12,           /* ntok, id_len, flags, reserved, fold */
	FLAG_TYPES = 1, FLAG_ID_NUM = 2, LABEL_SHIFT = 2, KNOWN_FLAGS = 0xf,
	WRITE_BUF = 1 << 20, INDEX_BUF = 4096,
};

/* Header field offsets. */
enum { H_VERSION = 8, H_FLAGS = 12, H_COUNT = 16, H_INDEX = 24, H_DATA = 32 };

static size_t align4(size_t n) { return (n + 3) & ~(size_t)3; }

static size_t id_len(const struct tokrec *t) { return t->id ? strlen(t->id) : 0; }

static size_t label_size(const struct tokrec *t)
{
	switch (t->label_kind) {
	case LABEL_INT: return 4;
	case LABEL_FLOAT: return 8;
	case LABEL_LIST: return 4 + 4 * t->nlabels;
	default: return 0;
	}
}

size_t shard_rec_size(const struct tokrec *t)
{
	size_t head = align4(REC_FIXED + label_size(t) + id_len(t));
	return align4(head + 4 * t->n + (t->types ? t->n : 0));
}

/* memcpy that allows NULL for zero bytes (a record without ids or id). */
static void copy(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

static uint8_t *put(uint8_t *p, const void *v, size_t n)
{
	copy(p, v, n);
	return p + n;
}

void shard_rec_encode(const struct tokrec *t, void *buf)
{
	size_t idlen = id_len(t);
	if (idlen > SHARD_MAX_ID)
		die("record id is %zu bytes long; shards hold ids of at most %d bytes", idlen, SHARD_MAX_ID);
	if (t->n > UINT32_MAX)
		die("record has %zu tokens; shards hold at most %u", t->n, UINT32_MAX);
	uint8_t *base = buf, *p = base;
	memset(base, 0, shard_rec_size(t));
	uint32_t n = (uint32_t)t->n, nlabels = (uint32_t)t->nlabels;
	uint16_t il = (uint16_t)idlen;
	uint8_t head[4] = {0, 0, (uint8_t)((t->types ? FLAG_TYPES : 0) | (t->id_is_num ? FLAG_ID_NUM : 0) |
					   t->label_kind << LABEL_SHIFT), 0};
	int32_t fold = t->fold;
	memcpy(head, &il, 2);
	p = put(put(put(p, &n, 4), head, 4), &fold, 4);
	if (t->label_kind == LABEL_INT)
		p = put(p, &t->label, 4);
	else if (t->label_kind == LABEL_FLOAT)
		p = put(p, &t->flabel, 8);
	else if (t->label_kind == LABEL_LIST)
		p = put(put(p, &nlabels, 4), t->labels, 4 * (size_t)nlabels);
	p = put(p, t->id, idlen);
	p = base + align4((size_t)(p - base));
	p = put(p, t->ids, 4 * t->n);
	if (t->types)
		put(p, t->types, t->n);
}

/* Whether n more bytes lie between p and end (p <= end). */
static int fits(const uint8_t *p, const uint8_t *end, size_t n) { return (size_t)(end - p) >= n; }

static const char *decode_label(const uint8_t **pp, const uint8_t *end, struct tokrec *out)
{
	const uint8_t *p = *pp;
	size_t need = out->label_kind == LABEL_INT ? 4 : out->label_kind == LABEL_FLOAT ? 8 :
		      out->label_kind == LABEL_LIST ? 4 : 0;
	if (!fits(p, end, need))
		return "label runs past the record";
	if (out->label_kind == LABEL_INT)
		memcpy(&out->label, p, 4);
	else if (out->label_kind == LABEL_FLOAT)
		memcpy(&out->flabel, p, 8);
	p += need;
	if (out->label_kind == LABEL_LIST) {
		uint32_t k;
		memcpy(&k, p - 4, 4);
		if (!fits(p, end, 4 * (size_t)k))
			return "label list runs past the record";
		grow(&out->labels, &out->cap_labels, k, sizeof *out->labels);
		copy(out->labels, p, 4 * (size_t)k);
		out->nlabels = k;
		p += 4 * (size_t)k;
	}
	*pp = p;
	return NULL;
}

const char *shard_rec_decode(const void *buf, size_t len, struct tokrec *out)
{
	const uint8_t *base = buf, *end = base + len, *p = base + REC_FIXED;
	if (len < REC_FIXED)
		return "shorter than a record header";
	uint32_t n;
	uint16_t idlen;
	uint8_t flags = base[6];
	int32_t fold;
	memcpy(&n, base, 4);
	memcpy(&idlen, base + 4, 2);
	memcpy(&fold, base + 8, 4);
	if (flags & ~KNOWN_FLAGS)
		return "unknown record flags";
	out->label_kind = (enum label_kind)(flags >> LABEL_SHIFT);
	out->fold = fold;
	const char *why = decode_label(&p, end, out);
	if (why)
		return why;
	if (!fits(p, end, idlen))
		return "id runs past the record";
	tokrec_set_id(out, (const char *)p, idlen, (flags & FLAG_ID_NUM) != 0);
	p = base + align4((size_t)(p + idlen - base));
	size_t body = 4 * (size_t)n + (flags & FLAG_TYPES ? n : 0);
	if (p > end || !fits(p, end, body))
		return "token ids run past the record";
	grow(&out->ids, &out->cap_ids, n, sizeof *out->ids);
	copy(out->ids, p, 4 * (size_t)n);
	out->n = n;
	out->types = NULL;
	if (flags & FLAG_TYPES) {
		grow(&out->types_buf, &out->cap_types, n, 1);
		copy(out->types_buf, p + 4 * (size_t)n, n);
		out->types = out->types_buf;
	}
	return NULL;
}

struct shard {
	char *path;
	const uint8_t *map;
	size_t size;
	uint64_t count, index_offset;
	const int32_t *relabel;   /* shard_relabel's, NULL for none */
	int nrelabel;
};

static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* Returns NULL if the header agrees with a file of this size, else why not. */
static const char *check_header(const uint8_t *h, size_t size)
{
	if (size < SHARD_HEADER_SIZE || memcmp(h, SHARD_MAGIC, 8))
		return "not a shard file (no TSSHARD1 magic)";
	if (get_u32(h + H_VERSION) != SHARD_VERSION || get_u32(h + H_FLAGS) != 0)
		return "unknown shard version or flags (made by a newer TopSpin?)";
	uint64_t count = get_u64(h + H_COUNT), index = get_u64(h + H_INDEX);
	if (get_u64(h + H_DATA) != SHARD_HEADER_SIZE)
		return "corrupt header (data offset)";
	if (index < SHARD_HEADER_SIZE || index % 8)
		return "corrupt header (index offset)";
	if (index > size)
		return "the index is past the end of the file (truncated?)";
	if (count > (size - index) / SHARD_INDEX_ENTRY || index + count * SHARD_INDEX_ENTRY != size)
		return "index does not match the file size (truncated?)";
	return NULL;
}

int shard_file_is(const char *path)
{
	char head[sizeof SHARD_MAGIC - 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO is read by its reader */
	struct stat st;
	int yes = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) && read(fd, head, sizeof head) == sizeof head &&
		  !memcmp(head, SHARD_MAGIC, sizeof head);
	if (fd >= 0)
		close(fd);
	return yes;
}

struct shard *shard_open(const char *path)
{
	off_t size;
	int fd = open_regular(path, &size);
	struct shard *s = xcalloc(1, sizeof *s);
	s->path = xstrdup(path);
	s->size = (size_t)size;
	if (s->size < SHARD_HEADER_SIZE)
		die("%s: not a shard file (too short)", path);
	void *m = mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("cannot map %s:", path);
	close(fd);
	s->map = m;
	const char *why = check_header(s->map, s->size);
	if (why)
		die("%s: %s", path, why);
	s->count = get_u64(s->map + H_COUNT);
	s->index_offset = get_u64(s->map + H_INDEX);
	return s;
}

uint64_t shard_count(const struct shard *s) { return s->count; }

static const uint8_t *index_entry(const struct shard *s, uint64_t i)
{
	if (i >= s->count)
		die("%s: record %llu asked for; the shard holds %llu", s->path, (unsigned long long)i,
		    (unsigned long long)s->count);
	return s->map + s->index_offset + i * SHARD_INDEX_ENTRY;
}

uint32_t shard_ntokens(const struct shard *s, uint64_t i) { return get_u32(index_entry(s, i) + 8); }

void shard_get(const struct shard *s, uint64_t i, struct tokrec *out)
{
	const uint8_t *e = index_entry(s, i);
	uint64_t start = get_u64(e), end = i + 1 < s->count ? get_u64(e + SHARD_INDEX_ENTRY) : s->index_offset;
	const char *why = NULL;
	if (start < SHARD_HEADER_SIZE || start % 4 || start > end || end > s->index_offset)
		why = "offset outside the data";
	else
		why = shard_rec_decode(s->map + start, end - start, out);
	if (!why && out->n != get_u32(e + 8))
		why = "token count differs from the index";
	if (why)
		die("%s: record %llu: corrupt shard: %s", s->path, (unsigned long long)i + 1, why);
	if (s->relabel)
		tokrec_relabel(out, s->relabel, s->nrelabel);
}

void shard_relabel(struct shard *s, const int32_t *to, int n)
{
	s->relabel = to;
	s->nrelabel = n;
}

void shard_close(struct shard *s)
{
	munmap((void *)s->map, s->size);
	free(s->path);
	free(s);
}

struct shard_writer {
	struct afile *f;
	int index_fd;             /* unlinked temp file: the index waits there until commit */
	char *index_name;
	uint8_t *buf;             /* records not yet written */
	size_t len, cap;
	uint8_t index[INDEX_BUF * SHARD_INDEX_ENTRY];
	size_t nindex;            /* entries in index[] */
	uint64_t count, offset;   /* records so far; file offset of the next one */
};

/* The index goes to a temp file, not memory, so that writing a shard of any
 * size takes bounded memory. */
static int open_index_file(const char *path, char **name)
{
	*name = beside(path, "index.tmp");
	int fd = open(*name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die("cannot create %s:", *name);
	unlink(*name);
	return fd;
}

struct shard_writer *shard_create(const char *path)
{
	if (!strcmp(path, "-"))
		die("a shard cannot be written to standard output (it needs a header written last)");
	struct shard_writer *w = xcalloc(1, sizeof *w);
	w->f = afile_open(path);
	w->index_fd = open_index_file(path, &w->index_name);
	w->cap = WRITE_BUF;
	w->buf = xcalloc(1, w->cap);
	w->len = w->offset = SHARD_HEADER_SIZE;   /* the header is rewritten on commit */
	return w;
}

static void flush_data(struct shard_writer *w)
{
	afile_write(w->f, w->buf, w->len);
	w->len = 0;
}

static void flush_index(struct shard_writer *w)
{
	write_all(w->index_fd, w->index, w->nindex * SHARD_INDEX_ENTRY, w->index_name);
	w->nindex = 0;
}

void shard_append(struct shard_writer *w, const struct tokrec *t)
{
	size_t size = shard_rec_size(t);
	if (w->len + size > w->cap)
		flush_data(w);
	grow(&w->buf, &w->cap, size, 1);
	shard_rec_encode(t, w->buf + w->len);
	w->len += size;
	if (w->nindex == INDEX_BUF)
		flush_index(w);
	uint8_t *e = w->index + w->nindex++ * SHARD_INDEX_ENTRY;
	uint32_t ntok = (uint32_t)t->n, zero = 0;
	put(put(put(e, &w->offset, 8), &ntok, 4), &zero, 4);
	w->offset += size;
	w->count++;
}

/* Appends the index from its temp file and returns its offset. */
static uint64_t write_index(struct shard_writer *w)
{
	flush_index(w);
	if (w->offset % 8) {
		if (w->len + 4 > w->cap)
			flush_data(w);
		memset(w->buf + w->len, 0, 4);   /* records end 4-aligned; the index starts 8-aligned */
		w->len += 4;
		w->offset += 4;
	}
	uint64_t index_offset = w->offset;
	if (lseek(w->index_fd, 0, SEEK_SET) < 0)
		die("cannot read back %s:", w->index_name);
	for (;;) {
		if (w->len == w->cap)
			flush_data(w);
		ssize_t got = read(w->index_fd, w->buf + w->len, w->cap - w->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			die("cannot read back %s:", w->index_name);
		if (got == 0)
			break;
		w->len += (size_t)got;
	}
	flush_data(w);
	return index_offset;
}

void shard_commit(struct shard_writer *w)
{
	uint8_t h[SHARD_HEADER_SIZE] = {0};
	uint32_t version = SHARD_VERSION;
	uint64_t data = SHARD_HEADER_SIZE, index = write_index(w);
	memcpy(h, SHARD_MAGIC, 8);
	memcpy(h + H_VERSION, &version, 4);
	memcpy(h + H_COUNT, &w->count, 8);
	memcpy(h + H_INDEX, &index, 8);
	memcpy(h + H_DATA, &data, 8);
	if (pwrite(w->f->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
		die("write %s:", w->f->path);
	afile_commit(w->f);
	close(w->index_fd);
	free(w->index_name);
	free(w->buf);
	free(w);
}
