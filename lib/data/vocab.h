/* The tokens a model knows, by id: a WordPiece vocab.txt (one token per line, id = line
 * index from 0), or the vocab of a Hugging Face tokenizer.json (its model's and its
 * added tokens); the special tokens the models need; the file, for copies. */
#ifndef TS_VOCAB_H
#define TS_VOCAB_H
#include "data/special.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct vocab;

/* A file that begins with '{' is a tokenizer.json (hftok.h says what is refused);
 * it must name each special token (<pad> or [PAD], ..., or its post-processor's).
 * Else dies with "PATH: line N: why" or "PATH: not a WordPiece vocab: why" on a file
 * that is not one: empty, binary, not UTF-8, an empty or duplicate token, whitespace in
 * a token, or one of [PAD] [UNK] [CLS] [SEP] [MASK] missing. Accepts CRLF and a last
 * line without a newline. */
struct vocab *vocab_load(const char *path);
void vocab_free(struct vocab *v);

int vocab_size(const struct vocab *v);
/* The id of the token tok[0..len), or -1 if absent. */
int32_t vocab_id(const struct vocab *v, const char *tok, size_t len);
/* The token of id (0 <= id < vocab_size), NUL-terminated. */
const char *vocab_token(const struct vocab *v, int32_t id);
/* Lowercase hex SHA-256 of the file's bytes. */
const char *vocab_sha256(const struct vocab *v);
/* Writes the bytes the vocab was read from, which its sha256 hashes, to path
 * (whole or not at all): not the file read again, which a pipe could not give
 * twice and which may have changed. */
void vocab_save(const struct vocab *v, const char *path);
/* The name its copy goes by in a data, run or model dir: "vocab.txt" or
 * "tokenizer.json". */
const char *vocab_file_name(const struct vocab *v);
/* The vocab of dir (malloc'd): DIR/vocab.txt where its SHA-256 is sha256 (a
 * model dir from Hugging Face holds it beside tokenizer.json, and data
 * tokenized with either may train there), else DIR/tokenizer.json where
 * there is one, else DIR/vocab.txt. sha256 may be NULL. */
char *vocab_in_dir(const char *dir, const char *sha256);
/* vocab_in_dir of a model dir, which must hold one of them: else dies
 * saying so (or that dir is not there), naming the option that gave it.
 * Dies too where that is a vocab.txt, the data's own (of sha256, where
 * given), and the dir's tokenizer_config.json says to lowercase otherwise
 * than lower does (whether the data was lowercased; -1 where that is not
 * known). */
char *vocab_of_model(const char *option, const char *dir, const char *sha256, int lower);
#define TOKENIZER_CONFIG "tokenizer_config.json"
/* For v a WordPiece vocab, writes DIR/tokenizer_config.json with lower as
 * its do_lower_case, which transformers reads beside a vocab.txt (true
 * where it is not said); nothing for a tokenizer.json, whose normalizer
 * says it, or where lower is -1 (not known). */
void vocab_save_case(const struct vocab *v, const char *dir, int lower);
/* Whether the file at path, where there is one, has the SHA-256 sha256. */
int vocab_file_has_sha256(const char *path, const char *sha256);
/* vocab_file_name of the vocab in the file at path, told by its first byte. */
const char *vocab_file_name_at(const char *path);
/* Whether token id begins a word (whole-word masking keeps a word's pieces
 * together): WordPiece's tokens but "##" ones; hftok_starts_word's. */
int vocab_starts_word(const struct vocab *v, int32_t id);
int32_t vocab_special(const struct vocab *v, enum vocab_special which);
/* The text of a special token, e.g. "[CLS]". */
const char *vocab_special_name(enum vocab_special which);

/* WordPiece's lookup: the id of s[0..len) as a word start, or of "##" s[0..len) when
 * cont is set; -1 if absent. No piece is longer than vocab_max_piece bytes. */
int32_t vocab_piece_id(const struct vocab *v, int cont, const char *s, size_t len);
size_t vocab_max_piece(const struct vocab *v);

/* The first min(len, 8) bytes of s as a zero-padded little-endian word (the
 * key of a piece), reading only s[0..len): overlapping loads, not a byte loop. */
static inline uint64_t vocab_head_word(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	if (len >= 8) {
		uint64_t w;
		memcpy(&w, u, 8);
		return w;
	}
	if (len >= 4) {
		uint32_t a, b;
		memcpy(&a, u, 4);
		memcpy(&b, u + len - 4, 4);
		return a | (uint64_t)b << (8 * (len - 4));
	}
	if (len)
		return u[0] | (uint64_t)u[len / 2] << (8 * (len / 2)) | (uint64_t)u[len - 1] << (8 * (len - 1));
	return 0;
}
/* The lengths a piece at s (avail bytes there, at least 1) can have, by
 * the vocab's pieces that begin with its first two bytes: bit L for
 * length L up to avail, bit 31 for any of 31 bytes and over; cont as for
 * vocab_piece_id. A vocab.txt's only (WordPiece's). */
uint32_t vocab_piece_lengths(const struct vocab *v, int cont, const char *s, size_t avail);
#endif
