/* Entity-level scores of token classification with seqeval's default
 * (lenient) rules: a tag's first character is its prefix (B, I, E, S or
 * anything else, O outside), the rest after a '-' its entity type; chunks
 * start and end as seqeval's get_entities decides, and an entity counts as
 * found when its type, first and last word match the truth's. */
#ifndef TS_ENTITIES_H
#define TS_ENTITIES_H
#include "eval/metrics.h"
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

struct entities {
	int k;                 /* tag classes */
	int ntypes;
	char **types;          /* the classes' types ("_" for O), sorted */
	int *type_of;          /* per class, and at k an O: its type */
	char *prefix;          /* the same: the first character of its name */
	int64_t *truth, *pred, *correct;   /* per type */
};

/* The tags' classes are named by names[0..k) (NULL: "0", "1", ...). */
struct entities *entities_new(char *const *names, int k);
/* Counts the entities of one sequence of n words' true and predicted classes. */
void entities_add(struct entities *e, const int32_t *truth, const int32_t *pred, int n);
/* The counts as 3 * ntypes doubles and back, to sum them over processes. */
void entities_to_doubles(const struct entities *e, double *v);
void entities_from_doubles(struct entities *e, const double *v);
/* Scores over the types that were true or predicted, as seqeval reports them. */
struct prf_table *entities_table(const struct entities *e, char ***type_names);
void entities_free(struct entities *e);
#endif
