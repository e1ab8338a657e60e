/*
 * jobq.h - a queue of jobs run in order by one thread of the context,
 * started with the first job: the prefetch loads (tier_loader.c) and the
 * steps started without waiting (stepq.c).
 */
#ifndef SHEMB_JOBQ_H
#define SHEMB_JOBQ_H

#include <stdbool.h>

#include "lib/internal.h"

/* The head of every job; the queue links them. */
struct shemb__job {
	struct shemb__job *next;
};

struct shemb__jobq_ops {
	const char *thread_name;
	bool moves_collectives; /* the thread asks for the context's
				 * comm_slice_us (thread.c) */
	/* on the queue's thread, without its lock */
	void (*run)(void *arg, struct shemb__job *j);
	/* then under its lock: the job is over (the waiters are woken
	 * after it) */
	void (*done)(void *arg, struct shemb__job *j);
};

struct shemb__jobq;

/* The queue in *slot, made with its thread on first use (ctx->lock
 * guards the making); NULL without memory or a thread. */
struct shemb__jobq *shemb__jobq_get(shemb_ctx *ctx, struct shemb__jobq **slot,
				    const struct shemb__jobq_ops *ops,
				    void *arg);
/* The queue in *slot if there is one, without a lock. */
struct shemb__jobq *shemb__jobq_peek(struct shemb__jobq *const *slot);
void shemb__jobq_push(struct shemb__jobq *q, struct shemb__job *j);
/* Jobs queued or running (read without the lock). */
int shemb__jobq_pending(const struct shemb__jobq *q);
/* Until busy(arg) is false, checked under the queue's lock after each
 * job; a no-op on the queue's own thread. */
void shemb__jobq_wait(struct shemb__jobq *q, bool (*busy)(void *arg),
		      void *arg);
/* ... for at most ms milliseconds: whether busy(arg) became false. */
bool shemb__jobq_wait_for(struct shemb__jobq *q, bool (*busy)(void *arg),
			  void *arg, int ms);
/* Until nothing is queued or running. */
void shemb__jobq_drain(struct shemb__jobq *q);
/* fn(arg) under the queue's lock (to read or mark a job's state). */
void shemb__jobq_locked(struct shemb__jobq *q, void (*fn)(void *arg),
			void *arg);
/*
 * On the queue's thread, while it runs a job: the job queued next, if
 * one is or comes within wait_ns (NULL: none); and, to run it as part of
 * the running one, take it out of the queue (it must still be next: only
 * this thread takes jobs) and end it (ops->done, the waiters woken) once
 * it is over.
 */
struct shemb__job *shemb__jobq_next(struct shemb__jobq *q, long wait_ns);
void shemb__jobq_take(struct shemb__jobq *q, struct shemb__job *j);
void shemb__jobq_end(struct shemb__jobq *q, struct shemb__job *j);
/* Run what is queued, end the thread, free the queue; *slot = NULL. */
void shemb__jobq_stop(struct shemb__jobq **slot);
/* ... unless the thread does not end and stuck(arg) says it never will
 * (it is asked every ms milliseconds), and it still does not end within
 * grace_ms after that: the thread and the queue are then left as they
 * are, and false returned. */
bool shemb__jobq_stop_unless(struct shemb__jobq **slot,
			     bool (*stuck)(void *arg), void *arg, int ms,
			     int grace_ms);

#endif
