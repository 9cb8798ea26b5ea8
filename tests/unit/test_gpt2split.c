/* gpt2_match (lib/data/gpt2split.c) against PCRE2's matches of GPT-2's regex
 * (lib/data/regex.c) over the e-mails, the Unicode stress lines, every code
 * point between letters, spaces and quotes, and random strings of the
 * characters that decide a match. U+180E alone differs, and there the
 * scanner is HF's: PCRE2's \s takes it, Oniguruma's (HF's) does not. */
#include "data/gpt2split.h"
#include "data/regex.h"
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static struct regex *re;
static struct regex_space *space;

/* Whether the scanner cuts s as PCRE2 does; on a difference, says where. */
static int same_cuts(const char *s, size_t n)
{
	size_t i = 0, a, b;
	while (i < n) {
		size_t mine = gpt2_match(s, n, i);
		if (!regex_find(re, space, s, n, i, &a, &b) || a != i || b != mine) {
			fprintf(stderr, "    at byte %zu of \"%.*s\": scanner ends at %zu, PCRE2 matches [%zu, %zu)\n", i,
				(int)(n < 80 ? n : 80), s, mine, a, b);
			return 0;
		}
		i = mine;
	}
	return 1;
}

static size_t check_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL, "%s opens", path);
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0, lines = 0, bad = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		utf8proc_uint8_t *valid = NULL;
		/* the scanner takes valid UTF-8, as the pipeline gives it */
		if (utf8proc_map((const utf8proc_uint8_t *)line, (utf8proc_ssize_t)len, &valid, 0) < 0)
			continue;
		bad += !same_cuts((char *)valid, strlen((char *)valid));
		free(valid);
		lines++;
	}
	free(line);
	fclose(f);
	CHECK(bad == 0 && lines > 0, "%s: %zu of %zu lines cut as PCRE2 cuts them", path, lines - bad, lines);
	return lines;
}

static void check_code_points(void)
{
	static const char *const around[][2] = {{"a", "b"}, {" ", "x"}, {"  ", " "}, {"'", "s"}, {"1", "'re"}, {"", ""}};
	size_t bad = 0, tried = 0;
	for (int32_t cp = 1; cp < 0x110000; cp++) {
		if (!utf8proc_codepoint_valid(cp) || cp == 0x180E)
			continue;
		char c[8] = {0}, s[32];
		utf8proc_encode_char(cp, (utf8proc_uint8_t *)c);
		for (size_t k = 0; k < sizeof around / sizeof *around; k++) {
			int n = snprintf(s, sizeof s, "%s%s%s%s", around[k][0], c, c, around[k][1]);
			tried++;
			bad += !same_cuts(s, (size_t)n);
			if (bad > 5)
				break;
		}
		if (bad > 5)
			break;
	}
	CHECK(bad == 0, "every code point between letters, spaces and quotes: %zu of %zu strings cut alike", tried - bad,
	      tried);
	size_t end = gpt2_match("a\xe1\xa0\x8e\xe1\xa0\x8e" "b", 8, 1);
	CHECK(end == 7, "U+180E U+180E between letters is a run of its own, as in HF (ends at %zu)", end);
}

static void check_random(void)
{
	static const char *const parts[] = {" ", "  ", "\t", "\n", "'", "s", "re", "ll", "d", "a", "Z", "7", "!",
					    "\xc2\xa0", "\xe3\x80\x80", "\xc3\xa9", "\xd9\xa3", "\xf0\x9f\x91\x8d", "-", "'S"};
	srand(7);
	size_t bad = 0;
	for (int t = 0; t < 20000 && bad < 5; t++) {
		char s[128] = "";
		for (int i = 0, m = rand() % 12; i < m; i++)
			strcat(s, parts[rand() % (sizeof parts / sizeof *parts)]);
		if (*s)
			bad += !same_cuts(s, strlen(s));
	}
	CHECK(bad == 0, "20000 random strings of spaces, quotes, letters and marks cut alike");
}

int main(void)
{
	char why[200];
	re = regex_new(GPT2_REGEX, strlen(GPT2_REGEX), 0, why, sizeof why);
	CHECK(re != NULL, "PCRE2 compiles GPT-2's regex (%s)", re ? "ok" : why);
	if (!re)
		CHECK_DONE();
	space = regex_space_new();
	check_file("tests/fixtures/tokenizers/stress.txt");
	check_file("examples/spamassassin.csv");
	check_code_points();
	check_random();
	regex_space_free(space);
	regex_free(re);
	CHECK_DONE();
}
