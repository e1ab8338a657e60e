/*
 * held.c - buffers that a failed collective may still touch.
 *
 * A transport cannot always take back what it posted: libfabric's shm
 * provider was seen to match a message into a receive it had reported
 * cancelled, and a peer that has not yet learnt of a failure may still
 * send its piece, or copy one out of this rank's memory.  Until the
 * communicator is destroyed (its endpoint closed), such a collective's
 * buffers must stay allocated.  The application keeps its own
 * (shemb_alltoallv(3), BUGS); the library's own collectives free theirs
 * through shemb__coll_buf_free(), which leaves the ones remembered here
 * to the context.
 */
#include "lib/held.h"

#include <stdlib.h>

struct shemb__held {
	struct shemb__held *next;
	const void *p;
	bool owned; /* the library's: freed with the context */
};

/* with ctx->lock */
static struct shemb__held *find(shemb_ctx *ctx, const void *p)
{
	for (struct shemb__held *h = ctx->held; h; h = h->next)
		if (h->p == p)
			return h;
	return NULL;
}

#define SPARE_RECORDS 2

/* with ctx->lock: a record, from the spares when there is no memory;
 * spares are made again while there is */
static struct shemb__held *new_record(shemb_ctx *ctx)
{
	struct shemb__held *h = shemb__spare_alloc(&ctx->held_spares,
						   sizeof(*h));

	if (h)
		shemb__spares_fill(&ctx->held_spares, sizeof(*h),
				   SPARE_RECORDS);
	return h;
}

/* with ctx->lock; without memory for the record, even a spare, the
 * library gives up freeing its collectives' buffers for the context's
 * life: a leak, not a write into freed memory */
static void remember(shemb_ctx *ctx, const void *p)
{
	struct shemb__held *h;

	if (!p || find(ctx, p))
		return;
	h = new_record(ctx);
	if (!h) {
		ctx->held_all = true;
		return;
	}
	h->p = p;
	h->next = ctx->held;
	ctx->held = h;
}

void shemb__held_note(shemb_ctx *ctx, const void *sendbuf,
		      const void *recvbuf)
{
	pthread_mutex_lock(&ctx->lock);
	remember(ctx, sendbuf);
	remember(ctx, recvbuf);
	pthread_mutex_unlock(&ctx->lock);
}

void shemb__coll_buf_free(shemb_ctx *ctx, void *p)
{
	struct shemb__held *h;
	bool keep;

	if (!p)
		return;
	pthread_mutex_lock(&ctx->lock);
	h = find(ctx, p);
	if (h)
		h->owned = true;
	keep = h || ctx->held_all;
	pthread_mutex_unlock(&ctx->lock);
	if (!keep)
		free(p);
}

void shemb__held_free_all(shemb_ctx *ctx, bool closed)
{
	while (ctx->held) {
		struct shemb__held *h = ctx->held;

		ctx->held = h->next;
		if (h->owned && closed)
			free((void *)h->p);
		free(h);
	}
	shemb__spares_drop(&ctx->held_spares);
}

size_t shemb__held_count(shemb_ctx *ctx, size_t *owned)
{
	size_t n = 0, mine = 0;

	pthread_mutex_lock(&ctx->lock);
	for (struct shemb__held *h = ctx->held; h; h = h->next) {
		n++;
		mine += h->owned;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (owned)
		*owned = mine;
	return n;
}
