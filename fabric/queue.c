/*
 * queue.c - the engine's queues of transfers waiting to be posted: by
 * priority, with the bounds on what an op has queued or posted at once
 * (its data sends, max_chunks; its data receives, a window per run of a
 * peer's chunks), and what leaves them when an op fails.  Under the
 * engine's lock.
 */
#include "config.h"

#include "shemb.h"
#include "fabric/engine.h"

/* Take op's transfers that wait to be posted out of a queue. */
static void purge_queue(struct xfer **head, struct xfer **tail,
			const struct op *op)
{
	struct xfer *prev = NULL;

	for (struct xfer *x = *head; x; x = x->next) {
		if (x->op != op) {
			prev = x;
			continue;
		}
		if (prev)
			prev->next = x->next;
		else
			*head = x->next;
		if (*tail == x)
			*tail = prev;
		x->op->late_queued -= x->late;
		x->late = false;
	}
}

/* The chunks of op waiting to be copied were posted, as far as the
 * counts go, and no longer are. */
static void purge_pulls(struct fab *f, struct op *op)
{
	for (struct xfer *x = f->pq_head; x; x = x->next) {
		if (x->op != op)
			continue;
		x->posted = false;
		op->posted--;
	}
	purge_queue(&f->pq_head, &f->pq_tail, op);
}

void shemb__fab_unqueue(struct fab *f, struct op *op)
{
	purge_queue(&f->rq_head, &f->rq_tail, op);
	purge_queue(&f->sq_head, &f->sq_tail, op);
	purge_queue(&f->nq_head, &f->nq_tail, op);
	purge_pulls(f, op);
	op->defer_head = op->defer_tail = NULL;
}

/* A send of data (not a header): those are the ones max_chunks bounds,
 * and the receives that stand for them with single copy (acks): each is
 * a receive libfabric holds, and shm holds a bounded number of those. */
static bool is_chunk(const struct xfer *x)
{
	return x->send && !x->is_hdr;
}

/* A receive of data (a chunk, or a chunk to copy out of the peer's
 * memory), as coll.c builds them in runs, one per peer and round. */
static bool is_chunk_receive(const struct xfer *x)
{
	return !x->send && !x->is_hdr && !x->drain && !x->sink;
}

/*
 * A run's receives are queued a window at a time: the first max_chunks
 * of them (as many as the peer may have data sends in flight in the
 * op), then one more as each completes.  The first of the run not yet
 * received is then always posted, and the peer's sends, which go in the
 * run's order, always find their receives; and the receives an op holds
 * stay few.  Before, an op queued all of its receives, up to what the
 * provider holds (max_recvs): shm (1024) also keeps there the messages
 * that come before their receives, and with collectives of more chunks
 * than that in flight together, another collective's messages took the
 * last entries and a receive was refused (FI_ENOMEM).  One window for
 * the op's receives from all its peers, instead of one per run, could
 * give it all to one peer's while another peer's sends, in flight to
 * this rank, held that peer's own window shut: 4 ranks then stopped.
 */
static bool hold_receive(const struct fab *f, const struct xfer *x)
{
	return is_chunk_receive(x) && !x->released &&
	       x->run_pos >= f->max_chunks[x->op->lane];
}

/* A data receive completed: the one a window after it in its run may be
 * queued. */
static void release_receive(struct fab *f, struct xfer *x)
{
	int w = f->max_chunks[x->op->lane];

	if (x->run_after < w || x->op->done)
		return;
	x[w].released = true;
	shemb__fab_enqueue(f, &x[w]);
}

/* x waits in its op's own list: the op has max_chunks data sends queued
 * or posted; or, a receive beyond its run's window, until the one a
 * window before it completes.  Keeping them out of the engine's queues
 * spares every post a walk past them (a 64 MiB collective in 128 KiB
 * chunks has 512). */
static bool defer(struct fab *f, struct xfer *x)
{
	struct op *op = x->op;

	if (hold_receive(f, x))
		return true;
	if (!is_chunk(x))
		return false;
	if (op->chunks_queued < f->max_chunks[op->lane]) {
		op->chunks_queued++;
		return false;
	}
	shemb__fab_push_back(&op->defer_head, &op->defer_tail, x);
	return true;
}

/* x goes after every transfer of the queue of its op's priority or
 * above. */
void shemb__fab_insert_by_prio(struct xfer **head, struct xfer **tail,
			       struct xfer *x)
{
	struct xfer **at = head, *prev = NULL;
	int prio = x->op->prio;

	if (*tail && (*tail)->op->prio >= prio) { /* the usual case */
		prev = *tail;
		at = &prev->next;
	} else {
		while (*at && (*at)->op->prio >= prio) {
			prev = *at;
			at = &prev->next;
		}
	}
	x->next = *at;
	*at = x;
	if (*tail == prev)
		*tail = x;
}

/* x first in a queue, whatever its priority. */
void shemb__fab_push_front(struct xfer **head, struct xfer **tail,
			   struct xfer *x)
{
	x->next = *head;
	*head = x;
	if (!*tail)
		*tail = x;
}

/* x last in a queue, whatever its priority. */
void shemb__fab_push_back(struct xfer **head, struct xfer **tail,
			  struct xfer *x)
{
	x->next = NULL;
	if (*tail)
		(*tail)->next = x;
	else
		*head = x;
	*tail = x;
}

void shemb__fab_enqueue(struct fab *f, struct xfer *x)
{
	bool send = shemb__xfer_in_sends(x);

	if (!defer(f, x))
		shemb__fab_insert_by_prio(send ? &f->sq_head : &f->rq_head,
			       send ? &f->sq_tail : &f->rq_tail, x);
}

/* A data send of op completed: the next one it deferred is queued. */
static void undefer(struct fab *f, struct op *op)
{
	struct xfer *x = op->defer_head;

	op->chunks_queued--;
	if (!x || op->done)
		return;
	op->defer_head = x->next;
	if (!op->defer_head)
		op->defer_tail = NULL;
	shemb__fab_enqueue(f, x);
}

/* A transfer of x's op completed: the send or receive its bound held
 * back next is queued. */
void shemb__fab_queue_room(struct fab *f, struct xfer *x)
{
	if (is_chunk(x))
		undefer(f, x->op);
	else if (is_chunk_receive(x))
		release_receive(f, x);
}
