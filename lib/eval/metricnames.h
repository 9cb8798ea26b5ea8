/* The names of the metrics: which task scores which, which way is better,
 * which best/ follows by default, and where each lies in an evaluation's
 * JSON (evaluate.h's eval_json), for the commands that read evaluations
 * back without evaluating (ts-sweep, ts-top). */
#ifndef TS_METRICNAMES_H
#define TS_METRICNAMES_H
#include "model/bert.h"
#include <jansson.h>

/* Metric names: loss, ppl (e to the loss: every task but reg); accuracy,
 * macro-f1 (cls); micro-f1, macro-f1, exact-match (multi); pearson,
 * spearman (reg); entity-f1, accuracy (tokcls). */
int metric_known(const char *name, enum bert_task task);
int metric_higher_is_better(const char *name);
/* The metric best/ follows when none is given. */
const char *metric_default(enum bert_task task);
/* Where metric name (one of the above, or mcc) lies in eval_json's object:
 * its keys from the top, NULL-terminated ({"entities", "micro", "f1"});
 * NULL for a name no task has. */
const char *const *metric_path(const char *name);
/* The task whose evaluation eval_json made j (told by the keys only that
 * task's has). */
enum bert_task eval_json_task(const json_t *j);
#endif
