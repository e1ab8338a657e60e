/*
 * held.h - buffers that a failed collective may still touch (held.c).
 */
#ifndef SHEMB_HELD_H
#define SHEMB_HELD_H

#include "lib/internal.h"

/* A collective on these buffers failed and its communicator holds them
 * (shemb_comm_ops.holds): the context remembers them until it is
 * destroyed.  Either may be NULL. */
void shemb__held_note(shemb_ctx *ctx, const void *sendbuf,
		      const void *recvbuf);
/* free(p) for a buffer of the library's own collectives, unless one that
 * failed may still touch it: the context then frees it once its
 * communicator is destroyed. */
void shemb__coll_buf_free(shemb_ctx *ctx, void *p);
/* After the communicator is destroyed: the library's buffers freed (left
 * allocated when it could not be closed), the application's forgotten. */
void shemb__held_free_all(shemb_ctx *ctx, bool closed);
/* How many buffers are remembered; of them, the library's. */
size_t shemb__held_count(shemb_ctx *ctx, size_t *owned);

#endif
