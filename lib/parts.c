/*
 * parts.c - the outputs of a started lookup that are final, set by set.
 */
#include "lib/internal.h"
#include "lib/parts.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct shemb__parts {
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a set became final, or the step ended */
	int n;
	bool ended;
	int status;                /* the step's, once ended */
	unsigned char done[];
};

struct shemb__parts *shemb__parts_new(int n)
{
	struct shemb__parts *p = calloc(1, sizeof(*p) + (size_t)n + 1);

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->n = n;
	return p;
}

void shemb__parts_free(struct shemb__parts *p)
{
	if (!p)
		return;
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int shemb__parts_count(const struct shemb__parts *p)
{
	return p->n;
}

void shemb__parts_mark(struct shemb__parts *p, const int *index, int n)
{
	pthread_mutex_lock(&p->lock);
	for (int k = 0; k < n; k++)
		if (index[k] >= 0 && index[k] < p->n)
			p->done[index[k]] = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void shemb__parts_end(struct shemb__parts *p, int status)
{
	pthread_mutex_lock(&p->lock);
	p->ended = true;
	p->status = status;
	for (int i = 0; i < p->n; i++)
		p->done[i] = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

int shemb__parts_get(struct shemb__parts *p, int i, int wait_ms, int *done)
{
	struct timespec until = { 0 };
	int status = 0;

	if (wait_ms > 0) /* shemb_test_part polls: no clock read */
		until = shemb__deadline_in(wait_ms);
	pthread_mutex_lock(&p->lock);
	while (wait_ms > 0 && !p->done[i] &&
	       pthread_cond_timedwait(&p->cond, &p->lock, &until) != ETIMEDOUT)
		;
	*done = p->done[i];
	/* a failed step's outputs are not to be used, whichever it wrote */
	if (p->ended)
		status = p->status;
	pthread_mutex_unlock(&p->lock);
	return status;
}
