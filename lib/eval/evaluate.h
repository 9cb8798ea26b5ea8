/* Evaluation of a model over a split: the loss, and what each task scores:
 * the confusion matrix of cls (by record) and tokcls (by word, with the
 * entities of its tags), the predictions of reg, the per-class counts of
 * multi at a threshold. Batches go in order of length for speed, and a hook
 * sees the logits of each batch (for predictions). */
#ifndef TS_EVALUATE_H
#define TS_EVALUATE_H
#include "eval/entities.h"
#include "eval/metricnames.h"
#include "eval/metrics.h"
#include "model/batcher.h"
#include <jansson.h>

struct eval_result {
	enum bert_task task;
	double loss;              /* mean over predicted items */
	int64_t count;            /* predicted items */
	int64_t records;
	struct confusion *conf;   /* cls, tokcls */
	struct entities *ent;     /* tokcls */
	double *pred, *truth;     /* reg: by record, in the split's order */
	int L;                    /* multi: classes */
	double threshold;         /* multi: a class is predicted at this probability */
	int64_t *tp, *fp, *fn;    /* multi: per class */
	int64_t exact;            /* multi: records with every class right */
};

/* logits: a row of bert_logit_width per predicted item (bert_logits). */
typedef void (*eval_hook)(const struct batch *b, const float *logits, void *ctx);

/* How the processes of a run share an evaluation: process part of parts
 * evaluates every parts-th batch from batch part on, and sum adds v[0..n)
 * over all of them, so that each gets the result of all. */
struct eval_share {
	int part, parts;
	void (*sum)(const void *ctx, double *v, int n);
	const void *ctx;
};

struct eval_opts {
	int batch;                 /* records a batch */
	double threshold;          /* multi */
	char *const *names;        /* class names (tokcls: the tags, whose entities are scored), or NULL */
	const struct eval_share *share;   /* NULL: this process evaluates it all */
};

/* MLM masks are drawn from a fixed epoch so every evaluation sees the same. */
void evaluate(struct bert *m, const struct batch_source *src, const struct eval_opts *o, eval_hook hook, void *ctx,
	      struct eval_result *out);
/* Whether evaluating src scores anything: false when, say, MLM masks no
 * token of any record. */
int eval_scores_any(const struct batch_source *src);
void eval_result_free(struct eval_result *r);

double metric_value(const struct eval_result *r, const char *name);
/* Everything as one JSON object: loss and ppl, and the task's metrics
 * (classes by names, NULL: by number). */
json_t *eval_json(const struct eval_result *r, char *const *names);
/* A readable report of the task's metrics. */
void eval_report(FILE *f, const struct eval_result *r, char *const *names);
#endif
