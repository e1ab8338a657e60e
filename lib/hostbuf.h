/*
 * hostbuf.h - host memory for the host copies of device buffers: the
 * backend's page-locked memory where it has some (a GPU), else (none, or
 * none left) malloc.
 */
#ifndef SHEMB_HOSTBUF_H
#define SHEMB_HOSTBUF_H

#include <stddef.h>
#include <stdlib.h>

#include "lib/internal.h"
#include "lib/mem_ops.h"

struct shemb__hostbuf {
	void *p;
	size_t bytes;
	bool pinned;         /* from the backend's host_alloc */
};

static inline bool shemb__has_host_alloc(const shemb_ctx *ctx)
{
	return ctx->mem->size > offsetof(struct shemb_mem_ops, host_free) &&
	       ctx->mem->host_alloc && ctx->mem->host_free;
}

/* n bytes (at least one) into b: 0, or SHEMB_ENOMEM. */
static inline int shemb__host_buf(shemb_ctx *ctx, size_t n,
				  struct shemb__hostbuf *b)
{
	b->bytes = n ? n : 1;
	b->pinned = shemb__has_host_alloc(ctx);
	b->p = b->pinned ? ctx->mem->host_alloc(ctx->be, b->bytes) : NULL;
	if (!b->p) {
		b->pinned = false;
		b->p = malloc(b->bytes);
	}
	return b->p ? 0 : SHEMB_ENOMEM;
}

static inline void shemb__host_buf_free(shemb_ctx *ctx,
					struct shemb__hostbuf *b)
{
	if (b->pinned)
		ctx->mem->host_free(ctx->be, b->p, b->bytes);
	else
		free(b->p);
	b->p = NULL;
}

#endif
