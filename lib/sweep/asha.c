#include "sweep/asha.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>

struct job {
	long base;        /* its first evaluation's step; 0: none yet */
	int next;         /* the rung it reaches next */
};

struct rung {
	double *v;        /* the values reached there */
	size_t n, cap;
};

struct asha {
	int eta, lower;
	struct job *jobs;
	size_t njobs;
	struct rung *rungs;
	size_t nrungs;
};

struct asha *asha_new(int eta, int lower_is_better)
{
	struct asha *a = xcalloc(1, sizeof *a);
	a->eta = eta;
	a->lower = lower_is_better;
	return a;
}

void asha_free(struct asha *a)
{
	for (size_t k = 0; k < a->nrungs; k++)
		free(a->rungs[k].v);
	free(a->rungs), free(a->jobs), free(a);
}

/* Whether x is better than y. */
static int better(const struct asha *a, double x, double y)
{
	return a->lower ? x < y : x > y;
}

int asha_report(struct asha *a, int job, long step, double value, int *rung, double *best)
{
	if (job < 0 || !isfinite(value))
		return 0;
	if ((size_t)job >= a->njobs) {
		a->jobs = xrealloc(a->jobs, ((size_t)job + 1) * sizeof *a->jobs);
		for (size_t j = a->njobs; j <= (size_t)job; j++)
			a->jobs[j] = (struct job){0, 0};
		a->njobs = (size_t)job + 1;
	}
	struct job *j = &a->jobs[job];
	if (!j->base)
		j->base = step > 0 ? step : 1;
	double at = (double)j->base * pow(a->eta, j->next);
	if ((double)step < at)
		return 0;
	int k = j->next++;
	if ((size_t)k >= a->nrungs) {
		a->rungs = xrealloc(a->rungs, ((size_t)k + 1) * sizeof *a->rungs);
		for (size_t r = a->nrungs; r <= (size_t)k; r++)
			a->rungs[r] = (struct rung){NULL, 0, 0};
		a->nrungs = (size_t)k + 1;
	}
	struct rung *r = &a->rungs[k];
	grow(&r->v, &r->cap, r->n + 1, sizeof *r->v);
	r->v[r->n++] = value;
	/* its place among the values of the rung: how many are better */
	size_t ahead = 0;
	*best = value;
	for (size_t i = 0; i < r->n; i++) {
		ahead += better(a, r->v[i], value);
		if (better(a, r->v[i], *best))
			*best = r->v[i];
	}
	*rung = k;
	size_t keep = r->n / (size_t)a->eta;
	return r->n >= (size_t)a->eta && ahead >= (keep ? keep : 1);
}
