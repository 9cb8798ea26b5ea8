/* --gpus lists, as ts-train and ts-sweep take them. */
#ifndef TS_GPULIST_H
#define TS_GPULIST_H

enum { MAX_GPUS = 64 };

/* Parses a --gpus list such as "0,2,5-7" into ids (at most MAX_GPUS);
 * returns how many, or dies with a usage error on a bad list. */
int gpus_parse(const char *list, int *ids);
#endif
