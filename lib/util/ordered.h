/* An ordered parallel map over batches: the calling thread produces batches,
 * worker threads transform them, and one writer thread consumes them in the
 * order they were produced. */
#ifndef TS_ORDERED_H
#define TS_ORDERED_H

struct ordered_job {
	int nthreads;            /* workers */
	int nslots;              /* batches in flight (>= nthreads + 2) */
	void **slots;            /* caller-allocated batches */
	int (*produce)(void *slot, void *ctx);          /* fill; 0 when input ended */
	void (*work)(void *slot, int worker, void *ctx);
	void (*consume)(void *slot, void *ctx);
	void *ctx;
};

void ordered_run(const struct ordered_job *job);
#endif
