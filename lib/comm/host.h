/* Which machine a process runs on, as processes tell each other through
 * a sum of doubles: the processes of a run that share one. */
#ifndef TS_HOST_H
#define TS_HOST_H
#include <stddef.h>

/* This machine, as a number that a sum of doubles carries exactly, and
 * its name in name. */
double host_key(char *name, size_t len);
/* hosts[size] holds each process's machine; returns how many processes
 * share rank's machine, with rank's place among them in *slot and the
 * first of them in *first. */
int host_share(const double *hosts, int size, int rank, int *slot, int *first);
#endif
