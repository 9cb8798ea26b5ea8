/* --precision (lib/backend/precision.h): the names, which precision each device can train at, and
 * the default: bf16 from sm_80 on, fp32 on older GPUs and on the CPU. */
#include "check.h"
#include "backend/precision.h"
#include <string.h>

static const char *const names[] = { "fp32", "tf32", "bf16", "fp16" };

static void test_names(void)
{
	for (int i = 0; i < 4; i++) {
		enum precision p = precision_parse(names[i]);
		CHECK(p == (enum precision)i && !strcmp(precision_name(p), names[i]),
		      "%s: parsed and named back", names[i]);
	}
}

/* Whether device sm takes p, and why not in words that name the cause and
 * fit ts-eval as well as ts-train: none speaks of training. */
static void expect(enum precision p, int sm, const char *why)
{
	const char *got = precision_lacking(p, sm);
	if (!why)
		CHECK(!got, "%s on sm %d: taken (%s)", names[p], sm, got ? got : "no reason");
	else
		CHECK(got && strstr(got, why) && !strstr(got, "train"), "%s on sm %d: refused, '%s' in '%s', no training",
		      names[p], sm, why, got ? got : "(taken)");
}

static void test_devices(void)
{
	expect(PREC_FP32, 0, NULL);
	expect(PREC_BF16, 0, NULL);   /* the CPU's own check says whether it has AVX512-BF16 */
	expect(PREC_TF32, 0, "tensor cores");
	expect(PREC_FP16, 0, "a GPU's");
	for (int sm = 70; sm <= 90; sm += 5) {
		expect(PREC_FP32, sm, NULL);
		expect(PREC_TF32, sm, sm >= 80 ? NULL : "sm_80");
		expect(PREC_BF16, sm, sm >= 80 ? NULL : "sm_80");
		expect(PREC_FP16, sm, NULL);
	}
}

static void test_default(void)
{
	CHECK(precision_default(0) == PREC_FP32, "the CPU: fp32 unless told");
	CHECK(precision_default(75) == PREC_FP32, "a T4 (sm_75): fp32");
	CHECK(precision_default(80) == PREC_BF16, "an A100 (sm_80): bf16");
	CHECK(precision_default(90) == PREC_BF16, "an H100 (sm_90): bf16");
	CHECK(precision_default(120) == PREC_BF16, "a later GPU (sm_120): bf16");
}

/* ts-top's MFU takes the precision from the backend's name. */
static void test_backend_names(void)
{
	CHECK(precision_of_backend("cpu") == PREC_FP32, "cpu: fp32");
	CHECK(precision_of_backend("cpu bf16") == PREC_BF16, "cpu bf16: bf16");
	CHECK(precision_of_backend("cuda:0") == PREC_FP32, "cuda:0: fp32");
	CHECK(precision_of_backend("cuda:3 tf32") == PREC_TF32, "cuda:3 tf32: tf32");
	CHECK(precision_of_backend("cuda:1 bf16") == PREC_BF16, "cuda:1 bf16: bf16");
	CHECK(precision_of_backend("cuda:1 bf17") == PREC_FP32, "an unknown word: fp32");
}

int main(void)
{
	test_names();
	test_backend_names();
	test_devices();
	test_default();
	CHECK_DONE();
}
