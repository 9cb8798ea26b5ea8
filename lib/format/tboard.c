#include "format/tboard.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct tboard {
	FILE *f;
	char *path;
};

uint32_t tb_crc32c(const void *data, size_t n)
{
	static uint32_t table[256];
	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;   /* Castagnoli, reflected */
			table[i] = c;
		}
	uint32_t c = 0xffffffffu;
	for (const unsigned char *p = data; n--; p++)
		c = table[(c ^ *p) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

uint32_t tb_masked_crc(const void *data, size_t n)
{
	uint32_t c = tb_crc32c(data, n);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protocol buffer encoding, the few kinds used here ---- */

static void varint(struct strbuf *b, uint64_t v)
{
	do {
		sb_addc(b, (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
		v >>= 7;
	} while (v);
}

static void little(struct strbuf *b, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		sb_addc(b, (char)(v >> (8 * i)));
}

/* Field number field of wire type 2 (bytes). */
static void bytes_field(struct strbuf *b, int field, const void *p, size_t n)
{
	varint(b, (uint64_t)field << 3 | 2);
	varint(b, n);
	sb_add(b, p, n);
}

/* An Event: wall_time (1, double), step (2, varint), and file_version (3),
 * summary (5) or session_log (7) as given, already encoded. */
static void write_event(struct tboard *tb, double wall_time, int64_t step, int field, const struct strbuf *body)
{
	struct strbuf e = {0};
	uint64_t bits;
	memcpy(&bits, &wall_time, sizeof bits);
	varint(&e, 1 << 3 | 1);
	little(&e, bits, 8);
	varint(&e, 2 << 3 | 0);
	varint(&e, (uint64_t)step);
	bytes_field(&e, field, body->s, body->n);
	struct strbuf rec = {0};
	unsigned char len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)e.n >> (8 * i));
	sb_add(&rec, len, 8);
	little(&rec, tb_masked_crc(len, 8), 4);
	sb_add(&rec, e.s, e.n);
	little(&rec, tb_masked_crc(e.s, e.n), 4);
	if (fwrite(rec.s, 1, rec.n, tb->f) != rec.n)
		die("%s: cannot write:", tb->path);
	sb_free(&e), sb_free(&rec);
}

struct tboard *tb_open(const char *dir)
{
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		die("cannot create %s:", dir);
	char host[HOST_NAME_MAX + 1] = "localhost", name[HOST_NAME_MAX + 64];
	gethostname(host, sizeof host);
	host[HOST_NAME_MAX] = 0;
	snprintf(name, sizeof name, "events.out.tfevents.%ld.%s.%ld", (long)time(NULL), host, (long)getpid());
	struct tboard *tb = xcalloc(1, sizeof *tb);
	tb->path = path_join(dir, name);
	if (!(tb->f = fopen(tb->path, "ab")))
		die("cannot create %s:", tb->path);
	struct strbuf v = {0};
	sb_add(&v, "brain.Event:2", 13);
	write_event(tb, (double)time(NULL), 0, 3, &v);
	sb_free(&v);
	tb_flush(tb);
	return tb;
}

void tb_restart(struct tboard *tb, int64_t step)
{
	struct strbuf log = {0};
	varint(&log, 1 << 3 | 0);   /* SessionLog's status: START */
	varint(&log, 1);
	write_event(tb, (double)time(NULL), step, 7, &log);
	sb_free(&log);
	tb_flush(tb);
}

void tb_scalar(struct tboard *tb, const char *tag, int64_t step, double wall_time, double value)
{
	struct strbuf val = {0}, sum = {0};
	bytes_field(&val, 1, tag, strlen(tag));
	float f = (float)value;
	uint32_t bits;
	memcpy(&bits, &f, sizeof bits);
	varint(&val, 2 << 3 | 5);
	little(&val, bits, 4);
	bytes_field(&sum, 1, val.s, val.n);
	write_event(tb, wall_time, step, 5, &sum);
	sb_free(&val), sb_free(&sum);
}

void tb_fields(struct tboard *tb, const char *prefix, const json_t *fields, double wall_time)
{
	int64_t step = (int64_t)json_integer_value(json_object_get(fields, "step"));
	const char *key, *sub;
	const json_t *v, *w;
	char tag[256];
	json_object_foreach((json_t *)fields, key, v) {
		if (!strcmp(key, "step") || !strcmp(key, "epoch") || !strcmp(key, "time"))
			continue;
		if (json_is_number(v)) {
			snprintf(tag, sizeof tag, "%s/%s", prefix, key);
			tb_scalar(tb, tag, step, wall_time, json_number_value(v));
		} else if (json_is_object(v)) {
			json_object_foreach((json_t *)v, sub, w) if (json_is_number(w)) {
				snprintf(tag, sizeof tag, "%s/%s/%s", prefix, key, sub);
				tb_scalar(tb, tag, step, wall_time, json_number_value(w));
			}
		}
	}
}

void tb_flush(struct tboard *tb)
{
	if (fflush(tb->f) != 0)
		die("%s: cannot write:", tb->path);
}

void tb_close(struct tboard *tb)
{
	if (fclose(tb->f) != 0)
		die("%s: cannot write:", tb->path);
	free(tb->path);
	free(tb);
}
