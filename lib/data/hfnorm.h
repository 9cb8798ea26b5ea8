/* tokenizer.json's normalizers: NFC, NFD, NFKC, NFKD, Lowercase,
 * StripAccents, Strip, Replace, Prepend and Sequence, as HF tokenizers
 * applies them (the text only: TopSpin keeps no offsets). */
#ifndef TS_HFNORM_H
#define TS_HFNORM_H
#include "data/tjson.h"
#include "util/strbuf.h"

struct hfnorm;
struct hfnorm_space;   /* a thread's buffers */

/* The normalizer j (NULL or JSON null: none); dies naming what it cannot do. */
struct hfnorm *hfnorm_new(const struct tjwhere *w, json_t *j);
void hfnorm_free(struct hfnorm *n);
/* Whether one of its steps lowercases. */
int hfnorm_lowercases(const struct hfnorm *nm);
struct hfnorm_space *hfnorm_space_new(void);
void hfnorm_space_free(struct hfnorm_space *s);
/* s[0..n) (valid UTF-8) normalized; *len its length. Valid until the next
 * call with the same space; s itself where nothing changes it. */
const char *hfnorm_run(const struct hfnorm *nm, struct hfnorm_space *sp, const char *s, size_t n, size_t *len);
#endif
