/* config.json of a model dir (lib/model/hfconfig.c): a config that reads must
 * write back and read again to the same settings and label names, as a
 * checkpoint of a fine-tuned transformers model does. */
#include "fuzz.h"
#include "model/hfconfig.h"

struct ctx {
	char *in, *out;
	struct bert_config c, back;
	char **labels, **labels_back;
	int n, n_back;
};

static int same_config(const struct bert_config *a, const struct bert_config *b)
{
	return a->vocab == b->vocab && a->hidden == b->hidden && a->layers == b->layers &&
	       a->heads == b->heads && a->ffn == b->ffn && a->max_pos == b->max_pos &&
	       a->type_vocab == b->type_vocab && a->ln_eps == b->ln_eps &&
	       a->hidden_dropout == b->hidden_dropout && a->attn_dropout == b->attn_dropout &&
	       a->task == b->task && a->num_labels == b->num_labels;
}

/* num_labels may be anything up to INT32_MAX; writing that many names
 * (LABEL_0, ...) back takes time and memory in proportion, as it should. */
enum { MAX_WRITTEN_LABELS = 1 << 16 };

static void run(void *arg)
{
	struct ctx *c = arg;
	hfconfig_read(c->in, &c->c, &c->labels, &c->n);
	if (c->c.num_labels > MAX_WRITTEN_LABELS)
		return;
	fuzz_die_is_bug(1);
	hfconfig_write(c->out, &c->c, c->labels, c->n);
	hfconfig_read(c->out, &c->back, &c->labels_back, &c->n_back);
	fuzz_die_is_bug(0);
	if (!same_config(&c->c, &c->back) || (c->n && c->n_back != c->n))
		abort();
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->labels[i], c->labels_back[i]))
			abort();
}

static void release(void *arg)
{
	struct ctx *c = arg;
	hfconfig_free_labels(c->labels, c->n);
	hfconfig_free_labels(c->labels_back, c->n_back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.in = fuzz_file("config.json", data, size),
			.out = path_join(fuzz_tmpdir(), "out.json")};
	fuzz_survive(run, release, &c);
	free(c.in);
	free(c.out);
	return 0;
}
