#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/regex.h"
#include "util/err.h"
#include <pcre2.h>
#include <stdio.h>

struct regex {
	pcre2_code *code;
};

/* One pair of offsets is all the callers read. */
struct regex_space *regex_space_new(void)
{
	pcre2_match_data *m = pcre2_match_data_create(1, NULL);
	if (!m)
		die("out of memory");
	return (struct regex_space *)m;
}

void regex_space_free(struct regex_space *m)
{
	pcre2_match_data_free((pcre2_match_data *)m);
}

struct regex *regex_new(const char *pattern, size_t len, int literal, char *why, size_t n)
{
	int err;
	PCRE2_SIZE at;
	uint32_t flags = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, len, flags, &err, &at, NULL);
	if (!code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(err, msg, sizeof msg);
		snprintf(why, n, "%s at offset %zu", (char *)msg, (size_t)at);
		return NULL;
	}
	pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);   /* where JIT is missing, the interpreter runs */
	struct regex *r = xcalloc(1, sizeof *r);
	r->code = code;
	return r;
}

void regex_free(struct regex *r)
{
	if (!r)
		return;
	pcre2_code_free(r->code);
	free(r);
}

int regex_find(const struct regex *r, struct regex_space *m, const char *s, size_t len, size_t from, size_t *start,
	       size_t *end)
{
	pcre2_match_data *match_data = (pcre2_match_data *)m;
	int rc = pcre2_match(r->code, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, match_data, NULL);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(rc, msg, sizeof msg);
		die("a tokenizer regex failed: %s", (char *)msg);
	}
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(match_data);
	*start = ov[0];
	*end = ov[1];
	return 1;
}
