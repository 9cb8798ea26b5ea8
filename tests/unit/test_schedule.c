/* Learning-rate schedules against Hugging Face transformers 4.44's LambdaLR
 * schedules: warmup given as steps or as a ratio, linear/cosine/poly/constant
 * decay, with and without an end lr. Bit for bit where end_ratio is 0 (poly
 * aside: HF divides by the peak and multiplies back).
 * usage: test_schedule [FIXTURE_DIR]   (default tests/fixtures/optim, made by
 * tests/fixtures/gen-optim.py) */
#include "check.h"
#include "model/schedule.h"
#include "util/err.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *fixdir = "tests/fixtures/optim";

static double num(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

static void test_case(json_t *c)
{
	const char *decay = json_string_value(json_object_get(c, "decay"));
	double warmup = num(c, "warmup");
	struct schedule s = {
		.peak_lr = num(c, "peak_lr"), .total_steps = num(c, "total_steps"),
		.decay = decay_kind_parse(decay), .end_ratio = num(c, "end_ratio"), .power = num(c, "power"),
	};
	s.warmup_steps = warmup_steps_from(warmup, s.total_steps);
	CHECK(s.warmup_steps == num(c, "warmup_steps"), "%s: warmup %g of %ld steps is %ld steps (HF %g)",
	      decay, warmup, s.total_steps, s.warmup_steps, num(c, "warmup_steps"));
	int exact = s.end_ratio == 0 && s.decay != DECAY_POLY;
	json_t *lrs = json_object_get(c, "lrs"), *v;
	size_t step;
	char off[128] = "";
	json_array_foreach(lrs, step, v) {
		double got = schedule_lr(&s, step), want = json_number_value(v);
		if (!*off && (exact ? got != want : !close_enough(got, want, 1e-18, 1e-12)))
			snprintf(off, sizeof off, " (step %zu: %.17g, HF %.17g)", step, got, want);
	}
	CHECK(!*off, "%s warmup %ld total %ld end %g power %g: %zu lrs match HF %s%s",
	      decay, s.warmup_steps, s.total_steps, s.end_ratio, s.power, json_array_size(lrs),
	      exact ? "exactly" : "within 1e-12", off);
}

/* HF's cosine climbs back up past total_steps; ours holds the end lr. */
static void test_past_the_end(void)
{
	struct schedule s = {1e-3, 100, 10, DECAY_COSINE, 0.1, 1};
	CHECK(close_enough(schedule_lr(&s, 150), 1e-4, 0, 1e-12) && schedule_lr(&s, 100) == schedule_lr(&s, 150),
	      "cosine holds end_ratio*peak past total_steps (%g)", schedule_lr(&s, 150));
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	CHECK(decay_kind_parse("linear") == DECAY_LINEAR && decay_kind_parse("poly") == DECAY_POLY &&
	      decay_kind_parse("constant") == DECAY_CONSTANT && decay_kind_parse("cos") == -1 &&
	      !strcmp(decay_kind_name(DECAY_COSINE), "cosine"), "decay names parse and print");
	char path[512];
	json_error_t err;
	snprintf(path, sizeof path, "%s/schedule.json", fixdir);
	json_t *cases = json_load_file(path, 0, &err), *c;
	if (!cases)
		die("%s:%d: %s", path, err.line, err.text);
	size_t i;
	CHECK(json_array_size(cases) >= 9, "%s holds its %zu cases", path, json_array_size(cases));
	json_array_foreach(cases, i, c)
		test_case(c);
	test_past_the_end();
	json_decref(cases);
	CHECK_DONE();
}
