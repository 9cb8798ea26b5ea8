/* ts-shard: shuffle token records with a seed, optionally drop duplicates,
 * split them and write a data dir of indexed shards and a manifest, in
 * bounded memory (an external sort keyed by a hash of the seed). A part
 * may come from a file of its own (a corpus's official test set), whole:
 * only train is shuffled; the inputs' classes get one numbering, by name. */
#include "data/extsort.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "data/splitspec.h"
#include "data/tokrec.h"
#include "data/vocab.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include "util/rng.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *output, *vocab_path, *split = "train=0.8,valid=0.1,test=0.1";
static long seed, mem_mib = 256;
static int dedupe, force;

static const struct opt opts[] = {
	{'o', "output", OPT_STR, &output, "DIR", "write the data dir DIR (required)", "@dir"},
	{'v', "vocab", OPT_STR, &vocab_path, "FILE",
	 "vocab.txt the records were made with (default: the file their header names)", "@file"},
	{'s', "split", OPT_STR, &split, "SPEC",
	 "NAME=FRACTION,... or NAME=COUNT,...[,NAME=rest], and NAME=@FILE for a file whole "
	 "(default train=0.8,valid=0.1,test=0.1)", NULL},
	{0, "seed", OPT_INT, &seed, "N", "shuffle seed", NULL,
	 .min = 0, .max = LONG_MAX},
	{0, "dedupe", OPT_FLAG, &dedupe, NULL, "drop records whose tokens repeat those of an earlier record", NULL},
	{0, "mem", OPT_INT, &mem_mib, "MIB", "memory for the shuffle in MiB", NULL,
	 .min = 1, .max = 16777216},
	{'f', "force", OPT_FLAG, &force, NULL, "replace an existing data dir", NULL},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-shard", "Shuffle, dedupe and split token records into a data dir of shards.", "[FILE...]", "file",
	opts,
};

/* The largest value of a kind in the records read so far, and where it is. */
struct seen {
	int32_t max;
	const char *file;   /* NULL while there is none */
	uint64_t rec;
};

/* Reading the inputs: the header fields go into the manifest (first_header
 * names the stream they came from), the records into a sort: the shares'
 * inputs into one, each file of a part of its own into its own. */
struct inputs {
	struct manifest *m;
	struct stream_header header;   /* the streams' headers, merged */
	char *first_header;
	struct label_union labels;     /* one numbering of the streams' classes */
	struct vocab *vocab;           /* NULL while unknown */
	const char *vocab_file;
	struct seen id, label;         /* the largest token id, and class label of records without names */
	char *file;                    /* the stream being read, kept for seen */
	struct tokrec t;
	void *buf;
	size_t cap;
};

/* The vocab a header names, where -v gave none: it goes into the data dir, so
 * that ts-train needs no --vocab. Only a header with the vocab's hash names
 * one: no file is taken that the hash does not vouch for. */
static void open_header_vocab(struct inputs *in, const struct rec_reader *r)
{
	const char *path = in->header.vocab_file;
	if (access(path, R_OK))
		die("%s: cannot read %s, the vocab the header names: %s (give it with -v FILE)", rec_name(r), path,
		    strerror(errno));
	if (!vocab_file_has_sha256(path, in->header.vocab_sha256))   /* told so before it is parsed */
		die("%s: made with the vocab of sha256 %.12s\u2026, but %s, the vocab the header names, has "
		    "changed since (give the one they were made with: -v FILE)", rec_name(r), in->header.vocab_sha256,
		    path);
	in->vocab = vocab_load(path);
	in->vocab_file = path;
}

/* The records read so far against the vocab and the label names, as far as
 * they are known: a header that comes after records applies to them too, so
 * the order of the inputs cannot change what is refused. */
static void check_seen(const struct inputs *in)
{
	const struct seen *id = &in->id, *label = &in->label;
	if (in->vocab && id->file && id->max >= vocab_size(in->vocab))
		die("%s: record %llu: token id %d is beyond the vocab's %d tokens", id->file, (unsigned long long)id->rec,
		    id->max, vocab_size(in->vocab));
	if (in->labels.n && label->file && label->max >= in->labels.n)
		die("%s: record %llu: label %d is out of range (%d label names)", label->file,
		    (unsigned long long)label->rec, label->max, in->labels.n);
}

/* The streams' headers agree with each other and with the vocab, and fill
 * the manifest's fields. */
static void agree_header(struct inputs *in, const struct rec_reader *r, struct stream_header *h)
{
	header_merge(&in->header, &in->first_header, r, h);
	if (!in->vocab && in->header.vocab_file && in->header.vocab_sha256)
		open_header_vocab(in, r);
	const char *want = in->header.vocab_sha256;
	if (in->vocab && want && strcmp(want, vocab_sha256(in->vocab)))
		die("%s: made with the vocab of sha256 %.12s\u2026, but %s has sha256 %.12s\u2026", rec_name(r), want,
		    in->vocab_file, vocab_sha256(in->vocab));
	label_union_header(&in->labels, h);
	struct manifest *m = in->m;
	m->vocab_sha256 = in->header.vocab_sha256;
	m->labels = in->labels.names;
	m->nlabels = in->labels.n;
	m->lower = in->header.lower;
	m->max_len = in->header.max_len;
	check_seen(in);
}

static const char *kind_text(enum label_kind k)
{
	static const char *const text[] = {"no", "class", "list", "float"};
	return text[k];
}

static void note(struct seen *s, int32_t v, const struct inputs *in, const struct rec_reader *r)
{
	if (!s->file || v > s->max)
		*s = (struct seen){v, in->file, rec_number(r)};
}

/* What shards cannot hold, ids too long and labels of mixed kinds; the
 * classes take the union's numbers, and the token ids and the classes of
 * records without names are noted for check_seen. */
static void check_record(const struct rec_reader *r, struct inputs *in)
{
	struct tokrec *t = &in->t;
	struct manifest *m = in->m;
	for (size_t i = 0; i < t->n; i++)
		note(&in->id, t->ids[i], in, r);
	if (strlen(t->id) > SHARD_MAX_ID)
		rec_die(r, "id is %zu bytes long; shards hold ids of at most %d bytes", strlen(t->id), SHARD_MAX_ID);
	if (t->label_kind == LABEL_NONE)
		return;
	if (m->label_kind == LABEL_NONE)
		m->label_kind = t->label_kind;
	if (t->label_kind != m->label_kind)
		rec_die(r, "a %s label, but earlier records have %s labels", kind_text(t->label_kind),
			kind_text(m->label_kind));
	if (label_union_record(&in->labels, r, t))
		return;
	size_t n;
	const int32_t *v = tokrec_classes(t, &n);
	for (size_t i = 0; i < n; i++)   /* tokrec_unpack refuses negative labels but for the tags */
		note(&in->label, v[i], in, r);
}

/* With --dedupe the key hashes the tokens, so copies meet in the sort. */
static uint64_t content_hash(const struct tokrec *t)
{
	uint64_t h = rng_mix64(t->n * 2 + (t->types != NULL));
	for (size_t i = 0; i < t->n; i++)
		h = rng_mix64(h ^ (uint32_t)t->ids[i] ^ (t->types ? (uint64_t)t->types[i] << 32 : 0));
	return h;
}

/* A sort of records: shuffled by the seed (and with --dedupe met by their
 * tokens), or in the order they come. The pieces of a folded text follow
 * its first under the first's key (they come in a row), so that they stay
 * together: a text split between train and test would be learnt from and
 * then scored. */
struct pile {
	struct extsort *sort;
	int shuffled;
	uint64_t text_key;   /* the key of the last piece 0 */
};

static void add_record(struct inputs *in, struct pile *p, const struct rec_reader *r)
{
	uint64_t i = extsort_count(p->sort);
	size_t size = shard_rec_size(&in->t);
	if (size > extsort_max_item(p->sort))
		rec_die(r, "it takes %zu bytes, more than the shuffle's memory holds (%zu): give a larger --mem", size,
			extsort_max_item(p->sort));
	grow(&in->buf, &in->cap, size, 1);
	shard_rec_encode(&in->t, in->buf);
	uint64_t key = !p->shuffled ? i
		       : in->t.fold > 0 ? p->text_key
		       : rng_hash((uint64_t)seed, dedupe ? content_hash(&in->t) : i);
	if (in->t.fold == 0)
		p->text_key = key;
	extsort_add(p->sort, key, i, in->buf, (uint32_t)size);
}

static void read_file(struct inputs *in, const char *path, struct pile *p)
{
	if (shard_file_is(path))
		die("%s: a shard of a data dir, not a token stream (ts-tokenize's records): ts-shard makes shards, "
		    "and reads none", path);
	struct rec_reader *r = rec_open(path);
	in->file = xstrdup(rec_name(r));   /* never freed: seen may point at it */
	label_union_stream(&in->labels);
	const msgpack_object *o;
	struct stream_header h;
	while ((o = rec_next(r))) {
		if (header_unpack(r, o, &h)) {
			agree_header(in, r, &h);
			header_free(&h);
			continue;
		}
		tokrec_unpack(r, o, &in->t);
		check_record(r, in);
		check_seen(in);
		add_record(in, p, r);
	}
	rec_close(r);
}

/* Reads every record of the sorted output once; with --dedupe, skips records
 * whose tokens equal those of one already kept under the same key. */
struct reader {
	struct extsort *sort;
	int dedupe;                /* --dedupe, on a shuffled pile */
	struct tokrec t, other;
	uint64_t key;              /* t's */
	int held;                  /* t is read but not taken: the next record */
	struct { void *data; uint32_t len; } *kept;   /* records kept under key */
	size_t nkept, cap;
};

static int same_tokens(const struct tokrec *a, const struct tokrec *b)
{
	if (a->n != b->n || !a->types != !b->types)
		return 0;
	if (a->n == 0)
		return 1;
	return !memcmp(a->ids, b->ids, a->n * sizeof *a->ids) && (!a->types || !memcmp(a->types, b->types, a->n));
}

static void decode(const void *data, uint32_t len, struct tokrec *t)
{
	const char *why = shard_rec_decode(data, len, t);
	if (why)
		die("the sort's temp file is corrupt: %s", why);
}

static void forget_kept(struct reader *rd)
{
	while (rd->nkept)
		free(rd->kept[--rd->nkept].data);
}

static int is_duplicate(struct reader *rd, const struct extsort_item *it)
{
	if (it->key != rd->key)
		forget_kept(rd);
	rd->key = it->key;
	for (size_t i = 0; i < rd->nkept; i++) {
		decode(rd->kept[i].data, rd->kept[i].len, &rd->other);
		if (same_tokens(&rd->t, &rd->other))
			return 1;
	}
	grow(&rd->kept, &rd->cap, rd->nkept + 1, sizeof *rd->kept);
	rd->kept[rd->nkept].data = xmalloc(it->len);
	memcpy(rd->kept[rd->nkept].data, it->data, it->len);
	rd->kept[rd->nkept++].len = it->len;
	return 0;
}

static int next_record(struct reader *rd)
{
	if (rd->held)
		return rd->held = 0, 1;
	struct extsort_item it;
	while (extsort_next(rd->sort, &it)) {
		decode(it.data, it.len, &rd->t);
		if (!rd->dedupe || !is_duplicate(rd, &it)) {
			rd->key = it.key;
			return 1;
		}
	}
	return 0;
}

static void rewind_records(struct reader *rd)
{
	extsort_rewind(rd->sort);
	forget_kept(rd);
	rd->held = 0;
}

static uint64_t count_kept(struct reader *rd)
{
	uint64_t n = 0;
	rewind_records(rd);
	while (next_record(rd))
		n++;
	return n;
}

/* Split i's shard in the data dir's temp dir: the next count records of rd,
 * and the pieces left of the last one's text. */
static void write_split(struct reader *rd, const char *name, uint64_t count, const char *dir, struct manifest_split *s)
{
	s->name = xstrdup(name);
	s->file = xmalloc(strlen(s->name) + 8);
	sprintf(s->file, "%s.shard", s->name);
	char *path = manifest_shard_path(dir, s);
	struct shard_writer *w = shard_create(path);
	uint64_t key = 0;
	for (uint64_t j = 0; next_record(rd); j++) {
		int goes_on = j && rd->t.fold > 0 && rd->key == key;   /* a later piece of the text before */
		if (j >= count && !goes_on) {
			rd->held = 1;
			break;
		}
		key = rd->key;
		shard_append(w, &rd->t);
		manifest_split_add(s, &rd->t);
	}
	shard_commit(w);
	free(path);
}

/* The records a pile keeps (--dedupe drops repeats), and its reader. */
static uint64_t open_pile(struct reader *rd, struct pile *p)
{
	*rd = (struct reader){.sort = p->sort, .dedupe = dedupe && p->shuffled};
	return rd->dedupe ? count_kept(rd) : extsort_count(p->sort);
}

static void close_pile(struct reader *rd)
{
	forget_kept(rd);
	free(rd->kept);
	tokrec_free(&rd->t);
	tokrec_free(&rd->other);
	extsort_free(rd->sort);
}

/* The parts in the order of --split: the shares from the shares' pile, a
 * file's part whole from its own. */
static void write_splits(const struct splitspec *sp, struct pile *piles, struct pile *shares, const char *dir,
			 struct manifest *m)
{
	struct reader rd;
	uint64_t kept = shares ? open_pile(&rd, shares) : 0, used = 0, all = kept;
	uint64_t *counts = xcalloc((size_t)sp->n, sizeof *counts);
	splitspec_counts(sp, kept, counts);
	m->splits = xcalloc((size_t)sp->n, sizeof *m->splits);
	if (shares)
		rewind_records(&rd);
	for (int i = 0; i < sp->n; i++, m->nsplits++) {
		if (!sp->parts[i].file) {
			write_split(&rd, sp->parts[i].name, counts[i], dir, &m->splits[i]);
			used += m->splits[i].count;
			continue;
		}
		struct reader own;
		uint64_t n = open_pile(&own, &piles[i]);
		rewind_records(&own);
		write_split(&own, sp->parts[i].name, n, dir, &m->splits[i]);
		close_pile(&own);
		all += n;
	}
	if (shares)
		close_pile(&rd);
	m->records_left_out = kept - used;
	m->duplicates_dropped = m->records_in - all;
	free(counts);
}

struct input_file {
	dev_t dev;
	ino_t ino;
	int order;   /* in the command line: parts' files, then FILE operands */
	const char *path;
};

/* qsort's order: by file, then as given. */
static int by_identity(const void *a, const void *b)
{
	const struct input_file *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->order - y->order;
}

/* The same file given twice, by one name or two, would put each of its
 * records in the data dir twice, across its splits too: refused. (One
 * that cannot be read is read_file's to name.) */
static void check_each_once(const char **paths, int n)
{
	struct input_file *f = xcalloc((size_t)n + 1, sizeof *f);
	int known = 0;
	struct stat st;
	for (int i = 0; i < n; i++)
		if (strcmp(paths[i], "-") && stat(paths[i], &st) == 0)
			f[known++] = (struct input_file){st.st_dev, st.st_ino, i, paths[i]};
	qsort(f, (size_t)known, sizeof *f, by_identity);
	for (int i = 1; i < known; i++)
		if (f[i - 1].dev == f[i].dev && f[i - 1].ino == f[i].ino)
			die_usage("%s and %s are the same file: its records would be read twice, in more than one split",
				  f[i - 1].path, f[i].path);
	free(f);
}

/* Inputs for the shares, and files of parts of their own, each read once;
 * standard input (FILE operands' '-', none given, or one part's @-) too. */
static void check_inputs(const struct splitspec *sp, char **files, int nfiles, int given)
{
	int shares = splitspec_shares(sp), stdin_uses = 0, n = 0;
	if (!shares && given)
		die_usage("every part of --split names its file: there are no shares to divide the FILE operands");
	const char **paths = xcalloc((size_t)sp->n + (size_t)nfiles + 1, sizeof *paths);
	for (int i = 0; i < sp->n; i++)
		if (sp->parts[i].file)
			paths[n++] = sp->parts[i].file;
	for (int i = 0; shares && i < nfiles; i++)
		paths[n++] = files[i];
	for (int i = 0; i < n; i++)
		stdin_uses += !strcmp(paths[i], "-");
	if (stdin_uses > 1)
		die_usage("standard input is read once: as '-' among the FILE operands (or none given) or as one part's @-");
	check_each_once(paths, n);
	free(paths);
}

/* An input in the data dir that --force replaces would go with it. */
static void check_not_replaced(const char *file)
{
	if (force && file && strcmp(file, "-") && lies_in(file, output))
		die("cannot replace %s: the input %s is in it", output, file);
}

int main(int argc, char **argv)
{
	char **files;
	int nfiles = opt_parse(&spec, argc, argv, &files), given = nfiles > 0;
	static char *std_input[] = {"-"};
	if (!nfiles) {
		files = std_input;
		nfiles = 1;
	}
	if (!output || !*output)
		die_usage("no output dir: -o DIR is required");
	struct splitspec sp;
	splitspec_parse(split, &sp);
	check_inputs(&sp, files, nfiles, given);
	for (int i = 0; i < nfiles; i++)
		check_not_replaced(files[i]);
	for (int i = 0; i < sp.n; i++)
		check_not_replaced(sp.parts[i].file);
	check_not_replaced(vocab_path);
	struct adir *dir = adir_begin(output, force, "manifest.json");

	/* a pile a file's part, one for the shares: the memory divided among them */
	int shares = splitspec_shares(&sp), npiles = sp.n - shares + (shares > 0);
	size_t mem = ((size_t)mem_mib << 20) / (size_t)npiles;
	mem = mem > (1u << 20) ? mem : 1u << 20;
	struct manifest *m = xcalloc(1, sizeof *m);
	struct inputs in = {.m = m};
	if (vocab_path)
		in.vocab = vocab_load(vocab_path), in.vocab_file = vocab_path;
	struct pile *piles = xcalloc((size_t)sp.n, sizeof *piles), pool = {0};
	for (int i = 0; i < sp.n; i++) {
		if (!sp.parts[i].file)
			continue;
		piles[i] = (struct pile){extsort_new(adir_tmp(dir), mem), !strcmp(sp.parts[i].name, "train")};
		read_file(&in, sp.parts[i].file, &piles[i]);
		if (!extsort_count(piles[i].sort))
			die("%s: no records for the %s split", sp.parts[i].file, sp.parts[i].name);
		m->records_in += extsort_count(piles[i].sort);
	}
	if (shares) {
		pool = (struct pile){extsort_new(adir_tmp(dir), mem), 1};
		for (int i = 0; i < nfiles; i++)
			read_file(&in, files[i], &pool);
		if (!extsort_count(pool.sort))
			die("%s: no records", nfiles > 1 ? "the inputs" : strcmp(files[0], "-") ? files[0] : "standard input");
		m->records_in += extsort_count(pool.sort);
	}
	m->seed = seed;
	m->dedupe = dedupe;
	write_splits(&sp, piles, shares ? &pool : NULL, adir_tmp(dir), m);
	if (in.vocab) {
		char *path = path_join(adir_tmp(dir), vocab_file_name(in.vocab));
		vocab_save(in.vocab, path);
		free(path);
		if (!m->vocab_sha256)
			m->vocab_sha256 = (char *)vocab_sha256(in.vocab);
	}
	manifest_write(adir_tmp(dir), m);
	adir_commit(dir);
	close_stdout();
	return 0;
}
