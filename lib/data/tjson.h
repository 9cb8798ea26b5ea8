/* What the readers of tokenizer.json's components share: typed fields with
 * defaults, and errors of one line that name the file and the component
 * ("PATH: pre_tokenizer 'UnicodeScripts' is not supported"). */
#ifndef TS_TJSON_H
#define TS_TJSON_H
#include "data/regex.h"
#include <jansson.h>

/* Where in the file a component sits, for errors: its file and its part
 * ("normalizer", "pre_tokenizer", "model", ...). */
struct tjwhere {
	const char *path, *part;
};

__attribute__((noreturn)) void tj_die(const struct tjwhere *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The component's "type"; dies where it has none. */
const char *tj_type(const struct tjwhere *w, json_t *j);
__attribute__((noreturn)) void tj_unsupported(const struct tjwhere *w, const char *type);
/* Field key of object j: a bool, a string (NULL where absent or null, when
 * def is NULL), an integer in [lo, hi]. Dies on the wrong type. */
int tj_bool(const struct tjwhere *w, json_t *j, const char *key, int def);
const char *tj_str(const struct tjwhere *w, json_t *j, const char *key, const char *def);
long long tj_int(const struct tjwhere *w, json_t *j, const char *key, long long lo, long long hi);
/* A pattern field: {"String": s} (matched as it is) or {"Regex": r}. */
struct regex *tj_pattern(const struct tjwhere *w, json_t *j, const char *key);
#endif
