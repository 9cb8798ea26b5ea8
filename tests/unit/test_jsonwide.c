/* json_loadb_wide (lib/format/jsonwide.c): integers beyond 64 bits, which
 * jansson refuses, are read as reals, in any key and at any depth; the
 * integers within 64 bits stay exact; strings, their escapes, and other
 * errors are as json_loadb gives them. json_loadb_python reads Python's
 * NaN and infinities as null. */
#include "format/jsonwide.h"
#include "check.h"
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static json_t *load(const char *text, json_error_t *err)
{
	return json_loadb_wide(text, strlen(text), 0, err);
}

int main(void)
{
	json_error_t err;
	json_t *j = load("{\"do_lower_case\": true, \"model_max_length\": 1000000000000000019884624838656}", &err);
	json_t *m = json_object_get(j, "model_max_length");
	CHECK(j && json_is_true(json_object_get(j, "do_lower_case")) && json_is_real(m) && json_real_value(m) == 1e30,
	      "tokenizer_config.json's model_max_length of int(1e30) is read, as the real 1e30");
	json_decref(j);

	j = load("[9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809, 7]", &err);
	CHECK(j && json_integer_value(json_array_get(j, 0)) == INT64_MAX &&
	      json_integer_value(json_array_get(j, 1)) == INT64_MIN && json_is_integer(json_array_get(j, 4)),
	      "the integers at 64 bits' ends stay exact integers");
	CHECK(json_is_real(json_array_get(j, 2)) && json_real_value(json_array_get(j, 2)) == 0x1p63 &&
	      json_is_real(json_array_get(j, 3)) && json_real_value(json_array_get(j, 3)) == -0x1p63,
	      "those just past them are reals");
	json_decref(j);

	j = load("{\"a\\\"99999999999999999999\": \"99999999999999999999\", \"b\": [{\"c\": -1e2, \"d\": 12345678901234567890123.5e1, "
		 "\"e\": 99999999999999999999}]}", &err);
	json_t *b = json_array_get(json_object_get(j, "b"), 0);
	CHECK(j && !strcmp(json_string_value(json_object_get(j, "a\"99999999999999999999")), "99999999999999999999") &&
	      json_real_value(json_object_get(b, "c")) == -100 && json_real_value(json_object_get(b, "d")) == 1.23456789012345678901235e23 &&
	      json_real_value(json_object_get(b, "e")) == 1e20,
	      "numbers in strings and keys stay as they are, reals too; a deep integer is widened");
	json_decref(j);

	CHECK(!load("{\"n\": 99999999999999999999,\n \"x\": tru}", &err) && err.line == 2 &&
	      strstr(err.text, "invalid token"), "another error beside is said, on its line (%d: %s)", err.line, err.text);
	char big[400];
	memset(big, '9', sizeof big - 1);
	big[sizeof big - 1] = 0;
	CHECK(!load(big, &err) && json_error_code(&err) == json_error_numeric_overflow,
	      "an integer beyond a double too is refused (%s)", err.text);
	CHECK(!load("{\"n\": 99999999999999999999", &err) && json_error_code(&err) == json_error_premature_end_of_input,
	      "a text cut short is said to be");

	const char *py = "{\"a\": NaN, \"b\": [Infinity, -Infinity, 1e400, -1e400, 1e-400, 5e-324], \"c\": \"NaN\", "
			 "\"d\": 99999999999999999999}";
	j = json_loadb_python(py, strlen(py), 0, &err);
	json_t *l = json_object_get(j, "b");
	CHECK(j && json_is_null(json_object_get(j, "a")) && json_is_null(json_array_get(l, 0)) &&
	      json_is_null(json_array_get(l, 1)) && json_is_null(json_array_get(l, 2)) && json_is_null(json_array_get(l, 3)),
	      "json_loadb_python: NaN, the infinities and reals past a double are null");
	CHECK(json_real_value(json_array_get(l, 4)) == 0 && json_real_value(json_array_get(l, 5)) == 5e-324 &&
	      !strcmp(json_string_value(json_object_get(j, "c")), "NaN") && json_real_value(json_object_get(j, "d")) == 1e20,
	      "an underflow is 0, a denormal itself, a string NaN a string, a wide integer a real");
	json_decref(j);
	CHECK(!load(py, &err) && strstr(err.text, "invalid token"), "json_loadb_wide leaves NaN to jansson (%s)", err.text);
	CHECK(!json_loadb_python("[NaNa]", 6, 0, &err) && strstr(err.text, "near 'NaNa'"),
	      "a word NaN begins is not NaN, and is named as written (%s)", err.text);

	CHECK(!load("\xEF\xBB\xBF{}", &err) && !strcmp(err.text, "a UTF-8 byte order mark opens it, which JSON does not allow") &&
	      json_error_code(&err) == json_error_invalid_syntax, "a byte order mark is said to be one (%s)", err.text);

	int fds[2];
	const char *text = "{\"max\": 1000000000000000019884624838656, \"n\": 3}";
	CHECK(!pipe(fds) && write(fds[1], text, strlen(text)) == (ssize_t)strlen(text) && !close(fds[1]) &&
	      (j = json_loadfd_wide(fds[0], "pipe", 0, &err)) && json_integer_value(json_object_get(j, "n")) == 3,
	      "json_loadfd_wide reads what is left at fd");
	json_decref(j);
	CHECK_DONE();
}
