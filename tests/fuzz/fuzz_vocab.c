/* vocab.txt (lib/data/vocab.c), as every command reads --vocab, and
 * WordPiece over it (wordpiece.c): a vocab that reads must find each of its
 * tokens at its own id, its special tokens by name, each piece's length in
 * its length table, and encode its own tokens and a few fixed texts into ids
 * below its size. A tokenizer.json (a file that begins with '{', after
 * white space) is fuzz_hftok's: one that reads is left there. */
#include "data/wordpiece.h"
#include "fuzz.h"

static const char *const texts[] = {
	"Hello world", "[CLS] [MASK] [SEP]", "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\x8d",
	"don't 1234 ##ing", "",
};

struct ctx {
	const char *path;
	struct vocab *v;
	struct wp_tokenizer *tok[2];
	struct ids ids;
};

static void check_ids(const struct ctx *c)
{
	for (size_t i = 0; i < c->ids.n; i++)
		if (c->ids.v[i] < 0 || c->ids.v[i] >= vocab_size(c->v))
			abort();
}

/* Token id is found by its text, and its piece's length is in the table. */
static void check_token(const struct vocab *v, int32_t id)
{
	const char *tok = vocab_token(v, id);
	size_t len = strlen(tok);
	if (vocab_id(v, tok, len) != id)
		abort();
	int cont = len > 2 && !strncmp(tok, "##", 2);
	const char *piece = tok + (cont ? 2 : 0);
	size_t n = len - (cont ? 2 : 0);
	if (vocab_piece_id(v, cont, piece, n) != id || n > vocab_max_piece(v) ||
	    !(vocab_piece_lengths(v, cont, piece, n) & 1u << (n < 31 ? n : 31)))
		abort();
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->v = vocab_load(c->path);
	if (!strcmp(vocab_file_name(c->v), "tokenizer.json"))
		return;
	fuzz_die_is_bug(1);
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		if (strcmp(vocab_token(c->v, vocab_special(c->v, i)), vocab_special_name(i)))
			abort();
	for (int32_t id = 0; id < vocab_size(c->v); id++)
		check_token(c->v, id);
	int ntexts = (int)(sizeof texts / sizeof *texts);
	int n = ntexts + (vocab_size(c->v) < 64 ? vocab_size(c->v) : 64);
	for (int cased = 0; cased < 2; cased++) {
		c->tok[cased] = wp_new(c->v, cased);
		for (int i = 0; i < n; i++) {
			const char *s = i < ntexts ? texts[i] : vocab_token(c->v, i - ntexts);
			c->ids.n = 0;
			wp_encode(c->tok[cased], s, strlen(s), &c->ids);
			check_ids(c);
		}
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	for (int i = 0; i < 2; i++)
		if (c->tok[i])
			wp_free(c->tok[i]);
	vocab_free(c->v);
	free(c->ids.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size && data[0] == '{')
		return 0;
	struct ctx c = {.path = fuzz_file("vocab.txt", data, size)};
	fuzz_survive(run, release, &c);
	free((char *)c.path);
	return 0;
}
