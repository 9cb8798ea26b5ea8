/* The backend a command computes on, by the names of --device and
 * --precision. */
#ifndef TS_DEVICE_H
#define TS_DEVICE_H
#include "backend/precision.h"

/* The compute capability of --device name (0 for the CPU). */
int device_sm(const char *name);
/* The backend that --device name picks: "cpu", "cuda" or "cuda:N", at
 * precision p; dies in one line for another name, or a GPU or precision
 * that this build or machine lacks. */
const struct backend *backend_open(const char *name, enum precision p);
/* "cuda" where a GPU is usable, else "cpu". */
const char *backend_default(void);
#endif
