/* exp_approx, the vectorised exp under softmax, GELU and cross-entropy: a NaN
 * must come out as NaN (the trainer's NaN check depends on it) without the
 * undefined NaN-to-int conversion that make test SAN=1 reports. */
#include "backend/cpu_ops.h"
#include "backend/cpu_simd.h"
#include "check.h"
#include <math.h>

int main(void)
{
	CHECK(isnan(exp_approx(NAN)), "exp_approx(NaN) is NaN");
	CHECK(isnan(exp_approx(-NAN)), "exp_approx(-NaN) is NaN");
	CHECK(isfinite(exp_approx(INFINITY)) && exp_approx(INFINITY) > 1e38f,
	      "exp_approx(inf) clamps to a huge finite value");
	CHECK(exp_approx(-INFINITY) >= 0.0f && exp_approx(-INFINITY) < 1e-37f,
	      "exp_approx(-inf) clamps to a tiny value");
	double worst = 0;
	for (float x = -80.0f; x <= 80.0f; x += 0.37f)
		worst = fmax(worst, fabs(exp_approx(x) / exp(x) - 1.0));
	CHECK(worst < 1e-6, "exp_approx within 1e-6 relative of exp on [-80, 80] (worst %.2g)", worst);

	CHECK(isnan(gelu(NAN)), "gelu(NaN) is NaN");
	float logits[2][4] = {{1, 2, NAN, 0}, {0.5f, -1, 2, 3}}, lse[2];
	int32_t labels[2] = {1, 3};
	double loss = crossentropy_forward(lse, &logits[0][0], labels, 2, 4, 0);
	CHECK(isnan(lse[0]) && isfinite(lse[1]), "a NaN logit makes its row's log-sum-exp NaN, only its row's");
	CHECK(isnan(loss), "and the loss NaN");
	CHECK_DONE();
}
