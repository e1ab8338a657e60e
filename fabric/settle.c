/*
 * settle.c - what a failed collective leaves between the ranks, taken up
 * before its buffers are given back.
 *
 * A collective that fails on one rank (its call disagrees, it finds no
 * memory, a local step or a transfer fails) cannot finish on the others,
 * and each rank stops wherever it was: receives posted that nothing will
 * match, messages sent that nobody will receive (over shm, a large one
 * holds back the later sends of its lane; over rxm, they fill the
 * receiver's buffers), and, with single copy, pieces a peer may still
 * read.  libfabric's fi_cancel() alone cannot take them back: a message
 * already on its way may still match a receive reported cancelled (shm,
 * libfabric 1.17), and nothing takes up a message sent.
 *
 * So every rank that fails the op tells every other rank, in its control
 * message, how many messages of the op it sent it, lane by lane, and
 * posts on each lane a receive of any message of the op (a sink, into
 * f->discard).  A rank that had finished the op answers that it sent
 * everything the asker's op expects from it.  Once every peer's account
 * has come and as many messages of the op were received here (by its own
 * receives or the sinks), no message of it is on its way: the receives
 * left are cancelled, and once libfabric has given back every transfer,
 * the op is settled and holds nothing.  A rank that found no memory for
 * the op takes part with a spare op (a ghost); one without a spare says
 * so (CTRL_UNSETTLED), and the others stop settling the op.
 *
 * Not over shm (libfabric 1.17): it matches a receive posted after a
 * message came with the ignored bits of whichever receive last held the
 * message's entry, so a sink posted late misses messages of its op, and
 * a sink's mask left on an entry lets a later receive take another
 * round's or call's message; with 4 ranks, a header was still lost now
 * and then.  There, a failed op is only told, as before, and leaves
 * what it leaves (fabric/README.md).
 *
 * A rank that does not answer within the timeout (it left, or does not
 * move its transfers) leaves the op unsettled, holding what it held
 * before (engine.c, shemb__fab_op_holds).  Under the engine's lock.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "shemb.h"
#include "fabric/engine.h"

/* Spare ops for starts without memory: a shortage fails starts in a row,
 * and each ghost lives until the peers' accounts come. */
#define OP_SPARES 4

/* fn on each transfer of op: its rounds', then its drains'. */
static void each_xfer(struct op *op, void (*fn)(struct xfer *x, void *arg),
		      void *arg)
{
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++)
			fn(&op->rounds[r].x[i], arg);
	for (struct drain *d = op->drains; d; d = d->next)
		for (int k = 0; k < d->n; k++)
			fn(&d->x[k], arg);
}

/* Of the transfers with peer, the messages sent (handed to libfabric),
 * else the receives (all of them, handed or not), counted lane by lane;
 * and of those, the empty messages of single copies (acks). */
struct tally {
	int peer;
	bool sent;
	uint32_t *n;
	uint32_t acks;
};

static void tally_one(struct xfer *x, void *arg)
{
	struct tally *t = arg;
	bool counted = t->sent ? shemb__xfer_sends_message(x) && x->handed
			       : shemb__xfer_takes_message(x);

	if (x->peer != t->peer || x->dropped || !counted)
		return;
	t->n[shemb__xfer_lane(x)]++;
	t->acks += x->pulled || x->ack;
}

static uint32_t tally(const struct op *op, int peer, bool sent,
		      uint32_t n[NLANES])
{
	struct tally t = { .peer = peer, .sent = sent, .n = n };

	each_xfer((struct op *)op, tally_one, &t);
	return t.acks;
}

/* The round of op's first message handed over to peer, 0 if none. */
static uint32_t first_round(const struct op *op, int peer)
{
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			const struct xfer *x = &op->rounds[r].x[i];

			if (x->peer == peer && x->handed &&
			    shemb__xfer_sends_message(x))
				return (uint32_t)r;
		}
	return 0;
}

/* c's counts: of what op sent peer, or of what it expects from it. */
static void fill_account(const struct op *op, int peer, bool sent,
			 struct shemb__ctrl *c)
{
	memset(c->sent, 0, sizeof(c->sent));
	c->acks = tally(op, peer, sent, c->sent);
	c->round0 = sent ? first_round(op, peer) : 0;
}

void shemb__fab_settle_account(const struct op *op, int peer,
			       struct shemb__ctrl *c)
{
	fill_account(op, peer, true, c);
}

void shemb__fab_settle_expected(const struct op *op, int peer,
				struct shemb__ctrl *c)
{
	fill_account(op, peer, false, c);
}

/* Settled, and libfabric gave every transfer back. */
static bool settle_over(const struct op *op)
{
	return op->settled && op->posted == 0;
}

bool shemb__fab_settle_pending(const struct op *op)
{
	return op->settling && !op->f->failed && !settle_over(op);
}

/*
 * The sinks: any message of op of one class (data, headers) on one lane,
 * of any round or chunk, from any peer.  Headers take only the urgent
 * lane.  One sink for both classes would ignore the class bit, and shm
 * (libfabric 1.17) was seen to leave messages unmatched by such a
 * receive (a 4-rank call that disagreed, about one run in four).
 */
static const struct {
	int lane;
	uint64_t cls;
} sinks[NSINKS] = {
	{ LANE_BULK, TAG_DATA },
	{ LANE_URGENT, TAG_DATA },
	{ LANE_URGENT, TAG_HDR },
};

static void queue_sink(struct fab *f, struct op *op, int i)
{
	struct xfer *x = &op->sink[i];

	memset(x, 0, sizeof(*x));
	x->op = op;
	x->sink = true;
	x->sink_lane = sinks[i].lane;
	x->peer = -1;
	x->buf = f->discard;
	x->len = f->discard ? f->discard_len : 0;
	x->tag = shemb__fab_tag(sinks[i].cls, op->seq, 0, 0);
	shemb__fab_enqueue(f, x);
}

uint64_t shemb__fab_sink_ignore(void)
{
	return (1ull << 32) - 1;
}

/* Whether any message of op accounted for has yet to come. */
static bool awaiting(const struct fab *f, const struct op *op)
{
	if (op->heard < f->world - 1)
		return true;
	for (int l = 0; l < NLANES; l++)
		if (op->caught[l] < op->expect[l])
			return true;
	return false;
}

/* A receive of op left posted: cancelled, its completion comes back as
 * cancelled. */
static void cancel_one(struct xfer *x, void *arg)
{
	struct fab *f = arg;

	if (x->posted && shemb__xfer_takes_message(x))
		fi_cancel(&f->ep[shemb__xfer_lane(x)]->fid, &x->fctx);
}

static void cancel_sinks(struct fab *f, struct op *op)
{
	for (int i = 0; i < NSINKS; i++)
		cancel_one(&op->sink[i], f);
}

/* Nothing of op is on its way: what is still posted to receive is
 * cancelled. */
static void let_go(struct fab *f, struct op *op)
{
	each_xfer(op, cancel_one, f);
	cancel_sinks(f, op);
}

void shemb__fab_settle_check(struct fab *f, struct op *op)
{
	if (!op->settling)
		return;
	if (!op->settled && !awaiting(f, op)) {
		op->settled = true;
		shemb__fab_unqueue(f, op); /* sinks not posted yet */
		let_go(f, op);
	}
	if (settle_over(op)) {
		shemb__fab_op_done(f); /* its waiter may go */
		shemb__fab_maybe_free(f, op);
	}
}

void shemb__fab_settle_hear(struct fab *f, struct op *op,
			    const struct shemb__ctrl *c)
{
	uint32_t n[NLANES] = { 0 };

	if (!op->settling || op->heard >= f->world - 1)
		return;
	op->heard++;
	if (c->flags & CTRL_FINISHED)
		tally(op, (int)c->from, false, n);
	for (int l = 0; l < NLANES; l++)
		op->expect[l] += c->flags & CTRL_FINISHED ? n[l] : c->sent[l];
	shemb__fab_settle_check(f, op);
}

void shemb__fab_settle_begin(struct fab *f, struct op *op)
{
	op->settling = true;
	op->settle_ns = shemb__fab_now_ns();
	shemb__fab_tell_all(f, op);
	for (int i = 0; i < NSINKS; i++)
		queue_sink(f, op, i);
	shemb__fab_settle_check(f, op);
}

void shemb__fab_sink_done(struct fab *f, struct xfer *x, int err)
{
	struct op *op = x->op;
	int lane = shemb__xfer_lane(x);

	x->posted = false;
	op->posted--;
	f->recvs_posted[lane]--;
	shemb__ep_undesc(f, x);
	if (err != FI_ECANCELED) {
		op->caught[lane]++; /* truncated or not, it was taken */
		if (op->settling && !op->settled)
			shemb__fab_enqueue(f, x);
	}
	if (op->settling)
		shemb__fab_settle_check(f, op);
	else
		shemb__fab_maybe_free(f, op);
}

/* op, not yet in the engine's list, failed at its start: it settles like
 * any failed op, and nobody waits for it (its caller got the error). */
void shemb__fab_settle_unstarted(struct fab *f, struct op *op, int status)
{
	struct peer_account *early = op->early_sent;

	op->early_sent = NULL;
	shemb__fab_clear_op(op);
	op->status = status;
	if (!f->settles || op->unsettled) {
		shemb__fab_tell_all(f, op);
		if (!shemb__fab_mop_unstarted(f, op, early))
			shemb__fab_free_op(op);
		return;
	}
	op->done = op->released = op->aborted = true;
	op->next = f->ops;
	f->ops = op;
	shemb__fab_settle_begin(f, op);
}

static int ghosts_wanted(const struct fab *f)
{
	return f->no_ghosts || !f->settles ? 0 : OP_SPARES;
}

int shemb__fab_ghost_spares(struct fab *f)
{
	return shemb__spares_fill(&f->op_spares, sizeof(struct op),
				  ghosts_wanted(f));
}

void shemb__fab_drop_op(struct op *op)
{
	shemb__spare_free(&op->f->op_spares, op, ghosts_wanted(op->f));
}

static struct op *take_ghost(struct fab *f)
{
	struct op *op = shemb__spare_take(&f->op_spares, sizeof(*op));

	if (op) {
		op->f = f;
		op->ghost = true;
	}
	return op;
}

/* A ghost goes back to the spares once it settled (once the peers'
 * accounts for its call came, which a peer sends when it gets to that
 * call) or gave up, and libfabric gave back its sinks; not after the
 * engine failed. */
static bool ghosts_out(const struct fab *f)
{
	if (f->failed)
		return false;
	for (const struct op *op = f->ops; op; op = op->next)
		if (op->ghost)
			return true;
	return false;
}

/*
 * A shortage fails calls in a row (each of a lookup's collectives), and
 * every spare may still be settling an earlier one, over a peer that has
 * not got to those calls yet: without a spare, the others would stop
 * settling this call and keep what they posted for it (one run in some
 * 60 of test_oom.sh's records walk, on a loaded host).  So the start
 * reads completions until a spare comes back, for at most GHOST_WAIT_MS
 * (shemb__fab_locked_wait_until).  The peers' accounts do not wait for
 * this rank: they come from their own calls.
 */
#define GHOST_WAIT_MS 2000u

struct op *shemb__fab_ghost(struct fab *f)
{
	uint64_t until = shemb__fab_locked_wait_until(f, GHOST_WAIT_MS);
	struct timespec nap = { .tv_nsec = 50000 };
	struct op *op = take_ghost(f);

	while (!op && ghosts_out(f) && !f->failed &&
	       shemb__fab_now_ns() < until) {
		shemb__fab_progress(f, true);
		op = take_ghost(f);
		if (!op)
			nanosleep(&nap, NULL);
	}
	return op;
}

/* The receives of op from a rank that never started it (it found no
 * memory for it: CTRL_UNSETTLED), on the lanes its account says it sent
 * nothing on: no message of it comes, and each would take one of the
 * receives the provider holds for good (a shortage of a few hundred
 * calls in a row left some 600 of rxm's 1024 posted, and a later call's
 * header then found no room). */
struct absent {
	struct fab *f;
	const struct shemb__ctrl *c;
};

static void cancel_absent(struct xfer *x, void *arg)
{
	const struct absent *a = arg;
	int lane = shemb__xfer_lane(x);

	if (x->peer == (int)a->c->from && a->c->sent[lane] == 0)
		cancel_one(x, a->f);
}

void shemb__fab_settle_unstarted_peer(struct fab *f, struct op *op,
				      const struct shemb__ctrl *c)
{
	struct absent a = { .f = f, .c = c };

	each_xfer(op, cancel_absent, &a); /* op failed: done */
	shemb__fab_settle_give_up(f, op);
}

void shemb__fab_settle_give_up(struct fab *f, struct op *op)
{
	if (!op->settling)
		return;
	op->settling = false;
	shemb__fab_unqueue(f, op); /* sinks waiting to be posted */
	cancel_sinks(f, op);
	shemb__fab_op_done(f); /* its waiter may go */
	shemb__fab_maybe_free(f, op);
}

/* Accounts that do not come within the timeout are not waited for: the
 * op keeps what it holds (shemb__fab_op_holds walks it again). */
void shemb__fab_settle_timeouts(struct fab *f, uint64_t now)
{
	uint64_t limit = (uint64_t)f->timeout_ms * 1000000ull;

	for (struct op *op = f->ops, *next; op; op = next) {
		next = op->next; /* giving up may free op */
		if (shemb__fab_settle_pending(op) &&
		    now - op->settle_ns >= limit)
			shemb__fab_settle_give_up(f, op);
	}
}
