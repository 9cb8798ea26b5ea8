/* ByteLevel's pre-tokenizing split, GPT-2's regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * as a scanner: what the regex matches, several times faster than a regex
 * engine runs it. tests/unit/test_gpt2split.c holds it to PCRE2's matches of
 * that regex. */
#ifndef TS_GPT2SPLIT_H
#define TS_GPT2SPLIT_H
#include <stddef.h>

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* The end of the match that starts at s[i] (i < n; s valid UTF-8). The
 * matches cover the text: the next starts where this one ends. */
size_t gpt2_match(const char *s, size_t n, size_t i);
#endif
