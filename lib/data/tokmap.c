#include "data/tokmap.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

void tokmap_read(const struct tjwhere *w, json_t *vocab, struct tokmap *m)
{
	if (!json_is_object(vocab))
		tj_die(w, "\"vocab\" is not an object of tokens and their ids");
	m->ids = strmap_new(json_object_size(vocab));
	const char *tok;
	json_t *v;
	json_object_foreach(vocab, tok, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TOKMAP_MAX_ID)
			tj_die(w, "vocab: the id of '%s' is not a whole number in 0..%d", tok, TOKMAP_MAX_ID - 1);
		if (json_integer_value(v) >= m->size)
			m->size = (int32_t)json_integer_value(v) + 1;
	}
	m->at = xcalloc((size_t)(m->size ? m->size : 1), sizeof *m->at);
	json_object_foreach(vocab, tok, v) {
		int32_t id = (int32_t)json_integer_value(v);
		if (m->at[id])
			tj_die(w, "vocab: '%s' and '%s' have the same id %d", m->text.s + m->at[id] - 1, tok, id);
		m->at[id] = (uint32_t)m->text.n + 1;
		size_t n = strlen(tok);
		sb_add(&m->text, tok, n + 1);
		strmap_put(m->ids, tok, n, id);
	}
}

void tokmap_free(struct tokmap *m)
{
	strmap_free(m->ids);
	sb_free(&m->text);
	free(m->at);
}
