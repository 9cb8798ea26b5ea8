/* Seconds on the monotonic clock, for spans of time. */
#ifndef TS_CLOCK_H
#define TS_CLOCK_H
#ifdef __cplusplus
extern "C" {    /* the CUDA collectives time their sums too */
#endif
double clock_seconds(void);
#ifdef __cplusplus
}
#endif
#endif
