/* Conversion between msgpack objects and JSON, for ts-cat and JSON lines input. */
#ifndef TS_MPJSON_H
#define TS_MPJSON_H
#include "util/strbuf.h"
#include <jansson.h>
#include <msgpack.h>

/* Appends o as compact JSON. Floats keep the shortest text that reads back
 * the same; NaN and infinities become null (JSON has none). */
void mp_to_json(const msgpack_object *o, struct strbuf *b);
/* Appends a float as mp_to_json does. */
void json_add_double(struct strbuf *b, double v, int is_f32);
/* Appends j as compact JSON, its reals as mp_to_json writes floats. */
void json_to_text(const json_t *j, struct strbuf *b);
/* Packs a JSON value as msgpack (integers stay integers, reals become float64). */
void json_to_mp(const json_t *j, msgpack_packer *pk);
/* A JSON real, or null for NaN and infinities (JSON has none). */
json_t *json_number(double v);
#endif
