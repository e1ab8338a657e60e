/*
 * rank_held.h - the check that failed collectives left nothing behind,
 * for the rank programs linked with the static core (tests/refuse_rank.c,
 * tests/oom_rank.c).  Include after rank_check.h.
 */
#ifndef SHEMB_RANK_HELD_H
#define SHEMB_RANK_HELD_H

#include "fabric/fabric.h"
#include "lib/held.h"
#include "lib/internal.h"

/* After a barrier: no op kept in the transport for a receive that never
 * completes, and no buffer the context keeps for one (lib/held.c).
 * what, k: where in the program, for the message. */
static inline void check_nothing_held(shemb_ctx *ctx, const char *what,
				      int k)
{
	size_t bufs;
	int held;

	CHECK_RC(ctx, shemb_barrier(ctx, NULL));
	held = shemb__fabric_ops_held(ctx->comm, 5000);
	if (held != 0)
		FAIL("after %s %d the transport still holds %d collectives",
		     what, k, held);
	bufs = shemb__held_count(ctx, NULL);
	if (bufs != 0)
		FAIL("after %s %d the context keeps %zu buffers of failed "
		     "collectives", what, k, bufs);
}

#endif
