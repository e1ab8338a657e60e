/*
 * threadpool.h - a fixed set of pthreads that run parallel loops.
 */
#ifndef SHEMB_THREADPOOL_H
#define SHEMB_THREADPOOL_H

#include <stdint.h>

struct shemb__pool;

/* Runs task number `task` of a job; tasks of one job run in any order and
 * on any thread, so results must not depend on which thread runs what. */
typedef void (*shemb__task_fn)(void *arg, int64_t task);

/* nthreads counts the caller: nthreads - 1 workers are started. */
int shemb__pool_create(int nthreads, struct shemb__pool **pool);
void shemb__pool_destroy(struct shemb__pool *pool);
int shemb__pool_nthreads(const struct shemb__pool *pool);

/*
 * Run tasks 0 .. ntasks - 1 and return when all are done.  The caller works
 * too.  When another thread's job holds the workers, the caller runs the
 * whole job itself rather than wait: concurrent callers never block each
 * other.
 */
void shemb__pool_run(struct shemb__pool *pool, int64_t ntasks,
		     shemb__task_fn fn, void *arg);

/* Number of tasks to cut n items into, for items of roughly equal cost. */
int64_t shemb__pool_split(const struct shemb__pool *pool, int64_t n,
			  int64_t min_per_task);

#endif
