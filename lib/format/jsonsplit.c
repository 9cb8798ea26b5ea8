#include "format/jsonsplit.h"
#include "format/jsonarena.h"
#include "format/jsonwide.h"
#include "util/err.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A value worth two threads: smaller ones are read with the rest. */
enum { SPLIT_FROM = 1 << 18 };
#define NONE SIZE_MAX

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* Past the string that opens at s[i] ('"'), or NONE. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
	for (i++; i < n; i++)
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	return NONE;
}

/* Past the value that starts at s[i], or NONE: its brackets are counted,
 * not checked (jansson checks what is read). */
static size_t skip_value(const char *s, size_t n, size_t i)
{
	if (i >= n)
		return NONE;
	if (s[i] == '"')
		return skip_string(s, n, i);
	if (s[i] != '[' && s[i] != '{') {
		while (i < n && !strchr(",]} \t\r\n", s[i]))
			i++;
		return i;
	}
	size_t depth = 0;
	for (; i < n; i++) {
		if (s[i] == '"') {
			if ((i = skip_string(s, n, i)) == NONE)
				return NONE;
			i--;
		} else if (s[i] == '[' || s[i] == '{') {
			depth++;
		} else if ((s[i] == ']' || s[i] == '}') && --depth == 0) {
			return i + 1;
		}
	}
	return NONE;
}

/* The start of the value of the first member key (its raw bytes) of the
 * object at s[i], or NONE. */
static size_t member(const char *s, size_t n, size_t i, const char *key)
{
	size_t klen = strlen(key);
	if ((i = skip_ws(s, n, i)) >= n || s[i] != '{')
		return NONE;
	for (i = skip_ws(s, n, i + 1); i < n && s[i] == '"';) {
		size_t k = i, end = skip_string(s, n, i);
		if (end == NONE || (i = skip_ws(s, n, end)) >= n || s[i] != ':')
			return NONE;
		size_t v = skip_ws(s, n, i + 1);
		if (end - k - 2 == klen && !memcmp(s + k + 1, key, klen))
			return v;
		size_t ve = skip_value(s, n, v);
		if (ve == NONE || (i = skip_ws(s, n, ve)) >= n || s[i] != ',')
			return NONE;
		i = skip_ws(s, n, i + 1);
	}
	return NONE;
}

/* The comma between two members of the array or object s[v..ve) nearest
 * past its middle, or NONE. */
static size_t middle_comma(const char *s, size_t v, size_t ve)
{
	size_t half = v + (ve - v) / 2;
	for (size_t i = skip_ws(s, ve, v + 1); i < ve;) {
		if (s[v] == '{') {   /* a member's key and colon */
			if ((i = skip_string(s, ve, i)) == NONE || (i = skip_ws(s, ve, i)) >= ve || s[i] != ':')
				return NONE;
			i = skip_ws(s, ve, i + 1);
		}
		if ((i = skip_value(s, ve, i)) == NONE || (i = skip_ws(s, ve, i)) >= ve || s[i] != ',')
			return NONE;
		if (i >= half)
			return i;
		i = skip_ws(s, ve, i + 1);
	}
	return NONE;
}

/* A text of its own: a + b + c. */
static char *joined(const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc, size_t *n)
{
	char *t = xmalloc(na + nb + nc + 1);
	memcpy(t, a, na);
	memcpy(t + na, b, nb);
	memcpy(t + na + nb, c, nc);
	*n = na + nb + nc;
	return t;
}

/* The second half, read on a thread of its own into its own arena, which
 * the first thread takes in after. */
struct half {
	const char *text;
	size_t n, flags;
	json_t *value;
	json_error_t err;
	struct json_blocks *blocks;
};

static void *read_half(void *hp)
{
	struct half *h = hp;
	json_arena_begin();
	h->value = json_loadb(h->text, h->n, h->flags, &h->err);
	h->blocks = json_arena_detach();
	return NULL;
}

/* b's members after a's: 0 where a key of b is one of a's. */
static int join(json_t *a, json_t *b)
{
	if (json_is_array(a))
		return json_is_array(b) && !json_array_extend(a, b);
	size_t want = json_object_size(a) + json_object_size(b);
	return json_is_object(b) && !json_object_update(a, b) && json_object_size(a) == want;
}

json_t *json_loadb_halves(const char *text, size_t n, size_t flags, const char *outer, const char *inner,
			  json_error_t *err, int *halved)
{
	int unused;
	halved = halved ? halved : &unused;
	*halved = 0;
	size_t m = member(text, n, 0, outer), v = m == NONE ? NONE : member(text, n, m, inner);
	size_t ve = v == NONE || (text[v] != '[' && text[v] != '{') ? NONE : skip_value(text, n, v);
	size_t comma = ve == NONE || ve - v < SPLIT_FROM ? NONE : middle_comma(text, v, ve);
	if (comma == NONE)
		return json_loadb_wide(text, n, flags, err);
	int array = text[v] == '[';
	size_t nrest, n1, n2;
	char *rest = joined(text, v, array ? "[]" : "{}", 2, text + ve, n - ve, &nrest);
	char *first = joined(text + v, comma - v, array ? "]" : "}", 1, "", 0, &n1);
	char *second = joined(array ? "[" : "{", 1, text + comma + 1, ve - comma - 1, "", 0, &n2);
	struct half h = { second, n2, flags, NULL, { 0 }, NULL };
	pthread_t reader;
	int threads = !pthread_create(&reader, NULL, read_half, &h);
	json_t *root = json_loadb(rest, nrest, flags, err), *a = json_loadb(first, n1, flags, err);
	if (threads)
		pthread_join(reader, NULL);
	else   /* into this thread's arena, which read_half's would end */
		h.value = json_loadb(second, n2, flags, &h.err);
	json_arena_adopt(h.blocks);
	json_t *model = json_object_get(root, outer);
	int whole = a && h.value && json_object_get(model, inner) && join(a, h.value) &&
		    !json_object_set(model, inner, a);
	json_decref(a);
	json_decref(h.value);
	free(rest);
	free(first);
	free(second);
	if (whole) {
		*halved = 1;
		return root;
	}
	json_decref(root);
	return json_loadb_wide(text, n, flags, err);   /* its own message, or its own tree */
}
