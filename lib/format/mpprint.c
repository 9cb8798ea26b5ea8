#include "format/mpprint.h"
#include "format/mpjson.h"
#include "util/err.h"
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

enum { BUF = 1 << 16, FLUSH_AT = 1 << 16, MAX_DEPTH = 256 };

struct mpprint {
	int fd, eof;
	char *name;
	unsigned char *buf;
	size_t pos, end;          /* unread bytes are buf[pos, end) */
	uint64_t n;               /* records begun */
	struct strbuf *b;         /* where the JSON goes */
	struct afile *out;        /* where b goes when full; NULL: nowhere yet */
	int is_header;
	int torn_ok;              /* a cut-short last record ends the stream */
	int spilled;              /* part of this record already went to out */
	size_t whole;             /* the bytes of b that are whole records */
	jmp_buf torn;             /* where a torn last record returns to */
};

enum kind { NIL, BOOL, UINT, INT, F32, F64, STR, BIN, EXT, ARRAY, MAP };

struct token {
	enum kind kind;
	uint64_t u;               /* BOOL, UINT; the bits of F32 and F64 */
	int64_t i;                /* INT */
	uint32_t len;             /* bytes of STR, BIN, EXT; items of ARRAY, MAP */
};

struct mpprint *mpprint_open(const char *path)
{
	struct mpprint *p = xcalloc(1, sizeof *p);
	if (!strcmp(path, "-")) {
		p->fd = STDIN_FILENO;
		p->name = xstrdup("standard input");
	} else {
		p->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (p->fd < 0)
			die("cannot open %s:", path);
		p->name = xstrdup(path);
	}
	p->buf = xmalloc(BUF);
	return p;
}

void mpprint_close(struct mpprint *p)
{
	if (p->fd != STDIN_FILENO)
		close(p->fd);
	free(p->buf);
	free(p->name);
	free(p);
}

void mpprint_allow_torn_tail(struct mpprint *p) { p->torn_ok = 1; }

static _Noreturn void truncated(struct mpprint *p)
{
	if (p->torn_ok && !p->spilled) {
		warnx("%s: record %llu is cut short (a torn write); ignoring it", p->name,
		      (unsigned long long)p->n);
		longjmp(p->torn, 1);
	}
	die("%s: record %llu: truncated stream", p->name, (unsigned long long)p->n);
}

static _Noreturn void bad(const struct mpprint *p, const char *why)
{
	if (p->out && p->whole)   /* the records before this one go out whole */
		afile_write(p->out, p->b->s, p->whole);
	die("%s: record %llu: %s", p->name, (unsigned long long)p->n, why);
}

/* Reads until want bytes (at most the buffer) are unread, or the input ends;
 * returns how many are. */
static size_t have(struct mpprint *p, size_t want)
{
	if (want > BUF)
		want = BUF;
	while (p->end - p->pos < want && !p->eof) {
		memmove(p->buf, p->buf + p->pos, p->end - p->pos);
		p->end -= p->pos;
		p->pos = 0;
		ssize_t got;
		do
			got = read(p->fd, p->buf + p->end, BUF - p->end);
		while (got < 0 && errno == EINTR);
		if (got < 0)
			die("read %s:", p->name);
		p->eof = got == 0;
		p->end += (size_t)got;
	}
	return p->end - p->pos;
}

/* The next n bytes (n <= 8), big-endian. */
static uint64_t take(struct mpprint *p, int n)
{
	if (have(p, (size_t)n) < (size_t)n)
		truncated(p);
	uint64_t v = 0;
	for (int k = 0; k < n; k++)
		v = v << 8 | p->buf[p->pos++];
	return v;
}

/* The head of the next value (msgpack spec): its kind, and its value or the
 * size of what follows. */
static void next_token(struct mpprint *p, struct token *t)
{
	unsigned c = (unsigned)take(p, 1);
	memset(t, 0, sizeof *t);
	if (c <= 0x7f)
		t->kind = UINT, t->u = c;
	else if (c <= 0x8f)
		t->kind = MAP, t->len = c & 15;
	else if (c <= 0x9f)
		t->kind = ARRAY, t->len = c & 15;
	else if (c <= 0xbf)
		t->kind = STR, t->len = c & 31;
	else if (c >= 0xe0)
		t->kind = INT, t->i = (int8_t)c;
	else if (c == 0xc0)
		t->kind = NIL;
	else if (c == 0xc2 || c == 0xc3)
		t->kind = BOOL, t->u = c & 1;
	else if (c >= 0xc4 && c <= 0xc6)
		t->kind = BIN, t->len = (uint32_t)take(p, 1 << (c - 0xc4));
	else if (c >= 0xc7 && c <= 0xc9)
		t->kind = EXT, t->len = (uint32_t)take(p, 1 << (c - 0xc7)), take(p, 1);
	else if (c == 0xca || c == 0xcb)
		t->kind = c == 0xca ? F32 : F64, t->u = take(p, c == 0xca ? 4 : 8);
	else if (c >= 0xcc && c <= 0xcf)
		t->kind = UINT, t->u = take(p, 1 << (c - 0xcc));
	else if (c >= 0xd0 && c <= 0xd3) {
		int bits = 8 << (c - 0xd0);
		t->kind = INT, t->i = (int64_t)(take(p, bits / 8) << (64 - bits)) >> (64 - bits);
	} else if (c >= 0xd4 && c <= 0xd8)
		t->kind = EXT, t->len = 1u << (c - 0xd4), take(p, 1);
	else if (c >= 0xd9 && c <= 0xdb)
		t->kind = STR, t->len = (uint32_t)take(p, 1 << (c - 0xd9));
	else if (c == 0xdc || c == 0xdd)
		t->kind = ARRAY, t->len = (uint32_t)take(p, c == 0xdc ? 2 : 4);
	else if (c == 0xde || c == 0xdf)
		t->kind = MAP, t->len = (uint32_t)take(p, c == 0xde ? 2 : 4);
	else
		bad(p, "malformed msgpack");
}

/* b's whole records out once it is full, so that what is written ends
 * where a record does; a record that fills it alone goes out in pieces. */
static void spill(struct mpprint *p)
{
	if (!p->out || p->b->n < FLUSH_AT)
		return;
	size_t n = p->whole ? p->whole : p->b->n;
	afile_write(p->out, p->b->s, n);
	memmove(p->b->s, p->b->s + n, p->b->n - n);
	p->b->n -= n;
	p->spilled |= !p->whole;
	p->whole = 0;   /* the record under way begins at 0 */
}

/* How many of the n bytes at s end on a character boundary, so that a string
 * printed in pieces never has a UTF-8 character cut in two. */
static size_t whole_chars(const unsigned char *s, size_t n)
{
	for (size_t i = n; i > 0 && i + 4 > n; i--) {
		unsigned c = s[i - 1];
		if ((c & 0xc0) == 0x80)
			continue;
		size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return i - 1 + len <= n || i == 1 ? n : i - 1;
	}
	return n;
}

static void print_str(struct mpprint *p, uint32_t len)
{
	sb_addc(p->b, '"');
	while (len) {
		size_t got = have(p, len);
		if (!got)
			truncated(p);
		if (got > len)
			got = len;
		size_t n = got < len ? whole_chars(p->buf + p->pos, got) : got;
		sb_add_json_chars(p->b, (const char *)p->buf + p->pos, n);
		p->pos += n;
		len -= (uint32_t)n;
		spill(p);
	}
	sb_addc(p->b, '"');
}

/* bin and ext data as a list of byte values */
static void print_bytes(struct mpprint *p, uint32_t len)
{
	sb_addc(p->b, '[');
	for (uint32_t i = 0; i < len; i++) {
		if (i)
			sb_addc(p->b, ',');
		sb_add_uint(p->b, take(p, 1));
		spill(p);
	}
	sb_addc(p->b, ']');
}

/* Token ids are most of what a stream holds: printf would make printing
 * them five times slower. */
static void print_token(struct mpprint *p, const struct token *t, int depth);

static void print_value(struct mpprint *p, int depth)
{
	struct token t;
	next_token(p, &t);
	print_token(p, &t, depth);
}

/* A key of the map at depth; JSON keys are strings, so another key is
 * printed on the side and quoted. */
static void print_key(struct mpprint *p, int depth)
{
	struct token t;
	next_token(p, &t);
	if (t.kind == STR) {
		if (depth == 0 && t.len == 4 && have(p, 4) >= 4 && !memcmp(p->buf + p->pos, "kind", 4))
			p->is_header = 1;
		print_str(p, t.len);
		return;
	}
	/* printed as a JSON string, a key's own keys would be escaped once more
	 * at every level: a few bytes of nested keys would print as gigabytes */
	if (t.kind == MAP || t.kind == ARRAY)
		bad(p, "a map key is a map or a list");
	struct strbuf kb = {0}, *b = p->b;
	struct afile *out = p->out;
	p->b = &kb, p->out = NULL;
	print_token(p, &t, depth + 1);
	p->b = b, p->out = out;
	sb_add_json_str(b, kb.s, kb.n);
	sb_free(&kb);
}

static void print_token(struct mpprint *p, const struct token *t, int depth)
{
	if (depth > MAX_DEPTH)
		bad(p, "nested too deep");
	switch (t->kind) {
	case NIL: sb_add(p->b, "null", 4); break;
	case BOOL: t->u ? sb_add(p->b, "true", 4) : sb_add(p->b, "false", 5); break;
	case UINT: sb_add_uint(p->b, t->u); break;
	case INT:
		if (t->i < 0)
			sb_addc(p->b, '-');
		sb_add_uint(p->b, t->i < 0 ? -(uint64_t)t->i : (uint64_t)t->i);
		break;
	case F32: {
		uint32_t bits = (uint32_t)t->u;
		float f;
		memcpy(&f, &bits, sizeof f);
		json_add_double(p->b, f, 1);
		break;
	}
	case F64: {
		double d;
		memcpy(&d, &t->u, sizeof d);
		json_add_double(p->b, d, 0);
		break;
	}
	case STR: print_str(p, t->len); break;
	case BIN:
	case EXT: print_bytes(p, t->len); break;
	case ARRAY:
		sb_addc(p->b, '[');
		for (uint32_t i = 0; i < t->len; i++) {
			if (i)
				sb_addc(p->b, ',');
			print_value(p, depth + 1);
		}
		sb_addc(p->b, ']');
		break;
	case MAP:
		sb_addc(p->b, '{');
		for (uint32_t i = 0; i < t->len; i++) {
			if (i)
				sb_addc(p->b, ',');
			print_key(p, depth);
			sb_addc(p->b, ':');
			print_value(p, depth + 1);
		}
		sb_addc(p->b, '}');
		break;
	}
	spill(p);
}

int mpprint_more(struct mpprint *p) { return have(p, 1) > 0; }

int mpprint_record(struct mpprint *p, struct strbuf *b, struct afile *out)
{
	struct token t;
	p->n++;
	p->b = b, p->out = out, p->is_header = 0, p->spilled = 0;
	p->whole = b->n;
	if (setjmp(p->torn)) {
		b->n = p->whole;   /* where the torn record began */
		p->pos = p->end;
		return -1;
	}
	next_token(p, &t);
	if (t.kind != MAP)
		bad(p, "not a map");
	print_token(p, &t, 0);
	sb_addc(b, '\n');
	p->whole = b->n;
	spill(p);
	return p->is_header;
}
