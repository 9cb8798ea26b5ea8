/* Text records for ts-tokenize from CSV, TSV, JSON lines, plain lines or
 * CoNLL: the text (or its words), an optional text pair, label and id, by
 * column or field name. CoNLL holds a word a line, its tag in the last of
 * two or more columns split by blanks, and a blank line after a sentence;
 * -DOCSTART- lines are skipped. */
#ifndef TS_TOKINPUT_H
#define TS_TOKINPUT_H
#include <stddef.h>
#include <stdint.h>

enum in_format { FMT_CSV, FMT_TSV, FMT_JSONL, FMT_LINES, FMT_CONLL };

/* The fields wanted (NULL: not wanted); numeric: the label is a number (a
 * regression target) whether it is written as text or as an integer. */
struct in_cols {
	const char *text, *pair, *label, *id;
	int numeric;
};

/* IN_LABEL_NAMES: a list of names (the classes of a record, or the tags
 * of its words). */
enum in_label { IN_LABEL_NONE, IN_LABEL_STR, IN_LABEL_INT, IN_LABEL_FLOAT, IN_LABEL_LIST, IN_LABEL_NAMES };

struct in_str {
	const char *s;
	size_t n;
};

struct in_record {
	const char *text, *pair, *id, *label;   /* pair, id: NULL when absent */
	size_t text_n, pair_n, id_n, label_n;
	const struct in_str *words;             /* the text as words (CoNLL, a JSON list) */
	size_t nwords;
	int is_words;                           /* whether it came so: a JSON list may be empty */
	int id_is_num;
	enum in_label label_kind;
	long label_int;
	double label_float;
	const long *label_list;
	const struct in_str *label_names;
	size_t label_list_n;                    /* of label_list or label_names */
	uint64_t line;                          /* where the record began */
	size_t bad_utf8;                        /* JSON lines: invalid UTF-8 replaced by U+FFFD */
};

/* Format from a file name's extension, or -1 when it has none we know. */
int format_from_name(const char *path);
int format_parse(const char *name);   /* "csv", "tsv", "jsonl", "lines", "conll"; -1 if none */

struct tokinput;
struct tokinput *tokinput_open(const char *path, enum in_format fmt, const struct in_cols *cols);
/* The next record; 0 at the end. Fields stay valid until the next call. */
int tokinput_next(struct tokinput *in, struct in_record *r);
uint64_t tokinput_offset(const struct tokinput *in);   /* bytes consumed, for progress */
const char *tokinput_name(const struct tokinput *in);
void tokinput_close(struct tokinput *in);
#endif
