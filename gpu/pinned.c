/*
 * pinned.c - page-locked host buffers, kept for reuse: the host copies of
 * collectives on device buffers and of device bag sets go through them,
 * so the device copies them at full speed and without a bounce through
 * CUDA's own staging.  Making page-locked memory costs far more than a
 * copy of the same bytes, so blocks come in power-of-two sizes and go
 * back to a free list of their size, up to CACHE_BYTES in all.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cuda.h"
#include "gpu/pinned.h"

#define MIN_SHIFT 16                    /* 64 KiB */
#define NCLASS 48
#define CACHE_BYTES ((size_t)256 << 20)

struct free_block {
	struct free_block *next;
};

struct shemb__pinned {
	pthread_mutex_t lock;
	struct shemb__cuda *c;
	struct free_block *free[NCLASS];
	size_t cached;
};

struct shemb__pinned *shemb__pinned_create(struct shemb__cuda *c)
{
	struct shemb__pinned *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	p->c = c;
	return p;
}

void shemb__pinned_destroy(struct shemb__pinned *p)
{
	if (!p)
		return;
	for (int k = 0; k < NCLASS; k++)
		while (p->free[k]) {
			struct free_block *b = p->free[k];

			p->free[k] = b->next;
			shemb__cuda_host_free(p->c, b);
		}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* The size class of bytes: blocks of 1 << class bytes; -1 if too big. */
static int class_of(size_t bytes)
{
	int k = MIN_SHIFT;

	while (k < MIN_SHIFT + NCLASS && ((size_t)1 << k) < bytes)
		k++;
	return k < MIN_SHIFT + NCLASS ? k - MIN_SHIFT : -1;
}

void *shemb__pinned_get(struct shemb__pinned *p, size_t bytes)
{
	int k = class_of(bytes);
	struct free_block *b;
	void *raw = NULL;

	if (k < 0 || bytes > SHEMB__PINNED_MAX)
		return NULL;
	pthread_mutex_lock(&p->lock);
	b = p->free[k];
	if (b) {
		p->free[k] = b->next;
		p->cached -= (size_t)1 << (k + MIN_SHIFT);
	}
	pthread_mutex_unlock(&p->lock);
	if (b)
		return b;
	if (shemb__cuda_host_alloc(p->c, (size_t)1 << (k + MIN_SHIFT), &raw))
		return NULL;
	return raw;
}

void shemb__pinned_put(struct shemb__pinned *p, void *block, size_t bytes)
{
	int k = class_of(bytes);
	size_t size;

	if (!block)
		return;
	size = (size_t)1 << (k + MIN_SHIFT);
	pthread_mutex_lock(&p->lock);
	if (p->cached + size <= CACHE_BYTES) {
		struct free_block *b = block;

		b->next = p->free[k];
		p->free[k] = b;
		p->cached += size;
		block = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (block)
		shemb__cuda_host_free(p->c, block);
}
