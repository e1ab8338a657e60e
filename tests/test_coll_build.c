/*
 * test_coll_build.c - the rounds the libfabric transport builds for a
 * collective (fabric/coll.c), every rank of a world built here, checked
 * against each other:
 * - every send of a rank in round r meets a receive of its peer in the
 *   same round, from that rank, with the same tag and length, and the
 *   other way round (no transfer waits for one that is never posted);
 * - every data receive waits for a header receive from its peer in its
 *   round (no data lands before the peer's call checked out);
 * - in collectives of several rounds with data (a ring allreduce, a
 *   pairwise alltoallv), every data send waits for a header receive from
 *   the rank it goes to, in its round: shm completes a lane's sends in
 *   the order they were posted, and a send to a rank still in an earlier
 *   round would hold back the sends that rank waits for.  Nothing run
 *   between processes tells such a send from a gated one until the
 *   ranks' timing makes the job hang, hence this check;
 * - in one-round collectives, where sends complete in order, a send of
 *   more than the provider injects waits for its peer's header too (the
 *   peer may not have started the call), and the others go at once;
 * - a receive waits for no header but its own peer's, and a ring's
 *   receives after round 0 for none: the rank's header of the round has
 *   told its left neighbour to send;
 * - with single copy (fabric/cma.c), a bulk alltoallv is one round, each
 *   data receive copies its chunk from where the peer's header says the
 *   peer's piece for it starts, at the chunk's offset, into the right
 *   place of the receive buffer, the chunks of a piece cover it once, and
 *   each data send only waits for its receiver's empty message; an
 *   allreduce keeps its messages;
 * - a piece of at most inline_max bytes travels in its header's message
 *   (alltoallv, allgatherv, a small allreduce): no data transfer either way,
 *   a header send carrying exactly the piece, a header receive with room
 *   for one; taking the header copies the piece into place, and a header
 *   whose flag or length disagrees fails the op;
 * - without single copy, a rank's messages to a peer on a lane, in the
 *   order its rounds build them, are the peer's receives from it on that
 *   lane in the order the peer's rounds build them (fabric/mop.c counts
 *   on it);
 * - the aborts that peers sent for an op before it started here are all
 *   taken when it starts (fabric/ctrl.c, shemb__fab_early_abort);
 * - a refusing rank's headers, and what it must take from each peer;
 *   counts that disagree between two ranks;
 * - a failed op leaves its caller's buffers to libfabric (they must be
 *   kept) while a transfer on them is posted, and only then.
 */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "tests/check_run.h"

#define MAX_W 7
#define CHUNK 4096
#define INJECT (2 * CHUNK) /* pieces above this are several chunks */
#define URGENT_CHUNK (4 * CHUNK) /* the urgent lane's, larger */
#define PULL_CHUNK (2 * CHUNK)   /* single copies' */
#define SPAN (1 << 18)           /* room for one rank's pieces */

struct world {
	int w;
	struct fab f[MAX_W];
	struct op *op[MAX_W];
	size_t counts[MAX_W][4][MAX_W];
	float *red[MAX_W];
	bool cma;                  /* single copy */
	bool inline_pieces;        /* f->inline_max as the transport sets it */
};

/* Each rank's buffers: single copy's addresses, and the pieces that
 * travel in headers (sbufs[r][i] = r + 3 i, mod 251). */
static char sbufs[MAX_W][SPAN], rbufs[MAX_W][SPAN];

static void fill_sbufs(void)
{
	for (int r = 0; r < MAX_W; r++)
		for (int i = 0; i < SPAN; i++)
			sbufs[r][i] = (char)((r + 3 * i) % 251);
}

/* What rank a sends rank b: some empty, some over several chunks. */
static size_t piece(int a, int b)
{
	return (size_t)((a * 7 + b * 3) % 5) * CHUNK * 3 / 2;
}

static void build_all(struct world *wd, int kind, int lane, size_t count,
		      bool in_order)
{
	memset(wd->f, 0, sizeof(wd->f));
	for (int r = 0; r < wd->w; r++) {
		struct fab *f = &wd->f[r];
		struct op *op = calloc(1, sizeof(*op));
		size_t *sc = wd->counts[r][0], *sd = wd->counts[r][1];
		size_t *rc = wd->counts[r][2], *rd = wd->counts[r][3];

		ck_assert_ptr_nonnull(op);
		f->rank = r;
		f->world = wd->w;
		f->chunk[LANE_BULK] = CHUNK;
		f->chunk[LANE_URGENT] = URGENT_CHUNK;
		f->max_chunks[LANE_BULK] = f->max_chunks[LANE_URGENT] = 16;
		f->pairwise = !wd->cma;
		f->cma = wd->cma;
		f->pull_chunk = PULL_CHUNK;
		f->sends_in_order = in_order;
		f->inject_size = INJECT;
		f->inline_max = wd->inline_pieces ? shemb__coll_inline_limit(f)
						  : 0;
		for (int p = 0; p < wd->w; p++) {
			sc[p] = piece(r, p);
			rc[p] = piece(p, r);
			sd[p] = p ? sd[p - 1] + sc[p - 1] : 0;
			rd[p] = p ? rd[p - 1] + rc[p - 1] : 0;
		}
		op->f = f;
		op->kind = kind;
		op->lane = lane;
		op->seq = 5;
		op->counts = calloc(4 * (size_t)wd->w, sizeof(size_t));
		ck_assert_ptr_nonnull(op->counts);
		for (int k = 0; k < 4; k++)
			memcpy(op->counts + (size_t)k * wd->w,
			       wd->counts[r][k], (size_t)wd->w * sizeof(size_t));
		op->c.kind = kind;
		op->c.sendbuf = sbufs[r];
		op->c.recvbuf = rbufs[r];
		if (kind == SHEMB__ALLREDUCE) {
			wd->red[r] = calloc(count, sizeof(float));
			for (size_t i = 0; wd->red[r] && i < count; i++)
				wd->red[r][i] = (float)r + 0.25f * (float)i;
			op->c.sendbuf = op->c.recvbuf = wd->red[r];
			op->c.count = count;
			op->c.dtype = SHEMB_F32;
		}
		ck_assert_int_eq(shemb__coll_build(f, op), 0);
		wd->op[r] = op;
	}
}

static void free_all(struct world *wd)
{
	for (int r = 0; r < wd->w; r++) {
		shemb__fab_free_op(wd->op[r]);
		free(wd->f[r].spare);
		free(wd->red[r]);
		wd->red[r] = NULL;
	}
}

/* The header receive of round rd from peer that gates transfer i. */
static bool gated_by_peer(const struct round *rd, int i, int peer)
{
	if (!rd->x[i].gated)
		return false;
	for (int h = 0; h < rd->nx; h++) {
		const struct xfer *x = &rd->x[h];

		if (x->is_hdr && !x->send && x->peer == peer &&
		    x->gate_lo <= i && i < x->gate_hi)
			return true;
	}
	return false;
}

/* x of rank a meets a transfer the other way at its peer, same round,
 * tag and length (a header receive: room for the send). */
static bool met(const struct world *wd, int a, int r, const struct xfer *x)
{
	const struct op *peer = wd->op[x->peer];

	if (r >= peer->nrounds)
		return false;
	for (int i = 0; i < peer->rounds[r].nx; i++) {
		const struct xfer *y = &peer->rounds[r].x[i];

		size_t sent = x->send ? x->len : y->len;
		size_t room = x->send ? y->len : x->len;

		if (y->send != x->send && y->peer == a && y->tag == x->tag &&
		    y->is_hdr == x->is_hdr &&
		    (x->is_hdr ? sent <= room : sent == room))
			return true;
	}
	return false;
}

/* How the data sends of a world wait. */
enum sends {
	SENDS_FREE,         /* at once */
	SENDS_GATED,        /* for their peer's header */
	SENDS_GATED_BIG,    /* for it when the piece is above INJECT */
};

static bool want_send_gated(enum sends how, int a, int peer)
{
	return how == SENDS_GATED ||
	       (how == SENDS_GATED_BIG && piece(a, peer) > INJECT);
}

/* Data receives of rounds below recv_rounds wait for their headers, the
 * later ones (a ring's: the header of round 0 checked the call) for
 * none; data sends wait as how says. */
static void check_xfer(const struct world *wd, int a, int r, int i,
		       int recv_rounds, enum sends how)
{
	const struct round *rd = &wd->op[a]->rounds[r];
	const struct xfer *x = &rd->x[i];
	bool want = x->send ? want_send_gated(how, a, x->peer)
			    : r < recv_rounds;

	ck_assert_msg(met(wd, a, r, x), "world %d, rank %d, round %d: "
		      "transfer %d (peer %d) has no match", wd->w, a, r, i,
		      x->peer);
	/* room for a piece in every header receive, whatever the call */
	if (x->is_hdr && !x->send)
		ck_assert_uint_eq(x->len, sizeof(struct shemb__hdr) +
						  wd->f[a].inline_max);
	if (x->is_hdr)
		return;
	ck_assert_msg(x->gated == want && (!want || gated_by_peer(rd, i,
								   x->peer)),
		      "world %d, rank %d, round %d: a %s %s %d %s", wd->w, a,
		      r, x->send ? "send" : "receive", x->send ? "to" : "from",
		      x->peer, want ? "not gated by its header"
				    : "that waits for a header");
}

/* The largest data transfer of the world: each lane cuts at its own
 * chunk size. */
static size_t largest_chunk(const struct world *wd)
{
	size_t most = 0;

	for (int a = 0; a < wd->w; a++) {
		const struct op *op = wd->op[a];

		for (int r = 0; r < op->nrounds; r++)
			for (int i = 0; i < op->rounds[r].nx; i++)
				if (!op->rounds[r].x[i].is_hdr &&
				    op->rounds[r].x[i].len > most)
					most = op->rounds[r].x[i].len;
	}
	return most;
}

/* The tags of op's messages to (send) or from peer on lane, in the order
 * its rounds build them; their number. */
static int tags_in_order(const struct op *op, int peer, int lane, bool send,
			 uint64_t *tags, int max)
{
	int n = 0;

	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			const struct xfer *x = &op->rounds[r].x[i];
			bool mine = send ? shemb__xfer_sends_message(x)
					 : shemb__xfer_takes_message(x);

			if (x->peer != peer || !mine ||
			    shemb__xfer_lane(x) != lane)
				continue;
			ck_assert_int_lt(n, max);
			tags[n++] = x->tag;
		}
	return n;
}

/*
 * Where a failed op is mopped up (fabric/mop.c), a rank takes the first n
 * of its receives from a peer on a lane for the n messages the peer says
 * it sent it: so the peer's messages to it, in the order its rounds build
 * them (the order it sends them), must be its receives', tag for tag.
 */
static void check_message_order(const struct world *wd)
{
	enum { MAX_MSGS = 512 };
	static uint64_t sent[MAX_MSGS], taken[MAX_MSGS];

	for (int a = 0; a < wd->w; a++)
		for (int p = 0; p < wd->w; p++)
			for (int l = 0; p != a && l < NLANES; l++) {
				int ns = tags_in_order(wd->op[a], p, l, true,
						       sent, MAX_MSGS);
				int nt = tags_in_order(wd->op[p], a, l, false,
						       taken, MAX_MSGS);

				ck_assert_int_eq(ns, nt);
				for (int k = 0; k < ns; k++)
					ck_assert_uint_eq(sent[k], taken[k]);
			}
}

static void check_world(const struct world *wd, int recv_rounds,
			enum sends how)
{
	if (!wd->cma)
		check_message_order(wd);
	for (int a = 0; a < wd->w; a++) {
		const struct op *op = wd->op[a];

		ck_assert_int_eq(op->nrounds, wd->op[0]->nrounds);
		for (int r = 0; r < op->nrounds; r++)
			for (int i = 0; i < op->rounds[r].nx; i++)
				check_xfer(wd, a, r, i, recv_rounds, how);
	}
}

/* An abort from a peer for an op this rank has not started waits as a
 * record (fabric/ctrl.c), one an op: when the op starts, it goes, with
 * the first account's status and reason, and the accounts of every rank
 * that failed it summed for its settling (fabric/settle.c), and, where
 * ops do not settle, peer by peer for mopping up (fabric/mop.c).  A
 * record left would stay for good, and past MAX_EARLY later aborts are
 * lost. */
static void note_early(struct fab *f, uint32_t seq, uint32_t from,
		       int status, uint32_t flags, uint32_t bulk,
		       uint32_t urgent, const char *why)
{
	struct shemb__ctrl c;

	memset(&c, 0, sizeof(c));
	c.seq = seq;
	c.from = from;
	c.status = status;
	c.flags = flags;
	c.sent[LANE_BULK] = bulk;
	c.sent[LANE_URGENT] = urgent;
	snprintf(c.why, sizeof(c.why), "%s", why);
	shemb__fab_note_early(f, &c);
}

START_TEST(early_aborts_all_taken)
{
	static struct fab f;
	struct op op;

	f.world = 4; /* over shm: f.settles false */
	memset(&op, 0, sizeof(op));
	note_early(&f, 9, 1, SHEMB_ENOMEM, 0, 2, 1, "its tier is full");
	note_early(&f, 10, 2, SHEMB_EIO, CTRL_RELAYED, 0, 0,
		   "rank 3: its file is short");
	note_early(&f, 9, 3, SHEMB_EINVAL, CTRL_RELAYED, 5, 7,
		   "rank 1: its tier is full");
	/* an answer to an account never sent here is not one */
	note_early(&f, 11, 2, 0, CTRL_FINISHED, 4, 4, "");
	ck_assert_int_eq(f.nearly, 2);
	op.seq = 9;
	ck_assert_int_eq(shemb__fab_early_abort(&f, &op), SHEMB_ENOMEM);
	ck_assert_str_eq(op.why, "rank 1: its tier is full");
	ck_assert_int_eq(op.heard, 2);
	ck_assert_uint_eq(op.expect[LANE_BULK], 2 + 5);
	ck_assert_uint_eq(op.expect[LANE_URGENT], 1 + 7);
	ck_assert(op.relayed);
	ck_assert_ptr_nonnull(op.early_sent);
	for (int p = 0; p < f.world; p++) {
		uint32_t bulk = p == 1 ? 2 : p == 3 ? 5 : 0;
		uint32_t urgent = p == 1 ? 1 : p == 3 ? 7 : 0;

		ck_assert_uint_eq(op.early_sent[p].sent[LANE_BULK], bulk);
		ck_assert_uint_eq(op.early_sent[p].sent[LANE_URGENT],
				  urgent);
	}
	free(op.early_sent);
	ck_assert_int_eq(f.nearly, 1);
	ck_assert_uint_eq(f.early[0].c.seq, 10);
	memset(&op, 0, sizeof(op));
	op.seq = 9;
	ck_assert_int_eq(shemb__fab_early_abort(&f, &op), 0);
	ck_assert_int_eq(op.heard, 0);
	op.seq = 10;
	ck_assert_int_eq(shemb__fab_early_abort(&f, &op), SHEMB_EIO);
	ck_assert_str_eq(op.why, "rank 3: its file is short");
	ck_assert_int_eq(op.heard, 1);
	ck_assert_int_eq(f.nearly, 0);
	free(op.early_sent);
	/* where ops settle, the sums do */
	f.settles = true;
	memset(&op, 0, sizeof(op));
	note_early(&f, 12, 2, SHEMB_EIO, 0, 1, 1, "its file is short");
	op.seq = 12;
	ck_assert_int_eq(shemb__fab_early_abort(&f, &op), SHEMB_EIO);
	ck_assert_ptr_null(op.early_sent);
	ck_assert_uint_eq(op.expect[LANE_BULK], 1);
}
END_TEST

START_TEST(pairwise_alltoallv)
{
	struct world wd = { .w = _i };

	build_all(&wd, SHEMB__ALLTOALLV, LANE_BULK, 0, true);
	ck_assert_int_eq(wd.op[0]->nrounds, _i - 1);
	check_world(&wd, _i - 1, SENDS_GATED);
	ck_assert_uint_eq(largest_chunk(&wd), CHUNK);
	free_all(&wd);
}
END_TEST

START_TEST(ring_allreduce)
{
	struct world wd = { .w = _i };

	/* past SHEMB__ALLREDUCE_ONE_ROUND_BYTES: a ring */
	build_all(&wd, SHEMB__ALLREDUCE, LANE_BULK, 100000, true);
	ck_assert_int_eq(wd.op[0]->nrounds, 2 * (_i - 1));
	check_world(&wd, 1, SENDS_GATED);
	free_all(&wd);
}
END_TEST

/* One round (the urgent lane's alltoallv): everything meets, receives
 * wait for headers; the sends go at once where sends complete in any
 * order (fabric/coll.c says why), and those above what the provider
 * injects wait for their headers where they complete in order. */
START_TEST(one_round_alltoallv)
{
	struct world wd = { .w = _i };

	build_all(&wd, SHEMB__ALLTOALLV, LANE_URGENT, 0, false);
	ck_assert_int_eq(wd.op[0]->nrounds, 1);
	check_world(&wd, 1, SENDS_FREE);
	/* pieces of up to 6 CHUNK: the urgent lane's chunks, not the bulk's */
	ck_assert_uint_eq(largest_chunk(&wd), URGENT_CHUNK);
	free_all(&wd);
	build_all(&wd, SHEMB__ALLTOALLV, LANE_URGENT, 0, true);
	check_world(&wd, 1, SENDS_GATED_BIG);
	free_all(&wd);
}
END_TEST

/* The single copies of rank a from peer p: where each starts in the
 * peer's memory and lands here, and that they cover the piece once. */
static void check_pulls(const struct world *wd, int a, int p)
{
	const struct round *rd = &wd->op[a]->rounds[0];
	uint64_t from = shemb__hdr_out(wd->op[p], a)->addr;
	size_t len = wd->counts[p][0][a], covered = 0;

	ck_assert_msg(!len || from == (uint64_t)(uintptr_t)(sbufs[p] +
					wd->counts[p][1][a]),
		      "world %d: rank %d tells rank %d a wrong address",
		      wd->w, p, a);
	for (int i = 0; i < rd->nx; i++) {
		const struct xfer *x = &rd->x[i];

		if (x->is_hdr || x->peer != p)
			continue;
		ck_assert(x->send ? x->ack && !x->pull : x->pull && !x->ack);
		if (x->send)
			continue;
		ck_assert_uint_eq(x->off, covered);
		ck_assert_ptr_eq(x->buf, rbufs[a] + wd->counts[a][3][p] +
					 x->off);
		ck_assert_uint_le(x->len, PULL_CHUNK);
		covered += x->len;
	}
	ck_assert_uint_eq(covered, len);
}

START_TEST(single_copy_alltoallv)
{
	struct world wd = { .w = _i, .cma = true };

	build_all(&wd, SHEMB__ALLTOALLV, LANE_BULK, 0, true);
	ck_assert_int_eq(wd.op[0]->nrounds, 1);
	check_world(&wd, 1, SENDS_GATED_BIG);
	ck_assert_uint_eq(largest_chunk(&wd), PULL_CHUNK);
	for (int a = 0; a < wd.w; a++)
		for (int p = 0; p < wd.w; p++)
			if (p != a)
				check_pulls(&wd, a, p);
	free_all(&wd);
	/* the urgent lane's exchanges keep their messages, and so does a
	 * ring allreduce */
	build_all(&wd, SHEMB__ALLTOALLV, LANE_URGENT, 0, true);
	for (int a = 0; a < wd.w; a++)
		ck_assert(!wd.op[a]->pull);
	free_all(&wd);
	build_all(&wd, SHEMB__ALLREDUCE, LANE_BULK, 100000, true);
	for (int a = 0; a < wd.w; a++)
		ck_assert(!wd.op[a]->pull);
	check_world(&wd, 1, SENDS_GATED);
	free_all(&wd);
}
END_TEST

/* Rank a's transfers with peer p in an op of one round where pieces up
 * to inline_max travel in headers. */
static void check_inline_pair(const struct world *wd, int a, int p)
{
	const struct op *op = wd->op[a];
	const struct round *rd = &op->rounds[0];
	size_t out = wd->counts[a][0][p], in = wd->counts[a][2][p];
	size_t lim = wd->f[a].inline_max, hdr = sizeof(struct shemb__hdr);
	bool out_inline = out && out <= lim, in_inline = in && in <= lim;

	for (int i = 0; i < rd->nx; i++) {
		const struct xfer *x = &rd->x[i];
		const struct shemb__hdr *h = x->buf;

		if (x->peer != p)
			continue;
		if (!x->is_hdr) {
			ck_assert_msg(x->send ? !out_inline : !in_inline,
				      "world %d: rank %d moves an inline "
				      "piece %s rank %d as data", wd->w, a,
				      x->send ? "to" : "from", p);
			continue;
		}
		if (!x->send) {
			ck_assert_uint_eq(x->len, hdr + lim);
			continue;
		}
		ck_assert_uint_eq(h->inlined, out_inline);
		ck_assert_uint_eq(x->len, hdr + (out_inline ? out : 0));
		ck_assert(!out_inline ||
			  !memcmp(h + 1, sbufs[a] + wd->counts[a][1][p], out));
	}
}

/* Rank p's header lands at rank a as rank p sent it, less cut bytes,
 * with its flag flipped if flip: 0 or the code of the take. */
static int land_header(struct world *wd, int a, int p, size_t cut,
		       bool flip)
{
	struct op *op = wd->op[a];
	struct shemb__hdr *h = shemb__hdr_out(wd->op[p], a);
	size_t len = sizeof(*h) + (h->inlined ? h->bytes : 0) - cut;

	memcpy(shemb__hdr_in(op, p), h, len);
	if (flip)
		shemb__hdr_in(op, p)->inlined ^= 1;
	return shemb__coll_take_header(op, p, len);
}

START_TEST(inline_alltoallv)
{
	struct world wd = { .w = _i, .inline_pieces = true };
	size_t lim;

	fill_sbufs();
	for (int lane = LANE_BULK; lane <= LANE_URGENT; lane++) {
		wd.cma = lane == LANE_BULK; /* single copy for the others */
		build_all(&wd, SHEMB__ALLTOALLV, lane, 0, true);
		lim = wd.f[0].inline_max;
		/* the pieces of piece(): 0, 6 KiB (inline), 12 KiB ... */
		ck_assert_uint_ge(lim, 3 * CHUNK / 2);
		ck_assert_uint_lt(lim, 3 * CHUNK);
		check_world(&wd, 1, SENDS_GATED_BIG);
		for (int a = 0; a < wd.w; a++)
			for (int p = 0; p < wd.w; p++)
				if (p != a)
					check_inline_pair(&wd, a, p);
		memset(rbufs, 0, sizeof(rbufs));
		for (int a = 0; a < wd.w; a++) {
			for (int p = 0; p < wd.w; p++) {
				size_t n = wd.counts[a][2][p];
				const char *want = sbufs[p] +
						   wd.counts[p][1][a];

				if (p == a)
					continue;
				ck_assert_int_eq(land_header(&wd, a, p, 0,
							     false), 0);
				if (!n || n > lim)
					continue;
				ck_assert(!memcmp(rbufs[a] +
						  wd.counts[a][3][p], want,
						  n));
			}
		}
		free_all(&wd);
	}
}
END_TEST

/* A small allreduce: each rank's buffer travels in its headers, and the
 * headers landed, the round's reduction gives the sum in rank order. */
START_TEST(inline_allreduce)
{
	struct world wd = { .w = _i, .inline_pieces = true };
	enum { N = 100 };

	build_all(&wd, SHEMB__ALLREDUCE, LANE_BULK, N, true);
	for (int a = 0; a < wd.w; a++) {
		struct op *op = wd.op[a];
		const struct round *rd = &op->rounds[0];

		for (int i = 0; i < rd->nx; i++)
			ck_assert(rd->x[i].is_hdr); /* no data message */
		for (int p = 0; p < wd.w; p++)
			if (p != a)
				ck_assert_int_eq(land_header(&wd, a, p, 0,
							     false), 0);
		ck_assert_int_eq(rd->after(op, 0), 0);
		for (int i = 0; i < N; i++) {
			float want = 0;

			for (int r = 0; r < wd.w; r++)
				want += (float)r + 0.25f * (float)i;
			ck_assert_float_eq(wd.red[a][i], want);
		}
	}
	free_all(&wd);
}
END_TEST

/* No header send of op carries a piece. */
static void check_no_inline(const struct op *op)
{
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			const struct xfer *x = &op->rounds[r].x[i];

			if (x->is_hdr && x->send)
				ck_assert_uint_eq(x->len,
						  sizeof(struct shemb__hdr));
		}
}

/* A header whose flag or length disagrees with the piece fails the op;
 * the collectives of several rounds keep their pieces apart, and their
 * header receives have room for one all the same. */
START_TEST(inline_refused)
{
	struct world wd = { .w = _i, .inline_pieces = true };
	int a = -1, p = -1;

	fill_sbufs();
	build_all(&wd, SHEMB__ALLTOALLV, LANE_URGENT, 0, false);
	for (int i = 0; i < wd.w * wd.w && a < 0; i++) {
		size_t n = wd.counts[i / wd.w][0][i % wd.w];

		if (i / wd.w != i % wd.w && n && n <= CHUNK * 2) {
			p = i / wd.w;
			a = i % wd.w;
		}
	}
	ck_assert_int_ge(a, 0); /* world 3 on: piece() makes one */
	ck_assert_int_eq(land_header(&wd, a, p, 1, false), SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(wd.op[a]->why, "header message"));
	ck_assert_int_eq(land_header(&wd, a, p, 0, true), SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(wd.op[a]->why, "this rank expects it"));
	ck_assert_int_eq(land_header(&wd, a, p, 0, false), 0);
	free_all(&wd);
	build_all(&wd, SHEMB__BARRIER, LANE_URGENT, 0, false);
	check_world(&wd, 0, SENDS_FREE);
	for (int r = 0; r < wd.w; r++)
		check_no_inline(wd.op[r]);
	free_all(&wd);
	build_all(&wd, SHEMB__ALLTOALLV, LANE_BULK, 0, true);
	check_world(&wd, wd.w - 1, SENDS_GATED);
	for (int r = 0; r < wd.w; r++)
		check_no_inline(wd.op[r]);
	free_all(&wd);
}
END_TEST

/* Rank v of the world, its call built, fails it before it can take
 * part: rebuilt in place as a refusal, as fabric/comm.c does, its
 * headers carrying status and why. */
static void refuse_at(struct world *wd, int v, const char *why)
{
	struct op *op = wd->op[v];

	snprintf(op->why, sizeof(op->why), "%s", why);
	ck_assert_int_eq(shemb__fab_build_refusal(op, SHEMB_ENOMEM), 0);
	ck_assert(op->refusing);
}

/* Every header send and receive of every rank meets one at its peer. */
static void check_headers_met(const struct world *wd)
{
	for (int a = 0; a < wd->w; a++)
		for (int r = 0; r < wd->op[a]->nrounds; r++)
			for (int i = 0; i < wd->op[a]->rounds[r].nx; i++) {
				const struct xfer *x =
					&wd->op[a]->rounds[r].x[i];

				ck_assert_msg(!x->is_hdr || met(wd, a, r, x),
					      "world %d, rank %d: a header "
					      "with %d has no match", wd->w,
					      a, x->peer);
			}
}

/* Rank p's header to rank a lands there as sent: the code of the take. */
static int land_sent(struct world *wd, int a, int p)
{
	const struct op *from = wd->op[p];

	for (int r = 0; r < from->nrounds; r++)
		for (int i = 0; i < from->rounds[r].nx; i++) {
			const struct xfer *x = &from->rounds[r].x[i];

			if (x->is_hdr && x->send && x->peer == a) {
				memcpy(shemb__hdr_in(wd->op[a], p), x->buf,
				       x->len);
				return shemb__coll_take_header(wd->op[a], p,
							       x->len);
			}
		}
	ck_abort_msg("rank %d sends rank %d no header", p, a);
	return 0;
}

/* The bytes of rank a's data sends to v that wait for no header; every
 * other data transfer of a with v waits for v's header. */
static size_t ungated_to(const struct world *wd, int a, int v)
{
	const struct op *op = wd->op[a];
	size_t bytes = 0;

	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			const struct xfer *x = &op->rounds[r].x[i];

			if (x->is_hdr || x->peer != v)
				continue;
			if (!x->gated) {
				ck_assert(x->send);
				bytes += x->len;
			} else {
				ck_assert(gated_by_peer(&op->rounds[r], i, v));
			}
		}
	return bytes;
}

/*
 * A refusal: the refusing rank's transfers are headers only, each met at
 * its peer; its header makes every peer's take end in
 * SHEMB__HDR_REFUSED, with its status and "rank v: why"; the peers'
 * headers land at it without complaint, and the bytes it must take from
 * each (shemb__coll_ungated_bytes) are those of the peer's data sends
 * that wait for no header, as the peer built them; a refusal whose
 * length disagrees with its detail's fails the take.
 */
START_TEST(refusal)
{
	struct world wd = { .w = _i, .inline_pieces = true };

	fill_sbufs();
	for (int k = 0; k < 6; k++) {
		int lane = k % 2 ? LANE_URGENT : LANE_BULK, v = k % wd.w;
		char want[64];

		wd.cma = k / 2 == 1;
		build_all(&wd, SHEMB__ALLTOALLV, lane, 0, k < 4);
		refuse_at(&wd, v, "its tier is full");
		check_headers_met(&wd);
		snprintf(want, sizeof(want), "rank %d: its tier is full", v);
		for (int a = 0; a < wd.w; a++) {
			if (a == v)
				continue;
			ck_assert_uint_eq(shemb__coll_ungated_bytes(wd.op[v],
								    a), 0);
			ck_assert_int_eq(land_sent(&wd, v, a), 0);
			ck_assert_uint_eq(shemb__coll_ungated_bytes(wd.op[v],
								    a),
					  ungated_to(&wd, a, v));
			ck_assert_int_eq(land_sent(&wd, a, v),
					 SHEMB__HDR_REFUSED);
			ck_assert_int_eq(wd.op[a]->refused, SHEMB_ENOMEM);
			ck_assert_str_eq(wd.op[a]->why, want);
		}
		shemb__hdr_out(wd.op[v], (v + 1) % wd.w)->why_len++;
		ck_assert_int_eq(land_sent(&wd, (v + 1) % wd.w, v),
				 SHEMB_EINVAL);
		free_all(&wd);
	}
}
END_TEST

/*
 * Counts that disagree between two ranks of the same call: each finds
 * the disagreement in the other's header, which its take drops
 * (SHEMB__HDR_REFUSED) with SHEMB_EINVAL and the counts named, the first
 * detail kept; a third rank takes both headers as usual.
 */
START_TEST(disagreement)
{
	struct world wd = { .w = _i, .inline_pieces = true };

	fill_sbufs();
	build_all(&wd, SHEMB__ALLTOALLV, LANE_URGENT, 0, false);
	/* rank 0 says it sends rank 1 a byte more than it does */
	shemb__hdr_out(wd.op[0], 1)->bytes++;
	ck_assert_int_eq(land_sent(&wd, 1, 0), SHEMB__HDR_REFUSED);
	ck_assert_int_eq(wd.op[1]->refused, SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(wd.op[1]->why, "rank 0 sends"));
	ck_assert_int_eq(land_sent(&wd, 0, 1), SHEMB__HDR_REFUSED);
	ck_assert_int_eq(wd.op[0]->refused, SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(wd.op[0]->why, "rank 1 sends"));
	if (wd.w > 2) {
		ck_assert_int_eq(land_sent(&wd, 2, 0), 0);
		ck_assert_int_eq(land_sent(&wd, 2, 1), 0);
		ck_assert_int_eq(wd.op[2]->refused, 0);
		/* a second disagreement keeps the first detail */
		shemb__hdr_out(wd.op[2], 1)->expect++;
		ck_assert_int_eq(land_sent(&wd, 1, 2), SHEMB__HDR_REFUSED);
		ck_assert_ptr_nonnull(strstr(wd.op[1]->why, "rank 0 sends"));
	}
	free_all(&wd);
}
END_TEST

/* Whether x moves bytes of the caller's buffer: [lo, lo + len) or
 * [lo2, lo2 + len). */
static bool on_caller(const struct xfer *x, const void *lo, const void *lo2,
		      size_t len)
{
	const char *b = x->buf, *a = lo, *c = lo2;

	return (b >= a && b < a + len) || (b >= c && b < c + len);
}

/*
 * Rank 0's op of wd: not done, it holds its caller's buffers; done, only
 * if it failed.  Failed, with each transfer alone posted, it holds them
 * exactly when that transfer's buffer lies in them (headers, an
 * allreduce's incoming data: the op's own memory); with single copy, if
 * it was cut short, also while any send has not had its peer's empty
 * message (ack), posted or not: the peer knows where the piece is from
 * the header; not once it ended as a refusal.  Checks that some
 * transfers hold it and some do not.
 */
static void check_holds(struct world *wd, const void *lo, const void *lo2,
			size_t len)
{
	struct op *op = wd->op[0];
	int held = 0, n = 0, acks = 0;

	ck_assert(shemb__fab_op_holds(op));
	op->done = true;
	ck_assert(!shemb__fab_op_holds(op));
	op->status = SHEMB_EPEER;
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			struct xfer *x = &op->rounds[r].x[i];

			acks += x->ack;
			x->landed = x->landed || x->ack;
		}
	ck_assert(!shemb__fab_op_holds(op));
	for (int r = 0; r < op->nrounds; r++)
		for (int i = 0; i < op->rounds[r].nx; i++) {
			struct xfer *x = &op->rounds[r].x[i];
			bool want = on_caller(x, lo, lo2, len);

			x->posted = true;
			op->posted = 1;
			ck_assert_msg(shemb__fab_op_holds(op) == want,
				      "world %d, round %d, transfer %d "
				      "(header %d, send %d): holds %d", wd->w,
				      r, i, x->is_hdr, x->send, !want);
			x->posted = false;
			op->posted = 0;
			if (x->ack) {
				x->landed = false;
				op->aborted = true;
				ck_assert(shemb__fab_op_holds(op));
				op->aborted = false;
				ck_assert(!shemb__fab_op_holds(op));
				x->landed = true;
			}
			held += want;
			n++;
		}
	ck_assert_int_gt(held, 0);
	ck_assert_int_lt(held, n);
	ck_assert_int_eq(acks > 0, wd->op[0]->pull);
	op->done = false;
	op->status = 0;
}

START_TEST(failed_op_holds)
{
	struct world wd = { .w = _i };

	build_all(&wd, SHEMB__ALLTOALLV, LANE_BULK, 0, true);
	check_holds(&wd, sbufs[0], rbufs[0], SPAN);
	free_all(&wd);
	/* the ring's receives land in the op's scratch */
	build_all(&wd, SHEMB__ALLREDUCE, LANE_BULK, 100000, true);
	ck_assert_ptr_nonnull(wd.op[0]->scratch);
	check_holds(&wd, wd.red[0], wd.red[0], 100000 * sizeof(float));
	free_all(&wd);
	/* single copy: a send stands for the piece its peer copies */
	wd.cma = true;
	build_all(&wd, SHEMB__ALLTOALLV, LANE_BULK, 0, true);
	check_holds(&wd, sbufs[0], rbufs[0], SPAN);
	free_all(&wd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coll_build");
	TCase *tc = tcase_create("rounds");

	tcase_add_loop_test(tc, pairwise_alltoallv, 3, MAX_W + 1);
	tcase_add_loop_test(tc, ring_allreduce, 2, MAX_W + 1);
	tcase_add_loop_test(tc, one_round_alltoallv, 2, MAX_W + 1);
	tcase_add_loop_test(tc, single_copy_alltoallv, 2, MAX_W + 1);
	tcase_add_loop_test(tc, inline_alltoallv, 2, MAX_W + 1);
	tcase_add_loop_test(tc, inline_refused, 3, MAX_W + 1);
	tcase_add_loop_test(tc, inline_allreduce, 2, MAX_W + 1);
	tcase_add_test(tc, early_aborts_all_taken);
	tcase_add_loop_test(tc, refusal, 2, MAX_W + 1);
	tcase_add_loop_test(tc, disagreement, 2, MAX_W + 1);
	tcase_add_loop_test(tc, failed_op_holds, 2, MAX_W + 1);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
