/* ts-tokenize: text in, token records out, by a WordPiece vocab.txt or any
 * Hugging Face tokenizer.json. */
#include "data/encode.h"
#include "data/hftok.h"
#include "data/labelmap.h"
#include "data/tokinput.h"
#include "data/vocab.h"
#include "data/wordpiece.h"
#include "format/mpjson.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/ordered.h"
#include "util/progress.h"
#include "util/strbuf.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *vocab_path, *tokenizer_path, *format, *text_col, *pair_col, *label_col, *id_col, *labels_file;
static char *output = "-";
static long max_len = 512, stride, threads;
static int fold, cased, strict, show_tokens, numeric_labels;

static const struct opt opts[] = {
	{'v', "vocab", OPT_STR, &vocab_path, "FILE", "WordPiece vocabulary (vocab.txt)", "@file"},
	{'t', "tokenizer", OPT_STR, &tokenizer_path, "FILE", "a Hugging Face tokenizer.json, or a model dir that holds one", "@file"},
	{'f', "format", OPT_STR, &format, "FMT", "input format (default: from the file extension; lines for stdin)", "csv|tsv|jsonl|lines|conll"},
	{0, "text", OPT_STR, &text_col, "COL", "column or field holding the text, or in jsonl its list of words (default: text)", NULL},
	{0, "text-pair", OPT_STR, &pair_col, "COL", "column holding the second text of a pair", NULL},
	{0, "label", OPT_STR, &label_col, "COL", "column holding the label", NULL},
	{0, "labels", OPT_STR, &labels_file, "FILE", "label names in id order, one per line", "@file"},
	{0, "numeric-labels", OPT_FLAG, &numeric_labels, NULL, "read the labels as numbers, for --task reg (text or integers too)", NULL},
	{0, "id", OPT_STR, &id_col, "COL", "column holding the record id (default: the record number)", NULL},
	{0, "max-len", OPT_INT, &max_len, "N", "tokens per record including [CLS] and [SEP]; 0 for no limit", NULL,
	 .min = 0, .max = 1048576},
	{0, "fold", OPT_FLAG, &fold, NULL, "cut long text into several records instead of truncating", NULL},
	{0, "stride", OPT_INT, &stride, "N", "tokens of overlap between folded pieces", NULL,
	 .min = 0, .max = 1048576},
	{0, "cased", OPT_FLAG, &cased, NULL, "keep case and accents (for cased vocabularies)", NULL},
	{0, "strict", OPT_FLAG, &strict, NULL, "refuse invalid UTF-8 instead of replacing it", NULL},
	{0, "show-tokens", OPT_FLAG, &show_tokens, NULL, "print each record's tokens as JSON lines instead of writing records", NULL},
	{'j', "threads", OPT_INT, &threads, "N", "worker threads (default: all cores)", NULL,
	 .min = 0, .max = 1024},
	{'o', "output", OPT_STR, &output, "FILE", "write records to FILE (default: standard output)", "@file"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-tokenize", "Tokenize text into TopSpin token records.", "[FILE...]", "file", opts,
};

/* A batch ends at so many records or bytes of text, whichever comes first:
 * long records (e-mails) still make enough batches for every worker. */
enum { BATCH_RECORDS = 2048, BATCH_BYTES = 1 << 18 };

struct item {
	size_t text, text_n, pair, pair_n, id, id_n;  /* offsets into the batch arena */
	size_t words, nwords;                          /* a list of words: into the batch's word list */
	int is_words, has_pair, id_is_num;
	enum label_kind label_kind;
	int32_t label;
	double flabel;
	size_t labels, nlabels;                        /* offsets into the batch's label list */
	const char *file;                              /* where the item is, for errors found later */
	uint64_t line;
	size_t bad_utf8;                               /* invalid UTF-8 the reader replaced */
};

struct batch {
	struct strbuf arena;
	struct item *items;
	size_t n, cap;
	int32_t *lab;
	size_t nlab, lab_cap;
	size_t *word;                                  /* offsets of words in the arena, then lengths */
	size_t nword, word_cap;
	msgpack_sbuffer out;
	uint64_t records, bad_utf8;
	size_t first_bad;                              /* the item of the first invalid UTF-8 */
};

struct ctx {
	char **files;
	int nfiles, cur;
	enum in_format fmt;
	struct in_cols cols;
	struct tokinput *in;
	const char *in_name;   /* outlives the input, for errors found later */
	struct labelmap *labels;
	uint64_t next_id;
	struct vocab *vocab;               /* one of the two */
	struct hftok *hf;
	struct wp_tokenizer **wp;          /* a tokenizer per worker */
	struct hftok_space **hfs;
	struct template tpl;
	struct encode_opts enc;
	struct afile *out;
	FILE *spool;   /* records wait here when label names are found on the way */
	int header_due;   /* the header goes out before the first record: empty input writes nothing */
	uint64_t records, bad_utf8;
	const char *bad_file;   /* where the first invalid UTF-8 was */
	uint64_t bad_line;
	enum label_kind kind;   /* the first label's: every label is of its kind */
	char *kind_at;          /* "FILE: line N" of the first label */
	struct progress *prog;
	uint64_t done_bytes, total_bytes;
};

static enum in_format format_for(const char *path)
{
	if (format)
		return (enum in_format)format_parse(format);
	if (!strcmp(path, "-"))
		return FMT_LINES;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {   /* no name of a dir tells a format */
		errno = EISDIR;
		die("read %s:", path);
	}
	int f = format_from_name(path);
	if (f < 0)
		die_usage("%s: cannot tell the format from the name; give --format", path);
	return (enum in_format)f;
}

static int open_next(struct ctx *c)
{
	if (c->in) {
		c->done_bytes += tokinput_offset(c->in);
		tokinput_close(c->in);
		c->in = NULL;
	}
	if (c->cur == c->nfiles)
		return 0;
	const char *path = c->files[c->cur++];
	c->in = tokinput_open(path, format_for(path), &c->cols);
	c->in_name = strcmp(path, "-") ? path : "standard input";
	return 1;
}

/* A class, a number and a list are labels of three tasks: one stream holds
 * one of them (a number written whole, 3 among 2.5s, is a class otherwise). */
static void check_kind(struct ctx *c, enum label_kind k, const char *name, uint64_t line)
{
	static const char *const kinds[] = { "", "a class", "a list", "a number" };
	if (!c->kind) {
		c->kind = k;
		c->kind_at = xmalloc(strlen(name) + 32);
		sprintf(c->kind_at, "%s: line %llu", name, (unsigned long long)line);
		return;
	}
	if (k == c->kind)
		return;
	int numbers = (k == LABEL_FLOAT && c->kind == LABEL_INT) || (k == LABEL_INT && c->kind == LABEL_FLOAT);
	die("%s: line %llu: the label is %s, but %s's is %s%s", name, (unsigned long long)line, kinds[k], c->kind_at,
	    kinds[c->kind], numbers ? " (--numeric-labels reads every label as a number)" : "");
}

static void set_label(struct ctx *c, struct batch *b, struct item *it, const struct in_record *r)
{
	const char *name = tokinput_name(c->in);
	it->label_kind = LABEL_NONE;
	switch (r->label_kind) {
	case IN_LABEL_NONE: break;
	case IN_LABEL_STR:
		it->label_kind = LABEL_INT;
		it->label = labelmap_id(c->labels, r->label, r->label_n, name, r->line);
		break;
	case IN_LABEL_INT:
		it->label_kind = LABEL_INT;
		it->label = labelmap_class(c->labels, r->label_int, name, r->line);
		break;
	case IN_LABEL_FLOAT: it->label_kind = LABEL_FLOAT, it->flabel = r->label_float; break;
	case IN_LABEL_LIST:
	case IN_LABEL_NAMES:
		it->label_kind = LABEL_LIST;
		grow(&b->lab, &b->lab_cap, b->nlab + r->label_list_n, sizeof *b->lab);
		it->labels = b->nlab;
		it->nlabels = r->label_list_n;
		for (size_t i = 0; i < r->label_list_n; i++)
			b->lab[b->nlab++] = r->label_kind == IN_LABEL_LIST
				? labelmap_class(c->labels, r->label_list[i], name, r->line)
				: labelmap_id(c->labels, r->label_names[i].s, r->label_names[i].n, name, r->line);
		break;
	}
	if (it->label_kind != LABEL_NONE)
		check_kind(c, it->label_kind, name, r->line);
	if (!r->is_words || it->label_kind == LABEL_NONE)
		return;
	if (it->label_kind != LABEL_LIST)
		die("%s: line %llu: a list of words takes a list of tags, one a word, not one label", name,
		    (unsigned long long)r->line);
	if (it->nlabels != r->nwords)
		die("%s: line %llu: %zu words but %zu tags", name, (unsigned long long)r->line, r->nwords, it->nlabels);
}

static size_t stash(struct strbuf *a, const char *s, size_t n)
{
	size_t at = a->n;
	sb_add(a, s, n);
	sb_addc(a, 0);
	return at;
}

static void add_item(struct ctx *c, struct batch *b, const struct in_record *r)
{
	grow(&b->items, &b->cap, b->n + 1, sizeof *b->items);
	struct item *it = &b->items[b->n++];
	/* work() reads every field, and grow() leaves them unset */
	*it = (struct item){.file = c->in_name, .line = r->line, .bad_utf8 = r->bad_utf8};
	it->text = stash(&b->arena, r->text, r->text_n), it->text_n = r->text_n;
	it->has_pair = r->pair != NULL;
	if (r->is_words && r->pair)
		die("%s: line %llu: a list of words has no text pair", tokinput_name(c->in), (unsigned long long)r->line);
	it->words = b->nword, it->nwords = r->nwords, it->is_words = r->is_words;
	grow(&b->word, &b->word_cap, 2 * (b->nword + r->nwords), sizeof *b->word);
	for (size_t i = 0; i < r->nwords; i++, b->nword++) {
		b->word[2 * b->nword] = stash(&b->arena, r->words[i].s, r->words[i].n);
		b->word[2 * b->nword + 1] = r->words[i].n;
	}
	if (r->pair)
		it->pair = stash(&b->arena, r->pair, r->pair_n), it->pair_n = r->pair_n;
	char num[32];
	if (r->id) {
		it->id = stash(&b->arena, r->id, r->id_n), it->id_n = r->id_n, it->id_is_num = r->id_is_num;
	} else {
		int n = snprintf(num, sizeof num, "%llu", (unsigned long long)c->next_id);
		it->id = stash(&b->arena, num, (size_t)n), it->id_n = (size_t)n, it->id_is_num = 1;
	}
	c->next_id++;
	set_label(c, b, it, r);
}

static int produce(void *slot, void *ctxp)
{
	struct ctx *c = ctxp;
	struct batch *b = slot;
	b->arena.n = b->n = b->nlab = b->nword = 0;
	struct in_record r;
	while (b->n < BATCH_RECORDS && b->arena.n < BATCH_BYTES) {
		if (!c->in || !tokinput_next(c->in, &r)) {
			if (!open_next(c))
				break;
			continue;
		}
		add_item(c, b, &r);
	}
	if (c->prog)
		progress_update(c->prog, c->done_bytes + (c->in ? tokinput_offset(c->in) : 0), NULL);
	return b->n > 0;
}

/* Appends the ids of text to out by worker's tokenizer; returns how many
 * invalid UTF-8 sequences were replaced. */
static size_t encode_text(const struct ctx *c, int worker, const char *text, size_t len, struct ids *out)
{
	return c->hf ? hftok_encode(c->hf, c->hfs[worker], text, len, out) : wp_encode(c->wp[worker], text, len, out);
}

/* The pieces of an item's words in a, and in tags each word's tag (-1 when
 * it has none) at its first piece, -100 at the others. A word after the
 * first gets the space before it where the tokenizer keeps spaces. */
static size_t encode_words(const struct ctx *c, int worker, const struct batch *b, const struct item *it,
			   struct ids *a, struct ids *tags, struct strbuf *spaced)
{
	size_t bad = 0;
	int space = c->hf && hftok_spaced_words(c->hf);
	tags->n = 0;
	grow(&tags->v, &tags->cap, 1, sizeof *tags->v);   /* tags, if none, for a list of no words */
	for (size_t w = 0; w < it->nwords; w++) {
		const size_t *word = b->word + 2 * (it->words + w);
		size_t start = a->n;
		spaced->n = 0;
		if (space && w > 0)
			sb_addc(spaced, ' ');
		sb_add(spaced, b->arena.s + word[0], word[1]);
		bad += encode_text(c, worker, spaced->s, spaced->n, a);
		for (size_t i = start; i < a->n; i++)
			ids_push(tags, i > start ? TAG_NONE : it->label_kind == LABEL_LIST ? b->lab[it->labels + w] : TAG_UNKNOWN);
	}
	return bad;
}

static void work(void *slot, int worker, void *ctxp)
{
	struct ctx *c = ctxp;
	struct batch *b = slot;
	struct ids a = {0}, p = {0}, tags = {0};
	struct strbuf spaced = {0};
	struct tokrec t = {0};
	msgpack_packer pk;
	b->out.size = 0;
	msgpack_packer_init(&pk, &b->out, msgpack_sbuffer_write);
	b->records = b->bad_utf8 = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct item *it = &b->items[i];
		a.n = p.n = 0;
		size_t bad = it->bad_utf8 + (it->is_words ? encode_words(c, worker, b, it, &a, &tags, &spaced)
							: encode_text(c, worker, b->arena.s + it->text, it->text_n, &a));
		if (it->has_pair)
			bad += encode_text(c, worker, b->arena.s + it->pair, it->pair_n, &p);
		if (bad && !b->bad_utf8)
			b->first_bad = i;
		b->bad_utf8 += bad;
		tokrec_set_id(&t, b->arena.s + it->id, it->id_n, it->id_is_num);
		t.label_kind = it->label_kind;
		t.label = it->label;
		t.flabel = it->flabel;
		t.labels = it->nlabels ? b->lab + it->labels : NULL;   /* b->lab is NULL until a list label */
		t.nlabels = it->nlabels;
		b->records += encode_pack(&c->enc, &a, it->has_pair ? &p : NULL, it->is_words ? tags.v : NULL, &t, &pk);
	}
	t.labels = NULL;
	tokrec_free(&t);
	free(a.v);
	free(p.v);
	free(tags.v);
	sb_free(&spaced);
}

static const char *token_text(const struct ctx *c, int32_t id)
{
	const char *t = c->hf ? hftok_token(c->hf, id) : id >= 0 && id < vocab_size(c->vocab) ? vocab_token(c->vocab, id) : NULL;
	return t ? t : "";
}

/* The batch's records as JSON lines of their ids' tokens, for a reader. */
static void show_records(const struct ctx *c, struct batch *b)
{
	struct strbuf line = {0};
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	while (msgpack_unpack_next(&u, b->out.data, b->out.size, &off) == MSGPACK_UNPACK_SUCCESS) {
		const msgpack_object *id = mp_get(&u.data, "id"), *ids = mp_get(&u.data, "ids");
		line.n = 0;
		sb_add(&line, "{\"id\":", 6);
		mp_to_json(id, &line);
		sb_add(&line, ",\"tokens\":[", 11);
		for (uint32_t i = 0; i < ids->via.array.size; i++) {
			const char *t = token_text(c, (int32_t)ids->via.array.ptr[i].via.i64);
			if (i)
				sb_addc(&line, ',');
			sb_add_json_str(&line, t, strlen(t));
		}
		sb_add(&line, "]}\n", 3);
		afile_write(c->out, line.s, line.n);
	}
	msgpack_unpacked_destroy(&u);
	sb_free(&line);
}

static void write_header(struct ctx *c)
{
	struct stream_header h = {
		.kind = "tokens", .max_len = max_len,
		.vocab_sha256 = (char *)(c->hf ? hftok_sha256(c->hf) : vocab_sha256(c->vocab)),
		.vocab_file = realpath(c->hf ? hftok_path(c->hf) : vocab_path, NULL),
		.tokenizer = c->hf ? "tokenizer.json" : NULL, .model = c->hf ? (char *)hftok_kind(c->hf) : NULL,
		.lower = c->hf ? hftok_lowercases(c->hf) : !cased,
	};
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		h.special[i] = c->hf ? hftok_special(c->hf, i) : -1;
	labelmap_names(c->labels, &h.labels, &h.nlabels);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	header_pack(&pk, &h);
	afile_write(c->out, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	free(h.vocab_file);
	c->header_due = 0;
}

static void consume(void *slot, void *ctxp)
{
	struct ctx *c = ctxp;
	struct batch *b = slot;
	if (strict && b->bad_utf8) {
		const struct item *bad = &b->items[b->first_bad];
		die("%s: line %llu: invalid UTF-8", bad->file, (unsigned long long)bad->line);
	}
	if (b->bad_utf8 && !c->bad_utf8) {
		c->bad_file = b->items[b->first_bad].file;
		c->bad_line = b->items[b->first_bad].line;
	}
	c->records += b->records;
	c->bad_utf8 += b->bad_utf8;
	if (show_tokens) {
		show_records(c, b);
	} else if (c->spool) {
		if (fwrite(b->out.data, 1, b->out.size, c->spool) != b->out.size)
			die("cannot write a temporary file in %s:", temp_dir());
	} else if (b->out.size) {
		if (c->header_due)
			write_header(c);
		afile_write(c->out, b->out.data, b->out.size);
	}
}

/* The one warning for the invalid UTF-8 replaced, naming where the first was. */
static void warn_bad_utf8(const struct ctx *c)
{
	if (c->bad_utf8 == 1)
		warnx("%s: line %llu: replaced an invalid UTF-8 sequence with U+FFFD", c->bad_file,
		      (unsigned long long)c->bad_line);
	else if (c->bad_utf8)
		warnx("replaced %llu invalid UTF-8 sequences with U+FFFD, the first in %s: line %llu",
		      (unsigned long long)c->bad_utf8, c->bad_file, (unsigned long long)c->bad_line);
}

static void copy_spool(struct ctx *c)
{
	char buf[1 << 16];
	size_t n;
	/* the last piece is still in the stream's buffer, and rewind() would
	 * write it without a word on a full disk */
	if (fflush(c->spool) == EOF || fseek(c->spool, 0, SEEK_SET) < 0)
		die("cannot write a temporary file in %s:", temp_dir());
	while ((n = fread(buf, 1, sizeof buf, c->spool)) > 0)
		afile_write(c->out, buf, n);
	if (ferror(c->spool))
		die("cannot read a temporary file in %s:", temp_dir());
	fclose(c->spool);
}

static uint64_t total_size(char **files, int n)
{
	uint64_t total = 0;
	struct stat st;
	for (int i = 0; i < n; i++)
		if (strcmp(files[i], "-") && stat(files[i], &st) == 0)
			total += (uint64_t)st.st_size;
	return total;
}

static void check_options(void)
{
	if (vocab_path && tokenizer_path)
		die_usage("-t and -v are one at a time: a tokenizer.json or a vocab.txt (one of them)");
	if (!vocab_path && !tokenizer_path)
		die_usage("a tokenizer is required: -t tokenizer.json or -v vocab.txt (one of them)");
	if (tokenizer_path && cased)
		die_usage("--cased is for a vocab.txt: a tokenizer.json decides case itself");
	if (format && format_parse(format) < 0)
		die_usage("unknown format '%s'", format);
}

static void check_lengths(const struct template *tpl)
{
	struct encode_opts e = {.max_len = max_len, .fold = fold, .stride = stride, .tpl = tpl};
	const char *why = encode_check(&e, pair_col != NULL);
	if (why)
		die_usage("%s", why);
}

/* Whether an input is CoNLL, whose tags are label names. */
static int any_conll(char **files, int n)
{
	for (int i = 0; i < n; i++)
		if (format_for(files[i]) == FMT_CONLL)
			return 1;
	return 0;
}

/* Every input's format is known before any output is written. */
static void check_formats(char **files, int n)
{
	for (int i = 0; i < n; i++)
		if (format_for(files[i]) == FMT_LINES && (text_col || pair_col || label_col || id_col))
			die_usage("%s: --text, --text-pair, --label and --id need csv, tsv or jsonl input", files[i]);
		else if (format_for(files[i]) == FMT_CONLL && (text_col || pair_col || label_col || id_col))
			die_usage("%s: conll input has its words and tags in fixed columns: no --text, --text-pair, --label or --id",
				  files[i]);
}

int main(int argc, char **argv)
{
	struct ctx c = {0};
	c.nfiles = opt_parse(&spec, argc, argv, &c.files);
	opt_instead(&spec, "vocab", (const char *const[]){ "tokenizer", NULL });   /* -c FILE -t: the command line's */
	opt_instead(&spec, "tokenizer", (const char *const[]){ "vocab", "cased", NULL });
	check_options();
	static char *dash[] = {"-"};
	if (c.nfiles == 0)
		c.files = dash, c.nfiles = 1;
	check_formats(c.files, c.nfiles);
	if (labels_file && !label_col && !any_conll(c.files, c.nfiles))
		die_usage("--labels names the classes of --label COL or of conll input's tags");
	if (numeric_labels && !label_col)
		die_usage("--numeric-labels reads the labels of --label COL");
	if (numeric_labels && labels_file)
		die_usage("--numeric-labels and --labels are one at a time: numbers name no classes");
	for (int i = 0, stdin_seen = 0; i < c.nfiles; i++)
		if (!strcmp(c.files[i], "-") && stdin_seen++)
			die_usage("standard input is read once: '-' is named twice");
	for (int i = 0; labels_file && !strcmp(labels_file, "-") && i < c.nfiles; i++)
		if (!strcmp(c.files[i], "-"))
			die_usage("standard input is read once: as --labels - or as the input ('-', or no FILE)");
	c.cols = (struct in_cols){text_col ? text_col : "text", pair_col, label_col, id_col, numeric_labels};
	if (tokenizer_path) {
		c.hf = hftok_load(tokenizer_path);
		c.tpl = *hftok_template(c.hf);
	} else {
		c.vocab = vocab_load(vocab_path);
		if (strcmp(vocab_file_name(c.vocab), "vocab.txt"))
			die_usage("-v %s: a tokenizer.json, which -t reads", vocab_path);
		template_bert(&c.tpl, vocab_special(c.vocab, VOCAB_CLS), vocab_special(c.vocab, VOCAB_SEP));
	}
	check_lengths(&c.tpl);
	c.enc = (struct encode_opts){max_len, fold, stride, &c.tpl};
	c.labels = labels_file ? labelmap_load(labels_file) : labelmap_new();
	int nthreads = threads ? (int)threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	c.wp = xcalloc((size_t)nthreads, sizeof *c.wp);
	c.hfs = xcalloc((size_t)nthreads, sizeof *c.hfs);
	for (int i = 0; i < nthreads; i++)
		if (c.hf)
			c.hfs[i] = hftok_space_new();
		else
			c.wp[i] = wp_new(c.vocab, cased);
	for (int i = 0; i < c.nfiles; i++)
		check_not_input(output, "the input", c.files[i]);
	check_not_input(output, "the tokenizer", c.hf ? hftok_path(c.hf) : vocab_path);
	if (labels_file)
		check_not_input(output, "the labels file", labels_file);
	c.out = afile_open(output);
	if (show_tokens) {
		/* no header: the lines are for reading */
	} else if ((label_col || any_conll(c.files, c.nfiles)) && !labels_file) {
		c.spool = temp_file();
	} else {
		c.header_due = 1;
	}
	c.total_bytes = total_size(c.files, c.nfiles);
	c.prog = progress_new("tokenizing", c.total_bytes, PROGRESS_BYTES);
	int nslots = 2 * nthreads + 2;
	struct batch *slots = xcalloc((size_t)nslots, sizeof *slots);
	void **sp = xcalloc((size_t)nslots, sizeof *sp);
	for (int i = 0; i < nslots; i++) {
		msgpack_sbuffer_init(&slots[i].out);
		sp[i] = &slots[i];
	}
	struct ordered_job job = {nthreads, nslots, sp, produce, work, consume, &c};
	ordered_run(&job);
	progress_done(c.prog);
	if (c.next_id == 0)
		die("%s: empty input", c.nfiles == 1 ? (strcmp(c.files[0], "-") ? c.files[0] : "standard input") : "all inputs");
	if (c.spool && !show_tokens) {
		write_header(&c);
		copy_spool(&c);
	}
	afile_commit(c.out);
	warn_bad_utf8(&c);
	close_stdout();
	return 0;
}
