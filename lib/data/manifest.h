/* The manifest of a data dir (DIR/manifest.json): what the shards hold and
 * how they were made. ts-shard writes it; ts-train and ts-eval read it.
 *
 * {"format": "topspin-data", "version": 1, "vocab_sha256": "..." or null,
 *  "labels": [names], "label_kind": "none"|"int"|"list"|"float",
 *  "max_len": N or null, "lower": bool, "seed": N, "dedupe": bool,
 *  "records_in": N, "duplicates_dropped": N, "records_left_out": N,
 *  "splits": {"train": {"file": "train.shard", "count": N, "tokens": N,
 *             "max_tokens": N, "max_id": N, "label_counts": {"ham": N, ...},
 *             "length_hist": [[upper_bound, count], ...]}, ...}}
 *
 * label_counts (int and list labels only) are keyed by label name where the
 * id has one, else by the id in decimal. max_id is the largest token id (absent
 * in manifests written before it was kept). length_hist has one entry per
 * non-empty power-of-two bin: records with upper/2 < tokens <= upper. */
#ifndef TS_MANIFEST_H
#define TS_MANIFEST_H
#include "data/tokrec.h"
#include <stdint.h>

enum { MANIFEST_VERSION = 1, MANIFEST_HIST_BINS = 33 };

struct label_count {
	int32_t label;
	uint64_t count;
};

struct manifest_split {
	char *name;
	char *file;                   /* relative to the data dir */
	uint64_t count, tokens;
	uint32_t max_tokens;
	int64_t max_id;                             /* -1 when unknown */
	uint64_t length_hist[MANIFEST_HIST_BINS];   /* [k]: upper bound 2^k */
	struct label_count *label_counts;           /* in order of first count */
	size_t nlabel_counts, cap_label_counts;
	size_t *slot, nslots;                       /* hash index into label_counts: entry + 1, 0 empty */
};

struct manifest {
	char *vocab_sha256;           /* NULL when unknown */
	char **labels;                /* label names in id order; NULL when none */
	int nlabels;
	enum label_kind label_kind;
	long max_len;                 /* 0 when unknown */
	int lower;
	long seed;
	int dedupe;
	uint64_t records_in, duplicates_dropped, records_left_out;
	struct manifest_split *splits;
	int nsplits;
};

/* Whether the data's text was lowercased: 1, 0, or -1 where its tokenizer
 * is not known (records made from ids, without a vocab's hash). */
int manifest_lower(const struct manifest *m);
/* Counts one record into a split's statistics. */
void manifest_split_add(struct manifest_split *sp, const struct tokrec *t);
/* Count of one label in a split (0 if never seen). */
uint64_t manifest_label_count(const struct manifest_split *sp, int32_t label);
/* Dies when the split of data dir dir holds token ids of vocab or more, where
 * the manifest knows. */
void manifest_check_ids(const char *dir, const struct manifest_split *sp, int32_t vocab);
/* Writes dir/manifest.json atomically. */
void manifest_write(const char *dir, const struct manifest *m);
/* Reads dir/manifest.json; dies naming the file when it is missing or invalid. */
struct manifest *manifest_read(const char *dir);
/* The split of that name, or NULL. */
const struct manifest_split *manifest_split(const struct manifest *m, const char *name);
/* dir/file of a split's shard (free it). */
char *manifest_shard_path(const char *dir, const struct manifest_split *sp);
/* Frees m (allocated with malloc) and everything it points to. */
void manifest_free(struct manifest *m);
#endif
