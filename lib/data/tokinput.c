#include "data/tokinput.h"
#include "data/csv.h"
#include "data/textin.h"
#include "data/utf8.h"
#include "format/jsonwide.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tokinput {
	enum in_format fmt;
	struct in_cols cols;
	struct csv *csv;
	int col[4];                 /* CSV column of text, pair, label, id; -1 none */
	int ncols;
	struct textin *lines;
	json_t *json;
	long *list;
	size_t list_cap;
	struct in_str *words, *names;   /* a record's words and its list of names */
	size_t words_cap, names_cap;
	struct strbuf sentence;         /* CoNLL: the words and tags of a sentence */
	struct strbuf valid;            /* JSON lines: the line with invalid UTF-8 replaced */
	uint64_t bytes;
	char num[32];
};

static const char *format_names[] = {"csv", "tsv", "jsonl", "lines", "conll"};

int format_parse(const char *name)
{
	for (int i = 0; i < 5; i++)
		if (!strcmp(name, format_names[i]))
			return i;
	return -1;
}

int format_from_name(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (!dot || strchr(dot, '/'))
		return -1;
	if (!strcmp(dot, ".json") || !strcmp(dot, ".ndjson"))
		return FMT_JSONL;
	if (!strcmp(dot, ".txt"))
		return FMT_LINES;
	return format_parse(dot + 1);
}

static const char **wanted(struct tokinput *in, int i)
{
	const char **w[] = {&in->cols.text, &in->cols.pair, &in->cols.label, &in->cols.id};
	return w[i];
}

static void read_csv_header(struct tokinput *in)
{
	struct csv_field *f;
	int nf = csv_next(in->csv, &f);
	if (nf < 0)
		die("%s: empty input", csv_name(in->csv));
	in->ncols = nf;
	for (int k = 0; k < 4; k++) {
		const char *name = *wanted(in, k);
		in->col[k] = -1;
		for (int i = 0; name && i < nf; i++)
			if (!strcmp(f[i].s, name) && in->col[k] >= 0)
				die("%s: columns %d and %d are both named '%s'", csv_name(in->csv), in->col[k] + 1, i + 1,
				    name);
			else if (!strcmp(f[i].s, name))
				in->col[k] = i;
		if (name && in->col[k] < 0) {
			struct strbuf b = {0};
			for (int i = 0; i < nf; i++)
				sb_addf(&b, "%s%s", i ? ", " : "", f[i].s);
			die("%s: no column '%s' (columns: %s)", csv_name(in->csv), name, b.s);
		}
	}
}

struct tokinput *tokinput_open(const char *path, enum in_format fmt, const struct in_cols *cols)
{
	struct tokinput *in = xcalloc(1, sizeof *in);
	in->fmt = fmt;
	in->cols = *cols;
	if (fmt == FMT_CSV || fmt == FMT_TSV) {
		in->csv = csv_open(path, fmt == FMT_CSV ? ',' : '\t');
		read_csv_header(in);
	} else {
		in->lines = textin_open(path);
	}
	return in;
}

/* r's label, text, as the number it must be (a regression target). */
static void label_number(struct in_record *r, const char *name)
{
	char buf[64], *end;
	const char *s = r->label;
	size_t n = r->label_n;
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	double v = 0;
	int ok = n && n < sizeof buf;
	if (ok) {
		memcpy(buf, s, n);
		buf[n] = 0;
		const char *d = buf + (*buf == '-' || *buf == '+');
		v = strtod(buf, &end);
		ok = !*end && isfinite(v) && !(d[0] == '0' && (d[1] | 0x20) == 'x');   /* not C's hex */
	}
	if (!ok)
		die("%s: line %llu: label '%.*s' is not a decimal number (--numeric-labels)", name,
		    (unsigned long long)r->line, (int)(n < 40 ? n : 40), s);
	if (fabs(v) > FLT_MAX)
		die("%s: line %llu: label '%.*s' is beyond a float's range (--numeric-labels)", name,
		    (unsigned long long)r->line, (int)(n < 40 ? n : 40), s);
	r->label_kind = IN_LABEL_FLOAT, r->label_float = v;
}

static int next_csv(struct tokinput *in, struct in_record *r)
{
	struct csv_field *f;
	int nf = csv_next(in->csv, &f);
	if (nf < 0)
		return 0;
	r->line = csv_line(in->csv);
	if (nf != in->ncols)
		die("%s: line %llu: %d fields, expected %d", csv_name(in->csv), (unsigned long long)r->line, nf,
		    in->ncols);
	r->text = f[in->col[0]].s, r->text_n = f[in->col[0]].n;
	if (in->col[1] >= 0)
		r->pair = f[in->col[1]].s, r->pair_n = f[in->col[1]].n;
	if (in->col[2] >= 0) {
		r->label_kind = IN_LABEL_STR;
		r->label = f[in->col[2]].s, r->label_n = f[in->col[2]].n;
		if (!r->label_n)
			die("%s: line %llu: the label is empty", csv_name(in->csv), (unsigned long long)r->line);
		if (in->cols.numeric)
			label_number(r, csv_name(in->csv));
	}
	if (in->col[3] >= 0) {
		r->id = f[in->col[3]].s, r->id_n = f[in->col[3]].n;
		/* ids are C strings downstream: a NUL would cut them short */
		if (memchr(r->id, 0, r->id_n))
			die("%s: line %llu: the id holds a NUL byte", csv_name(in->csv), (unsigned long long)r->line);
	}
	in->bytes = csv_offset(in->csv);
	return 1;
}

static _Noreturn void json_bad(struct tokinput *in, const char *fmt, const char *key)
{
	char msg[256];
	snprintf(msg, sizeof msg, fmt, key);
	die("%s: line %llu: %s", textin_name(in->lines), (unsigned long long)textin_lineno(in->lines), msg);
}

/* Refuses a null: Python's NaN and infinities too (format/jsonwide.h). */
static void not_null(struct tokinput *in, const json_t *v, const char *key)
{
	if (json_is_null(v))
		json_bad(in, "field '%s' is null, NaN or infinite", key);
}

static const char *json_text(struct tokinput *in, const char *key, size_t *n)
{
	json_t *v = json_object_get(in->json, key);
	if (!v) {
		struct strbuf b = {0};
		const char *k;
		json_t *x;
		json_object_foreach(in->json, k, x)
			sb_addf(&b, "%s%s", b.n ? ", " : "", k);
		char msg[512];   /* the field names are the input's: never a format */
		snprintf(msg, sizeof msg, "no field '%s' (fields: %s)", key, b.n ? b.s : "none");
		sb_free(&b);
		json_bad(in, "%s", msg);
	}
	not_null(in, v, key);
	if (!json_is_string(v))
		json_bad(in, "field '%s' is not a string", key);
	*n = json_string_length(v);
	return json_string_value(v);
}

/* Whether x is an integer beyond 64 bits, which comes as a real
 * (format/jsonwide.h). */
static int beyond_64(const json_t *x) { return json_is_real(x) && fabs(json_real_value(x)) >= 0x1p63; }

/* A class id: records carry them as int32, and none is negative. */
static long json_class(struct tokinput *in, const json_t *x)
{
	json_int_t v = json_integer_value(x);
	if (beyond_64(x) || v < 0 || v > INT32_MAX) {
		char num[32], msg[128];
		if (beyond_64(x))
			snprintf(num, sizeof num, "%.17g", json_real_value(x));
		else
			snprintf(num, sizeof num, "%lld", (long long)v);
		snprintf(msg, sizeof msg, "label %s is out of range (0 to %d)", num, INT32_MAX);
		json_bad(in, "%s", msg);
	}
	return (long)v;
}

/* The strings of JSON list v (field key), in *buf. */
static const struct in_str *json_strings(struct tokinput *in, json_t *v, const char *key, struct in_str **buf,
					 size_t *cap)
{
	size_t i;
	json_t *x;
	grow(buf, cap, json_array_size(v) + 1, sizeof **buf);
	json_array_foreach(v, i, x) {
		if (!json_is_string(x))
			json_bad(in, "field '%s' is a list of something other than strings", key);
		(*buf)[i] = (struct in_str){json_string_value(x), json_string_length(x)};
	}
	return *buf;
}

static void json_label(struct tokinput *in, struct in_record *r)
{
	json_t *v = json_object_get(in->json, in->cols.label);
	not_null(in, v, in->cols.label);
	if (!v) {
		json_text(in, in->cols.label, &r->label_n);   /* dies naming the fields */
	} else if (json_is_string(v)) {
		r->label_kind = IN_LABEL_STR;
		r->label = json_string_value(v), r->label_n = json_string_length(v);
		if (!r->label_n)
			json_bad(in, "field '%s' is empty", in->cols.label);
		if (in->cols.numeric)
			label_number(r, textin_name(in->lines));
	} else if (in->cols.numeric && json_is_number(v)) {
		r->label_kind = IN_LABEL_FLOAT, r->label_float = json_number_value(v);
		if (fabs(r->label_float) > FLT_MAX)
			json_bad(in, "field '%s' is a number beyond a float's range", in->cols.label);
	} else if (in->cols.numeric) {
		json_bad(in, "field '%s' is not a number (--numeric-labels)", in->cols.label);
	} else if (json_is_real(v) && fabs(json_real_value(v)) > FLT_MAX) {
		json_bad(in, "field '%s' is a number beyond a float's range", in->cols.label);
	} else if (json_is_integer(v) || beyond_64(v)) {
		r->label_kind = IN_LABEL_INT, r->label_int = json_class(in, v);
	} else if (json_is_real(v)) {
		r->label_kind = IN_LABEL_FLOAT, r->label_float = json_real_value(v);
	} else if (json_is_array(v) && json_is_string(json_array_get(v, 0))) {
		r->label_kind = IN_LABEL_NAMES, r->label_names = json_strings(in, v, in->cols.label, &in->names,
									       &in->names_cap);
		r->label_list_n = json_array_size(v);
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;
		grow(&in->list, &in->list_cap, json_array_size(v), sizeof *in->list);
		json_array_foreach(v, i, x) {
			if (!json_is_integer(x) && !beyond_64(x))
				json_bad(in, "field '%s' is a list of something other than integers or strings",
					 in->cols.label);
			in->list[i] = json_class(in, x);
		}
		r->label_kind = IN_LABEL_LIST, r->label_list = in->list, r->label_list_n = json_array_size(v);
	} else {
		json_bad(in, "field '%s' is not a string, number or list", in->cols.label);
	}
}

static void json_id(struct tokinput *in, struct in_record *r)
{
	json_t *v = json_object_get(in->json, in->cols.id);
	not_null(in, v, in->cols.id);
	if (v && json_is_integer(v)) {
		r->id_n = (size_t)snprintf(in->num, sizeof in->num, "%lld", (long long)json_integer_value(v));
		r->id = in->num, r->id_is_num = 1;
	} else if (beyond_64(v)) {
		json_bad(in, "field '%s' is a whole number beyond 64 bits (-2^63 to 2^63-1): write it as a string",
			 in->cols.id);
	} else if (v && !json_is_string(v)) {
		json_bad(in, "field '%s' is not a string or a whole number", in->cols.id);
	} else {
		r->id = json_text(in, in->cols.id, &r->id_n);
	}
}

/* The code unit of the \uXXXX escape at s[i..n), or -1 where there is none. */
static long escaped_unit(const char *s, size_t n, size_t i)
{
	if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u')
		return -1;
	long u = 0;
	for (size_t k = i + 2; k < i + 6; k++) {
		int c = s[k], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
				   : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		u = u << 4 | d;
	}
	return u;
}

/* Rewrites each \u escape of a lone surrogate in the JSON line s as the
 * surrogate's three bytes in UTF-8's pattern, which the UTF-8 repair then
 * makes three U+FFFD: what HF tokenizers gets from the str that Python's
 * json.loads makes (Jansson refuses the escape). Returns the new length. */
static size_t unescape_lone_surrogates(char *s, size_t n)
{
	char *first = memchr(s, '\\', n);
	size_t o = first ? (size_t)(first - s) : n;
	for (size_t i = o; i < n;) {
		long u = escaped_unit(s, n, i), low;
		size_t step = u >= 0 ? 6 : s[i] == '\\' && i + 1 < n ? 2 : 1;   /* an escape whole: \\u is none */
		if (u >= 0xD800 && u < 0xDC00 && (low = escaped_unit(s, n, i + 6)) >= 0xDC00 && low < 0xE000) {
			step = 12;   /* a pair: one character */
		} else if (u >= 0xD800 && u < 0xE000) {
			s[o++] = (char)0xED, s[o++] = (char)(0x80 | (u >> 6 & 0x3F)), s[o++] = (char)(0x80 | (u & 0x3F));
			i += 6;
			continue;
		}
		memmove(s + o, s + i, step);
		o += step, i += step;
	}
	return o;
}

static int next_jsonl(struct tokinput *in, struct in_record *r)
{
	size_t n;
	char *line;
	do
		if (!(line = textin_line(in->lines, &n)))
			return 0;
	while (strspn(line, " \t") == n);
	in->bytes += n + 1;
	r->line = textin_lineno(in->lines);
	json_decref(in->json);
	n = unescape_lone_surrogates(line, n);
	const char *text = utf8_repair(&in->valid, line, n, &r->bad_utf8);
	json_error_t err;
	in->json = json_loadb_python(text, text == line ? n : in->valid.n, 0, &err);
	if (!in->json && json_error_code(&err) == json_error_null_character)
		json_bad(in, "a string holds \\u0000, a NUL character, which no text or name may hold%s", "");
	if (!in->json && json_error_code(&err) == json_error_premature_end_of_input)
		json_bad(in, "not JSON: %s (the line ends inside it: JSON lines hold one whole object a line)", err.text);
	if (!in->json)
		json_bad(in, "not JSON: %s", err.text);
	if (!json_is_object(in->json))
		json_bad(in, "not a JSON object%s", "");
	json_t *words = json_object_get(in->json, in->cols.text);
	if (json_is_array(words)) {
		r->words = json_strings(in, words, in->cols.text, &in->words, &in->words_cap);
		r->nwords = json_array_size(words), r->is_words = 1;
		r->text = "", r->text_n = 0;
	} else {
		r->text = json_text(in, in->cols.text, &r->text_n);
	}
	if (in->cols.pair)
		r->pair = json_text(in, in->cols.pair, &r->pair_n);
	if (in->cols.label)
		json_label(in, r);
	if (in->cols.id)
		json_id(in, r);
	return 1;
}

static int next_line(struct tokinput *in, struct in_record *r)
{
	size_t n;
	char *line = textin_line(in->lines, &n);
	if (!line)
		return 0;
	in->bytes += n + 1;
	r->line = textin_lineno(in->lines);
	r->text = line, r->text_n = n;
	return 1;
}

/* A CoNLL line's first and last blank-separated fields; returns how many it has. */
static int conll_fields(char *line, size_t n, struct in_str *first, struct in_str *last)
{
	int count = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
			i++;
		if (i == n)
			break;
		size_t j = i;
		while (j < n && line[j] != ' ' && line[j] != '\t' && line[j] != '\r')
			j++;
		*last = (struct in_str){line + i, j - i};
		if (!count++)
			*first = *last;
		i = j;
	}
	return count;
}

/* A sentence of CoNLL: its words, and the tags when every line has them. */
static int next_conll(struct tokinput *in, struct in_record *r)
{
	size_t n, count = 0, tagged = 0;
	char *line;
	in->sentence.n = 0;
	size_t *at = NULL, cap = 0;   /* offsets of word, tag pairs in sentence */
	while ((line = textin_line(in->lines, &n))) {
		in->bytes += n + 1;
		struct in_str word, tag;
		int k = conll_fields(line, n, &word, &tag);
		if (!k) {
			if (count)
				break;
			continue;
		}
		if (word.n == 10 && !memcmp(word.s, "-DOCSTART-", 10))
			continue;
		if (!count)
			r->line = textin_lineno(in->lines);
		tagged += k > 1;
		grow(&at, &cap, 2 * count + 2, sizeof *at);
		at[2 * count] = in->sentence.n;
		sb_add(&in->sentence, word.s, word.n);
		sb_addc(&in->sentence, 0);
		at[2 * count + 1] = in->sentence.n;
		sb_add(&in->sentence, tag.s, k > 1 ? tag.n : 0);
		sb_addc(&in->sentence, 0);
		count++;
	}
	if (tagged && tagged != count)
		die("%s: line %llu: a sentence with tags on some words only", textin_name(in->lines),
		    (unsigned long long)r->line);
	grow(&in->words, &in->words_cap, count + 1, sizeof *in->words);
	grow(&in->names, &in->names_cap, count + 1, sizeof *in->names);
	for (size_t i = 0; i < count; i++) {   /* lengths from the offsets: a NUL in a field is data */
		size_t end = i + 1 < count ? at[2 * i + 2] : in->sentence.n;
		in->words[i] = (struct in_str){in->sentence.s + at[2 * i], at[2 * i + 1] - at[2 * i] - 1};
		in->names[i] = (struct in_str){in->sentence.s + at[2 * i + 1], end - at[2 * i + 1] - 1};
	}
	free(at);
	if (!count)
		return 0;
	r->text = "", r->words = in->words, r->nwords = count, r->is_words = 1;
	if (tagged)
		r->label_kind = IN_LABEL_NAMES, r->label_names = in->names, r->label_list_n = count;
	return 1;
}

int tokinput_next(struct tokinput *in, struct in_record *r)
{
	memset(r, 0, sizeof *r);
	return in->fmt == FMT_JSONL ? next_jsonl(in, r)
	       : in->fmt == FMT_CONLL ? next_conll(in, r)
	       : in->fmt == FMT_LINES ? next_line(in, r) : next_csv(in, r);
}

uint64_t tokinput_offset(const struct tokinput *in) { return in->bytes; }

const char *tokinput_name(const struct tokinput *in)
{
	return in->csv ? csv_name(in->csv) : textin_name(in->lines);
}

void tokinput_close(struct tokinput *in)
{
	if (in->csv)
		csv_close(in->csv);
	else
		textin_close(in->lines);
	json_decref(in->json);
	free(in->list);
	free(in->words);
	free(in->names);
	sb_free(&in->sentence);
	sb_free(&in->valid);
	free(in);
}
