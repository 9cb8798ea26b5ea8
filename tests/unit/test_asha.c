/* ASHA (lib/sweep/asha.c), as ts-sweep --asha uses it: which evaluations are
 * rungs (the first at or after base * eta^k), who is stopped at a rung (not
 * among the best 1/eta of those that reached it, once eta have), the best
 * value it reports, both directions of better, and the reports it ignores. */
#include "check.h"
#include "sweep/asha.h"

/* Job's report; returns whether it stops, with the rung it reached and the
 * best there in *rung and *best (-1 and NAN where it reached none). */
static int report(struct asha *a, int job, long step, double value, int *rung, double *best)
{
	*rung = -1, *best = NAN;
	return asha_report(a, job, step, value, rung, best);
}

static void test_rungs(void)
{
	struct asha *a = asha_new(3, 0);   /* higher is better */
	int rung;
	double best;
	CHECK(!report(a, 0, 10, 0.5, &rung, &best) && !report(a, 1, 10, 0.7, &rung, &best),
	      "eta 3: the first two at rung 0 go on, fewer than eta there");
	CHECK(!report(a, 2, 10, 0.9, &rung, &best), "the third, the best of three, goes on");
	CHECK(report(a, 3, 10, 0.6, &rung, &best) && rung == 0 && best == 0.9,
	      "a fourth behind two of four is stopped at rung 0, the best there 0.9 (rung %d, best %g)",
	      rung, best);
	CHECK(!report(a, 2, 20, 0.1, &rung, &best), "step 20 of a job based at 10: no rung (the next is 30)");
	CHECK(!report(a, 2, 35, 0.9, &rung, &best), "step 35: its first evaluation at or after 30, rung 1, goes on");
	CHECK(!report(a, 1, 30, 0.95, &rung, &best) && !report(a, 0, 30, 0.99, &rung, &best),
	      "rung 1: the second and third there, better than the first, go on");
	CHECK(report(a, 1, 90, 0.2, &rung, &best) == 0 && report(a, 0, 90, 0.3, &rung, &best) == 0,
	      "rung 2 (step 90): fewer than eta there, both go on");
	CHECK(report(a, 2, 90, 0.25, &rung, &best) && rung == 2 && best == 0.3,
	      "the third at rung 2, behind one of three, is stopped (rung %d, best %g)", rung, best);
	asha_free(a);
}

static void test_lower_is_better(void)
{
	struct asha *a = asha_new(2, 1);
	int rung;
	double best;
	CHECK(!report(a, 0, 5, 2.0, &rung, &best), "eta 2, lower is better: the first goes on");
	CHECK(!report(a, 1, 5, 1.0, &rung, &best), "a lower loss goes on");
	CHECK(report(a, 2, 5, 3.0, &rung, &best) && rung == 0 && best == 1.0,
	      "a higher loss, behind both, is stopped; the best is the lowest (best %g)", best);
	asha_free(a);
}

/* Jobs reaching rung 0 in the order of their values, worst first or best
 * first: how many of nine are stopped there. */
static int stopped_of_nine(int best_first)
{
	struct asha *a = asha_new(3, 0);
	int rung, n = 0;
	double best;
	for (int j = 0; j < 9; j++)
		n += report(a, j, 100, best_first ? 9 - j : j + 1, &rung, &best);
	asha_free(a);
	return n;
}

static void test_order(void)
{
	CHECK(stopped_of_nine(0) == 0, "each better than all before it: none stopped (%d)", stopped_of_nine(0));
	CHECK(stopped_of_nine(1) == 7, "each worse than all before it: all but the first two stopped (%d)",
	      stopped_of_nine(1));
}

static void test_ignored(void)
{
	struct asha *a = asha_new(2, 0);
	int rung;
	double best;
	CHECK(!report(a, -1, 10, 1.0, &rung, &best), "a negative job is ignored");
	CHECK(!report(a, 0, 10, NAN, &rung, &best) && !report(a, 0, 10, INFINITY, &rung, &best),
	      "a value that is not finite is ignored");
	CHECK(!report(a, 0, 10, 0.5, &rung, &best), "then the job's first real value is its rung 0, which it has alone");
	CHECK(!report(a, 1, 0, 0.1, &rung, &best) && rung == -1,
	      "an evaluation at step 0 is no rung: the job's rungs count from step 1 (rung %d)", rung);
	CHECK(report(a, 1, 1, 0.1, &rung, &best) && rung == 0 && best == 0.5,
	      "its evaluation at step 1 is rung 0, behind the one other there: stopped (rung %d, best %g)",
	      rung, best);
	CHECK(!report(a, 100, 10, 0.9, &rung, &best) && rung == 0 && best == 0.9,
	      "job 100, far past the others' numbers: rung 0, the best there, goes on (rung %d, best %g)",
	      rung, best);
	asha_free(a);
}

int main(void)
{
	test_rungs();
	test_lower_is_better();
	test_order();
	test_ignored();
	CHECK_DONE();
}
