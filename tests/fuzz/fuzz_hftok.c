/* tokenizer.json (lib/data/hftok.c and its components: tjson, hfnorm,
 * precompiled, pretok, regex, bpe, unigram, added, trie), as ts-tokenize -t
 * reads it. The input is the file, and after a NUL a text to encode; a file
 * that reads must encode that text and a few fixed ones into ids below its
 * size, and give a template of ids below it too. */
#include "data/hftok.h"
#include "fuzz.h"

static const char *const texts[] = {
	"Hello world", "  runs   of  spaces\t", "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\x8d",
	"<mask> [MASK] <s></s>", "don't 1234", "",
};

struct ctx {
	const char *json, *text;
	size_t njson, ntext;
	struct hftok *t;
	struct hftok_space *sp;
	struct ids ids;
};

static void check_ids(const struct ctx *c)
{
	for (size_t i = 0; i < c->ids.n; i++)
		if (c->ids.v[i] < 0 || c->ids.v[i] >= hftok_size(c->t))
			abort();
}

static void check_template(const struct hftok *t)
{
	const struct template *p = hftok_template(t);
	for (int i = 0; i < p->nsingle + p->npair; i++) {
		int32_t id = i < p->nsingle ? p->single[i].id : p->pair[i - p->nsingle].id;
		if (id >= hftok_size(t) || (id < 0 && id != TPL_A && id != TPL_B))
			abort();
	}
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->t = hftok_parse("tokenizer.json", c->json, c->njson);
	c->sp = hftok_space_new();
	check_template(c->t);
	for (size_t i = 0; i <= sizeof texts / sizeof *texts; i++) {
		const char *s = i < sizeof texts / sizeof *texts ? texts[i] : c->text;
		size_t n = i < sizeof texts / sizeof *texts ? strlen(s) : c->ntext;
		c->ids.n = 0;
		hftok_encode(c->t, c->sp, s, n, &c->ids);
		check_ids(c);
	}
}

static void release(void *arg)
{
	struct ctx *c = arg;
	hftok_space_free(c->sp);
	hftok_free(c->t);
	free(c->ids.v);
	c->sp = NULL, c->t = NULL, c->ids = (struct ids){0};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	struct ctx c = {.json = (const char *)data, .njson = nul ? (size_t)(nul - data) : size, .text = ""};
	if (nul)
		c.text = (const char *)nul + 1, c.ntext = size - c.njson - 1;
	fuzz_survive(run, release, &c);
	return 0;
}
