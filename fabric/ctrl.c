/*
 * ctrl.c - control messages between the ranks' engines: a rank that fails
 * a collective tells every other rank, with its reason and its account of
 * what it sent them (settle.c), so that they fail it too instead of
 * waiting for their timeout; an abort for a collective not started yet
 * here waits until it starts, and a rank that finished the collective
 * answers so.  Runs under the engine's lock, as engine.c does.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "fabric/fabric.h"

#define CTRL_MAGIC 0x4c525443u /* "CTRL" */

/* ---- control messages: "I failed our op, and why" ---- */

static bool is_ctrl_rx(const struct fab *f, const struct xfer *x)
{
	return x >= f->ctrl_rx && x < f->ctrl_rx + CTRL_RX;
}

/*
 * Every control message has the one tag, so its receives ignore no tag
 * bit.  libfabric 1.17's shm matches a receive posted after a message
 * came against that message with the ignored bits of whichever receive
 * last held the entry the message was queued in: a control receive's
 * mask, ignoring all but the class, let a receive for one collective's
 * header take a header of another from the same peer (11 of 40 runs of
 * oom_rank --shortage on 2 ranks; none of 40 with no bit ignored).
 */
static void post_ctrl_rx_one(struct fab *f, int i)
{
	struct xfer *x = &f->ctrl_rx[i];

	x->posted = !shemb__fab_refused_for_test(f) &&
		    fi_trecv(f->ep[LANE_URGENT], &f->ctrl_buf[i],
			     sizeof(f->ctrl_buf[i]),
			     NULL, FI_ADDR_UNSPEC,
			     shemb__fab_tag(TAG_CTRL, 0, 0, 0), 0,
			     &x->fctx) == 0;
	if (x->posted)
		f->ctrl_rx_unposted &= ~(1u << i);
	else
		f->ctrl_rx_unposted |= 1u << i;
}

void shemb__fab_post_ctrl_rx(struct fab *f)
{
	for (int i = 0; i < CTRL_RX; i++)
		post_ctrl_rx_one(f, i);
}

/* A receive the provider could not take for the moment (its queue full)
 * is posted again at each pass: dropped, four such would leave this
 * rank deaf to the others' failures, which it would then see only at
 * its timeout. */
static void repost_ctrl_rx(struct fab *f)
{
	for (int i = 0; f->ctrl_rx_unposted && i < CTRL_RX; i++)
		if (f->ctrl_rx_unposted & (1u << i))
			post_ctrl_rx_one(f, i);
}

struct op *shemb__fab_find_op(struct fab *f, uint32_t seq)
{
	for (struct op *op = f->ops; op; op = op->next)
		if (op->seq == seq)
			return op;
	return NULL;
}

/* ---- telling the other ranks that this rank failed an op ---- */

struct ctrl_tx {
	struct xfer x;          /* first: the CQ hands back &x.fctx */
	struct shemb__ctrl c;
	struct ctrl_tx *next;   /* in the backlog, or sent */
};

/*
 * A message libfabric cannot take at once (or, where the provider
 * injects less than one, every message) waits in a record.  A rank that
 * fails an op for want of memory (comm.c) must still tell the others, or
 * they wait for it until their timeout and the ranks fall out of step:
 * the records come from the allocator, else from spares made with the
 * engine, two per peer, which every record done with refills first.
 */
static int spares_wanted(const struct fab *f)
{
	return 2 * (f->world - 1);
}

static void drop_ctrl(struct fab *f, struct ctrl_tx *t)
{
	shemb__spare_free(&f->ctrl_spares, t, spares_wanted(f));
}

/* Records in flight are back once their sends' completions are read:
 * a caller about to tell the others reads them first when the spares
 * run low (outside the reading of completions, which tells from
 * within). */
void shemb__fab_ctrl_reap(struct fab *f)
{
	if (f->ctrl_spares.n < f->world - 1 && f->ctrl_sent)
		shemb__fab_progress(f, false);
}

int shemb__fab_ctrl_spares(struct fab *f)
{
	return shemb__spares_fill(&f->ctrl_spares, sizeof(struct ctrl_tx),
				  spares_wanted(f));
}

/*
 * Where the provider injects a control message (shm and rxm do), it is
 * copied before the call returns and completes without a word back: no
 * record is kept, so a rank without memory still tells every peer.  A
 * record is needed only for a message libfabric cannot take yet.
 */
static bool injects_ctrl(const struct fab *f)
{
	return f->inject_size >= sizeof(struct shemb__ctrl) &&
	       !f->ctrl_records;
}

bool shemb__fabric_injects_ctrl(void *comm)
{
	return injects_ctrl(comm);
}

/* Done with t: sent, nobody to tell, or failed for good (best effort:
 * the peer's timeout remains); false: libfabric cannot take it yet. */
static bool inject_ctrl(struct fab *f, const struct ctrl_tx *t)
{
	if (shemb__peer_proc_ended(f, t->x.peer))
		return true; /* nobody to tell, and the send could spin */
	return fi_tinject(f->ep[LANE_URGENT], &t->c, sizeof(t->c),
			  *shemb__fab_peer(f, LANE_URGENT, t->x.peer),
			  shemb__fab_tag(TAG_CTRL, 0, 0, 0)) != -FI_EAGAIN;
}

static bool send_ctrl(struct fab *f, struct ctrl_tx *t)
{
	ssize_t rc;

	if (injects_ctrl(f)) {
		if (!inject_ctrl(f, t))
			return false;
		drop_ctrl(f, t);
		return true;
	}
	if (shemb__peer_proc_ended(f, t->x.peer)) {
		drop_ctrl(f, t); /* nobody to tell, and the send could spin */
		return true;
	}
	rc = fi_tsend(f->ep[LANE_URGENT], &t->c, sizeof(t->c), NULL,
			      *shemb__fab_peer(f, LANE_URGENT, t->x.peer),
			      shemb__fab_tag(TAG_CTRL, 0, 0, 0), &t->x.fctx);

	if (rc == -FI_EAGAIN)
		return false;
	if (rc) {
		drop_ctrl(f, t); /* best effort: the peer's timeout remains */
	} else {
		t->next = f->ctrl_sent;
		f->ctrl_sent = t;
	}
	return true;
}

static void ctrl_sent_done(struct fab *f, struct ctrl_tx *t)
{
	for (struct ctrl_tx **p = &f->ctrl_sent; *p; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	drop_ctrl(f, t);
}

void shemb__fab_flush_ctrl(struct fab *f)
{
	repost_ctrl_rx(f);
	while (f->ctrl_backlog) {
		struct ctrl_tx *t = f->ctrl_backlog;

		f->ctrl_backlog = t->next;
		if (!send_ctrl(f, t)) { /* later: put it back */
			t->next = f->ctrl_backlog;
			f->ctrl_backlog = t;
			return;
		}
	}
}

static void tell_one(struct fab *f, const struct shemb__ctrl *c, int peer)
{
	struct ctrl_tx one = { .x = { .is_ctrl = true, .send = true,
				      .peer = peer },
			       .c = *c };
	struct ctrl_tx *t;

	/* the messages carry their op: a backlog need not go first */
	if (injects_ctrl(f) && inject_ctrl(f, &one))
		return;
	t = shemb__spare_alloc(&f->ctrl_spares, sizeof(*t));
	if (!t)
		return; /* this peer learns it at its timeout */
	*t = one;
	t->next = f->ctrl_backlog;
	f->ctrl_backlog = t;
}

/*
 * A collective that fails on one rank cannot finish on the others: tell
 * every other rank directly, so each fails it too (with this rank's
 * status and reason) rather than wait for its timeout; a ring learns it
 * this way too.  Each message accounts for what this rank sent that
 * peer in op (settle.c).
 */
void shemb__fab_tell_all(struct fab *f, struct op *op)
{
	struct shemb__ctrl c = { .magic = CTRL_MAGIC, .seq = op->seq,
				 .from = (uint32_t)f->rank,
				 .status = op->status };

	c.flags = (op->relayed ? CTRL_RELAYED : 0) |
		  (op->unsettled ? CTRL_UNSETTLED : 0) |
		  (op->disagreed ? CTRL_DISAGREED : 0);
	snprintf(c.why, sizeof(c.why), "%.*s", (int)sizeof(c.why) - 1,
		 op->why);
	for (int p = 0; p < f->world; p++) {
		if (p == f->rank)
			continue;
		shemb__fab_settle_account(op, p, &c);
		tell_one(f, &c, p);
	}
	shemb__fab_flush_ctrl(f);
}

/* ---- accounts from the other ranks ---- */

/* An account for an op not started here (a peer failed it first): kept
 * until it starts, one record an op, the accounts summed (and, where ops
 * do not settle, kept peer by peer for mop.c). */
void shemb__fab_note_early(struct fab *f, const struct shemb__ctrl *c)
{
	struct early *e = NULL;

	if (c->flags & CTRL_FINISHED)
		return; /* an answer to an account this rank never sent */
	for (int i = 0; i < f->nearly && !e; i++)
		if (f->early[i].c.seq == c->seq)
			e = &f->early[i];
	if (!e) {
		if (f->nearly == MAX_EARLY)
			return; /* lost: the op will not settle */
		e = &f->early[f->nearly++];
		e->c = *c;
		e->heard = 0;
		memset(e->c.sent, 0, sizeof(e->c.sent));
		/* without it, what the peers sent stays unreceived */
		e->by_peer = f->settles ? NULL
					: calloc((size_t)f->world,
						 sizeof(*e->by_peer));
	}
	e->heard++;
	e->c.flags |= c->flags & CTRL_UNSETTLED;
	for (int l = 0; l < NLANES; l++)
		e->c.sent[l] += c->sent[l];
	if (e->by_peer && c->from < (uint32_t)f->world) {
		struct peer_account *a = &e->by_peer[c->from];

		for (int l = 0; l < NLANES; l++)
			a->sent[l] += c->sent[l];
		a->round0 = c->round0;
	}
}

struct unsettled *shemb__fab_unsettled(struct fab *f, uint32_t seq)
{
	for (unsigned i = 0; i < f->nunsettled && i < UNSETTLED_RING; i++)
		if (f->unsettled[i].seq == seq)
			return &f->unsettled[i];
	return NULL;
}

static bool failed_without_op(struct fab *f, uint32_t seq)
{
	return shemb__fab_unsettled(f, seq) != NULL;
}

void shemb__fab_note_succeeded(struct fab *f, const struct op *op)
{
	if (!f->settles && op->status == 0)
		f->succeeded[f->nsucceeded++ % SUCCEEDED_RING] = op->seq;
}

static bool succeeded_and_freed(const struct fab *f, uint32_t seq)
{
	for (unsigned i = 0; i < f->nsucceeded && i < SUCCEEDED_RING; i++)
		if (f->succeeded[i] == seq)
			return true;
	return false;
}

/*
 * A peer failed an op that this rank finished (and maybe freed): it sent
 * the peer everything the peer's op expects from it.  Where ops do not
 * settle, a freed op may have failed here too, and one that ended as a
 * refusal did not send everything: an op still here is answered for
 * with its account (mop.c), a freed one only if it succeeded
 * (CTRL_EVERYTHING), among the last SUCCEEDED_RING.  Before, the peer
 * waited for the answer until its timeout.
 */
static void answer_finished(struct fab *f, const struct shemb__ctrl *c,
			    const struct op *op)
{
	struct shemb__ctrl a = { .magic = CTRL_MAGIC, .seq = c->seq,
				 .from = (uint32_t)f->rank,
				 .flags = CTRL_FINISHED };

	if (failed_without_op(f, c->seq) || (c->flags & CTRL_FINISHED) ||
	    c->from >= (uint32_t)f->world)
		return;
	if (op)
		shemb__fab_settle_account(op, (int)c->from, &a);
	else if (!f->settles && succeeded_and_freed(f, c->seq))
		a.flags |= CTRL_EVERYTHING;
	else if (!f->settles)
		return;
	tell_one(f, &a, (int)c->from);
}

int shemb__fab_unsettled_room(struct fab *f)
{
	size_t n = (size_t)f->world;

	f->unsettled_room = calloc(UNSETTLED_RING * n,
				   sizeof(*f->unsettled_room));
	if (!f->unsettled_room)
		return SHEMB_ENOMEM;
	for (size_t i = 0; i < UNSETTLED_RING; i++)
		f->unsettled[i].early = f->unsettled_room + i * n;
	return 0;
}

/* A slot not taken up in eight calls is reused: what its accounts name
 * stays unreceived. */
void shemb__fab_note_unsettled(struct fab *f, struct op *none)
{
	struct unsettled *u = &f->unsettled[f->nunsettled++ %
					    UNSETTLED_RING];
	size_t n = (size_t)f->world * sizeof(*u->early);

	u->seq = none->seq;
	u->heard = none->heard;
	u->kept = !f->settles;
	if (none->early_sent)
		memcpy(u->early, none->early_sent, n);
	else
		memset(u->early, 0, n);
}

/* A peer failed an op, and accounts for what it sent this rank: the op
 * fails here too (and settles, or is mopped up where ops do not
 * settle), or waits in f->early if not started. */
static void take_ctrl(struct fab *f, const struct shemb__ctrl *c)
{
	struct op *op = shemb__fab_find_op(f, c->seq);
	bool started = (int32_t)(c->seq - f->next_seq) < 0;

	if (!op && started && failed_without_op(f, c->seq)) {
		op = shemb__fab_mop_orphan(f, c->seq); /* NULL if settling */
		if (!op) { /* or without memory */
			shemb__fab_mop_keep(f, c);
			return;
		}
	}
	if (!op) {
		if (!started)
			shemb__fab_note_early(f, c);
		else
			answer_finished(f, c, NULL);
		return;
	}
	if (op->done && !op->aborted) {
		answer_finished(f, c, op);
		return;
	}
	if (!op->done) {
		op->relayed = true;
		op->disagreed = (c->flags & CTRL_DISAGREED) != 0;
		if (c->flags & CTRL_RELAYED)
			shemb__fab_fail_op(f, op, c->status, "%s", c->why);
		else
			shemb__fab_fail_op(f, op, c->status, "rank %u: %s",
					   c->from, c->why);
		if (f->failed)
			return; /* failing may have freed op */
	}
	if (!f->settles) {
		shemb__fab_mop_hear(f, op, c);
		return;
	}
	if (c->flags & CTRL_UNSETTLED) /* that rank takes nothing up */
		shemb__fab_settle_unstarted_peer(f, op, c);
	else
		shemb__fab_settle_hear(f, op, c);
}

static void on_ctrl(struct fab *f, struct xfer *x, int err)
{
	int i = (int)(x - f->ctrl_rx);
	struct shemb__ctrl *c = &f->ctrl_buf[i];

	x->posted = false;
	if (err == FI_ECANCELED)
		return; /* at close */
	c->why[sizeof(c->why) - 1] = 0;
	if (!err && c->magic == CTRL_MAGIC)
		take_ctrl(f, c);
	post_ctrl_rx_one(f, i);
}

bool shemb__fab_ctrl_done(struct fab *f, struct xfer *x, int err)
{
	if (is_ctrl_rx(f, x))
		on_ctrl(f, x, err);
	else if (x->is_ctrl)
		ctrl_sent_done(f, (struct ctrl_tx *)x);
	else
		return false;
	return true;
}

/* After the endpoint is closed: no completion will come. */
void shemb__fab_free_ctrl(struct fab *f)
{
	struct ctrl_tx **lists[] = { &f->ctrl_backlog, &f->ctrl_sent };

	for (int i = 0; i < 2; i++) {
		while (*lists[i]) {
			struct ctrl_tx *t = *lists[i];

			*lists[i] = t->next;
			free(t);
		}
	}
	shemb__spares_drop(&f->ctrl_spares);
}

/* An op that peers failed before this rank started it: its record is
 * taken (several ranks may have failed it: their accounts are summed
 * into op), the first one's status returned and its reason put in
 * op->why. */
int shemb__fab_early_abort(struct fab *f, struct op *op)
{
	for (int i = 0; i < f->nearly; i++) {
		struct early *e = &f->early[i];

		if (e->c.seq != op->seq)
			continue;
		if (e->c.flags & CTRL_RELAYED)
			snprintf(op->why, sizeof(op->why), "%s", e->c.why);
		else
			snprintf(op->why, sizeof(op->why), "rank %u: %s",
				 e->c.from, e->c.why);
		op->relayed = true;
		op->unsettled |= (e->c.flags & CTRL_UNSETTLED) != 0;
		op->heard += e->heard;
		for (int l = 0; l < NLANES; l++)
			op->expect[l] += e->c.sent[l];
		op->status = e->c.status;
		free(op->early_sent);
		op->early_sent = e->by_peer;
		f->early[i] = f->early[--f->nearly];
		return op->status;
	}
	return 0;
}
