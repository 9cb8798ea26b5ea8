/* The backend a command computes on, by the names of --device and
 * --precision. */
#ifndef TS_DEVICE_H
#define TS_DEVICE_H
#include "backend/backend.h"

/* What the matrix work of training computes in (--precision). */
enum precision { PREC_FP32, PREC_BF16 };
/* "fp32" or "bf16" as enum precision; dies in one line for another name. */
enum precision precision_parse(const char *name);
/* The name precision_parse takes. */
const char *precision_name(enum precision p);
/* The backend that --device name picks: "cpu", "cuda" or "cuda:N", at
 * precision p; dies in one line for another name, or a GPU or precision
 * that this build or machine lacks. */
const struct backend *backend_open(const char *name, enum precision p);
/* "cuda" where a GPU is usable, else "cpu". */
const char *backend_default(void);
#endif
