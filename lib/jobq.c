/*
 * jobq.c - see jobq.h.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "lib/jobq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "lib/thread.h"

struct shemb__jobq {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;          /* a job came, or stop */
	pthread_cond_t done;          /* a job ended */
	struct shemb__job *head, *tail;
	atomic_int pending;           /* queued or running */
	bool stop;
	bool left;                    /* its thread detached, never to be
				       * joined: the queue stays allocated */
	const struct shemb__jobq_ops *ops;
	void *arg;
};

static void pop(struct shemb__jobq *q)
{
	q->head = q->head->next;
	if (!q->head)
		q->tail = NULL;
}

/* Under q->mu. */
static void end_job(struct shemb__jobq *q, struct shemb__job *j)
{
	q->ops->done(q->arg, j);
	atomic_fetch_sub(&q->pending, 1);
	pthread_cond_broadcast(&q->done);
}

static void *jobq_main(void *p)
{
	struct shemb__jobq *q = p;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct shemb__job *j;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->work, &q->mu);
		if (!q->head)
			break; /* stopped, nothing left */
		j = q->head;
		pop(q);
		pthread_mutex_unlock(&q->mu);
		q->ops->run(q->arg, j);
		pthread_mutex_lock(&q->mu);
		end_job(q, j);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static void jobq_free(struct shemb__jobq *q)
{
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->done);
	free(q);
}

struct shemb__jobq *shemb__jobq_get(shemb_ctx *ctx, struct shemb__jobq **slot,
				    const struct shemb__jobq_ops *ops,
				    void *arg)
{
	struct shemb__jobq *q = shemb__jobq_peek(slot);

	if (q)
		return q;
	pthread_mutex_lock(&ctx->lock);
	q = *slot;
	if (!q && (q = calloc(1, sizeof(*q)))) {
		pthread_mutex_init(&q->mu, NULL);
		pthread_cond_init(&q->work, NULL);
		pthread_cond_init(&q->done, NULL);
		q->ops = ops;
		q->arg = arg;
		if (shemb__thread_start(&q->thread, jobq_main, q,
					ops->thread_name,
					ops->moves_collectives
						? ctx->attr.comm_slice_us
						: 0)) {
			jobq_free(q);
			q = NULL;
		}
		__atomic_store_n(slot, q, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ctx->lock);
	return q;
}

struct shemb__jobq *shemb__jobq_peek(struct shemb__jobq *const *slot)
{
	return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}

void shemb__jobq_push(struct shemb__jobq *q, struct shemb__job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	atomic_fetch_add(&q->pending, 1);
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
}

int shemb__jobq_pending(const struct shemb__jobq *q)
{
	return atomic_load(&q->pending);
}

void shemb__jobq_wait(struct shemb__jobq *q, bool (*busy)(void *arg),
		      void *arg)
{
	if (pthread_equal(pthread_self(), q->thread))
		return;
	pthread_mutex_lock(&q->mu);
	while (busy(arg))
		pthread_cond_wait(&q->done, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

bool shemb__jobq_wait_for(struct shemb__jobq *q, bool (*busy)(void *arg),
			  void *arg, int ms)
{
	struct timespec until = shemb__deadline_in(ms);
	bool still;

	if (pthread_equal(pthread_self(), q->thread))
		return true;
	pthread_mutex_lock(&q->mu);
	while ((still = busy(arg)) &&
	       pthread_cond_timedwait(&q->done, &q->mu, &until) != ETIMEDOUT)
		;
	still = still && busy(arg);
	pthread_mutex_unlock(&q->mu);
	return !still;
}

static bool any_pending(void *q)
{
	return shemb__jobq_pending(q) > 0;
}

void shemb__jobq_drain(struct shemb__jobq *q)
{
	shemb__jobq_wait(q, any_pending, q);
}

struct shemb__job *shemb__jobq_next(struct shemb__jobq *q, long wait_ns)
{
	struct shemb__job *j;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += wait_ns;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&q->mu);
	while (wait_ns > 0 && !q->head && !q->stop &&
	       !pthread_cond_timedwait(&q->work, &q->mu, &until))
		;
	j = q->head;
	pthread_mutex_unlock(&q->mu);
	return j;
}

void shemb__jobq_take(struct shemb__jobq *q, struct shemb__job *j)
{
	pthread_mutex_lock(&q->mu);
	if (q->head == j)
		pop(q);
	pthread_mutex_unlock(&q->mu);
}

void shemb__jobq_end(struct shemb__jobq *q, struct shemb__job *j)
{
	pthread_mutex_lock(&q->mu);
	end_job(q, j);
	pthread_mutex_unlock(&q->mu);
}

void shemb__jobq_locked(struct shemb__jobq *q, void (*fn)(void *arg),
			void *arg)
{
	pthread_mutex_lock(&q->mu);
	fn(arg);
	pthread_mutex_unlock(&q->mu);
}

static void ask_stop(struct shemb__jobq *q)
{
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
}

void shemb__jobq_stop(struct shemb__jobq **slot)
{
	struct shemb__jobq *q = *slot;

	if (!q)
		return;
	ask_stop(q);
	pthread_join(q->thread, NULL);
	jobq_free(q);
	__atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
}

static bool joined_within(struct shemb__jobq *q, int ms)
{
	struct timespec until = shemb__deadline_in(ms);

	return !pthread_timedjoin_np(q->thread, NULL, &until);
}

bool shemb__jobq_stop_unless(struct shemb__jobq **slot,
			     bool (*stuck)(void *arg), void *arg, int ms,
			     int grace_ms)
{
	struct shemb__jobq *q = *slot;

	if (!q)
		return true;
	if (q->left)
		return false;
	ask_stop(q);
	for (;;) {
		if (joined_within(q, ms))
			break;
		if (!stuck(arg))
			continue;
		/* a thread that only waited on the stuck transport fails
		 * and ends once it sees it stuck: give it that moment */
		if (joined_within(q, grace_ms))
			break;
		pthread_detach(q->thread);
		q->left = true;
		return false; /* the thread may still use q */
	}
	jobq_free(q);
	__atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
	return true;
}
