/* Refusing work whose buffers cannot fit in a backend's memory, before
 * allocating them. */
#ifndef TS_MEMCHECK_H
#define TS_MEMCHECK_H
#include "backend/backend.h"

/* Dies (exit 1) when bytes exceed what be->memory() says, e.g. "model: needs
 * 1.2 TB for parameters, ...; this machine has 24 GB" or "...; cuda:0 has
 * 3.1 GB free". */
void memory_check(const struct backend *be, const char *what, double bytes, const char *purpose);
#endif
