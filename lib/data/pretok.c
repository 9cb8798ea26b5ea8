#include "data/pretok.h"
#include "data/gpt2split.h"
#include "data/uclass.h"
#include "data/utf8.h"
#include <pthread.h>
#include <string.h>

enum kind { BYTE_LEVEL, SPLIT, METASPACE, WHITESPACE, WHITESPACE_SPLIT, DIGITS, PUNCTUATION };
/* How a split treats what matched (HF's SplitDelimiterBehavior). */
enum behavior { REMOVED, ISOLATED, MERGED_PREVIOUS, MERGED_NEXT, CONTIGUOUS };
enum prepend { NEVER, ALWAYS, FIRST };

struct step {
	enum kind kind;
	int prefix_space, use_regex;   /* ByteLevel */
	struct regex *re;              /* Split's; Whitespace's own */
	enum behavior behavior;
	int invert;
	char rep[8];                   /* Metaspace's replacement, UTF-8 */
	size_t rep_n;
	enum prepend prepend;
	int split, individual;         /* Metaspace; Digits */
};

struct pretok {
	struct step *steps;
	int n;
};

struct pretok_space {
	struct pieces tmp[2];
	struct regex_space *m;
	struct strbuf work;
	struct seg { size_t a, b; int match; } *segs;
	size_t nseg, segcap;
};

/* Whitespace's: words and runs of other non-space characters, a word
 * character as HF's regex engine has it (PCRE2's \w lacks the marks and
 * the joiners). */
#define WORD_CHAR "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
static const char words_re[] = "[" WORD_CHAR "]+|[^" WORD_CHAR "\\s]+";

static struct regex *own_regex(const struct tjwhere *w, const char *pattern)
{
	char why[256];
	struct regex *r = regex_new(pattern, strlen(pattern), 0, why, sizeof why);
	if (!r)
		tj_die(w, "%s", why);
	return r;
}

static enum behavior parse_behavior(const struct tjwhere *w, json_t *j)
{
	static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
	const char *b = tj_str(w, j, "behavior", "Isolated");
	for (int i = 0; i < 5; i++)
		if (!strcmp(b, names[i]))
			return (enum behavior)i;
	tj_die(w, "behavior '%s' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", b);
}

static void parse_metaspace(const struct tjwhere *w, json_t *j, struct step *s)
{
	const char *rep = tj_str(w, j, "replacement", "\xe2\x96\x81");
	size_t n = strlen(rep), k;
	if (!n || n >= sizeof s->rep || (uc_at(rep, &k), k != n))
		tj_die(w, "Metaspace's replacement '%s' is not one character", rep);
	memcpy(s->rep, rep, n);
	s->rep_n = n;
	const char *scheme = tj_str(w, j, "prepend_scheme", NULL);
	if (!scheme)   /* files of before prepend_scheme */
		s->prepend = tj_bool(w, j, "add_prefix_space", 1) ? ALWAYS : NEVER;
	else if (!strcmp(scheme, "always") || !strcmp(scheme, "never") || !strcmp(scheme, "first"))
		s->prepend = scheme[0] == 'a' ? ALWAYS : scheme[0] == 'n' ? NEVER : FIRST;
	else
		tj_die(w, "Metaspace's prepend_scheme '%s' is not always, never or first", scheme);
	s->split = tj_bool(w, j, "split", 1);
}

static void parse_step(const struct tjwhere *w, json_t *j, struct pretok *p);

static void push_step(struct pretok *p, struct step s)
{
	p->steps = xrealloc(p->steps, ((size_t)p->n + 1) * sizeof *p->steps);
	p->steps[p->n++] = s;
}

static void add_step(const struct tjwhere *w, json_t *j, struct pretok *p)
{
	const char *type = tj_type(w, j);
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(j, "pretokenizers"), *e;
		size_t i;
		if (!json_is_array(list))
			tj_die(w, "Sequence has no list \"pretokenizers\"");
		json_array_foreach(list, i, e)
			add_step(w, e, p);
		return;
	}
	parse_step(w, j, p);
}

static void parse_step(const struct tjwhere *w, json_t *j, struct pretok *p)
{
	const char *type = tj_type(w, j);
	struct step s = {0};
	if (!strcmp(type, "ByteLevel")) {
		s.kind = BYTE_LEVEL;
		s.prefix_space = tj_bool(w, j, "add_prefix_space", 1);
		s.use_regex = tj_bool(w, j, "use_regex", 1);   /* GPT-2's regex, by gpt2split.c */
	} else if (!strcmp(type, "Split")) {
		s.kind = SPLIT;
		s.re = tj_pattern(w, j, "pattern");
		s.behavior = parse_behavior(w, j);
		s.invert = tj_bool(w, j, "invert", 0);
	} else if (!strcmp(type, "Metaspace")) {
		s.kind = METASPACE;
		parse_metaspace(w, j, &s);
	} else if (!strcmp(type, "Whitespace")) {
		s.kind = WHITESPACE;
		s.re = own_regex(w, words_re);
	} else if (!strcmp(type, "WhitespaceSplit")) {
		s.kind = WHITESPACE_SPLIT;
	} else if (!strcmp(type, "Digits")) {
		s.kind = DIGITS;
		s.individual = tj_bool(w, j, "individual_digits", 0);
	} else if (!strcmp(type, "Punctuation")) {
		s.kind = PUNCTUATION;
		s.behavior = parse_behavior(w, j);
	} else if (!strcmp(type, "BertPreTokenizer")) {   /* whitespace removed, then punctuation isolated */
		push_step(p, (struct step){.kind = WHITESPACE_SPLIT});
		s = (struct step){.kind = PUNCTUATION, .behavior = ISOLATED};
	} else {
		tj_unsupported(w, type);
	}
	push_step(p, s);
}

struct pretok *pretok_new(const struct tjwhere *w, json_t *j)
{
	struct pretok *p = xcalloc(1, sizeof *p);
	if (j && !json_is_null(j))
		add_step(w, j, p);
	return p;
}

void pretok_free(struct pretok *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		regex_free(p->steps[i].re);
	free(p->steps);
	free(p);
}

int pretok_spaced_words(const struct pretok *p)
{
	for (int i = 0; i < p->n; i++)
		if (p->steps[i].kind == BYTE_LEVEL && !p->steps[i].prefix_space)
			return 1;
	return 0;
}

const char *pretok_word_mark(const struct pretok *p)
{
	for (int i = 0; i < p->n; i++)
		if (p->steps[i].kind == BYTE_LEVEL)
			return "\xc4\xa0";
		else if (p->steps[i].kind == METASPACE)
			return p->steps[i].rep;
	return NULL;
}

struct pretok_space *pretok_space_new(void)
{
	struct pretok_space *s = xcalloc(1, sizeof *s);
	s->m = regex_space_new();
	return s;
}

void pretok_space_free(struct pretok_space *s)
{
	if (!s)
		return;
	pieces_free(&s->tmp[0]);
	pieces_free(&s->tmp[1]);
	regex_space_free(s->m);
	sb_free(&s->work);
	free(s->segs);
	free(s);
}

static void add_seg(struct pretok_space *sp, size_t a, size_t b, int match)
{
	grow(&sp->segs, &sp->segcap, sp->nseg + 1, sizeof *sp->segs);
	sp->segs[sp->nseg++] = (struct seg){a, b, match};
}

/* The segments of s: the regex's matches and the stretches between them. */
static void regex_segs(struct pretok_space *sp, const struct regex *re, const char *s, size_t n)
{
	size_t at = 0, from = 0, a, b;
	while (from <= n && regex_find(re, sp->m, s, n, from, &a, &b)) {
		if (a > at)
			add_seg(sp, at, a, 0);
		add_seg(sp, a, b, 1);
		at = b;
		if (b == a) {   /* an empty match: step over one character */
			if (b == n)
				break;
			b += utf8_len((unsigned char)s[b]);
		}
		from = b;
	}
	if (at < n)
		add_seg(sp, at, n, 0);
}

/* The segments of s where each character for which is(c) holds is a match
 * of its own (HF's character patterns). */
static void char_segs(struct pretok_space *sp, int (*is)(int32_t), const char *s, size_t n)
{
	size_t at = 0, k;
	for (size_t i = 0; i < n; i += k)
		if (is(uc_at(s + i, &k))) {
			if (i > at)
				add_seg(sp, at, i, 0);
			add_seg(sp, i, i + k, 1);
			at = i + k;
		}
	if (at < n)
		add_seg(sp, at, n, 0);
}

/* Cuts s by its segments as behavior says, into out, as HF's split does:
 * a match merged into the piece before it (or, MergedWithNext, after it)
 * only where that piece is no match itself. */
static void cut(struct pretok_space *sp, enum behavior behavior, int invert, const char *s, int first,
		struct pieces *out)
{
	struct seg *g = sp->segs;
	size_t n = sp->nseg, k = 0;
	for (size_t i = 0; i < n && invert; i++)
		g[i].match = !g[i].match;
	if (behavior == MERGED_NEXT) {   /* from the end, the kept pieces into g[k..n) */
		int next = 0;
		k = n;
		for (size_t i = n; i-- > 0;) {
			struct seg c = g[i];
			if (c.match && !next && k < n)
				g[k].a = c.a;
			else
				g[--k] = c;
			next = c.match;
		}
		for (size_t i = k; i < n; i++)
			pieces_add(out, s + g[i].a, g[i].b - g[i].a, first && g[i].a == 0);
		return;
	}
	int prev = 0;
	for (size_t i = 0; i < n; i++) {
		struct seg c = g[i];
		int merge = behavior == CONTIGUOUS ? c.match == prev : behavior == MERGED_PREVIOUS && c.match && !prev;
		prev = c.match;
		if (behavior == REMOVED && c.match)
			continue;
		if (merge && k)
			g[k - 1].b = c.b;
		else
			g[k++] = c;
	}
	for (size_t i = 0; i < k; i++)
		pieces_add(out, s + g[i].a, g[i].b - g[i].a, first && g[i].a == 0);
}

/* GPT-2's alphabet for bytes: printable Latin-1 bytes stand for themselves,
 * the others for U+0100 onwards in byte order; each as UTF-8. */
struct byte_char {
	char s[2];
	uint8_t n;
};

static struct byte_char byte_chars[256];

static void init_byte_chars(void)
{
	int next = 256;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
		int cp = printable ? b : next++;
		if (cp < 0x80)
			byte_chars[b] = (struct byte_char){{(char)cp, 0}, 1};
		else
			byte_chars[b] = (struct byte_char){{(char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 0x3F))}, 2};
	}
}

/* s[0..n) in GPT-2's byte alphabet, as one piece of out. */
static void add_bytes_mapped(struct pieces *out, const char *s, size_t n, int first)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_byte_chars);
	struct strbuf *t = &out->text;
	grow(&t->s, &t->cap, t->n + 2 * n + 1, 1);
	char *o = t->s + t->n;
	for (size_t i = 0; i < n; i++) {
		const struct byte_char *c = &byte_chars[(unsigned char)s[i]];
		*o++ = c->s[0];
		if (c->n > 1)
			*o++ = c->s[1];
	}
	size_t len = (size_t)(o - (t->s + t->n));
	t->n += len;
	t->s[t->n] = 0;
	pieces_close(out, len, first);
}

static void byte_level(const struct step *st, struct pretok_space *sp, const char *s, size_t n, int first,
		       struct pieces *out)
{
	if (st->prefix_space && (!n || s[0] != ' ')) {
		sp->work.n = 0;
		sb_addc(&sp->work, ' ');
		sb_add(&sp->work, s, n);
		s = sp->work.s, n = sp->work.n;
	}
	if (!st->use_regex) {
		add_bytes_mapped(out, s, n, first);
		return;
	}
	for (size_t i = 0, end; i < n; i = end) {
		end = gpt2_match(s, n, i);
		add_bytes_mapped(out, s + i, end - i, first && i == 0);
	}
}

static void metaspace(const struct step *st, struct pretok_space *sp, const char *s, size_t n, int first,
		      struct pieces *out)
{
	struct strbuf *w = &sp->work;
	w->n = 0;
	int starts = n >= st->rep_n && !memcmp(s, st->rep, st->rep_n);
	if (st->prepend == ALWAYS || (st->prepend == FIRST && first)) {
		if (!(starts || (n && s[0] == ' ')))
			sb_add(w, st->rep, st->rep_n);
	}
	for (size_t i = 0; i < n; i++) {   /* each run up to a space, then the space's replacement */
		const char *space = memchr(s + i, ' ', n - i);
		size_t e = space ? (size_t)(space - s) : n;
		sb_add(w, s + i, e - i);
		if (e < n)
			sb_add(w, st->rep, st->rep_n);
		i = e;
	}
	if (!st->split) {
		pieces_add(out, w->s, w->n, first);
		return;
	}
	/* The replacement's first byte starts a character (the text is valid
	 * UTF-8), so where it is found a character starts. */
	sp->nseg = 0;
	size_t at = 0;
	for (const char *r = w->s; w->n && (r = memchr(r, st->rep[0], w->n - (size_t)(r - w->s)));) {
		size_t i = (size_t)(r - w->s);
		if (i + st->rep_n > w->n || memcmp(r, st->rep, st->rep_n)) {
			r++;
			continue;
		}
		if (i > at)
			add_seg(sp, at, i, 0);
		add_seg(sp, i, i + st->rep_n, 1);
		at = i + st->rep_n;
		r = w->s + at;
	}
	if (at < w->n)
		add_seg(sp, at, w->n, 0);
	cut(sp, MERGED_NEXT, 0, w->s, first, out);
}

static void run_step(const struct step *st, struct pretok_space *sp, const char *s, size_t n, int first,
		     struct pieces *out)
{
	sp->nseg = 0;
	switch (st->kind) {
	case BYTE_LEVEL:
		byte_level(st, sp, s, n, first, out);
		return;
	case METASPACE:
		metaspace(st, sp, s, n, first, out);
		return;
	case SPLIT:
		regex_segs(sp, st->re, s, n);
		cut(sp, st->behavior, st->invert, s, first, out);
		return;
	case WHITESPACE:
		regex_segs(sp, st->re, s, n);
		cut(sp, REMOVED, 1, s, first, out);
		return;
	case WHITESPACE_SPLIT:
		char_segs(sp, uc_space, s, n);
		cut(sp, REMOVED, 0, s, first, out);
		return;
	case DIGITS:
		char_segs(sp, uc_numeric, s, n);
		cut(sp, st->individual ? ISOLATED : CONTIGUOUS, 0, s, first, out);
		return;
	case PUNCTUATION:
		char_segs(sp, uc_punct, s, n);
		cut(sp, st->behavior, 0, s, first, out);
		return;
	}
}

void pretok_run(const struct pretok *p, struct pretok_space *sp, const char *s, size_t n, int first,
		struct pieces *out)
{
	pieces_clear(out);
	if (!n)   /* no pieces: HF drops empty ones */
		return;
	if (!p->n) {
		pieces_add(out, s, n, first);
		return;
	}
	struct pieces *cur = p->n == 1 ? out : &sp->tmp[0];   /* the first step reads s itself */
	pieces_clear(cur);
	run_step(&p->steps[0], sp, s, n, first, cur);
	for (int k = 1; k < p->n; k++) {
		struct pieces *next = k == p->n - 1 ? out : &sp->tmp[cur == &sp->tmp[0]];
		pieces_clear(next);
		for (size_t i = 0; i < cur->n; i++)
			run_step(&p->steps[k], sp, cur->text.s + cur->v[i].off, cur->v[i].len, cur->v[i].first, next);
		cur = next;
	}
}
