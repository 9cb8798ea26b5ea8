/* The special tokens a model needs, whatever its tokenizer calls them. */
#ifndef TS_SPECIAL_H
#define TS_SPECIAL_H

enum vocab_special { VOCAB_PAD, VOCAB_UNK, VOCAB_CLS, VOCAB_SEP, VOCAB_MASK, VOCAB_NSPECIAL };
#endif
