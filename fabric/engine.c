/*
 * engine.c - posting transfers, reading completions, moving ops along,
 * failing them.  Every function here runs with the communicator's lock
 * held; read_cq() lets it go while it reads the bulk lane's completion
 * queue.  Control messages are in ctrl.c, the progress thread in
 * progress.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "fabric/fi_load.h"

/* Sends in flight, headers and chunks of every op (each op's chunks
 * have their own bound, max_chunks); receives are posted ahead of their
 * messages, so that these land in place rather than being buffered: a
 * window of each peer's chunks (queue.c, hold_receive()), within what
 * the provider takes (max_recvs). */
#define MAX_SENDS_POSTED 1024
#define CHECK_EVERY_NS 1000000ull

uint64_t shemb__fab_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The same clock as of its last tick (a few ms ago at most, never
 * ahead of shemb__fab_now_ns()), for the stamps that only timeouts of
 * milliseconds or more read, taken at every completion and every turn
 * of a wait: a third of the cost of the exact clock, whose dozen reads
 * were a tenth of a small alltoallv's time on 2 ranks over shm.
 */
uint64_t shemb__fab_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t shemb__fab_tag(uint64_t cls, uint32_t seq, int round, int chunk)
{
	uint64_t s = seq & ((1u << TAG_SEQ_BITS) - 1);

	return cls << 62 | s << 32 | (uint64_t)round << TAG_CHUNK_BITS |
	       (uint64_t)chunk;
}

/* ---- ops ---- */

void *shemb__fab_scratch(struct op *op, size_t len)
{
	struct fab *f = op->f;

	if (f->spare && f->spare_len >= len) {
		op->scratch = f->spare;
		op->scratch_len = f->spare_len;
		f->spare = NULL;
	} else {
		op->scratch = malloc(len ? len : 1);
		op->scratch_len = len;
	}
	return op->scratch;
}

static void keep_spare(struct fab *f, void *p, size_t len)
{
	if (f->spare && f->spare_len >= len) {
		free(p);
		return;
	}
	free(f->spare);
	f->spare = p;
	f->spare_len = len;
}

void shemb__fab_clear_op(struct op *op)
{
	free(op->early_sent);
	op->early_sent = NULL;
	while (op->drains) {
		struct drain *d = op->drains;

		op->drains = d->next;
		free(d);
	}
	for (int r = 0; op->rounds && r < op->nrounds; r++)
		free(op->rounds[r].x);
	free(op->rounds);
	free(op->hdr_out);
	free(op->hdr_in);
	free(op->counts);
	if (op->scratch)
		keep_spare(op->f, op->scratch, op->scratch_len);
	op->rounds = NULL;
	op->nrounds = 0;
	op->hdr_out = op->hdr_in = NULL;
	op->counts = NULL;
	op->scratch = NULL;
}

void shemb__fab_free_op(struct op *op)
{
	shemb__fab_clear_op(op);
	if (op->ghost)
		shemb__fab_drop_op(op); /* a spare again */
	else
		free(op);
}

static void unlink_op(struct fab *f, struct op *op)
{
	for (struct op **p = &f->ops; *p; p = &(*p)->next) {
		if (*p == op) {
			*p = op->next;
			return;
		}
	}
}

/* An op is freed once it is done, its caller let it go, libfabric
 * holds none of its transfers, and, failed, it settled or gave up (or,
 * where ops do not settle, its peers' messages were asked for). */
void shemb__fab_maybe_free(struct fab *f, struct op *op)
{
	if (op->done && op->released && op->posted == 0 &&
	    !shemb__fab_settle_pending(op) &&
	    !shemb__fab_mop_pending(op)) {
		shemb__fab_note_succeeded(f, op);
		unlink_op(f, op);
		/* a failed op may still have transfers waiting to be posted:
		 * a settle's sinks, when the engine failed before the
		 * provider took them, which settling no longer waits for */
		if (op->status)
			shemb__fab_unqueue(f, op);
		shemb__fab_free_op(op);
	}
}

/* A transfer of op, done, came back from libfabric. */
void shemb__fab_gave_back(struct fab *f, struct op *op)
{
	if (op->settling)
		shemb__fab_settle_check(f, op);
	else
		shemb__fab_mop_gave_back(f, op);
}

static void finish(struct fab *f, struct op *op, int status)
{
	op->status = status;
	op->done = true;
	f->active--;
	f->active_bulk -= op->lane == LANE_BULK;
	shemb__fab_op_done(f);
	shemb__fab_maybe_free(f, op);
}

/*
 * A failed op keeps the transfers it posted: they stay libfabric's until
 * they complete or are cancelled, and the op stays allocated until then.
 * While the other ranks are alive, it settles (settle.c): they are told,
 * and the messages between them taken up; its caller waits for that.
 */
void shemb__fab_fail_op(struct fab *f, struct op *op, int status,
			const char *fmt, ...)
{
	bool settle = !f->failed && f->settles;

	if (op->done)
		return;
	if (fmt) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(op->why, sizeof(op->why), fmt, ap);
		va_end(ap);
	}
	shemb__fab_unqueue(f, op);
	op->aborted = true;
	op->status = status;
	op->settling = settle; /* not freed by finish() */
	if (!settle && !f->failed) /* the others fail it at once, not at
				    * their timeout; before finish(), which
				    * may free op */
		shemb__fab_tell_all(f, op);
	if (!settle && !f->failed)
		shemb__fab_mop_begin(f, op); /* before finish() frees op */
	finish(f, op, status);
	if (settle)
		shemb__fab_settle_begin(f, op);
}

/* Headers and drains land in the op's own memory, and so does the
 * incoming data of an allreduce (its scratch); the other transfers move
 * the caller's pieces.  A send that waits for its peer's single copy
 * (ack) stands for the piece the peer reads. */
static bool on_caller_buffers(const struct op *op, const struct xfer *x)
{
	const char *b = x->buf, *s = op->scratch;

	if (x->is_hdr || x->drain)
		return false;
	return !s || b < s || b >= s + op->scratch_len;
}

/* An op not done (its wait gave up on the lock) may still move anything;
 * one that settled (settle.c) holds nothing.  With single copy, a peer
 * may read a piece from where this rank's header said it is until its
 * empty message came (the ack landed), whether that ack was posted yet
 * or not, unless the op ended as a refusal once its transfers were done
 * (the acks it dropped stand for pieces no peer reads), or every peer
 * accounted for the failed op (mop.c). */
bool shemb__fab_op_holds(const struct op *op)
{
	if (!op->done || shemb__fab_settle_pending(op))
		return true;
	if (!op->status || (op->settled && op->posted == 0))
		return false;
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			const struct xfer *x = &op->rounds[r].x[i];

			if (x->posted && on_caller_buffers(op, x))
				return true;
			if (x->ack && !x->landed && op->aborted &&
			    !shemb__fab_mop_heard_all(op))
				return true;
		}
	return false;
}

static void advance(struct fab *f, struct op *op);

void shemb__fab_enqueue_round(struct fab *f, struct op *op)
{
	struct round *rd;

	if (op->cur >= op->nrounds) {
		finish(f, op, op->refused);
		return;
	}
	rd = &op->rounds[op->cur];
	if (rd->nx == 0) {
		advance(f, op);
		return;
	}
	op->pending = rd->nx;
	for (int pass = 0; pass < 2; pass++) /* receives first */
		for (int i = 0; i < rd->nx; i++)
			if (rd->x[i].send == (pass == 1) && !rd->x[i].gated)
				shemb__fab_enqueue(f, &rd->x[i]);
}

/* The round is done: its local step, then the next round. */
static void advance(struct fab *f, struct op *op)
{
	struct round *rd = &op->rounds[op->cur];
	int rc = rd->after ? rd->after(op, op->cur) : 0;

	if (!rc && op->cur == op->nrounds - 1)
		rc = op->c.fail_late;
	if (rc) {
		shemb__fab_fail_op(f, op, rc, "local step of round %d failed",
				   op->cur);
		return;
	}
	op->cur++;
	shemb__fab_enqueue_round(f, op);
}

/* A single copy's empty message, or the receive that waits for it. */
static ssize_t post_notice(struct fab *f, struct xfer *x)
{
	fi_addr_t peer = *shemb__fab_peer(f, LANE_URGENT, x->peer);

	if (shemb__peer_proc_ended(f, x->peer))
		return -FI_EHOSTDOWN;
	if (x->pulled)
		return fi_tsend(f->ep[LANE_URGENT], NULL, 0, NULL, peer,
				x->tag, &x->fctx);
	return fi_trecv(f->ep[LANE_URGENT], NULL, 0, NULL, peer, x->tag, 0,
			&x->fctx);
}

static ssize_t post_one(struct fab *f, struct xfer *x)
{
	void *desc;
	int lane = shemb__xfer_lane(x);
	fi_addr_t peer;
	ssize_t rc;

	if (x->pulled || x->ack)
		return post_notice(f, x);
	/* before a registration is taken for it */
	if (x->send && shemb__peer_proc_ended(f, x->peer))
		return -FI_EHOSTDOWN; /* a send could spin: see peer_proc.c */
	desc = shemb__ep_desc(f, x);
	if (f->mr_local && x->len && !x->mr)
		return -FI_EKEYREJECTED; /* buffer not registered */
	if (x->sink) { /* from any peer */
		rc = fi_trecv(f->ep[lane], x->buf, x->len, desc,
			      FI_ADDR_UNSPEC, x->tag,
			      shemb__fab_sink_ignore(), &x->fctx);
		if (rc)
			shemb__ep_undesc(f, x);
		return rc;
	}
	peer = *shemb__fab_peer(f, lane, x->peer);
	if (x->send)
		rc = fi_tsend(f->ep[lane], x->buf, x->len, desc, peer, x->tag,
			      &x->fctx);
	else
		rc = fi_trecv(f->ep[lane], x->buf, x->len, desc, peer, x->tag,
			      0, &x->fctx);
	if (rc)
		shemb__ep_undesc(f, x);
	return rc;
}

static void refused(struct fab *f, struct xfer *x, ssize_t rc)
{
	if (x->op->done) { /* a failed op's late receive (mop.c) */
		shemb__fab_maybe_free(f, x->op);
		return;
	}
	shemb__fab_fail_op(f, x->op, SHEMB_EIO, "libfabric refused a %s with "
			   "rank %d: %s", x->send ? "send" : "receive",
			   x->peer, rc == -FI_EKEYREJECTED
			   ? "its buffer cannot be registered"
			   : shemb__fi_strerror((int)-rc));
}

static void unlink_xfer(struct xfer **at, struct xfer **tail,
			struct xfer *prev)
{
	struct xfer *x = *at;

	*at = x->next;
	if (*tail == x)
		*tail = prev;
	x->op->late_queued -= x->late; /* posted, or failed to be */
	x->late = false;
}

/* SHEMB_FABRIC_EAGAIN's refusals (ep.c), drawn by xorshift. */
bool shemb__fab_refused_for_test(struct fab *f)
{
	uint64_t x = f->refuse_state;

	if (!f->refuse_one_in)
		return false;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	f->refuse_state = x;
	if (x % f->refuse_one_in)
		return false;
	atomic_fetch_add_explicit(&f->test_refusals, 1,
				  memory_order_relaxed);
	return true;
}

/*
 * Post from one queue, in its order, while the provider and our caps
 * allow, lane by lane.  The bound on data sends is per op (defer()): an
 * op whose chunks wait for a peer that has not reached them (the next
 * round of a ring) must not hold up the chunks of others, which that
 * peer may be waiting for.
 *
 * No receive is posted on the bulk lane while a thread reads its
 * completions (read_cq): libfabric 1.17's shm matches an arriving message
 * against the posted receives and, finding none, queues it as unexpected
 * in two steps, each under its lock; a receive posted between them finds
 * neither, and the two wait for each other for good.  The reader posts
 * them once it is done.
 */
static void post_from(struct fab *f, struct xfer **head, struct xfer **tail,
		      bool send)
{
	int *posted = send ? f->sends_posted : f->recvs_posted;
	int cap = send ? MAX_SENDS_POSTED : f->max_recvs;
	bool full[NLANES] = { [LANE_BULK] = !send && f->bulk_reader };
	struct xfer **at = head, *prev = NULL;

	while (*at && !(full[LANE_BULK] && full[LANE_URGENT])) {
		struct xfer *x = *at;
		int lane = shemb__xfer_lane(x);
		ssize_t rc = -FI_EAGAIN;

		if (x->pull && !x->pulled) { /* for run_pull(), not libfabric */
			unlink_xfer(at, tail, prev);
			x->posted = true;
			x->op->posted++;
			shemb__fab_insert_by_prio(&f->pq_head, &f->pq_tail, x);
			continue;
		}
		if (posted[lane] >= cap)
			full[lane] = true;
		if (!full[lane])
			rc = shemb__fab_refused_for_test(f) ? -FI_EAGAIN
							  : post_one(f, x);
		if (rc == -FI_EAGAIN) {
			full[lane] = true; /* the provider's queue */
			prev = x;
			at = &x->next;
			continue;
		}
		unlink_xfer(at, tail, prev);
		if (rc == -FI_EHOSTDOWN) {
			shemb__fab_peer_ended(f, x->peer);
			at = head; /* every op's transfers left the queues */
			prev = NULL;
			continue;
		}
		if (rc) {
			refused(f, x, rc);
			at = head; /* the op's other transfers left the queue */
			prev = NULL;
			continue;
		}
		x->posted = x->handed = true;
		x->op->posted++;
		posted[lane]++;
	}
}

/* The receives, or the sends: first the empty messages of single
 * copies, in the order of the copies (pull.c), ahead of the other sends,
 * some of which may wait for the peers' own empty messages. */
static void post_queue(struct fab *f, bool send)
{
	if (!send) {
		post_from(f, &f->rq_head, &f->rq_tail, false);
		return;
	}
	post_from(f, &f->nq_head, &f->nq_tail, true);
	post_from(f, &f->sq_head, &f->sq_tail, true);
}

/* ---- completions ---- */

/* The peers learn it as the op settles (settle.c). */
static void mismatch(struct fab *f, struct op *op)
{
	op->disagreed = true;
	shemb__fab_fail_op(f, op, SHEMB_EINVAL, NULL);
}

/*
 * A receive that completed with a message of another tag.  libfabric 1.17
 * did it on shm with a stray message left by a collective that failed on
 * another rank (a header nobody posted a receive for), matched under the
 * mask of a receive posted earlier (ctrl.c, post_ctrl_rx_one, which no
 * longer ignores any bit).  Kept as a guard: the stray one is dropped and
 * the receive posted again for its own message.
 */
static bool wrong_message(struct fab *f, struct xfer *x, uint64_t tag, int err)
{
	bool in_sends = shemb__xfer_in_sends(x); /* an ack waits there */

	if (shemb__xfer_sends_message(x) || err || tag == x->tag)
		return false;
	atomic_fetch_add_explicit(&f->wrong_messages, 1,
				  memory_order_relaxed);
	x->posted = false;
	x->op->posted--;
	(in_sends ? f->sends_posted : f->recvs_posted)[shemb__xfer_lane(x)]--;
	shemb__ep_undesc(f, x);
	if (!x->op->done) /* first in line again */
		shemb__fab_push_front(in_sends ? &f->sq_head : &f->rq_head,
			   in_sends ? &f->sq_tail : &f->rq_tail, x);
	else
		shemb__fab_gave_back(f, x->op);
	return true;
}

/* The round's work on a data chunk just received; false if it failed
 * the op. */
bool shemb__fab_on_chunk(struct fab *f, struct op *op, const struct xfer *x)
{
	struct round *rd = &op->rounds[op->cur];
	int rc = rd->on_chunk ? rd->on_chunk(op, x) : 0;

	if (rc)
		shemb__fab_fail_op(f, op, rc, "local step on a chunk of round "
				   "%d failed", op->cur);
	return rc == 0;
}

/* Room in f->discard for a chunk of either lane or a header with its
 * piece or reason, made when the engine opens: receives may be writing
 * to it at any time. */
bool shemb__fab_discard_room(struct fab *f)
{
	size_t hdr = sizeof(struct shemb__hdr) + f->inline_max + 256;
	size_t len = f->chunk[LANE_BULK] > f->chunk[LANE_URGENT]
			     ? f->chunk[LANE_BULK]
			     : f->chunk[LANE_URGENT];

	if (!f->discard) {
		f->discard_len = len > hdr ? len : hdr;
		f->discard = malloc(f->discard_len);
	}
	return f->discard != NULL;
}

/*
 * This rank refuses op (fabric/README.md), or its counts disagree with
 * peer's, and peer sent it data before it could know, as its header says:
 * receive it all the same, into a buffer nobody reads (by single copy:
 * acknowledge the chunks without copying them), so that no message is
 * left unreceived here and no send waits at the peer for good.  The
 * chunks are cut as the peer cut them.
 */
static int drain(struct fab *f, struct op *op, int peer)
{
	size_t bytes = shemb__coll_ungated_bytes(op, peer);
	size_t chunk = shemb__coll_chunk(op);
	size_t n = (bytes + chunk - 1) / chunk;
	struct drain *d;

	if (!n)
		return 0;
	if (n > MAX_CHUNKS)
		return SHEMB_ENOMEM;
	d = calloc(1, sizeof(*d) + n * sizeof(d->x[0]));
	if (!d)
		return SHEMB_ENOMEM;
	d->n = (int)n;
	d->next = op->drains;
	op->drains = d;
	for (size_t k = 0; k < n; k++) {
		struct xfer *x = &d->x[k];

		x->op = op;
		x->peer = peer;
		x->drain = true;
		x->buf = op->pull ? NULL : f->discard;
		x->len = bytes - k * chunk < chunk ? bytes - k * chunk : chunk;
		x->tag = shemb__fab_tag(TAG_DATA, op->seq, op->cur, (int)k);
		x->pull = x->pulled = op->pull;
		op->pending++;
		shemb__fab_enqueue(f, x);
	}
	return 0;
}

/*
 * A header x landed (len bytes): checked, it lets what waited for it go
 * (the peer's data may come), or, a refusal or counts that disagree
 * (coll.c), drops it; a refusing op, or one whose counts disagree with
 * the peer's, takes the data the peer sent without waiting.  false if it
 * failed op.
 */
static bool take_header(struct fab *f, struct xfer *x, size_t len)
{
	struct op *op = x->op;
	struct round *rd = &op->rounds[op->cur];
	int rc = shemb__coll_take_header(op, x->peer, len);
	bool dropped = rc == SHEMB__HDR_REFUSED;

	if (rc && !dropped) {
		mismatch(f, op);
		return false;
	}
	if (dropped)
		op->pending -= x->gate_hi - x->gate_lo;
	for (int i = x->gate_lo; dropped && i < x->gate_hi; i++)
		rd->x[i].dropped = true; /* never run (settle.c) */
	for (int i = x->gate_lo; !dropped && i < x->gate_hi; i++)
		shemb__fab_enqueue(f, &rd->x[i]);
	if ((dropped || op->refusing) && (rc = drain(f, op, x->peer))) {
		shemb__fab_fail_op(f, op, rc, "no memory to take the data "
				   "rank %d sent", x->peer);
		return false;
	}
	return true;
}

static void on_transfer(struct fab *f, struct xfer *x, size_t len, int err)
{
	struct op *op = x->op;

	x->posted = false;
	op->posted--;
	(shemb__xfer_in_sends(x) ? f->sends_posted
				 : f->recvs_posted)[shemb__xfer_lane(x)]--;
	shemb__ep_undesc(f, x);
	if (x->pulled)
		len = x->len; /* the copy was whole; its message, empty */
	shemb__fab_queue_room(f, x);
	if (shemb__xfer_takes_message(x) && err != FI_ECANCELED)
		op->caught[shemb__xfer_lane(x)]++; /* for settle.c */
	if (x->ack && x->drain_late && !err)
		atomic_fetch_add_explicit(&f->late_acks, 1,
					  memory_order_relaxed);
	if (op->done) {
		shemb__fab_gave_back(f, op);
		return;
	}
	if (err == FI_ETRUNC) {
		snprintf(op->why, sizeof(op->why), "rank %d sent more bytes "
			 "than this rank expects from it", x->peer);
		mismatch(f, op);
		return;
	}
	if (err) {
		shemb__fab_transfer_failed(f, op, x->peer, err,
					   "transfer with",
					   shemb__fi_strerror(err));
		return;
	}
	if (!x->send && x->is_hdr && !take_header(f, x, len))
		return;
	if (!x->send && !x->is_hdr && !x->drain && len != x->len) {
		snprintf(op->why, sizeof(op->why), "rank %d sent %zu bytes "
			 "where this rank expects %zu", x->peer, len, x->len);
		mismatch(f, op);
		return;
	}
	op->last_ns = shemb__fab_coarse_ns();
	x->landed = !x->send || x->ack;
	if (!x->send && !x->is_hdr && !x->pulled && !x->drain &&
	    !shemb__fab_on_chunk(f, op, x))
		return;
	if (--op->pending == 0)
		advance(f, op);
}

static void on_completion(struct fab *f, void *ctx, size_t len,
			  uint64_t tag, int err)
{
	struct xfer *x = ctx;

	if (err < 0) /* some providers give the code negated */
		err = -err;
	if (shemb__fab_ctrl_done(f, x, err))
		return;
	if (x->sink)
		shemb__fab_sink_done(f, x, err);
	else if (!wrong_message(f, x, tag, err))
		on_transfer(f, x, len, err);
}

/*
 * Read a lane's completion queue.  The bulk lane's is read without the
 * lock, by one thread at a time: reading it is where shm copies the data
 * of the chunks that arrived, which takes milliseconds, and the urgent
 * lane's collectives must meanwhile be started, posted and completed
 * (the domain is FI_THREAD_SAFE), all but the bulk lane's receives
 * (post_queue).  The entries are handled under the lock; their transfers
 * stay allocated while posted.
 */
static int read_cq(struct fab *f, int lane)
{
	struct fi_cq_tagged_entry e[32];
	struct fi_cq_err_entry err;
	bool unlocked = lane == LANE_BULK;
	ssize_t n;

	if (unlocked) {
		if (f->bulk_reader)
			return 0;
		f->bulk_reader = true;
		f->bulk_read_ns = shemb__fab_coarse_ns();
		pthread_mutex_unlock(&f->lock);
	}
	n = fi_cq_read(f->cq[lane], e, 32);
	memset(&err, 0, sizeof(err));
	if (n == -FI_EAVAIL && fi_cq_readerr(f->cq[lane], &err, 0) != 1)
		n = 0;
	if (unlocked) {
		pthread_mutex_lock(&f->lock);
		f->bulk_reader = false;
		/* what waited for the read */
		shemb__fab_mop_cancel_deferred(f);
		post_queue(f, false);
	}
	for (ssize_t i = 0; i < n; i++)
		on_completion(f, e[i].op_context, e[i].len,
			      e[i].flags & FI_RECV ? e[i].tag
						   : ((struct xfer *)
							e[i].op_context)->tag,
			      0);
	if (n == -FI_EAVAIL) {
		on_completion(f, err.op_context, err.len,
			      ((struct xfer *)err.op_context)->tag, err.err);
		return 1;
	}
	return n > 0 ? (int)n : 0;
}

/* The urgent lane first, and again after each batch of the bulk one
 * (unless the caller leaves the bulk lane to the progress thread). */
static int read_cqs(struct fab *f, bool bulk)
{
	int n = read_cq(f, LANE_URGENT);

	/* the bulk lane at least every few batches, even under a steady
	 * stream of urgent completions */
	if (bulk && (n == 0 || ++f->urgent_batches % 8 == 0))
		n += read_cq(f, LANE_BULK) + shemb__fab_run_pull(f) +
		     read_cq(f, LANE_URGENT);
	return n;
}

void shemb__fab_post(struct fab *f)
{
	post_queue(f, false);
	post_queue(f, true);
}

int shemb__fab_progress(struct fab *f, bool bulk)
{
	uint64_t now, finished = f->finished;
	int n = 0, got;

	shemb__fab_flush_ctrl(f);
	post_queue(f, false);
	post_queue(f, true);
	/* a batch at least, then until an op finishes or a caller wants
	 * the lock: a waiter, or a caller that would start the next
	 * collective, must not wait for the busy ones */
	while ((got = read_cqs(f, bulk)) > 0) {
		n += got;
		/* what the completions released (receives a header let
		 * through, sends below their op's bound) goes at once */
		shemb__fab_post(f);
		if (f->finished != finished || n >= 4096 ||
		    shemb__fab_callers_waiting(f))
			break;
	}
	now = shemb__fab_now_ns();
	if (now >= f->next_check_ns) {
		f->next_check_ns = now + CHECK_EVERY_NS;
		shemb__fab_check_liveness(f);
		shemb__fab_check_timeouts(f, now);
		shemb__fab_settle_timeouts(f, now);
		shemb__fab_mop_timeouts(f, now);
	}
	return n;
}
