/* json_loadb_halves (lib/format/jsonsplit.c) against json_loadb on the same
 * texts: a model's vocab of over 256 kB as an array of [piece, score] and as
 * an object of ids, small ones, a key written with an escape, a key met in
 * both halves, damage in the second half, trailing bytes, a vocab that is
 * not there. Each must give json_loadb's tree (the same text when dumped,
 * so the same order) or its error (the same message and line). */
#include "format/jsonarena.h"
#include "format/jsonsplit.h"
#include "util/strbuf.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>

/* {"version": "1.0", "model": {"type": ..., VOCAB_KEY: [or {] n members [or }], "unk_id": 0}, "after": [1, 2]} */
static char *tokenizer_text(const char *vocab_key, int object, int n, size_t *len)
{
	struct strbuf b = { 0 };
	sb_addf(&b, "{\"version\": \"1.0\",\n \"model\": {\"type\": \"Unigram\",\n  %s: %c\n", vocab_key,
		object ? '{' : '[');
	for (int i = 0; i < n; i++) {
		const char *sep = i + 1 < n ? ",\n" : "\n";
		if (object)
			sb_addf(&b, "   \"p\\u00e9ce\\\"%05d\": %d%s", i, i, sep);
		else
			sb_addf(&b, "   [\"\\u2581p[i]{e}c,e %d\", %.17g]%s", i, -1.0 - i / 7.0, sep);
	}
	sb_addf(&b, "  %c,\n  \"unk_id\": 0},\n \"after\": [1, 2]}\n", object ? '}' : ']');
	*len = b.n;
	return b.s;
}

/* Whether both readers give the same tree or the same error for text, and
 * the text was read in halves where halves says it is to be. */
static void same(const char *text, size_t n, int halves, const char *what)
{
	json_error_t e1, e2;
	int halved;
	json_arena_begin();
	json_t *whole = json_loadb(text, n, JSON_REJECT_DUPLICATES, &e1);
	json_t *split = json_loadb_halves(text, n, JSON_REJECT_DUPLICATES, "model", "vocab", &e2, &halved);
	char *a = whole ? json_dumps(whole, JSON_COMPACT) : NULL, *b = split ? json_dumps(split, JSON_COMPACT) : NULL;
	int ok = (a && b && !strcmp(a, b)) ||
		 (!whole && !split && e1.line == e2.line && !strcmp(e1.text, e2.text));
	CHECK(ok && halved == halves, "%s: json_loadb_halves gives json_loadb's %s, %s", what,
	      whole ? "tree" : "error", halves ? "read in halves" : "read whole");
	json_arena_end();   /* the trees and their texts too */
}

int main(void)
{
	size_t n;
	char *t = tokenizer_text("\"vocab\"", 0, 60000, &n);
	CHECK(n > (1u << 20), "the array text is %zu bytes, past the size that is read in halves", n);
	same(t, n, 1, "a vocab of [piece, score]");
	char *bad = strdup(t);
	strstr(bad + n * 3 / 4, "],\n")[1] = '@';   /* in the second half, for a comma */
	same(bad, n, 0, "a vocab with a stray byte in its second half");
	same(t, n - 3, 0, "a text cut short");
	char *tail = malloc(n + 3);
	memcpy(tail, t, n);
	memcpy(tail + n, "{}", 3);
	same(tail, n + 2, 0, "a text with more after it");
	free(t), free(bad), free(tail);

	t = tokenizer_text("\"vocab\"", 1, 60000, &n);
	same(t, n, 1, "a vocab of ids (an object)");
	char *twice = strstr(t, "\"p\\u00e9ce\\\"59999\"");
	memcpy(twice + strlen("\"p\\u00e9ce\\\""), "00001", 5);   /* the first half's key "...00001" again, last */
	same(t, n, 0, "an object whose key is in both halves");
	free(t);

	t = tokenizer_text("\"voc\\u0061b\"", 0, 60000, &n);
	same(t, n, 0, "the vocab's key written with an escape");
	free(t);
	t = tokenizer_text("\"pieces\"", 0, 60000, &n);
	same(t, n, 0, "no vocab");
	free(t);
	t = tokenizer_text("\"vocab\"", 0, 10, &n);
	same(t, n, 0, "a small vocab");
	free(t);
	same("[1, 2]", 6, 0, "a text that is no object");
	same("", 0, 0, "an empty text");
	CHECK_DONE();
}
