/* Label names to class ids: in order of first appearance, or fixed by a
 * file of names (one per line, id = line order). */
#ifndef TS_LABELMAP_H
#define TS_LABELMAP_H
#include <stddef.h>
#include <stdint.h>

struct labelmap;
struct labelmap *labelmap_new(void);
/* Dies on a duplicate or empty name, or one with a NUL byte or not in
 * UTF-8, naming the file and line. */
struct labelmap *labelmap_load(const char *path);
/* The id of name; a new name gets the next id, unless the map came from a
 * file: then it is an error naming file and line, as is a new name with a
 * NUL byte or not in UTF-8, or one after class numbers (labelmap_class):
 * without a file, what the numbers name is unknown. */
int32_t labelmap_id(struct labelmap *m, const char *name, size_t n, const char *file, uint64_t line);
/* A class id (0 or more) given as a number; when the map came from a file
 * it must have a name there, and when not, no name may have come before
 * it; else it is an error naming file and line. */
int32_t labelmap_class(struct labelmap *m, long id, const char *file, uint64_t line);
/* The id of name, or -1 if the map lacks it. */
int32_t labelmap_find(const struct labelmap *m, const char *name, size_t n);
/* The names in id order (owned by the map). */
void labelmap_names(const struct labelmap *m, char ***names, int *n);
void labelmap_free(struct labelmap *m);

/* Whether names are LABEL_0, LABEL_1, ...: transformers' for classes it
 * was never told the names of, which name nothing. */
int labels_unnamed(char *const *names, int n);
/* Why a model's class names cannot score or teach the data's: "its labels
 * (a, b) are not the data's (b, a), in that order" (malloc'd); NULL when
 * they are the same list or either side names nothing (no names, or a
 * model's LABEL_0, LABEL_1, ... as transformers names classes it was never
 * told). */
char *labels_disagree(char *const *model, int nmodel, char *const *data, int ndata);
/* Which class names one side has and the other lacks: "it has no x, y;
 * the data has no a" (malloc'd, ten names of each at most); NULL when
 * each has all the other's or either names nothing (as labels_disagree). */
char *labels_missing(char *const *model, int nmodel, char *const *data, int ndata);
/* How the data's class ids become the model's, by name: to[d] is the
 * model's id of the data's class d (d itself where either side names
 * nothing, as labels_disagree). Returns NULL, or why not (malloc'd): "it
 * knows no class a, b of the data's (its labels: c, d)". */
char *labels_map(char *const *model, int nmodel, char *const *data, int ndata, int32_t *to);
/* One numbering for the classes of several streams: the names of
 * names[0..n) that *acc (of *nacc, malloc'd) lacks are added at its end,
 * and to[i] becomes the id of names[i] there. */
void labels_union(char ***acc, int *nacc, char *const *names, int n, int32_t *to);
/* Whether want names the classes of have in another order; then want[i]
 * is have[from[i]]. */
int labels_reordered(char *const *have, int nhave, char *const *want, int nwant, int *from);
#endif
