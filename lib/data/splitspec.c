#include "data/splitspec.h"
#include "util/err.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NAME = 64, MAX_DIGITS = 18 };

static int valid_name(const char *s, size_t n)
{
	if (n == 0 || n > MAX_NAME)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

/* "0.125" is 125/1000, exactly, so that rounding never depends on binary floats. */
static int parse_fraction(const char *v, uint64_t *num, uint64_t *den)
{
	uint64_t n = 0, d = 1;
	int dot = 0, digits = 0;
	for (const char *p = v; *p; p++) {
		if (*p == '.' && !dot) {
			dot = 1;
			continue;
		}
		if (!isdigit((unsigned char)*p) || digits++ == MAX_DIGITS)
			return 0;
		n = n * 10 + (uint64_t)(*p - '0');
		if (dot)
			d *= 10;
	}
	/* a bare 1 is all of the data: "train=1" means the whole set, not one record */
	if ((!dot && strcmp(v, "1")) || !digits)
		return 0;
	*num = n;
	*den = d;
	return 1;
}

static int parse_count(const char *v, uint64_t *count)
{
	size_t n = strlen(v);
	if (n == 0 || n > MAX_DIGITS || strspn(v, "0123456789") != n)
		return 0;
	*count = strtoull(v, NULL, 10);
	return 1;
}

/* The form a --split takes, for the messages about a part not in it. */
#define SPLIT_EXAMPLE "train=0.8,valid=0.1,test=0.1"

/* A part without '=': after a file's part, the comma cut the file's path. */
static _Noreturn void not_name_value(const char *item, const struct split_part *before)
{
	if (before && before->file)
		die_usage("--split: '%s' is not NAME=VALUE: the comma after '%s' ends its path (give a path without "
			  "commas)", item, before->text);
	die_usage("--split: '%s' is not NAME=VALUE, as in " SPLIT_EXAMPLE, item);
}

/* Parses item into p; before is the part before it, or NULL. */
static void parse_part(struct split_part *p, const char *item, const struct split_part *before)
{
	const char *eq = strchr(item, '=');
	if (!eq)
		not_name_value(item, before);
	size_t len = (size_t)(eq - item);
	if (!len)
		die_usage("--split: '%s' has no NAME before '='", item);
	if (!valid_name(item, len))
		die_usage("--split: bad name '%.*s' (use up to %d letters, digits, '_' and '-')", (int)len, item, MAX_NAME);
	p->text = xstrdup(item);
	p->name = strndup(item, len);
	const char *v = eq + 1;
	if (v[0] == '@') {
		if (!v[1])
			die_usage("--split: '%s' names no file: give NAME=@FILE", item);
		p->file = xstrdup(v + 1);
	} else if (!strcmp(v, "rest")) {
		p->is_rest = 1;
	} else if (!parse_fraction(v, &p->num, &p->den) && !parse_count(v, &p->count)) {
		die_usage("--split: '%s' of '%s' is neither a fraction (0.8), a count (500), 'rest' nor @FILE%s", v,
			  p->name, strchr(v, '=') ? ": parts are separated by commas" : "");
	}
	if (p->den && p->num > p->den)
		die_usage("--split: fraction %s of '%s' is more than 1", v, p->name);
}

/* The last share, or -1. */
static int last_share(const struct splitspec *s)
{
	int last = -1;
	for (int i = 0; i < s->n; i++)
		if (!s->parts[i].file)
			last = i;
	return last;
}

/* The share that takes what the fractions' rounding leaves: the last one
 * that asks for some, or -1. */
static int remainder_share(const struct splitspec *s)
{
	int last = -1;
	for (int i = 0; i < s->n; i++)
		if (s->parts[i].is_rest || s->parts[i].num)
			last = i;
	return last;
}

int splitspec_shares(const struct splitspec *s)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		n += !s->parts[i].file;
	return n;
}

/* Fractions must sum to 1 (or at most 1 before "rest"); names are unique. */
static void check_parts(const struct splitspec *s)
{
	double sum = 0;
	int last = last_share(s);
	const struct split_part *fraction = NULL, *count = NULL;   /* the first of each */
	for (int i = 0; i < s->n; i++) {
		const struct split_part *p = &s->parts[i];
		for (int j = 0; j < i; j++)
			if (!strcmp(p->name, s->parts[j].name))
				die_usage("--split: '%s' named twice", p->name);
		if (p->is_rest && i != last)
			die_usage("--split: '%s' is not the last share: only the last may be 'rest'", p->text);
		if (p->is_rest || p->file || (!p->den && !p->count))   /* 0 is a count and a fraction */
			continue;
		if (p->den && !fraction)
			fraction = p;
		if (!p->den && !count)
			count = p;
		if (p->den)
			sum += (double)p->num / (double)p->den;
	}
	if (fraction && count)
		die_usage("--split: '%s' is a count and '%s' a fraction: give every share as a fraction or every one as "
			  "a count", count->text, fraction->text);
	int rest = last >= 0 && s->parts[last].is_rest;
	if (fraction && !rest && fabs(sum - 1) > 1e-6)
		die_usage("--split: the fractions sum to %g, not 1", sum);
	if (fraction && rest && sum > 1 + 1e-6)
		die_usage("--split: the fractions before 'rest' sum to %g, more than 1", sum);
}

void splitspec_parse(const char *text, struct splitspec *s)
{
	memset(s, 0, sizeof *s);
	size_t len = strlen(text);
	if (!len || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,"))
		die_usage("--split: an empty part in '%s': give NAME=VALUE,..., as in " SPLIT_EXAMPLE, text);
	int items = 1;
	for (const char *p = text; *p; p++)
		items += *p == ',';
	s->parts = xcalloc((size_t)items, sizeof *s->parts);
	char *copy = xstrdup(text), *save = NULL;
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save), s->n++)
		parse_part(&s->parts[s->n], item, s->n ? &s->parts[s->n - 1] : NULL);
	free(copy);
	check_parts(s);
}

void splitspec_counts(const struct splitspec *s, uint64_t total, uint64_t *counts)
{
	unsigned __int128 sum = 0;
	int by_fraction = 0, last = remainder_share(s);
	for (int i = 0; i < s->n; i++)
		by_fraction |= s->parts[i].den != 0;
	for (int i = 0; i < s->n; i++) {
		const struct split_part *p = &s->parts[i];
		uint64_t left = sum < total ? total - (uint64_t)sum : 0;
		if (p->file)
			counts[i] = 0;
		else if (p->is_rest || (by_fraction && i == last))
			counts[i] = left;
		else if (p->den) {
			uint64_t want = (uint64_t)((unsigned __int128)p->num * total / p->den);
			counts[i] = want < left ? want : left;   /* matters only within the 1e-6 slack */
		} else {
			counts[i] = p->count;
		}
		sum += counts[i];
	}
	if (sum > total)
		die("--split asks for %llu records but there are only %llu", (unsigned long long)sum,
		    (unsigned long long)total);
}

void splitspec_free(struct splitspec *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->parts[i].text);
		free(s->parts[i].name);
		free(s->parts[i].file);
	}
	free(s->parts);
	memset(s, 0, sizeof *s);
}
