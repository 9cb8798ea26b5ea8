/* Token records and the stream header that describes them (ts-tokenize(1), OUTPUT). */
#ifndef TS_TOKREC_H
#define TS_TOKREC_H
#include "data/special.h"
#include "format/rec.h"

/* A stream header: the first map of a stream may carry "kind". */
struct stream_header {
	char *kind;              /* "tokens" */
	int version;
	char *vocab_sha256;      /* hex, or NULL */
	char *vocab_file;        /* absolute path of that vocab, or NULL: where ts-shard finds it */
	char *tokenizer;         /* what the vocab is: NULL for a WordPiece vocab.txt, "tokenizer.json" */
	char *model;             /* a tokenizer.json's model: "BPE", "Unigram", "WordPiece" */
	int32_t special[VOCAB_NSPECIAL];   /* a tokenizer.json's special ids, -1 where it has none */
	char **labels;           /* label names in id order */
	int nlabels;
	long max_len;
	int lower;               /* lowercasing on */
};
void header_pack(msgpack_packer *pk, const struct stream_header *h);
/* Returns 1 and fills h if o is a header map, 0 if it is a plain record. */
int header_unpack(const struct rec_reader *r, const msgpack_object *o, struct stream_header *h);
void header_free(struct stream_header *h);
/* The index of the first label name that repeats an earlier one, or -1: a
 * name must say which class it is. */
int labels_repeat(char *const *names, int n);
/* Streams read together must agree. Takes header h of stream r into acc
 * (*from names the stream acc's first header came from, NULL before any):
 * what acc lacks comes from h, and another vocab or other lowercasing is an
 * error naming both streams. The label names are the caller's: each
 * stream numbers its own (labels_union makes one numbering of them). */
void header_merge(struct stream_header *acc, char **from, const struct rec_reader *r, struct stream_header *h);

enum label_kind { LABEL_NONE, LABEL_INT, LABEL_LIST, LABEL_FLOAT };

/* A list label holds classes, or for token classification a tag per token:
 * a class where a word starts, TAG_UNKNOWN where one starts without a tag,
 * TAG_NONE where none starts. */
enum { TAG_NONE = -100, TAG_UNKNOWN = -1 };

/* A token record. Pointers from tokrec_unpack point into reused buffers owned
 * by the record; they stay valid until the next unpack into it. */
struct tokrec {
	char *id;                /* text of the id */
	int id_is_num;           /* pack the id as an integer */
	int32_t *ids;
	uint8_t *types;          /* NULL when the record has no type ids */
	size_t n;
	enum label_kind label_kind;
	int32_t label;
	double flabel;
	int32_t *labels;         /* LABEL_LIST */
	size_t nlabels;
	int fold;                /* piece index, -1 when not folded */
	uint8_t *types_buf;      /* storage behind types */
	size_t cap_ids, cap_types, cap_labels, cap_id;
	uint64_t unpacked;       /* records unpacked into it: the id of the next if it has none */
};
void tokrec_pack(msgpack_packer *pk, const struct tokrec *t);
void tokrec_unpack(const struct rec_reader *r, const msgpack_object *o, struct tokrec *t);
void tokrec_free(struct tokrec *t);

/* Streams read together under one numbering of their classes: the names
 * of each header join the union (labels_union), and the records after it
 * are renumbered. Records before a stream's first header, or under a
 * header without names, keep their numbers. */
struct label_union {
	char **names;            /* the union, in order of first appearance */
	int n;
	int32_t *to;             /* the current header's ids in the union */
	int nto;                 /* 0: the records now read have no names */
};
/* A new stream starts: no names until its header. */
void label_union_stream(struct label_union *u);
void label_union_header(struct label_union *u, const struct stream_header *h);
/* Renumbers t, read from r; a class beyond its header's names is an error
 * naming r's record. Returns whether t had names to go by. */
int label_union_record(const struct label_union *u, const struct rec_reader *r, struct tokrec *t);
void label_union_free(struct label_union *u);
/* The classes of t's label, *n of them: its class, or its list (with a
 * token classifier's tags); none for a float label or none. */
int32_t *tokrec_classes(struct tokrec *t, size_t *n);
/* Makes each class c (0 <= c < n) of t's label to[c]; tags that are no
 * class stay, and so does a class beyond n, for the head's check to name. */
void tokrec_relabel(struct tokrec *t, const int32_t *to, int n);
/* Sets the id text (len bytes); is_num packs it as an integer. */
void tokrec_set_id(struct tokrec *t, const char *id, size_t len, int is_num);
#endif
