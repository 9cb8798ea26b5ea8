/* Each decay is a factor going from 1 to 0 after warmup, as HF's lambdas are;
 * end_ratio generalises it as lr = end + (peak - end)*factor, which is HF's
 * own formula for poly (lr_end) and for cosine with min_lr_rate. */
#include "model/schedule.h"
#include <math.h>
#include <string.h>

static const char *const decay_names[] = {"linear", "cosine", "poly", "constant"};

int decay_kind_parse(const char *name)
{
	for (int k = 0; k < (int)(sizeof decay_names / sizeof *decay_names); k++)
		if (!strcmp(name, decay_names[k]))
			return k;
	return -1;
}

const char *decay_kind_name(enum decay_kind kind)
{
	return decay_names[kind];
}

long warmup_steps_from(double warmup, long total_steps)
{
	/* HF computes ceil(total*ratio) in double: 100*0.07 gives 8 steps, and so do we. */
	return warmup < 1 ? (long)ceil(total_steps * warmup) : (long)warmup;
}

/* The decay factor of a step past warmup: 1 going to 0 at total_steps, and 0
 * after (HF's cosine would climb back up). Linear is HF's (total - step)/span,
 * not 1 - progress, to round as HF does. */
static double decay_factor(const struct schedule *s, double step)
{
	long span = s->total_steps - s->warmup_steps;
	span = span > 1 ? span : 1;
	if (step >= s->total_steps)
		return 0;
	double progress = (double)(step - s->warmup_steps) / span;
	if (s->decay == DECAY_LINEAR)
		return (s->total_steps - step) / span;
	if (s->decay == DECAY_COSINE)
		return 0.5 * (1 + cos(M_PI * progress));
	return pow(1 - progress, s->power);   /* DECAY_POLY; constant never decays */
}

double schedule_lr(const struct schedule *s, double step)
{
	if (step < s->warmup_steps)
		return s->peak_lr * (step / s->warmup_steps);
	if (s->decay == DECAY_CONSTANT)
		return s->peak_lr;
	double end = s->end_ratio * s->peak_lr;
	return end + (s->peak_lr - end) * decay_factor(s, step);
}
