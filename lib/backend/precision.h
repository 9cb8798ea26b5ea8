/* --precision: its names, what each device can train at, and the default. */
#ifndef TS_PRECISION_H
#define TS_PRECISION_H
#include "backend/backend.h"

/* "fp32", "tf32", "bf16" or "fp16" as enum precision; dies in one line
 * for another name. */
enum precision precision_parse(const char *name);
/* The name precision_parse takes. */
const char *precision_name(enum precision p);
/* Why a device of compute capability sm (75 for sm_75; 0: the CPU) cannot
 * compute at p, or NULL when it can: in words for training and evaluating alike. */
const char *precision_lacking(enum precision p, int sm);
/* The precision a device trains at unless told: bf16 on a GPU that has it
 * (sm_80 on), else fp32. */
enum precision precision_default(int sm);
/* The precision of a backend by its name ("cuda:0 bf16", "cpu"): fp32
 * where the name says none. */
enum precision precision_of_backend(const char *name);
#endif
