/* WordPiece vocabulary: validation on load and an open-addressing hash of the tokens.
 * A token "##x" is keyed as the continuation piece "x", so that WordPiece can look up
 * "##" + piece without building the string. */
#include "data/vocab.h"
#include "data/hftok.h"
#include "format/jsonwide.h"
#include "util/afile.h"
#include "util/digest.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

/* A piece's key: its first 8 bytes (zero-padded, little-endian), its length and
 * whether it continues a word. Most pieces are at most 8 bytes, so one slot compare
 * settles a lookup without touching the token text. */
struct key {
	uint64_t head;
	uint32_t len_cont;   /* length | CONT */
};
#define CONT 0x80000000u

struct slot {
	uint64_t head;
	uint32_t len_cont;
	int32_t id;          /* -1: empty */
};

struct vocab {
	char *bytes;        /* the file as read, the bytes sha256 hashes */
	size_t nbytes;
	char *text;         /* a copy, each line NUL-terminated in place */
	char **tokens;      /* by id */
	int n;
	struct slot *slots;
	size_t mask;        /* slots - 1, a power of two minus one */
	uint32_t *lengths;  /* by cont and first two bytes: vocab_piece_lengths' bits (vocab.txt) */
	size_t max_piece;
	int32_t special[VOCAB_NSPECIAL];
	char sha256[SHA256_HEX_SIZE];
	struct hftok *hf;   /* a tokenizer.json's, or NULL */
};

static const char *const special_names[VOCAB_NSPECIAL] = {
	"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
};
/* What the tokenizer.json families call them, for errors. */
static const char *const special_words[VOCAB_NSPECIAL] = {
	"padding", "unknown", "class (or beginning)", "separator (or end)", "mask",
};

const char *vocab_special_name(enum vocab_special which)
{
	return special_names[which];
}

static inline uint64_t load64(const unsigned char *s) { uint64_t w; memcpy(&w, s, 8); return w; }

static inline uint64_t mix(uint64_t h)
{
	h ^= h >> 32;
	h *= 0xD6E8FEB86659FD93ull;
	return h ^ h >> 32;
}

/* Hash of a key plus, for pieces over 8 bytes, the rest of their bytes. */
static inline uint64_t hash_key(struct key k, const unsigned char *s, size_t len)
{
	uint64_t h = mix(k.head ^ (uint64_t)k.len_cont * 0x9E3779B97F4A7C15ull);
	for (size_t i = 8; i < len; i += 8)
		h = mix(h ^ load64(s + (i + 8 <= len ? i : len - 8)));
	return h;
}

static int is_continuation(const char *tok, size_t len)
{
	return len > 2 && tok[0] == '#' && tok[1] == '#';
}

int32_t vocab_piece_id(const struct vocab *v, int cont, const char *piece, size_t len)
{
	const unsigned char *s = (const unsigned char *)piece;
	if (len > v->max_piece)
		return -1;
	struct key k = { vocab_head_word(piece, len), (uint32_t)len | (cont ? CONT : 0) };
	for (size_t i = hash_key(k, s, len) & v->mask;; i = (i + 1) & v->mask) {
		const struct slot *sl = &v->slots[i];
		if (sl->head == k.head && sl->len_cont == k.len_cont &&
		    (len <= 8 || !memcmp(v->tokens[sl->id] + (cont ? 2 : 0) + 8, s + 8, len - 8)))
			return sl->id;
		if (sl->id < 0)
			return -1;
	}
}

/* Where the lengths of the pieces that begin with the bytes a, b (cont:
 * continuing a word) are kept: bit L for length L, 31 for 31 and over. */
static inline uint32_t *lengths_of(const struct vocab *v, int cont, unsigned char a, unsigned char b)
{
	return &v->lengths[(size_t)cont << 16 | (size_t)a << 8 | b];
}

uint32_t vocab_piece_lengths(const struct vocab *v, int cont, const char *s, size_t avail)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t m = *lengths_of(v, cont != 0, u[0], avail > 1 ? u[1] : 0);
	return avail >= 31 ? m : m & ((2u << avail) - 1);
}

int32_t vocab_id(const struct vocab *v, const char *tok, size_t len)
{
	int cont = is_continuation(tok, len);
	return vocab_piece_id(v, cont, tok + (cont ? 2 : 0), len - (cont ? 2 : 0));
}

int vocab_size(const struct vocab *v) { return v->n; }
const char *vocab_token(const struct vocab *v, int32_t id) { return v->tokens[id]; }
const char *vocab_sha256(const struct vocab *v) { return v->sha256; }
int32_t vocab_special(const struct vocab *v, enum vocab_special which) { return v->special[which]; }
size_t vocab_max_piece(const struct vocab *v) { return v->max_piece; }

const char *vocab_file_name(const struct vocab *v) { return v->hf ? "tokenizer.json" : "vocab.txt"; }

/* Whether text begins, after white space, with '{': a tokenizer.json. */
static int is_json(const char *text, size_t n)
{
	size_t i = 0;
	while (i < n && strchr(" \t\r\n", text[i]))
		i++;
	return i < n && text[i] == '{';
}

const char *vocab_file_name_at(const char *path)
{
	char head[256];
	FILE *f = fopen(path, "rb");
	if (!f)
		die("%s:", path);
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	return is_json(head, n) ? "tokenizer.json" : "vocab.txt";
}

int vocab_starts_word(const struct vocab *v, int32_t id)
{
	return v->hf ? hftok_starts_word(v->hf, id) : strncmp(v->tokens[id], "##", 2) != 0;
}

void vocab_save(const struct vocab *v, const char *path)
{
	struct afile *f = afile_open(path);
	afile_write(f, v->bytes, v->nbytes);
	afile_commit(f);
}

/* The whole file at path, in a buffer of its size (a vocab keeps it); its
 * length in *len. */
static char *read_file(const char *path, size_t *len)
{
	struct strbuf b = {0};
	if (sb_add_file(&b, path))
		die("%s:", path);
	*len = b.n;
	return xrealloc(b.s, b.n + 1);
}

int vocab_file_has_sha256(const char *path, const char *sha256)
{
	if (access(path, F_OK))
		return 0;
	size_t n;
	char *bytes = read_file(path, &n), hex[SHA256_HEX_SIZE];
	sha256_hex(bytes, n, hex);
	free(bytes);
	return !strcmp(hex, sha256);
}

char *vocab_in_dir(const char *dir, const char *sha256)
{
	char *json = path_join(dir, "tokenizer.json"), *txt = path_join(dir, "vocab.txt");
	int json_first = !access(json, F_OK) && !(sha256 && vocab_file_has_sha256(txt, sha256));
	free(json_first ? txt : json);
	return json_first ? json : txt;
}

/* What DIR/tokenizer_config.json says of lowercasing: 1, 0, or -1 where it
 * says nothing (or there is none). */
static int dir_lowercases(const char *dir)
{
	char *path = path_join(dir, TOKENIZER_CONFIG);
	struct strbuf text = {0};
	if (sb_add_file(&text, path) && errno != ENOENT)
		die("cannot open %s:", path);
	json_error_t err;
	json_t *j = text.s ? json_loadb_wide(text.s, text.n, 0, &err) : NULL, *lower = json_object_get(j, "do_lower_case");
	if (!j && text.s)
		die("%s: line %d: %s", path, err.line, err.text);
	sb_free(&text);
	if (lower && !json_is_boolean(lower))
		die("%s: do_lower_case must be true or false", path);
	int says = lower ? json_is_true(lower) : -1;
	json_decref(j);
	free(path);
	return says;
}

char *vocab_of_model(const char *option, const char *dir, const char *sha256, int lower)
{
	char *path = vocab_in_dir(dir, sha256);
	if (access(path, F_OK)) {
		if (access(dir, F_OK))
			die("%s %s:", option, dir);
		die("%s %s: no tokenizer.json or vocab.txt: a model dir holds the vocab its model was trained on", option,
		    dir);
	}
	/* the case matters only for the data's own vocab: of another, that is what is wrong with it */
	int own = !sha256 || vocab_file_has_sha256(path, sha256);
	int says = strcmp(vocab_file_name_at(path), "vocab.txt") || !own ? -1 : dir_lowercases(dir);
	if (lower >= 0 && says >= 0 && says != lower)
		die("%s %s: its %s has do_lower_case %s, but the data was tokenized %s", option, dir, TOKENIZER_CONFIG,
		    says ? "true" : "false", lower ? "lowercased (ts-tokenize --cased keeps the case)" : "with --cased");
	return path;
}

void vocab_save_case(const struct vocab *v, const char *dir, int lower)
{
	if (v->hf || lower < 0)
		return;
	char *path = path_join(dir, TOKENIZER_CONFIG);
	afile_put_text(path, lower ? "{\"do_lower_case\": true}\n" : "{\"do_lower_case\": false}\n");
	free(path);
}

/* Why line tok (NUL-terminated, len bytes) is no token, or NULL. */
static const char *bad_token(const char *tok, size_t len)
{
	if (!len)
		return "empty token";
	for (size_t i = 0; i < len;) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)tok + i,
		                                      (utf8proc_ssize_t)(len - i), &cp);
		if (k < 0)
			return "not valid UTF-8";
		int c = utf8proc_category(cp);
		if (c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL ||
		    c == UTF8PROC_CATEGORY_ZP || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85)
			return "whitespace inside a token";
		i += (size_t)k;
	}
	return NULL;
}

/* The piece token id stands for (its bytes after "##" where it continues a
 * word), its length and whether it continues a word. */
static const unsigned char *piece_of(const struct vocab *v, int32_t id, size_t *len, int *cont)
{
	const char *tok = v->tokens[id];
	*len = strlen(tok);
	*cont = is_continuation(tok, *len);
	*len -= *cont ? 2 : 0;
	return (const unsigned char *)tok + (*cont ? 2 : 0);
}

/* Adds token id to the hash; returns the id of an equal token already there, or -1. */
static int32_t insert(struct vocab *v, int32_t id)
{
	size_t len;
	int cont;
	const unsigned char *piece = piece_of(v, id, &len, &cont);
	int32_t old = vocab_piece_id(v, cont, (const char *)piece, len);
	if (old >= 0)
		return old;
	struct key k = { vocab_head_word((const char *)piece, len), (uint32_t)len | (cont ? CONT : 0) };
	size_t i = hash_key(k, piece, len) & v->mask;
	while (v->slots[i].id >= 0)
		i = (i + 1) & v->mask;
	v->slots[i] = (struct slot){ k.head, k.len_cont, id };
	if (len > v->max_piece)
		v->max_piece = len;
	return -1;
}

/* vocab_piece_lengths' table of the pieces' lengths, for WordPiece (a
 * tokenizer.json's models have their own tables). */
static void index_lengths(struct vocab *v)
{
	v->lengths = xcalloc((size_t)2 << 16, sizeof *v->lengths);
	for (int32_t id = 0; id < v->n; id++) {
		size_t len;
		int cont;
		const unsigned char *piece = piece_of(v, id, &len, &cont);
		uint32_t bit = 1u << (len < 31 ? len : 31);
		if (len > 1)
			*lengths_of(v, cont, piece[0], piece[1]) |= bit;
		else   /* one byte: whatever follows it */
			for (int b = 0; b < 256; b++)
				*lengths_of(v, cont, piece[0], (unsigned char)b) |= bit;
	}
}

/* Cuts the text into NUL-terminated lines (dropping a '\r' before each '\n'). */
static int split_lines(const char *path, char *text, size_t len, char ***lines)
{
	size_t n = 0, cap = 0;
	*lines = NULL;
	for (char *p = text, *end = text + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *eol = nl ? nl : end;
		if (eol > p && eol[-1] == '\r')
			eol--;
		*eol = 0;
		if (n == cap)
			grow(lines, &cap, n + 1, sizeof **lines);
		(*lines)[n++] = p;
		p = nl ? nl + 1 : end;
		if (n > INT32_MAX / 2)
			die("%s: not a WordPiece vocab: more than %d lines", path, INT32_MAX / 2);
	}
	return (int)n;
}

static size_t line_of(const char *text, const char *at)
{
	size_t line = 1;
	for (const char *p = text; (p = memchr(p, '\n', (size_t)(at - p))); p++)
		line++;
	return line;
}

/* The hash of the tokens, for vocab_id; holes and repeats are left out. */
static void hash_tokens(struct vocab *v)
{
	size_t nslots = 2;
	while (nslots < 2 * (size_t)v->n)
		nslots *= 2;
	v->slots = xmalloc(nslots * sizeof *v->slots);
	for (size_t i = 0; i < nslots; i++)
		v->slots[i] = (struct slot){ 0, 0, -1 };
	v->mask = nslots - 1;
}

/* The vocab of a tokenizer.json: its ids' tokens ("" for an id it has
 * none for) and the special tokens it names. */
static void load_json(struct vocab *v, const char *path)
{
	v->hf = hftok_parse(path, v->bytes, v->nbytes);
	v->n = hftok_size(v->hf);
	v->tokens = xmalloc((size_t)v->n * sizeof *v->tokens);
	hash_tokens(v);
	for (int32_t id = 0; id < v->n; id++) {
		const char *tok = hftok_token(v->hf, id);
		v->tokens[id] = (char *)(tok ? tok : "");
		if (*v->tokens[id])
			insert(v, id);
	}
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		if ((v->special[i] = hftok_special(v->hf, i)) < 0)
			die("%s: names no %s token (such as %s)", path, special_words[i], special_names[i]);
}

struct vocab *vocab_load(const char *path)
{
	struct vocab *v = xcalloc(1, sizeof *v);
	size_t len;
	v->bytes = read_file(path, &len);
	v->nbytes = len;
	sha256_hex(v->bytes, len, v->sha256);
	if (is_json(v->bytes, len)) {
		load_json(v, path);
		return v;
	}
	size_t bom = len >= 3 && !memcmp(v->bytes, "\xef\xbb\xbf", 3) ? 3 : 0;   /* no part of the first token */
	len -= bom;
	v->text = xmalloc(len + 1);
	memcpy(v->text, v->bytes + bom, len + 1);
	if (!len)
		die("%s: not a WordPiece vocab: empty file", path);
	const char *nul = memchr(v->text, 0, len);
	if (nul)
		die("%s: not a WordPiece vocab: NUL byte on line %zu (a binary file?)", path,
		    line_of(v->text, nul));
	v->n = split_lines(path, v->text, len, &v->tokens);
	hash_tokens(v);
	for (int32_t id = 0; id < v->n; id++) {
		const char *why = bad_token(v->tokens[id], strlen(v->tokens[id]));
		if (why)
			die("%s: line %d: %s", path, id + 1, why);
		int32_t old = insert(v, id);
		if (old >= 0)
			die("%s: line %d: duplicate token '%s' (first on line %d)", path, id + 1,
			    v->tokens[id], old + 1);
	}
	for (int i = 0; i < VOCAB_NSPECIAL; i++) {
		v->special[i] = vocab_id(v, special_names[i], strlen(special_names[i]));
		if (v->special[i] < 0)
			die("%s: not a WordPiece vocab: no %s token", path, special_names[i]);
	}
	index_lengths(v);
	return v;
}

void vocab_free(struct vocab *v)
{
	if (!v)
		return;
	free(v->bytes);
	free(v->text);
	free(v->tokens);
	free(v->slots);
	free(v->lengths);
	hftok_free(v->hf);
	free(v);
}
