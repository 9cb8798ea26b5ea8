/* fp16's loss scale: halved on an overflow, doubled after 2000 steps taken
 * in a row, kept within 1 and 2^24, and an overflow at 1 the step's own. */
#include "check.h"
#include "model/lossscale.h"

static void test_grow(void)
{
	struct loss_scale s = { LOSS_SCALE_INIT, 0 };
	int taken = 1;
	for (int i = 0; i < LOSS_SCALE_WINDOW - 1; i++)
		taken &= loss_scale_update(&s, 1) == SCALE_TAKE;
	CHECK(taken && s.scale == LOSS_SCALE_INIT && s.clean == LOSS_SCALE_WINDOW - 1,
	      "1999 clean steps taken, the scale as it was (%g, %ld clean)", s.scale, s.clean);
	CHECK(loss_scale_update(&s, 1) == SCALE_TAKE && s.scale == 2 * LOSS_SCALE_INIT && s.clean == 0,
	      "the 2000th doubles it (%g) and counts again", s.scale);
}

static void test_overflow(void)
{
	struct loss_scale s = { LOSS_SCALE_INIT, 1500 };
	CHECK(loss_scale_update(&s, 0) == SCALE_HALVED && s.scale == LOSS_SCALE_INIT / 2 && s.clean == 0,
	      "an overflow: skipped, the scale halved (%g), the clean count reset", s.scale);
	for (int i = 0; i < LOSS_SCALE_WINDOW - 1; i++)
		loss_scale_update(&s, 1);
	CHECK(s.scale == LOSS_SCALE_INIT / 2, "1999 clean steps after it: not grown yet (%g)", s.scale);
	loss_scale_update(&s, 1);
	CHECK(s.scale == LOSS_SCALE_INIT, "2000: grown back (%g)", s.scale);
}

static void test_bounds(void)
{
	struct loss_scale s = { 2, 0 };
	CHECK(loss_scale_update(&s, 0) == SCALE_HALVED && s.scale == 1, "2 halves to 1");
	CHECK(loss_scale_update(&s, 0) == SCALE_FLOOR && s.scale == 1,
	      "an overflow at 1: the step's own, the scale stays 1");
	s = (struct loss_scale){ LOSS_SCALE_MAX, 0 };
	for (int i = 0; i < 3 * LOSS_SCALE_WINDOW; i++)
		loss_scale_update(&s, 1);
	CHECK(s.scale == LOSS_SCALE_MAX, "never past 2^24 (%g)", s.scale);
	s = (struct loss_scale){ 1, 0 };
	int halvings = 0;
	for (int i = 0; i < 30 * LOSS_SCALE_WINDOW; i++)
		halvings += loss_scale_update(&s, i % 3 != 0) == SCALE_HALVED;
	CHECK(s.scale >= 1 && s.scale <= 2 && halvings == 0,
	      "an overflow every third step from 1: never below 1, never grown (%g)", s.scale);
}

int main(void)
{
	test_grow();
	test_overflow();
	test_bounds();
	CHECK_DONE();
}
