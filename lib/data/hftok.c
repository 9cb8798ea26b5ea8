#include "data/hftok.h"
#include "data/added.h"
#include "data/bpe.h"
#include "data/hfnorm.h"
#include "data/pretok.h"
#include "data/tjson.h"
#include "data/unigram.h"
#include "data/utf8.h"
#include "data/wpmodel.h"
#include "format/jsonarena.h"
#include "format/jsonsplit.h"
#include "util/afile.h"
#include "util/digest.h"
#include "util/strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* No real tokenizer.json comes near this (XLM-R's is 17 MB). */
#define MAX_FILE (64 << 20)

struct hftok {
	char *path;
	char sha256[SHA256_HEX_SIZE];
	struct added *raw, *normalized;   /* added tokens matched before and after normalizing */
	struct hfnorm *norm;
	struct pretok *pre;
	struct bpe *bpe;                  /* the model: one of these */
	struct unigram *unigram;
	struct wpmodel *wordpiece;
	struct template tpl;
	char **added_name;                /* by id, the added tokens' contents (NULL elsewhere) */
	int32_t size, special[VOCAB_NSPECIAL];
};

struct hftok_space {
	struct strbuf valid;              /* the text with invalid UTF-8 replaced */
	struct added_match *raw, *normalized;
	size_t raw_cap, normalized_cap;
	struct hfnorm_space *norm;
	struct pretok_space *pre;
	struct pieces words;
	struct bpe_space *bpe;
	struct unigram_space *unigram;
	struct wpmodel_space *wordpiece;
};

/* The bytes of the file at path (a dir: its tokenizer.json); *real its name. */
static char *read_json_file(const char *path, size_t *n, char **real)
{
	struct stat st;
	*real = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path_join(path, "tokenizer.json") : xstrdup(path);
	off_t size;
	int fd = open_regular(*real, &size);
	if (size > MAX_FILE)
		die("%s: %lld bytes, more than a tokenizer.json holds (at most %d MiB)", *real, (long long)size,
		    MAX_FILE >> 20);
	char *buf = xmalloc((size_t)size + 1);
	size_t got = 0;
	for (ssize_t k; got < (size_t)size && (k = read(fd, buf + got, (size_t)size - got)) != 0;)
		if (k < 0)
			die("cannot read %s:", *real);
		else
			got += (size_t)k;
	close(fd);
	*n = got;
	return buf;
}

static void read_added(const struct tjwhere *w, json_t *list, struct hftok *t)
{
	t->raw = added_new();
	t->normalized = added_new();
	if (!list || json_is_null(list))
		return;
	if (!json_is_array(list))
		tj_die(w, "not a list");
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		int32_t id = (int32_t)tj_int(w, e, "id", 0, (1 << 24) - 1);
		const char *content = tj_str(w, e, "content", NULL);
		if (!content || !*content)
			tj_die(w, "token %zu has no content", i + 1);
		if (id >= t->size) {
			t->added_name = xrealloc(t->added_name, (size_t)(id + 1) * sizeof *t->added_name);
			memset(t->added_name + t->size, 0, (size_t)(id + 1 - t->size) * sizeof *t->added_name);
			t->size = id + 1;
		}
		free(t->added_name[id]);
		t->added_name[id] = xstrdup(content);
	}
}

/* The added tokens go into the tries once the normalizer is known: the
 * normalized ones are matched in normalized text, so in normalized form. */
static void index_added(const struct tjwhere *w, json_t *list, struct hftok *t)
{
	struct hfnorm_space *sp = hfnorm_space_new();
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		const char *content = tj_str(w, e, "content", NULL);
		int normalized = tj_bool(w, e, "normalized", 1);
		size_t n = strlen(content);
		const char *s = normalized ? hfnorm_run(t->norm, sp, content, n, &n) : content;
		if (n)
			added_add(normalized ? t->normalized : t->raw, s, n, (int32_t)json_integer_value(json_object_get(e, "id")),
				  tj_bool(w, e, "lstrip", 0), tj_bool(w, e, "rstrip", 0), tj_bool(w, e, "single_word", 0));
	}
	added_freeze(t->raw);
	added_freeze(t->normalized);
	hfnorm_space_free(sp);
}

static void read_model(const struct tjwhere *w, json_t *j, struct hftok *t)
{
	if (!json_is_object(j))
		tj_die(w, "missing or not an object");
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type && json_object_get(j, "merges"))   /* files of before "type" */
		type = "BPE";
	if (!type)
		tj_die(w, "no \"type\"");
	if (!strcmp(type, "BPE"))
		t->bpe = bpe_new(w, j);
	else if (!strcmp(type, "Unigram"))
		t->unigram = unigram_new(w, j);
	else if (!strcmp(type, "WordPiece"))
		t->wordpiece = wpmodel_new(w, j);
	else
		tj_unsupported(w, type);
}

static int32_t model_id(const struct hftok *t, const char *tok, size_t n)
{
	return t->bpe ? bpe_id(t->bpe, tok, n) : t->unigram ? unigram_id(t->unigram, tok, n)
							    : wpmodel_id(t->wordpiece, tok, n);
}

static const char *model_token(const struct hftok *t, int32_t id)
{
	return t->bpe ? bpe_token(t->bpe, id) : t->unigram ? unigram_token(t->unigram, id)
							   : wpmodel_token(t->wordpiece, id);
}

static int32_t model_size(const struct hftok *t)
{
	return t->bpe ? bpe_size(t->bpe) : t->unigram ? unigram_size(t->unigram) : wpmodel_size(t->wordpiece);
}

static void model_encode(const struct hftok *t, struct hftok_space *sp, const char *w, size_t n, struct ids *out)
{
	if (t->bpe)
		bpe_encode(t->bpe, sp->bpe, w, n, out);
	else if (t->unigram)
		unigram_encode(t->unigram, sp->unigram, w, n, out);
	else
		wpmodel_encode(t->wordpiece, sp->wordpiece, w, n, out);
}

static void put_part(const struct tjwhere *w, struct template_part *parts, int *n, int32_t id, long long type)
{
	if (*n == TPL_MAX)
		tj_die(w, "a template of more than %d parts", TPL_MAX);
	if (type < 0 || type > 255)
		tj_die(w, "type_id %lld is outside 0..255", type);
	parts[(*n)++] = (struct template_part){id, (uint8_t)type};
}

/* ["</s>", 2]: a special token of RobertaProcessing or BertProcessing. */
static int32_t named_id(const struct tjwhere *w, json_t *j, const char *key)
{
	json_t *v = json_object_get(j, key), *id = json_array_get(v, 1);
	if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(id))
		tj_die(w, "\"%s\" is not a token and its id", key);
	if (json_integer_value(id) < 0 || json_integer_value(id) >= 1 << 24)
		tj_die(w, "\"%s\": the id %lld is outside 0..16777215", key, (long long)json_integer_value(id));
	return (int32_t)json_integer_value(id);
}

static void template_parts(const struct tjwhere *w, json_t *list, json_t *specials, struct template_part *parts,
			   int *n)
{
	size_t i;
	json_t *e;
	if (!json_is_array(list))
		tj_die(w, "a template that is not a list");
	json_array_foreach(list, i, e) {
		json_t *seq = json_object_get(e, "Sequence"), *sp = json_object_get(e, "SpecialToken");
		if (seq) {
			const char *which = tj_str(w, seq, "id", "");
			if (strcmp(which, "A") && strcmp(which, "B"))
				tj_die(w, "a template's Sequence '%s' is neither A nor B", which);
			put_part(w, parts, n, which[0] == 'A' ? TPL_A : TPL_B, tj_int(w, seq, "type_id", 0, 255));
			continue;
		}
		const char *name = sp ? tj_str(w, sp, "id", NULL) : NULL;
		json_t *ids = name ? json_object_get(json_object_get(specials, name), "ids") : NULL, *id;
		if (!json_is_array(ids))
			tj_die(w, "a template names a special token '%s' that special_tokens does not give ids",
			       name ? name : "?");
		json_t *tokens = json_object_get(json_object_get(specials, name), "tokens");
		if (!json_is_array(tokens) || json_array_size(tokens) != json_array_size(ids))
			tj_die(w, "special token '%s' has not as many tokens as ids", name);   /* as HF refuses it */
		size_t k;
		json_array_foreach(ids, k, id) {
			if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= 1 << 24)
				tj_die(w, "special token '%s' has an id out of range", name);
			put_part(w, parts, n, (int32_t)json_integer_value(id), tj_int(w, sp, "type_id", 0, 255));
		}
	}
}

/* The template a post-processor makes; *set where it made one. */
static void read_post(const struct tjwhere *w, json_t *j, struct template *t, int *set)
{
	const char *type = tj_type(w, j);
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(j, "processors"), *e;
		size_t i;
		if (!json_is_array(list))
			tj_die(w, "Sequence has no list \"processors\"");
		json_array_foreach(list, i, e)
			read_post(w, e, t, set);
		return;
	}
	if (!strcmp(type, "ByteLevel"))   /* offsets only */
		return;
	if (*set)
		tj_die(w, "two post-processors that each add special tokens");
	*set = 1;
	*t = (struct template){0};
	if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
		int32_t cls = named_id(w, j, "cls"), sep = named_id(w, j, "sep");
		if (type[0] == 'B') {
			template_bert(t, cls, sep);
			return;
		}
		*t = (struct template){
			.single = {{cls, 0}, {TPL_A, 0}, {sep, 0}}, .nsingle = 3,
			.pair = {{cls, 0}, {TPL_A, 0}, {sep, 0}, {sep, 0}, {TPL_B, 0}, {sep, 0}}, .npair = 6,
		};
	} else if (!strcmp(type, "TemplateProcessing")) {
		json_t *specials = json_object_get(j, "special_tokens");
		template_parts(w, json_object_get(j, "single"), specials, t->single, &t->nsingle);
		template_parts(w, json_object_get(j, "pair"), specials, t->pair, &t->npair);
		int a = 0, b = 0;
		for (int i = 0; i < t->nsingle; i++)
			a += t->single[i].id == TPL_A, b += t->single[i].id == TPL_B;
		for (int i = 0; i < t->npair; i++)
			a += t->pair[i].id == TPL_A, b += t->pair[i].id == TPL_B;
		if (a != 2 || b != 1)
			tj_die(w, "a template must hold $A once in single, and $A and $B once each in pair");
	} else {
		tj_unsupported(w, type);
	}
}

static void read_template(const struct tjwhere *w, json_t *j, struct template *t)
{
	int set = 0;
	if (j && !json_is_null(j))
		read_post(w, j, t, &set);
	if (!set)   /* no post-processor: the texts as they are, the second of type 1 */
		*t = (struct template){.single = {{TPL_A, 0}}, .nsingle = 1, .pair = {{TPL_A, 0}, {TPL_B, 1}}, .npair = 2};
}

/* The template's tokens are among the vocab's ids. */
static void check_template(struct tjwhere *w, const struct hftok *t)
{
	const struct template *p = &t->tpl;
	w->part = "post_processor";
	for (int i = 0; i < p->nsingle + p->npair; i++) {
		int32_t id = i < p->nsingle ? p->single[i].id : p->pair[i - p->nsingle].id;
		if (id >= t->size)
			tj_die(w, "special token id %d is beyond the vocab's %d ids", id, t->size);
	}
}

static int32_t id_of(const struct hftok *t, const char *name)
{
	for (int32_t i = 0; i < t->size; i++)
		if (t->added_name[i] && !strcmp(t->added_name[i], name))
			return i;
	return model_id(t, name, strlen(name));
}

/* The special tokens by the names the families give them. */
static void find_specials(struct hftok *t)
{
	static const char *const names[VOCAB_NSPECIAL][3] = {
		[VOCAB_PAD] = {"<pad>", "[PAD]", "<|padding|>"}, [VOCAB_UNK] = {"<unk>", "[UNK]", "<|endoftext|>"},
		[VOCAB_CLS] = {"<s>", "[CLS]", NULL}, [VOCAB_SEP] = {"</s>", "[SEP]", NULL},
		[VOCAB_MASK] = {"<mask>", "[MASK]", NULL},
	};
	for (int k = 0; k < VOCAB_NSPECIAL; k++) {
		t->special[k] = -1;
		for (int i = 0; i < 3 && t->special[k] < 0 && names[k][i]; i++)
			t->special[k] = id_of(t, names[k][i]);
	}
	/* the template says best which tokens open and close a text */
	const struct template *p = &t->tpl;
	if (p->nsingle > 1 && p->single[0].id >= 0)
		t->special[VOCAB_CLS] = p->single[0].id;
	if (p->nsingle > 1 && p->single[p->nsingle - 1].id >= 0)
		t->special[VOCAB_SEP] = p->single[p->nsingle - 1].id;
}

struct hftok *hftok_parse(const char *name, const char *bytes, size_t n)
{
	struct hftok *t = xcalloc(1, sizeof *t);
	t->path = xstrdup(name);
	sha256_hex(bytes, n, t->sha256);
	json_error_t err;
	json_arena_begin();   /* the tree, read once into the tables, goes at once */
	json_t *root = json_loadb_halves(bytes, n, JSON_REJECT_DUPLICATES, "model", "vocab", &err, NULL);
	struct tjwhere w = {t->path, NULL};
	if (!root)
		die("%s: line %d: not JSON: %s", t->path, err.line, err.text);
	if (!json_is_object(root))
		tj_die(&w, "not a JSON object");
	w.part = "added_tokens";
	json_t *added = json_object_get(root, "added_tokens");
	read_added(&w, added, t);
	w.part = "normalizer";
	t->norm = hfnorm_new(&w, json_object_get(root, "normalizer"));
	w.part = "added_tokens";
	index_added(&w, added, t);
	w.part = "pre_tokenizer";
	t->pre = pretok_new(&w, json_object_get(root, "pre_tokenizer"));
	w.part = "model";
	read_model(&w, json_object_get(root, "model"), t);
	w.part = "post_processor";
	read_template(&w, json_object_get(root, "post_processor"), &t->tpl);
	json_arena_end();
	int32_t size = model_size(t);
	if (size > t->size) {
		t->added_name = xrealloc(t->added_name, (size_t)size * sizeof *t->added_name);
		memset(t->added_name + t->size, 0, (size_t)(size - t->size) * sizeof *t->added_name);
		t->size = size;
	}
	check_template(&w, t);
	find_specials(t);
	return t;
}

struct hftok *hftok_load(const char *path)
{
	size_t n;
	char *real, *bytes = read_json_file(path, &n, &real);
	struct hftok *t = hftok_parse(real, bytes, n);
	free(bytes);
	free(real);
	return t;
}

void hftok_free(struct hftok *t)
{
	if (!t)
		return;
	for (int32_t i = 0; i < t->size; i++)
		free(t->added_name[i]);
	free(t->added_name);
	added_free(t->raw);
	added_free(t->normalized);
	hfnorm_free(t->norm);
	pretok_free(t->pre);
	bpe_free(t->bpe);
	unigram_free(t->unigram);
	wpmodel_free(t->wordpiece);
	free(t->path);
	free(t);
}

const struct template *hftok_template(const struct hftok *t) { return &t->tpl; }
const char *hftok_path(const struct hftok *t) { return t->path; }
const char *hftok_sha256(const struct hftok *t) { return t->sha256; }
int hftok_starts_word(const struct hftok *t, int32_t id)
{
	if (t->wordpiece)
		return !wpmodel_continues(t->wordpiece, id);
	const char *mark = pretok_word_mark(t->pre), *tok = hftok_token(t, id);
	return !mark || !tok || t->added_name[id] || !strncmp(tok, mark, strlen(mark));
}

int hftok_spaced_words(const struct hftok *t) { return pretok_spaced_words(t->pre); }
int hftok_lowercases(const struct hftok *t) { return hfnorm_lowercases(t->norm); }
const char *hftok_kind(const struct hftok *t) { return t->bpe ? "BPE" : t->unigram ? "Unigram" : "WordPiece"; }
int32_t hftok_size(const struct hftok *t) { return t->size; }
int32_t hftok_special(const struct hftok *t, enum vocab_special which) { return t->special[which]; }

const char *hftok_token(const struct hftok *t, int32_t id)
{
	if (id < 0 || id >= t->size)
		return NULL;
	return t->added_name[id] ? t->added_name[id] : model_token(t, id);
}

struct hftok_space *hftok_space_new(void)
{
	struct hftok_space *s = xcalloc(1, sizeof *s);
	s->norm = hfnorm_space_new();
	s->pre = pretok_space_new();
	s->bpe = bpe_space_new();
	s->unigram = unigram_space_new();
	s->wordpiece = wpmodel_space_new();
	return s;
}

void hftok_space_free(struct hftok_space *s)
{
	if (!s)
		return;
	sb_free(&s->valid);
	free(s->raw);
	free(s->normalized);
	hfnorm_space_free(s->norm);
	pretok_space_free(s->pre);
	pieces_free(&s->words);
	bpe_space_free(s->bpe);
	unigram_space_free(s->unigram);
	wpmodel_space_free(s->wordpiece);
	free(s);
}

/* A stretch of normalized text free of added tokens: its words' ids. */
static void encode_words(const struct hftok *t, struct hftok_space *sp, const char *s, size_t n, int first,
			 struct ids *out)
{
	if (!n)
		return;
	pretok_run(t->pre, sp->pre, s, n, first, &sp->words);
	for (size_t i = 0; i < sp->words.n; i++)
		model_encode(t, sp, sp->words.text.s + sp->words.v[i].off, sp->words.v[i].len, out);
}

/* A stretch of the text free of the added tokens matched before
 * normalizing: normalized, then cut at the normalized ones. */
static void encode_stretch(const struct hftok *t, struct hftok_space *sp, const char *s, size_t n, int first,
			   struct ids *out)
{
	if (!n)
		return;
	size_t len, at = 0;
	const char *norm = hfnorm_run(t->norm, sp->norm, s, n, &len);
	size_t k = added_empty(t->normalized) ? 0 : added_find(t->normalized, norm, len, &sp->normalized,
								  &sp->normalized_cap);
	for (size_t i = 0; i < k; i++) {
		encode_words(t, sp, norm + at, sp->normalized[i].start - at, first && at == 0, out);
		ids_push(out, sp->normalized[i].id);
		at = sp->normalized[i].end;
	}
	encode_words(t, sp, norm + at, len - at, first && at == 0, out);
}

size_t hftok_encode(const struct hftok *t, struct hftok_space *sp, const char *text, size_t len, struct ids *out)
{
	size_t nbad = 0, at = 0;
	const char *s = utf8_repair(&sp->valid, text, len, &nbad);
	size_t n = s == text ? len : sp->valid.n;
	size_t k = added_empty(t->raw) ? 0 : added_find(t->raw, s, n, &sp->raw, &sp->raw_cap);
	for (size_t i = 0; i < k; i++) {
		encode_stretch(t, sp, s + at, sp->raw[i].start - at, at == 0, out);
		ids_push(out, sp->raw[i].id);
		at = sp->raw[i].end;
	}
	encode_stretch(t, sp, s + at, n - at, at == 0, out);
	return nbad;
}
