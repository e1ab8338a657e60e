/*
 * mop.c - over shm, where failed collectives do not settle (settle.c),
 * the messages a peer sent for a failed op are still received.
 *
 * shm (libfabric 1.17) completes a lane's sends to a peer in order, and
 * a message larger than it injects only once received; one nobody
 * receives holds back every later send of that lane to that peer, those
 * of later calls among them, which then end at their timeout.  A failed
 * op leaves such a message where its receive was still queued, or gated
 * by a header that had not come, when the op failed, and the peer had
 * sent it (traced on 3 ranks: one rank found no memory for a call, and
 * rank 0 had sent rank 1 an 8 KiB piece whose receive rank 1 then
 * dropped).
 *
 * Every rank that fails an op tells every other how many of the op's
 * messages it sent it, lane by lane (ctrl.c, shemb__fab_tell_all).  A
 * peer sends its messages of one lane to one rank in the order this
 * rank's receives of them are built (round by round; in a round, the
 * header first, then the chunks in order; coll.c builds the same rounds
 * on both sides), so the first n of those receives are the n messages
 * sent; with single copy, the empty messages that acknowledge copies
 * are counted apart (each_from()).  Those that this op never handed to
 * libfabric are received now, each by its exact tag (no mask for shm to
 * mismatch), into f->discard.
 * What a peer never sent is not asked for, and its receives posted here
 * are cancelled (cancel_unsent()).  The op stays allocated until every
 * peer's account came (or the timeout passed, or the engine failed) and
 * those receives came back, and its caller waits for that (mop_wait)
 * where the op can then hold nothing: not where calls disagreed or this
 * rank refused the call, nor once a peer's messages could not be taken
 * in order.  With single copy, a peer that accounted for the op reads
 * none of this rank's pieces any more (shemb__fab_mop_heard_all()), and
 * this rank's wait also waits for its own copy under way.  Under the
 * engine's lock.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_endpoint.h>

#include "shemb.h"
#include "fabric/engine.h"

bool shemb__fab_mop_pending(const struct op *op)
{
	if (op->late_queued > 0)
		return true;
	return op->mopping && !op->f->failed &&
	       op->heard < op->f->world - 1;
}

/* The caller of op waits for its mopping up where it can end with
 * nothing of op posted: not where this rank refused the call
 * (in_order()), nor where the calls disagreed. */
void shemb__fab_mop_begin(struct fab *f, struct op *op)
{
	op->mopping = true;
	op->mop_ns = shemb__fab_now_ns();
	op->mop_wait = !op->orphan && !op->refusing && !op->disagreed;
}

/* Every peer accounted for op: one that failed it reads no more of this
 * rank's pieces (what a copy under way still reads lands in a buffer of
 * that failed call), one that finished it sent every empty message. */
bool shemb__fab_mop_heard_all(const struct op *op)
{
	return op->mopping && !op->disagreed &&
	       op->heard >= op->f->world - 1;
}

bool shemb__fab_mop_waits(const struct op *op)
{
	return op->mop_wait && !op->f->failed &&
	       (shemb__fab_mop_pending(op) || op->posted > 0);
}

/* The caller of op may go: everything sent for op came, or will not. */
static void end_wait(struct fab *f, struct op *op)
{
	op->mop_wait = false;
	shemb__fab_op_done(f);
}

static void check_wait(struct fab *f, struct op *op)
{
	if (op->mop_wait && !shemb__fab_mop_waits(op))
		end_wait(f, op);
}

void shemb__fab_mop_gave_back(struct fab *f, struct op *op)
{
	check_wait(f, op);
	shemb__fab_maybe_free(f, op);
}

/* Whether op's receives from peer take its messages in order: not where
 * this rank refused the call, nor from a peer that refused it or whose
 * counts disagreed (its transfers dropped, its data taken by drains of
 * their own: engine.c). */
static bool in_order(const struct op *op, int peer)
{
	if (op->refusing)
		return false;
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++)
			if (op->rounds[r].x[i].peer == peer &&
			    op->rounds[r].x[i].dropped)
				return false;
	for (const struct drain *d = op->drains; d; d = d->next)
		if (d->n && d->x[0].peer == peer && !d->x[0].drain_late)
			return false;
	return true;
}

/*
 * fn on each of op's receives from peer that takes a message, in the
 * order they take the peer's messages, lane by lane, with whether peer
 * sent that message (by peer's account c: it is among the first sent[l]
 * of its lane l).  The empty messages of the single copies of this
 * rank's pieces (acks) are counted apart: the peer sends them in the
 * order of its copies, which is the order of the chunks (pull.c), but
 * one may pass its header when that waited to be posted.
 */
static void each_from(struct op *op, int peer, const struct shemb__ctrl *c,
		      void (*fn)(struct xfer *x, bool was_sent, void *arg),
		      void *arg)
{
	uint32_t seen[NLANES] = { 0 }, sent[NLANES], acks = 0;

	memcpy(sent, c->sent, sizeof(sent));
	sent[LANE_URGENT] -= c->acks < sent[LANE_URGENT] ? c->acks
							 : sent[LANE_URGENT];
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			struct xfer *x = &op->rounds[r].x[i];
			int l;

			if (x->peer != peer || !shemb__xfer_takes_message(x))
				continue;
			l = shemb__xfer_lane(x);
			if (x->ack)
				fn(x, acks++ < c->acks, arg);
			else
				fn(x, seen[l]++ < sent[l], arg);
		}
}

/* A receive into f->discard of the message of tag, len bytes at most,
 * queued to be posted; ack: the empty message of a single copy, on the
 * urgent lane. */
static void queue_late(struct fab *f, struct op *op, struct xfer *x,
		       int peer, uint64_t tag, bool is_hdr, bool ack,
		       size_t len)
{
	memset(x, 0, sizeof(*x));
	x->op = op;
	x->peer = peer;
	x->drain = x->late = x->drain_late = true;
	x->is_hdr = is_hdr; /* with ack, its lane */
	x->ack = ack;
	x->buf = f->discard;
	x->len = ack ? 0 : len < f->discard_len ? len : f->discard_len;
	x->tag = tag;
	op->late_queued++;
	shemb__fab_enqueue(f, x);
}

static struct drain *new_drain(struct op *op, int n)
{
	struct drain *d = calloc(1, sizeof(*d) + (size_t)n * sizeof(d->x[0]));

	if (d) {
		d->n = n;
		d->next = op->drains;
		op->drains = d;
	}
	return d;
}

/* The receives of the messages a peer sent that no receive here was
 * handed to libfabric for: counted, then queued into d. */
struct unreceived {
	struct fab *f;
	struct drain *d;
	int n;
};

static void count_unreceived(struct xfer *x, bool was_sent, void *arg)
{
	struct unreceived *u = arg;

	u->n += was_sent && !x->handed;
}

static void receive_late(struct xfer *x, bool was_sent, void *arg)
{
	struct unreceived *u = arg;

	if (was_sent && !x->handed)
		queue_late(u->f, x->op, &u->d->x[u->n++], x->peer, x->tag,
			   x->is_hdr, x->ack, x->len);
}

static void mop_peer(struct fab *f, struct op *op, int peer,
		     const struct shemb__ctrl *c)
{
	struct unreceived u = { .f = f };

	each_from(op, peer, c, count_unreceived, &u);
	if (!u.n || !(u.d = new_drain(op, u.n)))
		return; /* nothing, or left unreceived as before */
	u.n = 0;
	each_from(op, peer, c, receive_late, &u);
}

/*
 * A call that failed here at its start has no rounds here, and its peers
 * may have sent this rank messages before they learned of it: a header,
 * in the first round in which they send to this rank (round0 of their
 * account: round 0 of a one-round call, a later one of a pairwise
 * alltoallv or a barrier, which need not wait for this rank to get
 * there), and, in a one-round call, the chunks of a piece that did not
 * wait for this rank's header (an urgent call's after the header on the
 * urgent lane, else on the bulk lane); nothing after, which waits for
 * this rank.  Those are received by the op kept for them (an orphan).
 * The call's lane is the first account's with data; one that disagrees
 * is not followed.
 */
static bool orphan_lane(struct op *op, uint32_t nu, uint32_t nb)
{
	int lane = nu > 1 ? LANE_URGENT : LANE_BULK;

	if (nu <= 1 && nb == 0)
		return true; /* a header at most */
	if (op->lane_set)
		return op->lane == lane;
	op->lane = lane;
	op->lane_set = true;
	return true;
}

static void mop_unbuilt(struct fab *f, struct op *op, int peer,
			const uint32_t *sent, uint32_t round)
{
	uint32_t nu = sent[LANE_URGENT], nb = sent[LANE_BULK];
	size_t len = f->discard_len;
	struct drain *d;

	if (nu + nb == 0 || (nu > 1 && nb > 0) || nu + nb > MAX_CHUNKS ||
	    round >= MAX_ROUNDS || (nu + nb > 1 && round > 0) ||
	    !orphan_lane(op, nu, nb))
		return; /* not what a call sends a rank not in it */
	d = new_drain(op, (int)(nu + nb));
	for (uint32_t k = 0; d && k < nu + nb; k++) {
		bool hdr = k == 0 && nu > 0;
		uint32_t chunk = nu ? k - 1 : k;

		queue_late(f, op, &d->x[k], peer,
			   hdr ? shemb__fab_tag(TAG_HDR, op->seq, (int)round,
						0)
			       : shemb__fab_tag(TAG_DATA, op->seq, 0,
						(int)chunk),
			   hdr, false, len);
	}
}

/* op, done, in the engine's list as an orphan. */
static void adopt(struct fab *f, struct op *op)
{
	op->lane = LANE_BULK;
	op->done = op->released = op->aborted = true;
	op->orphan = true;
	shemb__fab_mop_begin(f, op);
	op->next = f->ops;
	f->ops = op;
}

/* What peers sent for seq, by the accounts that came before this rank
 * failed it at its start without memory, kept since (ctrl.c,
 * shemb__fab_note_unsettled), is asked for by op. */
static void take_kept(struct fab *f, struct op *op)
{
	struct unsettled *u = shemb__fab_unsettled(f, op->seq);

	if (!u || !u->kept)
		return;
	op->heard = u->heard;
	for (int p = 0; p < f->world; p++)
		if (p != f->rank)
			mop_unbuilt(f, op, p, u->early[p].sent,
				    u->early[p].round0);
	u->kept = false;
}

void shemb__fab_mop_keep(struct fab *f, const struct shemb__ctrl *c)
{
	struct unsettled *u = shemb__fab_unsettled(f, c->seq);
	struct peer_account *a;

	if (!u || !u->kept || u->heard >= f->world - 1 ||
	    c->from >= (uint32_t)f->world)
		return;
	u->heard++;
	a = &u->early[c->from];
	for (int l = 0; l < NLANES; l++)
		a->sent[l] += c->sent[l];
	a->round0 = c->round0;
}

struct op *shemb__fab_mop_orphan(struct fab *f, uint32_t seq)
{
	struct op *op;

	if (f->settles || f->failed)
		return NULL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return NULL; /* its peers' messages stay unreceived */
	op->f = f;
	op->seq = seq;
	op->status = SHEMB_ENOMEM;
	adopt(f, op);
	take_kept(f, op);
	return op;
}

/*
 * The accounts that came for a call before this rank failed it at its
 * start without memory say what the peers sent it; an orphan asks for
 * that once there is memory for one (at the next start), if no later
 * account made one already.  Until then, those messages hold back the
 * peers' later sends to this rank (shm completes them in order).
 */
void shemb__fab_mop_kept(struct fab *f)
{
	for (int i = 0; i < UNSETTLED_RING; i++) {
		struct unsettled *u = &f->unsettled[i];
		struct op *op;

		if (!u->kept || shemb__fab_find_op(f, u->seq))
			continue;
		op = shemb__fab_mop_orphan(f, u->seq);
		if (!op)
			return;
		shemb__fab_maybe_free(f, op); /* nothing sent, or all came */
	}
}

/*
 * A call that failed at its start here (peers failed it first, or this
 * rank could not build it): the peers that had started it may have sent
 * this rank messages all the same (their headers, sent at their start).
 * The op is kept as an orphan to receive them, from the accounts that
 * came early (op->heard counts them already, peer by peer in early) and
 * those still to come.
 */
bool shemb__fab_mop_unstarted(struct fab *f, struct op *op,
			      struct peer_account *early)
{
	bool adopted = !f->settles && !f->failed;

	if (adopted) {
		adopt(f, op);
		for (int p = 0; early && p < f->world; p++)
			if (p != f->rank)
				mop_unbuilt(f, op, p, early[p].sent,
					    early[p].round0);
		shemb__fab_maybe_free(f, op);
	}
	free(early);
	return adopted;
}

/*
 * A receive posted whose message the peer did not send (beyond the first
 * it sent of that lane), and never will: its op failed, and it sends
 * nothing more for it.  Cancelled, which is safe here (no message can
 * race the cancel), and frees the receive shm would hold for good (it
 * holds 1024): a rank without memory for a call leaves every peer's
 * header receive for its own header so.  On the bulk lane, only while no
 * thread reads that lane's completions, as its receives are posted
 * (engine.c, read_cq): a cancel made while another thread read it once
 * never came back (fabric/README.md).  So those are marked, and made
 * once the peer's receives are walked, or, while a thread reads that
 * lane, right after its read.
 */
struct unsent {
	struct fab *f;
	bool known[NLANES];          /* lanes whose order is known */
};

static void cancel_unsent(struct xfer *x, bool was_sent, void *arg)
{
	struct unsent *u = arg;
	struct fab *f = u->f;
	int lane = shemb__xfer_lane(x);

	if (was_sent || !x->posted || !u->known[lane])
		return;
	if (lane == LANE_BULK) { /* shemb__fab_mop_cancel_deferred() */
		x->cancel_later = true;
		f->bulk_cancels++;
		return;
	}
	fi_cancel(&f->ep[lane]->fid, &x->fctx);
}

static void cancel_marked(struct fab *f, struct op *op)
{
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			struct xfer *x = &op->rounds[r].x[i];

			if (!x->cancel_later)
				continue;
			x->cancel_later = false;
			if (x->posted)
				fi_cancel(&f->ep[LANE_BULK]->fid, &x->fctx);
		}
}

void shemb__fab_mop_cancel_deferred(struct fab *f)
{
	if (!f->bulk_cancels || f->bulk_reader)
		return;
	for (struct op *op = f->ops; op; op = op->next)
		if (op->done)
			cancel_marked(f, op);
	f->bulk_cancels = 0;
}

/* A peer's account of op, or its answer that it finished op (which
 * carries its account: ctrl.c, answer_finished). */
void shemb__fab_mop_hear(struct fab *f, struct op *op,
			 const struct shemb__ctrl *c)
{
	int from = (int)c->from;
	struct unsent u = { .f = f, .known = { true, true } };
	struct shemb__ctrl all;

	if (!op->mopping || op->heard >= f->world - 1)
		return;
	op->heard++;
	if (from < 0 || from >= f->world || from == f->rank)
		return;
	if (c->flags & CTRL_EVERYTHING) { /* it succeeded: all came */
		if (op->disagreed) { /* but it may have built another call */
			check_wait(f, op);
			shemb__fab_maybe_free(f, op);
			return;
		}
		all = *c;
		shemb__fab_settle_expected(op, from, &all);
		c = &all;
	}
	/* calls that disagree: order only guessed, the wait not made,
	 * the bulk lane's receives left as they are */
	if (c->flags & CTRL_DISAGREED)
		op->disagreed = true;
	if (op->disagreed && op->mop_wait)
		end_wait(f, op);
	u.known[LANE_BULK] = !op->disagreed;
	if (op->orphan) {
		mop_unbuilt(f, op, from, c->sent, c->round0);
	} else if (in_order(op, from)) {
		mop_peer(f, op, from, c);
		each_from(op, from, c, cancel_unsent, &u);
	} else {
		/* out of order, but a lane it sent nothing on is moot */
		for (int l = 0; l < NLANES; l++)
			u.known[l] = u.known[l] && c->sent[l] == 0;
		each_from(op, from, c, cancel_unsent, &u);
		if (op->mop_wait &&
		    (!u.known[LANE_URGENT] || !u.known[LANE_BULK]))
			end_wait(f, op); /* what is left stays posted */
	}
	shemb__fab_mop_cancel_deferred(f);
	check_wait(f, op);
	shemb__fab_maybe_free(f, op); /* posted with the next batch */
}

/*
 * A late receive on the urgent lane that did not complete within the
 * timeout was a wrong guess (an orphan's, of a round a call sends a rank
 * first that is not the one its account names): the peer's urgent
 * messages all came before its account (shm delivers a lane's messages
 * from one peer in order), so the one guessed never comes, and
 * cancelling it races nothing.
 */
static void cancel_late(struct fab *f, struct op *op)
{
	op->late_cancelled = true;
	for (struct drain *d = op->drains; d; d = d->next)
		for (int k = 0; k < d->n; k++)
			if (d->x[k].drain_late && d->x[k].posted &&
			    shemb__xfer_lane(&d->x[k]) == LANE_URGENT)
				fi_cancel(&f->ep[LANE_URGENT]->fid,
					  &d->x[k].fctx);
}

/* Accounts not come within the timeout are not waited for. */
void shemb__fab_mop_timeouts(struct fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->timeout_ms * 1000000ull;

	for (struct op *op = f->ops, *next; op; op = next) {
		next = op->next; /* may be freed */
		if (!op->mop_ns || now - op->mop_ns < limit)
			continue;
		if (!op->late_cancelled && op->posted > 0)
			cancel_late(f, op);
		if (op->mop_wait)
			end_wait(f, op); /* it holds what it holds */
		if (op->mopping) {
			op->mopping = false;
			shemb__fab_maybe_free(f, op);
		}
	}
}
