/*
 * coll_staged.h - collectives on device buffers through host memory
 * (coll_staged.c).
 */
#ifndef SHEMB_COLL_STAGED_H
#define SHEMB_COLL_STAGED_H

#include "lib/comm.h"
#include "lib/internal.h"

/* enum shemb_mem of c's buffers, or -1 (recorded) when they differ. */
int shemb__coll_mem(shemb_ctx *ctx, const struct shemb__coll *c);

/* Host copies of c's buffers, the pieces it sends copied in: *host is c
 * on them, to run on the host transport.  A failure of that copy is
 * kept for shemb__stage_finish: the collective runs all the same (on
 * zeros), so that the other ranks see it. */
int shemb__stage_begin(shemb_ctx *ctx, const struct shemb__coll *c,
		       struct shemb__staging **st, struct shemb__coll *host);
/* The collective on st ended with status rc: on success its received
 * pieces are copied into device memory and st freed; on a failure whose
 * buffers the transport still holds (held), st is kept until the context
 * is destroyed, since the transport may still write into it; on another
 * failure, freed.  Returns rc, or the copy's failure. */
int shemb__stage_finish(shemb_ctx *ctx, struct shemb__staging *st, int rc,
			bool held);
/* st (or NULL) of a collective whose end will not be seen, kept
 * likewise */
void shemb__stage_keep(shemb_ctx *ctx, struct shemb__staging *st);
/* st (or NULL) of a collective that never started */
void shemb__stage_free(shemb_ctx *ctx, struct shemb__staging *st);

#endif
