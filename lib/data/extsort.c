#include "data/extsort.h"
#include "util/afile.h"
#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A spilled item: u64 key, u64 seq, u32 len, u32 zero, data, zero padding to 8. */
enum { ITEM_HEAD = 24, READ_BUF = 256 << 10, WRITE_BUF = 256 << 10 };

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }
static size_t item_size(uint32_t len) { return ITEM_HEAD + align8(len); }

struct keyed { uint64_t key, seq, off; uint32_t len; };   /* an item held in memory */

struct span { uint64_t start, end; };   /* one sorted run: a byte range of a spill file */

/* An unlinked temp file holding sorted runs back to back. */
struct spill {
	int fd;
	uint64_t size;
	struct span *runs;
	size_t nruns, cap;
};

struct run_reader {
	uint64_t pos, end;      /* file bytes not yet read */
	uint8_t *buf;
	size_t cap, lo, hi;     /* buf[lo, hi) is read but not consumed */
	struct extsort_item cur;
};

/* k-way merge of runs through a heap of readers ordered by their current item. */
struct merger {
	int fd;
	struct run_reader *r;
	size_t *heap, nheap;
	size_t n;
	int pending;            /* the heap top was handed out: advance it first */
};

struct extsort {
	char *tmpdir;
	size_t fanin;           /* runs merged at once */
	uint8_t *arena;         /* item data of the chunk in memory */
	size_t arena_cap, arena_len, arena_room;   /* room: what is allocated, up to cap */
	struct keyed *keys;
	size_t keys_cap, nkeys, keys_room;
	struct spill spill;     /* fd -1 until the first spill */
	size_t spilled;
	uint8_t *wbuf;
	size_t wlen;
	uint64_t count;
	int sealed;
	size_t pos;             /* output position when nothing was spilled */
	struct merger m;
};

struct extsort *extsort_new(const char *tmpdir, size_t mem_bytes)
{
	if (mem_bytes < (1 << 20))
		mem_bytes = 1 << 20;
	struct extsort *s = xcalloc(1, sizeof *s);
	s->tmpdir = xstrdup(tmpdir);
	/* the keys get an eighth and the copy of them qsort may take (glibc's
	 * sorts by merging) another, so that sorting a full chunk stays within it */
	s->keys_cap = mem_bytes / 8 / sizeof *s->keys;
	s->arena_cap = mem_bytes - 2 * s->keys_cap * sizeof *s->keys;
	s->fanin = (mem_bytes - WRITE_BUF) / READ_BUF;
	if (s->fanin < 2)
		s->fanin = 2;
	s->spill.fd = -1;
	return s;
}

static struct spill spill_open(struct extsort *s)
{
	static unsigned serial;
	char name[4096];
	snprintf(name, sizeof name, "%s/.extsort.%ld.%u", s->tmpdir, (long)getpid(), serial++);
	struct spill sp = {0};
	sp.fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (sp.fd < 0)
		die("cannot create temp file %s:", name);
	unlink(name);
	if (!s->wbuf)
		s->wbuf = xmalloc(WRITE_BUF);
	return sp;
}

static void spill_close(struct spill *sp)
{
	close(sp->fd);
	free(sp->runs);
	memset(sp, 0, sizeof *sp);
	sp->fd = -1;
}

static void spill_flush(struct extsort *s, struct spill *sp)
{
	write_all(sp->fd, s->wbuf, s->wlen, "the sort's temp file");
	s->wlen = 0;
}

static void spill_write(struct extsort *s, struct spill *sp, const void *p, size_t n)
{
	if (s->wlen + n > WRITE_BUF)
		spill_flush(s, sp);
	if (n > WRITE_BUF) {
		write_all(sp->fd, p, n, "the sort's temp file");
	} else {
		memcpy(s->wbuf + s->wlen, p, n);
		s->wlen += n;
	}
	sp->size += n;
}

static void spill_item(struct extsort *s, struct spill *sp, uint64_t key, uint64_t seq, const void *data,
		       uint32_t len)
{
	static const uint8_t zeros[8];
	uint8_t head[ITEM_HEAD] = {0};
	memcpy(head, &key, 8);
	memcpy(head + 8, &seq, 8);
	memcpy(head + 16, &len, 4);
	spill_write(s, sp, head, ITEM_HEAD);
	spill_write(s, sp, data, len);
	spill_write(s, sp, zeros, align8(len) - len);
}

static void spill_end_run(struct extsort *s, struct spill *sp, uint64_t start)
{
	spill_flush(s, sp);
	grow(&sp->runs, &sp->cap, sp->nruns + 1, sizeof *sp->runs);
	sp->runs[sp->nruns++] = (struct span){start, sp->size};
}

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Sorts the chunk in memory and writes it out as one run. */
static void spill_chunk(struct extsort *s)
{
	if (s->spill.fd < 0)
		s->spill = spill_open(s);
	qsort(s->keys, s->nkeys, sizeof *s->keys, keyed_cmp);
	uint64_t start = s->spill.size;
	for (size_t i = 0; i < s->nkeys; i++) {
		const struct keyed *k = &s->keys[i];
		spill_item(s, &s->spill, k->key, k->seq, s->arena + k->off, k->len);
	}
	spill_end_run(s, &s->spill, start);
	s->spilled++;
	s->nkeys = s->arena_len = 0;
}

/* The arena and the keys grown, doubling up to their caps, to hold one more
 * item of n bytes: the sort's memory is taken as the input needs it, so
 * that a --mem past the machine's memory costs no more than the input. */
static void room_for(struct extsort *s, size_t n)
{
	if (s->nkeys == s->keys_room) {
		s->keys_room = s->keys_room ? 2 * s->keys_room : 1024;
		s->keys_room = s->keys_room < s->keys_cap ? s->keys_room : s->keys_cap;
		s->keys = xrealloc(s->keys, s->keys_room * sizeof *s->keys);
	}
	if (s->arena_len + n > s->arena_room) {
		size_t want = 2 * s->arena_room > s->arena_len + n ? 2 * s->arena_room : s->arena_len + n;
		want = want > (1 << 20) ? want : 1 << 20;
		s->arena_room = want < s->arena_cap ? want : s->arena_cap;
		s->arena = xrealloc(s->arena, s->arena_room);
	}
}

size_t extsort_max_item(const struct extsort *s) { return s->arena_cap; }

void extsort_add(struct extsort *s, uint64_t key, uint64_t seq, const void *data, uint32_t len)
{
	if (s->sealed)
		die("extsort_add after extsort_rewind");
	if (align8(len) > s->arena_cap)
		die("an item of %u bytes does not fit in the sort memory of %zu bytes", len, s->arena_cap);
	if (s->nkeys == s->keys_cap || s->arena_len + align8(len) > s->arena_cap)
		spill_chunk(s);
	room_for(s, align8(len));
	memcpy(s->arena + s->arena_len, data, len);
	s->keys[s->nkeys++] = (struct keyed){key, seq, s->arena_len, len};
	s->arena_len += align8(len);
	s->count++;
}

/* Makes n bytes readable at r->buf + r->lo; 0 if the run ends first. */
static int fill(struct run_reader *r, int fd, size_t n)
{
	if (r->hi - r->lo >= n)
		return 1;
	memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
	r->hi -= r->lo;
	r->lo = 0;
	grow(&r->buf, &r->cap, n, 1);
	while (r->hi < n && r->pos < r->end) {
		size_t want = r->cap - r->hi;
		if (want > r->end - r->pos)
			want = (size_t)(r->end - r->pos);
		ssize_t got = pread(fd, r->buf + r->hi, want, (off_t)r->pos);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			die("cannot read back the sort's temp file:");
		r->hi += (size_t)got;
		r->pos += (uint64_t)got;
	}
	return r->hi - r->lo >= n;
}

static int read_item(struct run_reader *r, int fd)
{
	if (!fill(r, fd, ITEM_HEAD)) {
		if (r->hi == r->lo)
			return 0;
		die("the sort's temp file is truncated");
	}
	uint32_t len;
	memcpy(&len, r->buf + r->lo + 16, 4);
	if (!fill(r, fd, item_size(len)))
		die("the sort's temp file is truncated");
	const uint8_t *p = r->buf + r->lo;
	memcpy(&r->cur.key, p, 8);
	memcpy(&r->cur.seq, p + 8, 8);
	r->cur.len = len;
	r->cur.data = p + ITEM_HEAD;
	r->lo += item_size(len);
	return 1;
}

static int item_less(const struct extsort_item *a, const struct extsort_item *b)
{
	return a->key != b->key ? a->key < b->key : a->seq < b->seq;
}

static void sift_down(struct merger *m, size_t i)
{
	for (;;) {
		size_t least = i, l = 2 * i + 1, r = l + 1;
		if (l < m->nheap && item_less(&m->r[m->heap[l]].cur, &m->r[m->heap[least]].cur))
			least = l;
		if (r < m->nheap && item_less(&m->r[m->heap[r]].cur, &m->r[m->heap[least]].cur))
			least = r;
		if (least == i)
			return;
		size_t t = m->heap[i];
		m->heap[i] = m->heap[least];
		m->heap[least] = t;
		i = least;
	}
}

static void merger_start(struct merger *m, int fd, const struct span *runs, size_t n)
{
	m->fd = fd;
	m->n = n;
	m->r = xcalloc(n, sizeof *m->r);
	m->heap = xcalloc(n, sizeof *m->heap);
	m->nheap = 0;
	m->pending = 0;
	for (size_t i = 0; i < n; i++) {
		m->r[i].pos = runs[i].start;
		m->r[i].end = runs[i].end;
		m->r[i].cap = READ_BUF;
		m->r[i].buf = xmalloc(READ_BUF);
		if (read_item(&m->r[i], fd))
			m->heap[m->nheap++] = i;
	}
	for (size_t i = m->nheap / 2; i-- > 0;)
		sift_down(m, i);
}

static int merger_next(struct merger *m, struct extsort_item *it)
{
	if (m->pending) {
		m->pending = 0;
		if (!read_item(&m->r[m->heap[0]], m->fd))
			m->heap[0] = m->heap[--m->nheap];
		sift_down(m, 0);
	}
	if (!m->nheap)
		return 0;
	*it = m->r[m->heap[0]].cur;
	m->pending = 1;
	return 1;
}

static void merger_free(struct merger *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->r[i].buf);
	free(m->r);
	free(m->heap);
	memset(m, 0, sizeof *m);
}

/* Merges groups of fanin runs into longer runs until one merge can read them all. */
static void reduce_runs(struct extsort *s)
{
	while (s->spill.nruns > s->fanin) {
		struct spill out = spill_open(s);
		for (size_t g = 0; g < s->spill.nruns; g += s->fanin) {
			size_t k = s->spill.nruns - g < s->fanin ? s->spill.nruns - g : s->fanin;
			struct merger m = {0};
			struct extsort_item it;
			uint64_t start = out.size;
			merger_start(&m, s->spill.fd, s->spill.runs + g, k);
			while (merger_next(&m, &it))
				spill_item(s, &out, it.key, it.seq, it.data, it.len);
			spill_end_run(s, &out, start);
			merger_free(&m);
		}
		spill_close(&s->spill);
		s->spill = out;
	}
}

/* After the last item: a chunk that never spilled is sorted in place; else the
 * rest is spilled and the memory handed back before merging. */
static void seal(struct extsort *s)
{
	s->sealed = 1;
	if (!s->spilled) {
		if (s->nkeys)
			qsort(s->keys, s->nkeys, sizeof *s->keys, keyed_cmp);
		return;
	}
	if (s->nkeys)
		spill_chunk(s);
	free(s->arena);
	free(s->keys);
	s->arena = NULL;
	s->keys = NULL;
	s->arena_room = s->keys_room = 0;
	reduce_runs(s);
}

void extsort_rewind(struct extsort *s)
{
	if (!s->sealed)
		seal(s);
	s->pos = 0;
	if (s->spilled) {
		merger_free(&s->m);
		merger_start(&s->m, s->spill.fd, s->spill.runs, s->spill.nruns);
	}
}

int extsort_next(struct extsort *s, struct extsort_item *it)
{
	if (s->spilled)
		return merger_next(&s->m, it);
	if (s->pos == s->nkeys)
		return 0;
	const struct keyed *k = &s->keys[s->pos++];
	*it = (struct extsort_item){k->key, k->seq, s->arena + k->off, k->len};
	return 1;
}

uint64_t extsort_count(const struct extsort *s) { return s->count; }
size_t extsort_spilled(const struct extsort *s) { return s->spilled; }

void extsort_free(struct extsort *s)
{
	merger_free(&s->m);
	if (s->spill.fd >= 0)
		spill_close(&s->spill);
	free(s->arena);
	free(s->keys);
	free(s->wbuf);
	free(s->tmpdir);
	free(s);
}
