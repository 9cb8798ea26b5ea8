#include "util/ordered.h"
#include "util/err.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum slot_state { FREE, FILLED, WORKING, DONE };

struct run {
	const struct ordered_job *job;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum slot_state *state;
	uint64_t produced, next_work;
	int ended;
};

static void *worker(void *arg)
{
	struct run *r = ((void **)arg)[0];
	int id = (int)(intptr_t)((void **)arg)[1];
	const struct ordered_job *j = r->job;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (r->next_work == r->produced && !r->ended)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->next_work == r->produced)
			break;
		int s = (int)(r->next_work++ % (uint64_t)j->nslots);
		r->state[s] = WORKING;
		pthread_mutex_unlock(&r->mu);
		j->work(j->slots[s], id, j->ctx);
		pthread_mutex_lock(&r->mu);
		r->state[s] = DONE;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static void *writer(void *arg)
{
	struct run *r = arg;
	const struct ordered_job *j = r->job;
	for (uint64_t seq = 0;; seq++) {
		int s = (int)(seq % (uint64_t)j->nslots);
		pthread_mutex_lock(&r->mu);
		while (!(seq < r->produced && r->state[s] == DONE) && !(r->ended && seq == r->produced))
			pthread_cond_wait(&r->cv, &r->mu);
		int finished = seq == r->produced;
		pthread_mutex_unlock(&r->mu);
		if (finished)
			break;
		j->consume(j->slots[s], j->ctx);
		pthread_mutex_lock(&r->mu);
		r->state[s] = FREE;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

void ordered_run(const struct ordered_job *j)
{
	struct run r = {.job = j};
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	r.state = xcalloc((size_t)j->nslots, sizeof *r.state);
	pthread_t *th = xcalloc((size_t)j->nthreads + 1, sizeof *th);
	void *(*args)[2] = xcalloc((size_t)j->nthreads, sizeof *args);
	for (int i = 0; i < j->nthreads; i++) {
		args[i][0] = &r;
		args[i][1] = (void *)(intptr_t)i;
		if (pthread_create(&th[i], NULL, worker, args[i]))
			die("cannot start a thread:");
	}
	if (pthread_create(&th[j->nthreads], NULL, writer, &r))
		die("cannot start a thread:");
	for (uint64_t seq = 0;; seq++) {
		int s = (int)(seq % (uint64_t)j->nslots);
		pthread_mutex_lock(&r.mu);
		while (r.state[s] != FREE)
			pthread_cond_wait(&r.cv, &r.mu);
		pthread_mutex_unlock(&r.mu);
		int more = j->produce(j->slots[s], j->ctx);
		pthread_mutex_lock(&r.mu);
		if (more) {
			r.state[s] = FILLED;
			r.produced++;
		} else {
			r.ended = 1;
		}
		pthread_cond_broadcast(&r.cv);
		pthread_mutex_unlock(&r.mu);
		if (!more)
			break;
	}
	for (int i = 0; i <= j->nthreads; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
	free(r.state);
	free(th);
	free(args);
}
