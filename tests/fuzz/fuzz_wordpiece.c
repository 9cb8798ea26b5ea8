/* ts-tokenize's text path with the bundled vocab: BERT normalisation and
 * WordPiece (lib/data/bertnorm.c, lib/data/wordpiece.c), then token records
 * (lib/data/encode.c). Byte 0 picks cased, pair and fold, byte 1 max_len, byte 2
 * the stride; the rest is the text, and the pair's text after a NUL. Every
 * record must be [CLS] ... [SEP] within max_len, of vocab ids. */
#include "data/encode.h"
#include "data/wordpiece.h"
#include "fuzz.h"

static struct vocab *vocab;
static struct wp_tokenizer *tok[2];   /* uncased, cased */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	vocab = vocab_load(FUZZ_VOCAB);
	tok[0] = wp_new(vocab, 0);
	tok[1] = wp_new(vocab, 1);
	return 0;
}

/* Aborts unless the n packed records in sb are well formed for o. */
static void check_records(const struct encode_opts *o, const msgpack_sbuffer *sb, size_t n, int pair)
{
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0, seen = 0;
	while (msgpack_unpack_next(&u, sb->data, sb->size, &off) == MSGPACK_UNPACK_SUCCESS) {
		const msgpack_object *ids = mp_get(&u.data, "ids"), *types = mp_get(&u.data, "types");
		uint32_t len = ids->via.array.size;
		const msgpack_object *v = ids->via.array.ptr;
		if (len < (pair ? 3u : 2u) || (o->max_len && len > o->max_len) || v[0].via.i64 != o->tpl->single[0].id ||
		    v[len - 1].via.i64 != o->tpl->single[2].id || !types != !pair || (pair && types->via.array.size != len))
			abort();
		for (uint32_t i = 0; i < len; i++)
			if (v[i].via.i64 < 0 || v[i].via.i64 >= vocab_size(vocab))
				abort();
		seen++;
	}
	if (seen != n)
		abort();
	msgpack_unpacked_destroy(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	int cased = data[0] & 1, pair = !!(data[0] & 2);
	struct template bert;
	template_bert(&bert, vocab_special(vocab, VOCAB_CLS), vocab_special(vocab, VOCAB_SEP));
	struct encode_opts o = {.max_len = data[1], .fold = !!(data[0] & 4), .stride = data[2], .tpl = &bert};
	if (encode_check(&o, pair))
		return 0;
	const char *text = (const char *)data + 3, *end = text + (size - 3);
	const char *nul = pair ? memchr(text, 0, (size_t)(end - text)) : NULL;
	if (pair && !nul)
		return 0;
	struct ids a = {0}, b = {0};
	wp_encode(tok[cased], text, (size_t)((pair ? nul : end) - text), &a);
	if (pair)
		wp_encode(tok[cased], nul + 1, (size_t)(end - nul - 1), &b);
	struct tokrec t = {0};
	tokrec_set_id(&t, "1", 1, 1);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	size_t n = encode_pack(&o, &a, pair ? &b : NULL, NULL, &t, &pk);
	check_records(&o, &sb, n, pair);
	msgpack_sbuffer_destroy(&sb);
	tokrec_free(&t);
	free(a.v);
	free(b.v);
	return 0;
}
