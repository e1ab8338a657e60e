/*
 * hostbuf.h - host memory for the host copies of device buffers: the
 * backend's page-locked memory where it has some (a GPU), else malloc.
 */
#ifndef SHEMB_HOSTBUF_H
#define SHEMB_HOSTBUF_H

#include <stddef.h>
#include <stdlib.h>

#include "lib/internal.h"
#include "lib/mem_ops.h"

static inline bool shemb__has_host_alloc(const shemb_ctx *ctx)
{
	return ctx->mem->size > offsetof(struct shemb_mem_ops, host_free) &&
	       ctx->mem->host_alloc && ctx->mem->host_free;
}

/* n bytes (at least one), or NULL */
static inline void *shemb__host_buf(shemb_ctx *ctx, size_t n)
{
	if (shemb__has_host_alloc(ctx))
		return ctx->mem->host_alloc(ctx->be, n ? n : 1);
	return malloc(n ? n : 1);
}

/* p of shemb__host_buf(ctx, n) */
static inline void shemb__host_buf_free(shemb_ctx *ctx, void *p, size_t n)
{
	if (shemb__has_host_alloc(ctx))
		ctx->mem->host_free(ctx->be, p, n ? n : 1);
	else
		free(p);
}

#endif
