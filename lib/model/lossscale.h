/* fp16's dynamic loss scaling (as PyTorch's GradScaler and NVIDIA's apex
 * do it): the loss is multiplied by the scale before the backward, so that
 * small gradients do not vanish below fp16's range; the gradient is divided
 * by it again before the optimizer. A step whose gradient overflowed is
 * skipped and the scale halved; after LOSS_SCALE_WINDOW steps in a row
 * taken, it doubles, up to LOSS_SCALE_MAX. */
#ifndef TS_LOSSSCALE_H
#define TS_LOSSSCALE_H

enum { LOSS_SCALE_WINDOW = 2000 };
#define LOSS_SCALE_INIT 65536.0       /* 2^16 */
#define LOSS_SCALE_MAX 16777216.0     /* 2^24 */

struct loss_scale {
	double scale;   /* a power of two from 1 to LOSS_SCALE_MAX; 0: no scaling */
	long clean;     /* steps taken since the scale last changed */
};

enum scale_verdict {
	SCALE_TAKE,     /* finite: the step is taken */
	SCALE_HALVED,   /* overflowed: skipped, the scale halved */
	SCALE_FLOOR,    /* not finite at scale 1: the step's own fault, as in fp32 */
};

/* After a step whose scaled gradient was finite or not. */
enum scale_verdict loss_scale_update(struct loss_scale *s, int finite);
#endif
