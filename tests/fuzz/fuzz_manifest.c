/* Data dir manifests (lib/data/manifest.c), read as ts-train reads them: a
 * manifest that reads must write back and read again to the same manifest. */
#include "data/manifest.h"
#include "fuzz.h"
#include <sys/stat.h>

struct ctx {
	char *back_dir;
	struct manifest *m, *back;
};

/* Whether every label counted in a has the same count in b (a count of 0
 * may be listed or left out). */
static int counts_in(const struct manifest_split *a, const struct manifest_split *b)
{
	for (size_t i = 0; i < a->nlabel_counts; i++)
		if (manifest_label_count(b, a->label_counts[i].label) != a->label_counts[i].count)
			return 0;
	return 1;
}

/* Label counts are kept for int and list labels only (manifest.h). */
static int same_split(const struct manifest_split *a, const struct manifest_split *b, enum label_kind kind)
{
	return !strcmp(a->name, b->name) && !strcmp(a->file, b->file) && a->count == b->count &&
	       a->tokens == b->tokens && a->max_tokens == b->max_tokens &&
	       !memcmp(a->length_hist, b->length_hist, sizeof a->length_hist) &&
	       ((kind != LABEL_INT && kind != LABEL_LIST) || (counts_in(a, b) && counts_in(b, a)));
}

static int same_manifest(const struct manifest *a, const struct manifest *b)
{
	if (!a->vocab_sha256 != !b->vocab_sha256 || (a->vocab_sha256 && strcmp(a->vocab_sha256, b->vocab_sha256)) ||
	    a->nlabels != b->nlabels || a->label_kind != b->label_kind || a->max_len != b->max_len ||
	    a->lower != b->lower || a->seed != b->seed || a->dedupe != b->dedupe ||
	    a->records_in != b->records_in || a->duplicates_dropped != b->duplicates_dropped ||
	    a->records_left_out != b->records_left_out || a->nsplits != b->nsplits)
		return 0;
	for (int i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i], b->labels[i]))
			return 0;
	for (int i = 0; i < a->nsplits; i++)
		if (!same_split(&a->splits[i], &b->splits[i], a->label_kind))
			return 0;
	return 1;
}

static void run(void *arg)
{
	struct ctx *c = arg;
	c->m = manifest_read(fuzz_tmpdir());
	fuzz_die_is_bug(1);
	manifest_write(c->back_dir, c->m);
	c->back = manifest_read(c->back_dir);
	fuzz_die_is_bug(0);
	if (!same_manifest(c->m, c->back))
		abort();
}

static void release(void *arg)
{
	struct ctx *c = arg;
	if (c->m)
		manifest_free(c->m);
	if (c->back)
		manifest_free(c->back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.back_dir = path_join(fuzz_tmpdir(), "back")};
	mkdir(c.back_dir, 0700);
	free(fuzz_file("manifest.json", data, size));
	fuzz_survive(run, release, &c);
	free(c.back_dir);
	return 0;
}
