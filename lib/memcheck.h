/* Refusing work whose buffers cannot fit in this machine's memory, before
 * allocating them. */
#ifndef TS_PHYSMEM_H
#define TS_PHYSMEM_H

/* Dies (exit 1) when bytes exceed the physical memory, e.g.
 * "model: needs 1.2 TB for parameters, ...; this machine has 24 GB". */
void physmem_check(const char *what, double bytes, const char *purpose);
#endif
