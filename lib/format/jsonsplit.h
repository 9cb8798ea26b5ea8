/* Reading a large JSON text on two threads. Most of a tokenizer.json is
 * one value, its model's vocab (XLM-R's 250,002 pieces: 16 of its 17 MB),
 * which jansson reads on one core. Here the members of that value are cut
 * into two runs near its middle, one read on a second thread while the
 * first reads the rest of the text and the other run, and joined into the
 * tree the rest makes: the tree json_loadb gives, in the same order.
 * Where anything is amiss (no such value, a text that is not JSON, a key
 * twice, an integer beyond 64 bits) the text is read whole by
 * json_loadb_wide (format/jsonwide.h), for its own answer. */
#ifndef TS_JSONSPLIT_H
#define TS_JSONSPLIT_H
#include <jansson.h>

/* json_loadb_wide(text, n, flags, err), the value at the root's member outer's
 * member inner read in two halves; *halved (where not NULL) says whether
 * it was. The calling thread's JSON arena (format/jsonarena.h) must be
 * open: the second thread's values join it. */
json_t *json_loadb_halves(const char *text, size_t n, size_t flags, const char *outer, const char *inner,
			  json_error_t *err, int *halved);
#endif
