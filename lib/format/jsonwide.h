/* JSON whose integers may pass 64 bits. Hugging Face's tokenizer_config.json
 * says "model_max_length": 1000000000000000019884624838656 (Python's
 * int(1e30)), which jansson refuses ("too big integer") in whatever key.
 * Here such an integer is read as a real instead: a key that must be an
 * integer refuses it as any other value out of its range, and a key no one
 * reads is no matter. Integers within 64 bits stay exact integers. */
#ifndef TS_JSONWIDE_H
#define TS_JSONWIDE_H
#include <jansson.h>

/* json_loadb, integers beyond 64 bits read as reals. */
json_t *json_loadb_wide(const char *text, size_t n, size_t flags, json_error_t *err);
/* json_loadb_wide, and NaN, Infinity and -Infinity (which Python's json
 * writes for the floats JSON lacks) and reals beyond a double's range read
 * as null: for JSON lines, whose every field read refuses a null. */
json_t *json_loadb_python(const char *text, size_t n, size_t flags, json_error_t *err);
/* json_loadb_wide of what is left to read at fd (the file name, for a read error,
 * which dies). */
json_t *json_loadfd_wide(int fd, const char *name, size_t flags, json_error_t *err);
#endif
