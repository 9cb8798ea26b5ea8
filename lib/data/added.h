/* tokenizer.json's added tokens, found in text as HF's AddedVocabulary
 * finds them: the leftmost match and of those the longest, a single_word
 * token only between non-word characters, lstrip and rstrip taking the
 * spaces beside a match into it. */
#ifndef TS_ADDED_H
#define TS_ADDED_H
#include <stddef.h>
#include <stdint.h>

struct added;

struct added_match {
	size_t start, end;
	int32_t id;
};

struct added *added_new(void);
void added_free(struct added *a);
/* Adds a token of n > 0 bytes; a content added twice keeps its last id.
 * The tokens are all added before added_freeze, and found after it. */
void added_add(struct added *a, const char *content, size_t n, int32_t id, int lstrip, int rstrip, int single_word);
void added_freeze(struct added *a);
int added_empty(const struct added *a);
/* The matches in s[0..n) (valid UTF-8), in order, into *m (grown; *cap its
 * room); returns how many. */
size_t added_find(const struct added *a, const char *s, size_t n, struct added_match **m, size_t *cap);
#endif
