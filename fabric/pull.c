/*
 * pull.c - the engine's single copies (cma.c): a chunk a peer's header
 * says where to find is copied out of the peer's memory without the
 * engine's lock, where the bulk lane is read, then acknowledged.  Under
 * the engine's lock otherwise, as engine.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "shemb.h"
#include "fabric/engine.h"

/*
 * Single copies go a slice at a time (f->pull_slice), and stop after the
 * slice when a caller of this process begins to wait for an urgent
 * collective; none begins while one is held back for it (the hold of
 * progress.c): on a host with more ranks than CPUs, the urgent exchange
 * needs every rank on a CPU, and a copy in progress holds one.  Without
 * the lock between slices: going back to the engine after each (128 KiB)
 * made a 1 MiB alltoallv of 2 ranks take 20-30 us more than 140 us.
 */

static bool bulk_held(const struct fab *f)
{
	return f->urgent_waiters && shemb__fab_now_ns() < f->bulk_hold_until;
}

/*
 * The empty message of x waits in a queue of its own, posted ahead of
 * the sends (engine.c, post_queue): they go in the order of the copies,
 * that is of the chunks, which a peer that failed the call counts on
 * when it learns how many were sent (mop.c).  Queued at the head of the
 * sends, where they once went, one could pass another that the provider
 * had refused for the moment, once a send of higher priority came
 * between them.  The progress loop posts it next (shemb__fab_post).
 */
static void queue_empty_message(struct fab *f, struct xfer *x)
{
	x->pulled = true;
	shemb__fab_push_back(&f->nq_head, &f->nq_tail, x);
}

/* A chunk copied whole: it has landed, and its local work is done here,
 * by the thread that does the bulk lane's work; its empty message, which
 * completes it, goes on the urgent lane, read by callers that wait for
 * urgent collectives too. */
static void pulled(struct fab *f, struct op *op, struct xfer *x)
{
	op->last_ns = shemb__fab_coarse_ns();
	x->landed = true;
	if (shemb__fab_on_chunk(f, op, x))
		queue_empty_message(f, x);
}

/* Copy len bytes of x from `from` on, slice after slice, until done or
 * an urgent wait begins: 0 or an errno, and the bytes copied in *done. */
static int copy_slices(struct fab *f, struct xfer *x, uint64_t from,
		       size_t len, size_t *done)
{
	int err = 0;

	*done = 0;
	while (!err && *done < len) {
		size_t n = len - *done < f->pull_slice ? len - *done
						       : f->pull_slice;

		err = shemb__cma_pull(f, x->peer,
				      (char *)x->buf + x->copied + *done,
				      from + *done, n);
		if (!err)
			*done += n;
		if (atomic_load_explicit(&f->urgent_waiting,
					 memory_order_relaxed))
			break;
	}
	return err;
}

/*
 * Copy the first chunk waiting for a single copy (cma.c), or what is left
 * of it, without the lock, as the bulk lane is read: one thread at a
 * time, where the bulk lane's work is done.  The chunk stays posted
 * meanwhile, so that its op is not freed under the copy; a failed op's
 * copy ends, and is dropped.  Once the chunk is whole, its empty message
 * tells the peer.  1 if some of it was copied.
 */
int shemb__fab_run_pull(struct fab *f)
{
	struct xfer *x = f->pq_head;
	struct op *op;
	uint64_t from;
	size_t n;
	int err;

	if (!x || f->puller || bulk_held(f))
		return 0;
	f->pq_head = x->next;
	if (!f->pq_head)
		f->pq_tail = NULL;
	op = x->op;
	from = shemb__hdr_in(op, x->peer)->addr + x->off + x->copied;
	f->puller = true;
	pthread_mutex_unlock(&f->lock);
	err = copy_slices(f, x, from, x->len - x->copied, &n);
	pthread_mutex_lock(&f->lock);
	f->puller = false;
	if (!err && !op->done && x->copied + n < x->len) {
		x->copied += n;
		op->last_ns = shemb__fab_coarse_ns();
		shemb__fab_push_front(&f->pq_head, &f->pq_tail, x); /* the rest next */
		return 1;
	}
	x->posted = false;
	op->posted--;
	if (op->done) {
		shemb__fab_gave_back(f, op);
		return 1;
	}
	/* a pid reused by another process answers EFAULT or EPERM */
	if (err == ESRCH || (err && shemb__peer_proc_ended(f, x->peer))) {
		shemb__fab_peer_ended(f, x->peer);
	} else if (err) {
		/* as a failed transfer: the peer may be dying */
		char what[96];

		snprintf(what, sizeof(what), "a copy of %zu bytes out of the "
			 "memory of", x->len);
		shemb__fab_transfer_failed(f, op, x->peer, FI_EIO, what,
				   strerror(err));
	} else {
		pulled(f, op, x);
	}
	return 1;
}

