/* wordpiece.h and bertnorm.h against Hugging Face's BertTokenizerFast: the cases and
 * every-code-point fixtures of tests/fixtures/gen-tokenize.py, plus hand-checked
 * WordPiece and UTF-8 repair cases on small vocabs. */
#include "check.h"
#include "data/bertnorm.h"
#include "data/wordpiece.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#define REAL_VOCAB "examples/vocab.txt"   /* the bert-base-uncased vocab, bundled */
#define CASES "tests/fixtures/tokenize/cases.tsv"
#define CODEPOINTS "tests/fixtures/tokenize/codepoints.txt"
#define NORMALIZED "tests/fixtures/tokenize/normalized.tsv"
enum { SHOW = 5 };   /* mismatches shown in detail */

static const char *const mode_name[2] = { "uncased", "cased" };

/* ---- helpers ---- */

static char *read_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = xmalloc((size_t)n + 1);
	if (fread(s, 1, (size_t)n, f) != (size_t)n)
		exit(2);
	fclose(f);
	s[n] = 0;
	*len = (size_t)n;
	return s;
}

/* Cuts s at the next c (NUL-terminating the piece); returns the rest or NULL. */
static char *cut(char *s, int c)
{
	char *p = strchr(s, c);
	if (!p)
		return NULL;
	*p = 0;
	return p + 1;
}

/* A case's text: a JSON string, or x:HEX for bytes that are not UTF-8. */
static char *decode_text(const char *field, size_t *len)
{
	if (!strncmp(field, "x:", 2)) {
		size_t n = strlen(field + 2) / 2;
		char *s = xmalloc(n + 1);
		for (size_t i = 0; i < n; i++) {
			unsigned b;
			sscanf(field + 2 + 2 * i, "%2x", &b);
			s[i] = (char)b;
		}
		*len = n;
		return s;
	}
	json_error_t err;
	json_t *j = json_loads(field, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	if (!json_is_string(j)) {
		fprintf(stderr, "bad JSON text %s: %s\n", field, err.text);
		exit(2);
	}
	*len = json_string_length(j);
	char *s = xmalloc(*len + 1);
	memcpy(s, json_string_value(j), *len + 1);
	json_decref(j);
	return s;
}

static void parse_ids(const char *field, struct ids *ids)
{
	ids->n = 0;
	for (char *end; *field; field = end)
		ids_push(ids, (int32_t)strtol(field, &end, 10));
}

/* Prints ids around position at as "id(token)". */
static void show_ids(const char *label, const struct vocab *v, const struct ids *ids, size_t at)
{
	size_t from = at > 4 ? at - 4 : 0;
	printf("    %s (%zu ids):%s", label, ids->n, from ? " ..." : "");
	for (size_t i = from; i < ids->n && i < at + 6; i++)
		printf(" %d(%s)", ids->v[i], vocab_token(v, ids->v[i]));
	printf("%s\n", at + 6 < ids->n ? " ..." : "");
}

static size_t first_difference(const struct ids *a, const struct ids *b)
{
	size_t i = 0;
	while (i < a->n && i < b->n && a->v[i] == b->v[i])
		i++;
	return i;
}

/* ---- the HF fixtures ---- */

struct tokenizers { const struct vocab *v; struct wp_tokenizer *t[2]; };

static void check_cases(struct tokenizers *tk)
{
	size_t size;
	char *all = read_text(CASES, &size);
	struct ids want = { 0 }, got = { 0 };
	int ncases = 0, bad[2] = { 0, 0 }, line = 0;
	for (char *s = all, *next; s && *s; s = next) {
		next = cut(s, '\n');
		line++;
		char *nbad = cut(s, '\t'), *uncased = nbad ? cut(nbad, '\t') : NULL;
		char *cased = uncased ? cut(uncased, '\t') : NULL;
		if (!cased) {
			CHECK(0, "%s:%d: four tab-separated fields", CASES, line);
			break;
		}
		size_t len;
		char *text = decode_text(s, &len);
		ncases++;
		for (int m = 0; m < 2; m++) {
			parse_ids(m ? cased : uncased, &want);
			got.n = 0;
			size_t replaced = wp_encode(tk->t[m], text, len, &got);
			size_t at = first_difference(&want, &got);
			if (at == want.n && at == got.n && replaced == strtoul(nbad, NULL, 10))
				continue;
			if (bad[m]++ < SHOW) {
				CHECK(0, "%s:%d (%s) matches HF", CASES, line, mode_name[m]);
				printf("    text: %.300s\n    invalid UTF-8: want %s, got %zu\n", s, nbad, replaced);
				show_ids("HF  ", tk->v, &want, at);
				show_ids("ours", tk->v, &got, at);
			}
		}
		free(text);
	}
	for (int m = 0; m < 2; m++)
		CHECK(ncases > 600 && !bad[m], "%s: %d of %d cases match HF's ids and U+FFFD counts",
		      mode_name[m], ncases - bad[m], ncases);
	free(want.v);
	free(got.v);
	free(all);
}

/* Expands a codepoints.txt word list for cp: "c", "c+N", "c-N" or absolute hex, each
 * word followed by one space as bert_normalize writes them. */
static size_t expand_words(const char *words, int32_t cp, char *out)
{
	size_t n = 0;
	for (const char *p = words; *p;) {
		int32_t c;
		char *end;
		if (*p == 'c') {
			c = cp;
			if (p[1] == '+' || p[1] == '-')
				c += (p[1] == '+' ? 1 : -1) * (int32_t)strtol(p + 2, &end, 16);
			else
				end = (char *)p + 1;
		} else {
			c = (int32_t)strtol(p, &end, 16);
		}
		n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)out + n);
		if (*end != '.')
			out[n++] = ' ';
		p = *end ? end + 1 : end;
	}
	return n;
}

static void show_bytes(const char *label, const char *s, size_t n)
{
	printf("    %s:", label);
	for (size_t i = 0; i < n; i++)
		printf(s[i] == ' ' ? " |" : " %02x", (unsigned char)s[i]);
	printf("\n");
}

/* Every code point C: "a" C "a" normalises and splits into HF's words. */
static void check_codepoints(void)
{
	size_t size;
	char *all = read_text(CODEPOINTS, &size);
	struct bert_norm norm[2];
	int m = -1, bad[2] = { 0, 0 };
	long checked[2] = { 0, 0 };
	bert_norm_init(&norm[0], 1);
	bert_norm_init(&norm[1], 0);
	for (char *s = all, *next; s && *s; s = next) {
		next = cut(s, '\n');
		if (!strcmp(s, "uncased") || !strcmp(s, "cased")) {
			m = !strcmp(s, "cased");
			continue;
		}
		char *words = cut(s, ' ');
		char *end;
		int32_t lo = (int32_t)strtol(s, &end, 16), hi = *end == '-' ? (int32_t)strtol(end + 1, NULL, 16) : lo;
		for (int32_t cp = lo; m >= 0 && cp <= hi; cp++) {
			char in[8], want[128];
			size_t k = 0, got;
			in[k++] = 'a';
			k += (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)in + k);
			in[k++] = 'a';
			size_t n = expand_words(words, cp, want);
			bert_normalize(&norm[m], in, k, &got);
			checked[m]++;
			if (got == n && !memcmp(norm[m].out, want, n))
				continue;
			if (bad[m]++ < SHOW) {
				CHECK(0, "U+%04X (%s) normalises as HF does", cp, mode_name[m]);
				show_bytes("HF  ", want, n);
				show_bytes("ours", norm[m].out, got);
			}
		}
	}
	for (m = 0; m < 2; m++) {
		CHECK(checked[m] == 0x110000 - 0x800 && !bad[m],
		      "%s: %ld of %ld code points normalise as HF's", mode_name[m],
		      checked[m] - bad[m], checked[m]);
		bert_norm_free(&norm[m]);
	}
	free(all);
}

/* Hand-made and fuzz texts split into HF's words (ids alone hide how an unknown
 * word was spelt). */
static void check_normalized(void)
{
	size_t size;
	char *all = read_text(NORMALIZED, &size);
	struct bert_norm norm[2];
	int ntexts = 0, bad[2] = { 0, 0 }, line = 0;
	bert_norm_init(&norm[0], 1);
	bert_norm_init(&norm[1], 0);
	for (char *s = all, *next; s && *s; s = next) {
		next = cut(s, '\n');
		line++;
		char *uncased = cut(s, '\t'), *cased = uncased ? cut(uncased, '\t') : NULL;
		if (!cased) {
			CHECK(0, "%s:%d: three tab-separated fields", NORMALIZED, line);
			break;
		}
		size_t len, n, got;
		char *text = decode_text(s, &len);
		ntexts++;
		for (int m = 0; m < 2; m++) {
			char *want = decode_text(m ? cased : uncased, &n);
			bert_normalize(&norm[m], text, len, &got);
			if ((got != n || memcmp(norm[m].out, want, n)) && bad[m]++ < SHOW) {
				CHECK(0, "%s:%d (%s) splits into HF's words", NORMALIZED, line, mode_name[m]);
				printf("    text: %.300s\n", s);
				show_bytes("HF  ", want, n);
				show_bytes("ours", norm[m].out, got);
			}
			free(want);
		}
		free(text);
	}
	for (int m = 0; m < 2; m++) {
		CHECK(ntexts > 400 && !bad[m], "%s: %d of %d texts split into HF's words",
		      mode_name[m], ntexts - bad[m], ntexts);
		bert_norm_free(&norm[m]);
	}
	free(all);
}

/* Tokenizers in two threads give the serial ids (each thread its own wp_tokenizer). */
static void check_threads(struct tokenizers *tk)
{
	size_t size;
	char *all = read_text(CASES, &size);
	size_t ok = 0;
	#pragma omp parallel num_threads(2) reduction(+:ok)
	{
		struct wp_tokenizer *t = wp_new(tk->v, 0);
		struct ids a = { 0 }, b = { 0 };
		#pragma omp for schedule(dynamic, 1)
		for (size_t i = 0; i < 64; i++) {
			a.n = b.n = 0;
			wp_encode(t, all + i * size / 64, size / 64, &a);
			#pragma omp critical
			wp_encode(tk->t[0], all + i * size / 64, size / 64, &b);
			ok += a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof *a.v);
		}
		wp_free(t);
		free(a.v);
		free(b.v);
	}
	CHECK(ok == 64, "two threads give the same ids as one (%zu of 64 chunks)", ok);
	free(all);
}

/* ---- hand-checked cases ---- */

static struct vocab *small_vocab(const char *tokens)
{
	char path[] = "/tmp/test_wordpiece.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n%s", tokens);
	fclose(f);
	struct vocab *v = vocab_load(path);
	unlink(path);
	return v;
}

/* Encodes text and compares with the space-separated tokens in want. */
static void check_encode(struct wp_tokenizer *t, const struct vocab *v, const char *text,
                         size_t len, const char *want)
{
	struct ids ids = { 0 };
	wp_encode(t, text, len, &ids);
	char got[4096] = "";
	size_t n = 0;
	for (size_t i = 0; i < ids.n && n < sizeof got - 64; i++)
		n += (size_t)snprintf(got + n, sizeof got - n, "%s%s", i ? " " : "", vocab_token(v, ids.v[i]));
	CHECK(!strcmp(got, want), "%.40s%s -> %.60s%s (got %.60s)", text, len > 40 ? "..." : "",
	      want, strlen(want) > 60 ? "..." : "", got);
	free(ids.v);
}

static void check_greedy_wordpiece(void)
{
	struct vocab *v = small_vocab("un\n##aff\n##able\nunaff\n##a\n##b\na\nb\n##ab\né\n##é\n"
	                              "abcdefghijklmnopqrstuvwxyz\n");
	struct wp_tokenizer *t = wp_new(v, 1);
	check_encode(t, v, "unaffable", 9, "unaff ##able");
	check_encode(t, v, "unable", 6, "un ##able");
	check_encode(t, v, "unx unaff", 9, "[UNK] unaff");
	check_encode(t, v, "aab", 3, "a ##ab");
	check_encode(t, v, "abcdefghijklmnopqrstuvwxyza", 27, "abcdefghijklmnopqrstuvwxyz ##a");
	check_encode(t, v, "[CLS]a[SEP]", 11, "[CLS] a [SEP]");
	char word[512], want[512] = "a";
	memset(word, 'a', 101);
	for (int i = 1; i < 100; i++)
		strcat(want, " ##a");
	check_encode(t, v, word, 100, want);
	check_encode(t, v, word, 101, "[UNK]");
	/* the limit counts characters: 100 two-byte é are one word of 100 pieces */
	for (int i = 0; i < 101; i++)
		memcpy(word + 2 * i, "é", 2);
	struct ids ids = { 0 };
	wp_encode(t, word, 200, &ids);
	CHECK(ids.n == 100 && ids.v[0] == vocab_id(v, "é", 2) && ids.v[99] == vocab_id(v, "##é", 4),
	      "100 x é -> é ##é ... (%zu ids)", ids.n);
	check_encode(t, v, word, 202, "[UNK]");
	wp_free(t);
	vocab_free(v);
	free(ids.v);
}

/* The ids HF's WordPiece gives the word w (n bytes, its characters whole):
 * at each start every length tried, longest first; the whole word [UNK]
 * where a start has no piece, or where it has over 100 characters. */
static void reference_word(const struct vocab *v, const char *w, size_t n, struct ids *out)
{
	size_t first = out->n, chars = 0, start = 0;
	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)w[i] & 0xC0) != 0x80;
	while (chars <= 100 && start < n) {
		size_t end = n;
		int32_t id = -1;
		for (; end > start; end--)
			if ((end == n || ((unsigned char)w[end] & 0xC0) != 0x80) &&
			    (id = vocab_piece_id(v, start > 0, w + start, end - start)) >= 0)
				break;
		if (id < 0)
			break;
		ids_push(out, id);
		start = end;
	}
	if (chars > 100 || start < n) {
		out->n = first;
		ids_push(out, vocab_special(v, VOCAB_UNK));
	}
}

/* Random words made of the vocab's pieces and single letters (cased: kept as
 * they are; uncased, with capitals: lowercased 16 bytes at a time) between
 * blanks and ASCII punctuation (a word of its own, [UNK] here): the ids are
 * the reference's, whatever was encoded before. */
static void check_random_words(void)
{
	struct vocab *v = small_vocab("a\nb\n##a\n##b\nab\n##ab\naab\n##bba\né\n##é\naé\n##éa\n1\n##1\nb1\n"
	                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\n##bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n"
	                              "##abababababababababababababa\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
	static const char *const chunks[2][8] = {
		{ "a", "b", "é", "aé", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		  "abababababababababababababa", "bba" },
		{ "a", "B", "1", "Ab", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", "bbbbbbbbbbbbbbbbBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
		  "ABABABABABABABABABABABABABA", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" },
	};
	static const char blanks[] = " \t !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
	struct wp_tokenizer *t[2] = { wp_new(v, 1), wp_new(v, 0) };
	uint64_t seed = 7;
	size_t words = 0, bad = 0;
	for (int round = 0; round < 400; round++) {
		int lower = round % 2;
		char text[8192], word[1024];
		size_t len = 0;
		struct ids want = { 0 }, got = { 0 };
		while (len < 6000) {
			size_t n = 0, k = 1 + (seed >> 60) % 4;
			for (size_t c = 0; c < k; c++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				const char *piece = chunks[lower][(seed >> 33) % 8];
				memcpy(word + n, piece, strlen(piece));
				n += strlen(piece);
			}
			memcpy(text + len, word, n);
			len += n;
			char sep = blanks[(seed >> 40) % (sizeof blanks - 1)];
			text[len++] = sep;
			for (size_t i = 0; lower && i < n; i++)
				word[i] = (char)(word[i] >= 'A' && word[i] <= 'Z' ? word[i] | 0x20 : word[i]);
			reference_word(v, word, n, &want);
			if (sep != ' ' && sep != '\t')
				ids_push(&want, vocab_special(v, VOCAB_UNK));
			words++;
		}
		wp_encode(t[lower], text, len, &got);
		bad += got.n != want.n || memcmp(got.v, want.v, got.n * sizeof *got.v);
		free(want.v);
		free(got.v);
	}
	CHECK(bad == 0, "%zu random words in 400 texts, with pieces of 1 to 45 bytes: the reference's ids (%zu "
	      "texts differ)", words, bad);
	wp_free(t[0]);
	wp_free(t[1]);
	vocab_free(v);
}

/* Invalid UTF-8: one U+FFFD per maximal subpart, then dropped by BERT cleaning. */
static void check_invalid_utf8(struct wp_tokenizer *t)
{
	static const struct { const char *bytes; size_t want; } cases[] = {
		{ "\x80", 1 }, { "\xbf\x80", 2 }, { "\xc0\xaf", 2 }, { "\xc1\xbf", 2 },
		{ "\xc2", 1 }, { "\xe2\x82", 1 }, { "\xe2\x82\xac", 0 }, { "\xe0\x80\xaf", 3 },
		{ "\xe0\xa0", 1 }, { "\xed\xa0\x80", 3 }, { "\xed\x9f\xbf", 0 }, { "\xef\xbf\xbd", 0 },
		{ "\xf0\x80\x80\x80", 4 }, { "\xf0\x90\x80", 1 }, { "\xf0\x9f\x98\x80", 0 },
		{ "\xf4\x8f\xbf\xbf", 0 }, { "\xf4\x90\x80\x80", 4 }, { "\xf5\x80", 2 },
		{ "\xf8\x88\x80\x80\x80", 5 }, { "\xfe\xff", 2 }, { "\xe2\x28\xa1", 2 },
		{ "caf\xc3 na\xc3\xafve", 1 }, { "\xe2\x82[CLS]\xac", 2 },
	};
	struct ids ids = { 0 };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t got = wp_encode(t, cases[i].bytes, strlen(cases[i].bytes), &ids);
		CHECK(got == cases[i].want, "invalid UTF-8 case %zu: %zu U+FFFD (got %zu)", i,
		      cases[i].want, got);
	}
	struct ids clean = { 0 };
	ids.n = 0;
	wp_encode(t, "to\xffken\xc3iza\xed\xa0\x80tion", 18, &ids);
	wp_encode(t, "tokenization", 12, &clean);
	CHECK(ids.n == clean.n && !memcmp(ids.v, clean.v, ids.n * sizeof *ids.v),
	      "replaced bytes vanish: to?ken?iza?tion encodes as tokenization");
	free(ids.v);
	free(clean.v);
}

static void check_appends(struct wp_tokenizer *t)
{
	struct ids ids = { 0 };
	ids_push(&ids, 42);
	size_t bad = wp_encode(t, "", 0, &ids);
	wp_encode(t, " \t\u3000 ", 7, &ids);
	wp_encode(t, "hello", 5, &ids);
	CHECK(bad == 0 && ids.n == 2 && ids.v[0] == 42 && ids.v[1] == 7592,
	      "wp_encode appends; empty and blank text add nothing");
	free(ids.v);
}

int main(void)
{
	check_greedy_wordpiece();
	check_random_words();
	if (access(REAL_VOCAB, R_OK) || access(CASES, R_OK)) {
		SKIP("%s or %s not found (run from the repo root)", REAL_VOCAB, CASES);
		CHECK_DONE();
	}
	struct vocab *v = vocab_load(REAL_VOCAB);
	struct tokenizers tk = { v, { wp_new(v, 0), wp_new(v, 1) } };
	check_appends(tk.t[0]);
	check_invalid_utf8(tk.t[0]);
	check_cases(&tk);
	check_codepoints();
	check_normalized();
	check_threads(&tk);
	wp_free(tk.t[0]);
	wp_free(tk.t[1]);
	vocab_free(v);
	CHECK_DONE();
}
