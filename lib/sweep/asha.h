/* Asynchronous successive halving (ASHA, Li et al., 2018), in the form
 * that stops jobs: job j's rungs are its first evaluations at or after
 * base * eta^k steps, base being the step of its first evaluation. When a
 * job reaches rung k its value there is kept, and once at least eta jobs
 * have reached that rung, a job whose value is not among the best
 * 1/eta of them is stopped: most jobs end early, the good ones go on. */
#ifndef TS_ASHA_H
#define TS_ASHA_H

struct asha;

struct asha *asha_new(int eta, int lower_is_better);
void asha_free(struct asha *a);
/* Job's evaluation at step, of value. Returns 1 when the job should stop,
 * with the rung it reached in *rung and the best value there so far in
 * *best; 0 when it goes on (or the evaluation is no rung). */
int asha_report(struct asha *a, int job, long step, double value, int *rung, double *best);
#endif
