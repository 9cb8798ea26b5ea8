/* Learning-rate schedules: linear warmup from 0 to the peak, then a decay
 * toward end_ratio*peak. With end_ratio 0 they are Hugging Face's
 * get_{linear,cosine,polynomial_decay,constant}_schedule_with_warmup. */
#ifndef TS_SCHEDULE_H
#define TS_SCHEDULE_H

enum decay_kind { DECAY_LINEAR, DECAY_COSINE, DECAY_POLY, DECAY_CONSTANT };

struct schedule {
	double peak_lr;
	long total_steps, warmup_steps;
	enum decay_kind decay;
	double end_ratio;   /* the lr decays to end_ratio*peak_lr (not constant) */
	double power;       /* poly only; HF's default is 1 */
};

/* "linear", "cosine", "poly" or "constant" as an enum decay_kind; -1 otherwise. */
int decay_kind_parse(const char *name);
const char *decay_kind_name(enum decay_kind kind);

/* Warmup steps from a --warmup value: a ratio of total_steps when below 1
 * (rounded up, as HF's TrainingArguments), else a number of steps. */
long warmup_steps_from(double warmup, long total_steps);

/* The lr at schedule position `step` (0-based optimizer steps, a fraction
 * between them where a resumed run's pace is not 1), as HF's LambdaLR gives
 * it at whole steps; past total_steps it stays at the end value. */
double schedule_lr(const struct schedule *s, double step);
#endif
