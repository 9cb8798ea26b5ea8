/* Evaluation of a model over a split: loss, and for cls the confusion
 * matrix; batches go in order of length for speed, and a hook sees the
 * logits of each batch (for predictions). */
#ifndef TS_EVALUATE_H
#define TS_EVALUATE_H
#include "batcher.h"
#include "metrics.h"
#include <jansson.h>

struct eval_result {
	double loss;              /* mean over predicted items */
	int64_t count;            /* predicted items */
	int64_t records;
	struct confusion *conf;   /* cls only */
};

/* logits: cls B*L; mlm one row of V per predicted position, row-major. */
typedef void (*eval_hook)(const struct batch *b, const float *logits, void *ctx);

/* How the processes of a run share an evaluation: process part of parts
 * evaluates every parts-th batch from batch part on, and sum adds v[0..n)
 * over all of them, so that each gets the result of all. */
struct eval_share {
	int part, parts;
	void (*sum)(const void *ctx, double *v, int n);
	const void *ctx;
};

/* MLM masks are drawn from a fixed epoch so every evaluation sees the same.
 * share NULL: this process evaluates it all. */
void evaluate(struct bert *m, const struct batch_source *src, int batch_size, const struct eval_share *share,
	      eval_hook hook, void *ctx, struct eval_result *out);
void eval_result_free(struct eval_result *r);

/* Metric names: accuracy, macro-f1 (cls), loss, ppl. */
int metric_known(const char *name, enum bert_task task);
int metric_higher_is_better(const char *name);
double metric_value(const struct eval_result *r, const char *name);
/* Everything as one JSON object: loss and ppl, and for cls all metrics
 * and the confusion matrix by label name. */
json_t *eval_json(const struct eval_result *r, enum bert_task task, char *const *labels);
#endif
