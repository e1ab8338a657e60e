/*
 * rank_held.h - for the rank programs linked with the static core that
 * fail collectives on purpose (tests/refuse_rank.c, tests/oom_rank.c):
 * their context, and the check that failed collectives left nothing
 * behind.  Include after rank_check.h, which defines rank.
 */
#ifndef SHEMB_RANK_HELD_H
#define SHEMB_RANK_HELD_H

#include "fabric/fabric.h"
#include "lib/held.h"
#include "lib/internal.h"

/* The context of attr (a 60 s timeout), and this rank's place in it:
 * rank, *nranks, from 2 to max ranks. */
static inline shemb_ctx *open_rank_ctx(struct shemb_ctx_attr *attr,
				       int *nranks, int max)
{
	shemb_ctx *c;

	attr->timeout_ms = 60000;
	CHECK_RC(NULL, shemb_ctx_create(attr, &c));
	CHECK_RC(c, shemb_ctx_get_attr(c, attr));
	rank = attr->rank;
	*nranks = attr->world_size;
	if (*nranks < 2 || *nranks > max)
		FAIL("needs 2 to %d ranks, has %d", max, *nranks);
	return c;
}

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

/* No receive completed with another collective's message (the engine
 * drops such a message, and its own then never comes): over shm,
 * control receives that ignored tag bits let it happen (fabric/ctrl.c). */
static inline void check_no_wrong_message(shemb_ctx *ctx)
{
	unsigned long n = shemb__fabric_wrong_messages(ctx->comm);

	if (n)
		FAIL("%lu receives completed with another collective's "
		     "message", n);
}

/* With SHEMB_FABRIC_EAGAIN set, the transport refused some of this
 * rank's posts as a full queue would, and posted them again: the calls
 * checked before ran through those paths. */
static inline void check_test_refusals(shemb_ctx *ctx)
{
	unsigned long n = shemb__fabric_test_refusals(ctx->comm);

	if (!getenv("SHEMB_FABRIC_EAGAIN"))
		return;
	if (!n)
		FAIL("SHEMB_FABRIC_EAGAIN is set, and no post was refused");
	printf("rank %d: posts refused as by a full queue: %lu\n", rank, n);
}

/* Every receive that took up a failed collective's message over shm
 * got its message: each asked for one that a peer's account said was
 * sent, by the tag of the round and chunk it was sent in. */
static inline void check_no_late_receive(shemb_ctx *ctx)
{
	int n = shemb__fabric_late_receives(ctx->comm, 5000);

	if (n)
		FAIL("%d receives of failed collectives' messages still "
		     "wait (-1: the transport's lock was not had)", n);
}

#endif
