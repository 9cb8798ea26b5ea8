#include "model/lossscale.h"

enum scale_verdict loss_scale_update(struct loss_scale *s, int finite)
{
	if (!finite) {
		s->clean = 0;
		if (s->scale <= 1)
			return SCALE_FLOOR;
		s->scale /= 2;
		return SCALE_HALVED;
	}
	if (++s->clean >= LOSS_SCALE_WINDOW && s->scale < LOSS_SCALE_MAX) {
		s->scale *= 2;
		s->clean = 0;
	}
	return SCALE_TAKE;
}
