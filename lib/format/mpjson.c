#include "format/mpjson.h"
#include "format/rec.h"
#include "util/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_add_double(struct strbuf *b, double v, int is_f32)
{
	if (!isfinite(v)) {
		sb_add(b, "null", 4);
		return;
	}
	size_t at = b->n;
	sb_add_double(b, v, is_f32);
	/* keep a float recognisable as one when it reads back */
	if (!strpbrk(b->s + at, ".eEn"))
		sb_add(b, ".0", 2);
}

void mp_to_json(const msgpack_object *o, struct strbuf *b)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: sb_add(b, "null", 4); break;
	case MSGPACK_OBJECT_BOOLEAN: o->via.boolean ? sb_add(b, "true", 4) : sb_add(b, "false", 5); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: sb_add_uint(b, o->via.u64); break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		sb_addc(b, '-');
		sb_add_uint(b, -(uint64_t)o->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32: json_add_double(b, o->via.f64, 1); break;
	case MSGPACK_OBJECT_FLOAT64: json_add_double(b, o->via.f64, 0); break;
	case MSGPACK_OBJECT_STR: sb_add_json_str(b, o->via.str.ptr, o->via.str.size); break;
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT: {
		const unsigned char *p = (const unsigned char *)(o->type == MSGPACK_OBJECT_BIN ? o->via.bin.ptr : o->via.ext.ptr);
		uint32_t n = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : o->via.ext.size;
		sb_addc(b, '[');
		for (uint32_t i = 0; i < n; i++) {
			if (i)
				sb_addc(b, ',');
			sb_add_uint(b, p[i]);
		}
		sb_addc(b, ']');
		break;
	}
	case MSGPACK_OBJECT_ARRAY:
		sb_addc(b, '[');
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				sb_addc(b, ',');
			mp_to_json(&o->via.array.ptr[i], b);
		}
		sb_addc(b, ']');
		break;
	case MSGPACK_OBJECT_MAP:
		sb_addc(b, '{');
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			if (i)
				sb_addc(b, ',');
			if (k->type == MSGPACK_OBJECT_STR) {
				mp_to_json(k, b);
			} else if (k->type == MSGPACK_OBJECT_MAP || k->type == MSGPACK_OBJECT_ARRAY) {
				/* as in mpprint: nested keys would be escaped again at every level */
				die("msgpack: a map key is a map or a list, which JSON cannot hold");
			} else {
				struct strbuf kb = {0};
				mp_to_json(k, &kb);
				sb_add_json_str(b, kb.s, kb.n);
				sb_free(&kb);
			}
			sb_addc(b, ':');
			mp_to_json(&o->via.map.ptr[i].val, b);
		}
		sb_addc(b, '}');
		break;
	}
}

void json_to_mp(const json_t *j, msgpack_packer *pk)
{
	switch (json_typeof(j)) {
	case JSON_NULL: msgpack_pack_nil(pk); break;
	case JSON_TRUE: msgpack_pack_true(pk); break;
	case JSON_FALSE: msgpack_pack_false(pk); break;
	case JSON_INTEGER: msgpack_pack_int64(pk, json_integer_value(j)); break;
	case JSON_REAL: msgpack_pack_double(pk, json_real_value(j)); break;
	case JSON_STRING: mp_pack_strn(pk, json_string_value(j), json_string_length(j)); break;
	case JSON_ARRAY: {
		msgpack_pack_array(pk, json_array_size(j));
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v)
			json_to_mp(v, pk);
		break;
	}
	case JSON_OBJECT: {
		msgpack_pack_map(pk, json_object_size(j));
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)j, k, v) {
			mp_pack_str(pk, k);
			json_to_mp(v, pk);
		}
		break;
	}
	}
}

void json_to_text(const json_t *j, struct strbuf *b)
{
	const char *key;
	const json_t *v;
	size_t i, n = 0;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		sb_addc(b, '{');
		json_object_foreach((json_t *)j, key, v) {
			if (n++)
				sb_addc(b, ',');
			sb_add_json_str(b, key, strlen(key));
			sb_addc(b, ':');
			json_to_text(v, b);
		}
		sb_addc(b, '}');
		break;
	case JSON_ARRAY:
		sb_addc(b, '[');
		json_array_foreach(j, i, v) {
			if (i)
				sb_addc(b, ',');
			json_to_text(v, b);
		}
		sb_addc(b, ']');
		break;
	case JSON_STRING:
		sb_add_json_str(b, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		sb_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
		break;
	case JSON_REAL:
		json_add_double(b, json_real_value(j), 0);
		break;
	default:
		sb_addf(b, "%s", json_is_true(j) ? "true" : json_is_false(j) ? "false" : "null");
	}
}

json_t *json_number(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}
