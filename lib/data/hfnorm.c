#include "data/hfnorm.h"
#include "data/bertnorm.h"
#include "data/precompiled.h"
#include "data/uclass.h"
#include "data/utf8.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

enum kind { NFC, NFD, NFKC, NFKD, LOWERCASE, STRIP_ACCENTS, STRIP, REPLACE, PREPEND, PRECOMPILED, BERT };

struct step {
	enum kind kind;
	int left, right;      /* Strip */
	struct regex *re;     /* Replace */
	char *text;           /* Replace's content, Prepend's prepend */
	size_t text_n;
	struct precompiled *charsmap;
	struct bert_settings bert;
};

struct hfnorm {
	struct step *steps;
	int n;
};

struct hfnorm_space {
	struct strbuf buf[2];
	struct regex_space *m;
	struct bert_norm bert;
};

static void push_step(struct hfnorm *nm, struct step s)
{
	nm->steps = xrealloc(nm->steps, ((size_t)nm->n + 1) * sizeof *nm->steps);
	nm->steps[nm->n++] = s;
}

static void add_step(const struct tjwhere *w, json_t *j, struct hfnorm *nm)
{
	static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
	const char *type = tj_type(w, j);
	for (int i = 0; i < 4; i++)
		if (!strcmp(type, forms[i])) {
			push_step(nm, (struct step){.kind = (enum kind)i});
			return;
		}
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(j, "normalizers"), *e;
		size_t i;
		if (!json_is_array(list))
			tj_die(w, "Sequence has no list \"normalizers\"");
		json_array_foreach(list, i, e)
			add_step(w, e, nm);
	} else if (!strcmp(type, "Lowercase")) {
		push_step(nm, (struct step){.kind = LOWERCASE});
	} else if (!strcmp(type, "StripAccents")) {
		push_step(nm, (struct step){.kind = STRIP_ACCENTS});
	} else if (!strcmp(type, "Strip")) {
		push_step(nm, (struct step){.kind = STRIP, .left = tj_bool(w, j, "strip_left", 1),
					    .right = tj_bool(w, j, "strip_right", 1)});
	} else if (!strcmp(type, "Replace")) {
		const char *content = tj_str(w, j, "content", NULL);
		if (!content)
			tj_die(w, "Replace has no \"content\"");
		push_step(nm, (struct step){.kind = REPLACE, .re = tj_pattern(w, j, "pattern"),
					    .text = xstrdup(content), .text_n = strlen(content)});
	} else if (!strcmp(type, "Prepend")) {
		const char *p = tj_str(w, j, "prepend", NULL);
		if (!p)
			tj_die(w, "Prepend has no \"prepend\"");
		push_step(nm, (struct step){.kind = PREPEND, .text = xstrdup(p), .text_n = strlen(p)});
	} else if (!strcmp(type, "BertNormalizer")) {
		int lower = tj_bool(w, j, "lowercase", 1);
		struct bert_settings b = {tj_bool(w, j, "clean_text", 1), tj_bool(w, j, "handle_chinese_chars", 1),
					  tj_bool(w, j, "strip_accents", lower), lower};
		push_step(nm, (struct step){.kind = BERT, .bert = b});
	} else if (!strcmp(type, "Precompiled")) {
		json_t *map = json_object_get(j, "precompiled_charsmap");
		if (json_is_null(map))   /* a SentencePiece model without normalization rules */
			return;
		if (!json_is_string(map))
			tj_die(w, "Precompiled has no \"precompiled_charsmap\"");
		push_step(nm, (struct step){.kind = PRECOMPILED,
					    .charsmap = precompiled_new(w, json_string_value(map), json_string_length(map))});
	} else {
		tj_unsupported(w, type);
	}
}

struct hfnorm *hfnorm_new(const struct tjwhere *w, json_t *j)
{
	struct hfnorm *nm = xcalloc(1, sizeof *nm);
	if (j && !json_is_null(j))
		add_step(w, j, nm);
	return nm;
}

void hfnorm_free(struct hfnorm *nm)
{
	if (!nm)
		return;
	for (int i = 0; i < nm->n; i++) {
		regex_free(nm->steps[i].re);
		precompiled_free(nm->steps[i].charsmap);
		free(nm->steps[i].text);
	}
	free(nm->steps);
	free(nm);
}

int hfnorm_lowercases(const struct hfnorm *nm)
{
	for (int i = 0; i < nm->n; i++)
		if (nm->steps[i].kind == LOWERCASE || (nm->steps[i].kind == BERT && nm->steps[i].bert.lower))
			return 1;
	return 0;
}

struct hfnorm_space *hfnorm_space_new(void)
{
	struct hfnorm_space *s = xcalloc(1, sizeof *s);
	s->m = regex_space_new();
	return s;
}

void hfnorm_space_free(struct hfnorm_space *s)
{
	if (!s)
		return;
	sb_free(&s->buf[0]);
	sb_free(&s->buf[1]);
	regex_space_free(s->m);
	bert_norm_free(&s->bert);
	free(s);
}

/* A Unicode normal form of s[0..n) into out: at most one ASCII character
 * and then others, through utf8proc where there are others. */
static void map_form(enum kind form, const char *s, size_t n, struct strbuf *out)
{
	static const int opts[] = {
		[NFC] = UTF8PROC_COMPOSE, [NFD] = UTF8PROC_DECOMPOSE,
		[NFKC] = UTF8PROC_COMPOSE | UTF8PROC_COMPAT, [NFKD] = UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
	};
	if (n < 2 && (!n || (unsigned char)*s < 0x80)) {
		sb_add(out, s, n);
		return;
	}
	utf8proc_uint8_t *dst;
	utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
					  (utf8proc_option_t)(opts[form] | UTF8PROC_STABLE));
	if (k < 0)
		die("cannot normalize text: %s", utf8proc_errmsg(k));
	sb_add(out, dst, (size_t)k);
	free(dst);
}

/* A Unicode normal form of s into out, as HF's older tables make it. ASCII
 * is its own in every form, and no character composes with one before an
 * ASCII character or with an ASCII character after it; a character those
 * tables do not know is left whole, and nothing reorders or composes across
 * it. So only the stretches between go through utf8proc, each with the
 * ASCII character before it, which a mark in it may compose with. */
static void normal_form(enum kind form, const char *s, size_t n, struct strbuf *out)
{
	size_t from = 0, i = 0, k;   /* s[from..i) waits for utf8proc */
	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			size_t end = i + 1;
			while (end < n && (unsigned char)s[end] < 0x80)
				end++;
			map_form(form, s + from, i - from, out);
			sb_add(out, s + i, end - 1 - i);
			from = end - 1, i = end;
		} else if (!uc_normal_forms_known(uc_at(s + i, &k))) {
			map_form(form, s + from, i - from, out);
			sb_add(out, s + i, k);
			from = i += k;
		} else {
			i += k;
		}
	}
	map_form(form, s + from, n - from, out);
}

static void put_cp(struct strbuf *out, int32_t c)
{
	char u[4];
	sb_add(out, u, (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)u));
}

/* Rust's to_lowercase of each character, as the current tokenizers has it (uc_lower):
 * İ becomes i and a combining dot. */
static void lowercase(const char *s, size_t n, struct strbuf *out)
{
	size_t k;
	for (size_t i = 0; i < n; i += k) {
		int32_t c = uc_at(s + i, &k);
		if (c < 0x80)
			sb_addc(out, (char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c));
		else if (c == 0x130)
			sb_add(out, "i\xcc\x87", 3);
		else
			put_cp(out, uc_lower(c));
	}
}

static void strip_accents(const char *s, size_t n, struct strbuf *out)
{
	size_t k;
	for (size_t i = 0; i < n; i += k)
		if (!uc_combining_mark(uc_at(s + i, &k)))   /* HF drops every mark */
			sb_add(out, s + i, k);
}

static void strip(const struct step *st, const char *s, size_t n, struct strbuf *out)
{
	size_t a = 0, b = n, k;
	while (st->left && a < b && uc_space(uc_at(s + a, &k)))
		a += k;
	while (st->right && b > a) {
		size_t c = b - 1;
		while (c > a && ((unsigned char)s[c] & 0xC0) == 0x80)
			c--;
		if (!uc_space(uc_at(s + c, &k)))
			break;
		b = c;
	}
	sb_add(out, s + a, b - a);
}

static void replace(const struct step *st, struct regex_space *m, const char *s, size_t n, struct strbuf *out)
{
	size_t at = 0, from = 0, a, b;
	while (from <= n && regex_find(st->re, m, s, n, from, &a, &b)) {
		sb_add(out, s + at, a - at);
		sb_add(out, st->text, st->text_n);
		at = b;
		from = b > a ? b : b < n ? b + utf8_len((unsigned char)s[b]) : n + 1;
	}
	sb_add(out, s + at, n - at);
}

static void run_step(const struct step *st, struct hfnorm_space *sp, const char *s, size_t n, struct strbuf *out)
{
	size_t len;
	switch (st->kind) {
	case BERT:
		bert_normalize_text(&sp->bert, &st->bert, s, n, &len);
		sb_add(out, sp->bert.out, len);
		return;
	case NFC: case NFD: case NFKC: case NFKD:
		normal_form(st->kind, s, n, out);
		return;
	case LOWERCASE:
		lowercase(s, n, out);
		return;
	case STRIP_ACCENTS:
		strip_accents(s, n, out);
		return;
	case STRIP:
		strip(st, s, n, out);
		return;
	case REPLACE:
		replace(st, sp->m, s, n, out);
		return;
	case PRECOMPILED:
		precompiled_run(st->charsmap, s, n, out);
		return;
	case PREPEND:
		if (n)
			sb_add(out, st->text, st->text_n);
		sb_add(out, s, n);
		return;
	}
}

const char *hfnorm_run(const struct hfnorm *nm, struct hfnorm_space *sp, const char *s, size_t n, size_t *len)
{
	for (int i = 0; i < nm->n; i++) {
		struct strbuf *out = &sp->buf[i & 1];
		out->n = 0;
		run_step(&nm->steps[i], sp, s, n, out);
		sb_addc(out, 0);   /* an empty result still has an address */
		s = out->s, n = out->n - 1;
	}
	*len = n;
	return s;
}
