/*
 * fail.c - the engine's failures: a rank that left (its process ended,
 * or the rendezvous says so), a transfer that failed (the peer may be
 * dying: wait a little for that news), a collective that moved nothing
 * for the timeout.  Each fails every op it must, under the engine's lock.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "shemb.h"
#include "fabric/boot.h"
#include "fabric/engine.h"

static void fail_all(struct fab *f, int status)
{
	for (struct op *op = f->ops, *next; op; op = next) {
		next = op->next; /* failing may free op */
		shemb__fab_fail_op(f, op, status, "%s", f->fail_why);
	}
}

/* A peer's process ended: every op fails, as when the rendezvous says
 * so (shemb__fab_check_liveness), since no collective can finish
 * without it. */
void shemb__fab_peer_ended(struct fab *f, int peer)
{
	if (!f->failed) {
		f->failed = SHEMB_EPEER;
		snprintf(f->fail_why, sizeof(f->fail_why),
			 "rank %d left the job (its process ended)", peer);
	}
	fail_all(f, f->failed);
}

/* Errors that say the peer's end of the connection is gone: the rank
 * left, whether or not the rendezvous has noticed it yet. */
static bool peer_gone(int err)
{
	switch (err) {
	case FI_ENOTCONN:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ECONNREFUSED:
	case EPIPE:
		return true;
	default:
		return false;
	}
}

/*
 * A transfer failed.  Providers report a peer that died in the middle of
 * a transfer in ways of their own (shm: an I/O error, tcp;ofi_rxm: the
 * operation canceled), often before the rendezvous connections tell of
 * the death: an error that does not name a lost connection waits up to
 * LEFT_WAIT_MS (at most half the timeout: a caller that cannot have the
 * lock for the whole timeout takes the engine for wedged, wedge.c) for
 * that news, so that the call reports SHEMB_EPEER as every call after
 * the loss does, and SHEMB_EIO only when no rank left.  Rare, and under
 * the engine's lock.
 */
#define LEFT_WAIT_MS 2000u

uint64_t shemb__fab_locked_wait_until(const struct fab *f, uint64_t ms)
{
	uint64_t half = f->timeout_ms > 0 ? (uint64_t)f->timeout_ms / 2 : 0;

	if (half && half < ms)
		ms = half;
	return shemb__fab_now_ns() + ms * 1000000u;
}

/* what: "transfer with", or another action on peer; why: the error */
void shemb__fab_transfer_failed(struct fab *f, struct op *op, int peer,
				int err, const char *what, const char *why)
{
	uint64_t until = shemb__fab_locked_wait_until(f, LEFT_WAIT_MS);
	bool failed_before = f->failed != 0;

	while (!peer_gone(err) && !f->failed && shemb__fab_now_ns() < until) {
		struct timespec nap = { .tv_nsec = 1000000 };

		shemb__fab_check_liveness(f);
		if (!f->failed)
			nanosleep(&nap, NULL);
	}
	if (!failed_before && f->failed)
		return; /* failed with the others (and maybe freed) */
	shemb__fab_fail_op(f, op, peer_gone(err) ? SHEMB_EPEER : SHEMB_EIO,
			   "%s rank %d failed: %s", what, peer, why);
}

void shemb__fab_check_liveness(struct fab *f)
{
	int left = f->boot ? shemb__boot_poll_left(f->boot) : -1;

	if (left < 0 || f->failed)
		return;
	f->failed = SHEMB_EPEER;
	snprintf(f->fail_why, sizeof(f->fail_why),
		 "rank %d left the job (its process ended or was killed, or "
		 "it closed its context)", left);
	fail_all(f, SHEMB_EPEER);
}

/* The first receive of op's round that has not landed: whom op waits
 * for, so that the timeout can name a rank; NULL if none. */
static const struct xfer *awaited(const struct op *op)
{
	const struct round *rd;

	if (op->cur >= op->nrounds)
		return NULL;
	rd = &op->rounds[op->cur];
	for (int i = 0; i < rd->nx; i++)
		if (!rd->x[i].send && !rd->x[i].landed)
			return &rd->x[i];
	return NULL;
}

/* Whom op waits for, and whether the receive it waits on was posted at
 * all (not, where the provider took no more, the engine's own cap on
 * receives was reached, or the bulk lane stayed read by a thread). */
static void tell_awaited(const struct fab *f, const struct op *op,
			 const struct xfer *x, char *buf, size_t len)
{
	snprintf(buf, len, " (still waiting for %s from rank %d%s%s)",
		 x->is_hdr ? "the call's header" : "data", x->peer,
		 op->nrounds > 1 && f->world > 2 ? ", or a rank it waits for"
						 : "",
		 x->posted ? "" : "; its receive is not posted");
}

void shemb__fab_check_timeouts(struct fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->timeout_ms * 1000000ull;

	for (struct op *op = f->ops; op; op = op->next) {
		const struct xfer *x;
		int n;

		if (op->done || now - op->last_ns < limit)
			continue;
		f->failed = SHEMB_ETIMEDOUT;
		n = snprintf(f->fail_why, sizeof(f->fail_why),
			     "collective call %u moved no data for %d ms: a "
			     "rank stopped answering", op->seq, f->timeout_ms);
		x = awaited(op);
		if (x && n > 0 && (size_t)n < sizeof(f->fail_why))
			tell_awaited(f, op, x, f->fail_why + n,
				     sizeof(f->fail_why) - (size_t)n);
		fail_all(f, SHEMB_ETIMEDOUT);
		return;
	}
}
