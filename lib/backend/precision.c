#include "backend/precision.h"
#include "util/err.h"
#include <string.h>

static const char *const precision_names[] = { "fp32", "tf32", "bf16", "fp16" };
/* sm_80 brought TF32 and bf16 to the tensor cores; fp16 runs on every GPU the build targets */
enum { PRECISIONS = sizeof precision_names / sizeof *precision_names, SM_TENSOR_FLOATS = 80 };

enum precision precision_parse(const char *name)
{
	for (int i = 0; i < PRECISIONS; i++)
		if (!strcmp(name, precision_names[i]))
			return (enum precision)i;
	die_usage("--precision %s: not fp32, tf32, bf16 or fp16", name);
}

const char *precision_name(enum precision p)
{
	return precision_names[p];
}

const char *precision_lacking(enum precision p, int sm)
{
	if (sm == 0 && p == PREC_TF32)
		return "tf32 is the tensor cores' format of a GPU; the CPU runs fp32 or bf16";
	if (sm == 0 && p == PREC_FP16)
		return "fp16 is a GPU's format; the CPU runs fp32 or bf16";
	if (sm == 0)
		return NULL;
	if ((p == PREC_TF32 || p == PREC_BF16) && sm < SM_TENSOR_FLOATS)
		return p == PREC_BF16 ? "bf16 needs an sm_80 GPU or later (A100, H100); --precision fp32 runs here"
				      : "tf32 needs an sm_80 GPU or later (A100, H100); --precision fp32 runs here";
	return NULL;
}

enum precision precision_default(int sm)
{
	return sm >= SM_TENSOR_FLOATS ? PREC_BF16 : PREC_FP32;
}

enum precision precision_of_backend(const char *name)
{
	const char *word = strchr(name, ' ');
	for (int i = 0; word && i < PRECISIONS; i++)
		if (!strcmp(word + 1, precision_names[i]))
			return (enum precision)i;
	return PREC_FP32;
}

