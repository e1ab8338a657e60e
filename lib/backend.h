/*
 * backend.h - the registry of memory backends (cpu now, cuda later).
 */
#ifndef SHEMB_BACKEND_H
#define SHEMB_BACKEND_H

#include "lib/internal.h"

/* Attach the backend this context uses (ctx->mem, ctx->be). */
int shemb__backend_open(shemb_ctx *ctx);
void shemb__backend_close(shemb_ctx *ctx);

/* After the ranks are connected: the collective communicator for device
 * buffers (NCCL) of a GPU context, when the GPU module has one; else
 * device buffers are staged through host memory (collectives.c). */
int shemb__backend_open_dev_comm(shemb_ctx *ctx);

#endif
