#include "data/tjson.h"
#include "util/err.h"
#include <stdarg.h>
#include <string.h>

void tj_die(const struct tjwhere *w, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		die("out of memory");
	va_end(ap);
	die("%s: %s%s%s", w->path, w->part ? w->part : "", w->part ? ": " : "", msg);
}

const char *tj_type(const struct tjwhere *w, json_t *j)
{
	if (!json_is_object(j))
		tj_die(w, "not a JSON object");
	const char *t = json_string_value(json_object_get(j, "type"));
	if (!t)
		tj_die(w, "no \"type\"");
	return t;
}

void tj_unsupported(const struct tjwhere *w, const char *type)
{
	die("%s: %s '%s' is not supported", w->path, w->part, type);
}

int tj_bool(const struct tjwhere *w, json_t *j, const char *key, int def)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return def;
	if (!json_is_boolean(v))
		tj_die(w, "\"%s\" is not true or false", key);
	return json_is_true(v);
}

const char *tj_str(const struct tjwhere *w, json_t *j, const char *key, const char *def)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return def;
	if (!json_is_string(v))
		tj_die(w, "\"%s\" is not a string", key);
	return json_string_value(v);
}

long long tj_int(const struct tjwhere *w, json_t *j, const char *key, long long lo, long long hi)
{
	json_t *v = json_object_get(j, key);
	if (!json_is_integer(v))
		tj_die(w, "\"%s\" is not an integer", key);
	long long x = json_integer_value(v);
	if (x < lo || x > hi)
		tj_die(w, "\"%s\" is %lld, outside %lld..%lld", key, x, lo, hi);
	return x;
}

struct regex *tj_pattern(const struct tjwhere *w, json_t *j, const char *key)
{
	json_t *p = json_object_get(j, key), *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
	json_t *v = s ? s : r;
	if (!json_is_string(v))
		tj_die(w, "\"%s\" is no {\"String\": ...} or {\"Regex\": ...}", key);
	char why[300];
	struct regex *re = regex_new(json_string_value(v), json_string_length(v), s != NULL, why, sizeof why);
	if (!re)
		tj_die(w, "the regex /%s/ is refused: %s", json_string_value(v), why);
	return re;
}
