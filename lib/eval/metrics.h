/* Classification metrics from a confusion matrix, as scikit-learn computes
 * them with labels=range(k) and zero_division=0: a class that is never
 * predicted (or never true) scores 0, and still counts in the macro mean. */
#ifndef TS_METRICS_H
#define TS_METRICS_H
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* m[truth*k + pred]: rows are the true class, columns the predicted one. */
struct confusion {
	int k;
	int64_t *m;
};

/* The class with the largest logit (the first of equals). */
int predicted_class(const float *logits, int k);
/* The probability of a multi-label class, sigmoid(logit), and whether it
 * is predicted: at least threshold. */
double class_probability(float logit);
int class_predicted(float logit, double threshold);

struct confusion *confusion_new(int k);
/* Counts one example; dies on a class outside 0..k-1. */
void confusion_add(struct confusion *c, int truth, int pred);
void confusion_free(struct confusion *c);

struct prf {
	double precision, recall, f1;
};

struct cls_metrics {
	int k;
	int64_t total;
	double accuracy;
	double mcc;                  /* multiclass Matthews correlation */
	struct prf macro;            /* the plain mean over the k classes */
	struct prf micro;            /* from summed counts: all equal accuracy */
	struct prf weighted;         /* the mean weighted by support */
	struct prf *per_class;       /* k entries */
	int64_t *support;            /* k entries: examples whose truth is the class */
};

struct cls_metrics *metrics_compute(const struct confusion *c);
void metrics_free(struct cls_metrics *m);

/* {"accuracy", "mcc", "support", "macro", "micro", "weighted" (each
 * {"precision", "recall", "f1"}), "classes": {<name>: {"precision", "recall",
 * "f1", "support"}, ...}, "labels": [<name>, ...], "confusion": [[...], ...]}.
 * names may be NULL: the classes are then called "0", "1", ... */
json_t *metrics_json(const struct cls_metrics *m, const struct confusion *c, char *const *names);

/* scikit-learn's classification_report (4 digits), a Matthews correlation
 * line, then the confusion matrix with the class names. */
void metrics_report(FILE *f, const struct cls_metrics *m, const struct confusion *c,
		    char *const *names);

/* Precision, recall and F1 of k classes that are each right or wrong on
 * their own (multi-label classes, entity types), from per class true
 * positives, predicted and true counts, with sklearn's formulas and
 * zero_division=0; micro from the summed counts, macro the plain mean,
 * weighted by support. */
struct prf_table {
	int k;
	struct prf *per_class;
	int64_t *support;
	int64_t total;               /* the summed support */
	struct prf micro, macro, weighted;
};

struct prf_table *prf_table_compute(const int64_t *tp, const int64_t *pred, const int64_t *truth, int k);
void prf_table_free(struct prf_table *t);
/* {"micro", "macro", "weighted" (each {"precision", "recall", "f1"}),
 * "classes": {<name>: {"precision", "recall", "f1", "support"}, ...}}. */
json_t *prf_table_json(const struct prf_table *t, char *const *names);
/* The table as seqeval's and sklearn's multi-label classification_report
 * print it: a line per class, then micro, macro and weighted avg. */
void prf_table_report(FILE *f, const struct prf_table *t, char *const *names);
#endif
