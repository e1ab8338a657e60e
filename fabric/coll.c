/*
 * coll.c - each collective as rounds of transfers.
 *
 * alltoallv, allgatherv: one round; a header to and from every peer, the
 *   data in chunks to and from each peer with a non-zero count, or in
 *   the header's message for a small piece (inlines()).  An
 *   alltoallv of the bulk lane over shm with 3 ranks or more, without
 *   single copy (cma.c): N - 1 pairwise rounds instead (pairwise_round).
 *   With single copy, each receive of data copies out of the sender's
 *   memory at the address its header gave, and each send waits for the
 *   receiver's empty message saying it is done.
 * allreduce up to SHEMB__ALLREDUCE_ONE_ROUND_BYTES (lib/comm.h): one
 *   round; every rank sends its buffer to every other, then each adds the
 *   N buffers in rank order (latency of one message; every rank computes
 *   the same bits).
 * allreduce above: a ring, N - 1 reduce-scatter rounds then N - 1
 *   allgather rounds, each moving 1/N of the buffer to the right neighbour
 *   (bandwidth-optimal).
 * barrier: dissemination, ceil(log2 N) rounds of one header each way.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "cpu/reduce.h"

#define HDR_MAGIC 0x424d4853u /* "SHMB" */

/* ---- building rounds ---- */

static struct xfer *add_xfer(struct op *op, int r, bool send, int peer,
			     void *buf, size_t len, uint64_t tag)
{
	struct round *rd = &op->rounds[r];
	struct xfer *x;

	/* room for 4, then doubled whenever full: 4, 8, 16 and on */
	if (rd->nx == 0 || (rd->nx >= 4 && !(rd->nx & (rd->nx - 1)))) {
		void *p = realloc(rd->x, (size_t)(rd->nx ? 2 * rd->nx : 4) *
						 sizeof(*rd->x));

		if (!p)
			return NULL;
		rd->x = p;
	}
	x = &rd->x[rd->nx++];
	memset(x, 0, sizeof(*x));
	x->op = op;
	x->send = send;
	x->peer = peer;
	x->buf = buf;
	x->len = len;
	x->tag = tag;
	return x;
}

/* The chunk size of op: an allreduce's chunks hold whole elements, since
 * each is reduced as it lands. */
size_t shemb__coll_chunk(const struct op *op)
{
	size_t chunk = op->f->chunk[op->lane], e;

	if (op->kind != SHEMB__ALLREDUCE)
		return op->pull ? op->f->pull_chunk : chunk;
	e = shemb__reduce_elem_size(op->c.dtype);
	return chunk < e ? e : chunk - chunk % e;
}

/* len bytes at buf, cut in chunks, to or from peer. */
static int add_chunks(struct op *op, int r, bool send, int peer, void *buf,
		      size_t len)
{
	size_t chunk = shemb__coll_chunk(op);

	if (len / chunk >= MAX_CHUNKS) {
		snprintf(op->why, sizeof(op->why), "%zu bytes to or from rank "
			 "%d take more than %d chunks of %zu bytes: raise "
			 "chunk_bytes", len, peer, MAX_CHUNKS, chunk);
		return SHEMB_EINVAL;
	}
	for (size_t off = 0, k = 0; off < len; off += chunk, k++) {
		size_t n = len - off < chunk ? len - off : chunk;
		struct xfer *x = add_xfer(op, r, send, peer, (char *)buf + off,
					  n, shemb__fab_tag(TAG_DATA, op->seq,
							    r, (int)k));

		if (!x)
			return SHEMB_ENOMEM;
		x->pull = op->pull && !send;
		x->ack = op->pull && send;
		x->off = off;
		x->run_pos = (int)k;
		x->run_after = (int)((len - off - n + chunk - 1) / chunk);
	}
	return 0;
}

/* A header to peer (with the piece it carries), or a receive of one
 * with room for a piece (hdr_stride). */
static int add_header(struct op *op, int r, int peer, bool send)
{
	struct shemb__hdr *h = send ? shemb__hdr_out(op, peer)
				    : shemb__hdr_in(op, peer);
	size_t len = send ? sizeof(*h) + (h->inlined ? h->bytes : 0)
			  : op->hdr_stride;
	struct xfer *x;

	if (send && op->refusing)
		len += h->why_len;
	x = add_xfer(op, r, send, peer, h, len,
		     shemb__fab_tag(TAG_HDR, op->seq, r, 0));

	if (!x)
		return SHEMB_ENOMEM;
	x->is_hdr = true;
	return 0;
}

static void fill_header(struct op *op, int peer, uint64_t bytes,
			uint64_t expect)
{
	struct shemb__hdr *h = shemb__hdr_out(op, peer);

	h->magic = HDR_MAGIC;
	h->kind = (uint16_t)op->kind;
	h->dtype = (uint8_t)op->c.dtype;
	h->op = (uint8_t)op->c.op;
	h->seq = op->seq;
	h->lane = (uint32_t)op->lane;
	h->from = (uint32_t)op->f->rank;
	h->inlined = 0;
	h->bytes = bytes;
	h->expect = expect;
	h->count = op->c.count;
	h->refused = 0;
	h->why_len = 0;
	if (op->refusing) { /* its detail, as much as the peer has room for */
		size_t room = op->hdr_stride - sizeof(*h);
		size_t n = strlen(op->why);

		h->refused = op->refused;
		h->why_len = (uint32_t)(n < room ? n : room);
		memcpy(h + 1, op->why, h->why_len);
	}
}

/* Whether op's data moves by single copy (cma.c): the bulk lane's, where
 * every rank can read the others' memory.  The urgent lane's small
 * pieces go as one message each, which costs less than the copy and its
 * empty message.  Allreduces keep them too: by single copy, a ring's
 * chunks and the empty messages that acknowledge them made a small
 * urgent alltoallv behind a 64 MiB allreduce take 4-7 times as long as
 * alone (shemb-bench sched -n 4, 2 CPUs), against 1.0-1.7 times. */
static bool pulls(const struct op *op)
{
	return op->f->cma && op->lane == LANE_BULK;
}

/* Where a single copy (cma.c) finds the bytes this rank sends to peer. */
static void tell_source(struct op *op, int peer, const void *src)
{
	if (op->pull)
		shemb__hdr_out(op, peer)->addr = (uint64_t)(uintptr_t)src;
}

/*
 * A piece of at most f->inline_max bytes travels in its header's message:
 * one message to each peer instead of two (over single copy, instead of a
 * message, a copy and its acknowledgement).  Only collectives of one
 * round do it (alltoallv, allgatherv, a small allreduce), but every
 * header receive of every collective has room for such a piece, whatever
 * this rank expects from the peer: a piece of a call that disagrees (a
 * barrier against an allreduce) must not be truncated, which tcp;ofi_rxm
 * answers by dropping the connection.  The header is checked as any
 * other, and its flag must agree with the receiver's count.  Over shm
 * the message stays within what shm injects (sends_in_order: a header is
 * never held back), over rxm within its eager messages (16 KiB), over
 * other providers within what they inject; the header slots of an op
 * take at most INLINE_SLOTS bytes each way.
 * Measured, median of 400 alltoallvs back to back (2 CPUs): over
 * tcp;ofi_rxm, 2 ranks, 2 to 15 KiB a peer, 10-13 us against 22-27 us
 * as a header and a piece (a barrier, one message each way: 9.5 us), but
 * 42 us against 25 for a message just past 16 KiB (rxm's rendezvous);
 * 4 ranks, 2 KiB, 75 against 151 us; over shm, 2 KiB, 1.1 against 3.8 us
 * (2 ranks) and 10 against 41 us (4 ranks).
 */
#define INLINE_MESSAGE 16384
#define INLINE_SLOTS (128 << 10)

size_t shemb__coll_inline_limit(const struct fab *f)
{
	bool rxm = strstr(f->provider, "ofi_rxm") != NULL;
	size_t msg = rxm && !f->sends_in_order ? INLINE_MESSAGE
					       : f->inject_size;
	size_t slot = INLINE_SLOTS / (size_t)f->world;
	size_t hdr = sizeof(struct shemb__hdr);

	if (slot < msg)
		msg = slot;
	return msg >= 2 * hdr ? (msg - hdr) & ~(size_t)7 : 0;
}

/* Whether a piece of len bytes travels in its header's message in op. */
static bool inlines(const struct op *op, size_t len)
{
	return op->inline_pieces && len && len <= op->f->inline_max;
}

/* Headers both ways with peer in round r; piece: the bytes the header
 * to peer carries, or NULL. */
static int exchange_headers(struct op *op, int r, int peer, uint64_t bytes,
			    uint64_t expect, const void *piece)
{
	int rc;

	fill_header(op, peer, bytes, expect);
	if (piece) {
		struct shemb__hdr *h = shemb__hdr_out(op, peer);

		h->inlined = 1;
		memcpy(h + 1, piece, bytes);
	}
	rc = add_header(op, r, peer, false);
	if (!rc)
		rc = add_header(op, r, peer, true);
	return rc;
}

/* The transfers [lo, hi) of round r wait for its header receive hdr. */
static void gate_range(struct op *op, int r, int hdr, int lo, int hi)
{
	struct round *rd = &op->rounds[r];

	for (int i = lo; i < hi; i++)
		rd->x[i].gated = true;
	rd->x[hdr].gate_lo = lo;
	rd->x[hdr].gate_hi = hi;
}

/* The transfers from lo to the end of round r wait for hdr. */
static void gate(struct op *op, int r, int hdr, int lo)
{
	gate_range(op, r, hdr, lo, op->rounds[r].nx);
}

/* Whether a send of len bytes to a peer must wait for the peer's header,
 * that is until the peer is in the call (engine.h, sends_in_order). */
static bool send_waits_for_header(const struct fab *f, size_t len)
{
	return f->sends_in_order && len > f->inject_size;
}

/*
 * Headers both ways with peer in round r, then rlen bytes from peer into
 * rbuf, which wait for the peer's header (so that no data lands in a
 * buffer sized for another call, see engine.h), and slen bytes of sbuf to
 * it.  The peer is in the same round, the only one of the call, but it
 * may not have started the call yet: where sends complete in order, a
 * piece it will only take later would hold back the completion of this
 * rank's later sends, those of a collective the peer waits for before it
 * starts this one among them (coll_rank late-start).  There the piece
 * waits for the peer's header too, unless it completes at once anyway.
 * Measured (shemb-bench comm, shm, 2 ranks, one pass each, twice): an
 * alltoallv of 16 MiB moved 2.2-2.3 GB/s a rank against 2.3-3.4
 * without the wait, of 64 MiB 1.9-2.1 against 2.4-2.8; 4 ranks (in
 * pairwise rounds, gated before) the same within the noise.
 */
static int exchange_pieces(struct op *op, int r, int peer, void *rbuf,
			   size_t rlen, const void *sbuf, size_t slen)
{
	struct round *rd = &op->rounds[r];
	int hdr = rd->nx, lo, receives_end, rc;

	rc = exchange_headers(op, r, peer, slen, rlen,
			      inlines(op, slen) ? sbuf : NULL);
	tell_source(op, peer, sbuf);
	lo = rd->nx;
	if (!rc && !inlines(op, rlen))
		rc = add_chunks(op, r, false, peer, rbuf, rlen);
	if (rc)
		return rc;
	receives_end = rd->nx;
	if (!inlines(op, slen))
		rc = add_chunks(op, r, true, peer, (void *)sbuf, slen);
	if (!rc)
		gate_range(op, r, hdr, lo,
			   send_waits_for_header(op->f, slen) ? rd->nx
							      : receives_end);
	return rc;
}

/* n rounds, and a header slot each way per peer with room for a piece;
 * inline_pieces: small pieces travel in them (inlines()). */
static int alloc_rounds(struct op *op, int n, bool inline_pieces)
{
	int world = op->f->world;
	size_t hdr = sizeof(struct shemb__hdr);

	if (n > MAX_ROUNDS)
		return SHEMB_EINVAL;
	op->inline_pieces = inline_pieces;
	op->hdr_stride = hdr + op->f->inline_max;
	op->rounds = calloc((size_t)(n ? n : 1), sizeof(*op->rounds));
	op->hdr_out = malloc((size_t)world * op->hdr_stride);
	op->hdr_in = malloc((size_t)world * op->hdr_stride);
	if (!op->rounds || !op->hdr_out || !op->hdr_in)
		return SHEMB_ENOMEM;
	for (int p = 0; p < world; p++) { /* the room stays as it is */
		memset(shemb__hdr_out(op, p), 0, hdr);
		memset(shemb__hdr_in(op, p), 0, hdr);
	}
	op->nrounds = n;
	return 0;
}

/* The i-th peer (1 <= i < N) a rank exchanges with: ranks start with
 * different peers, so that the first chunks do not all queue at rank 0. */
static int first_peers_differ(const struct fab *f, int i)
{
	return (f->rank + i) % f->world;
}

/* ---- alltoallv and allgatherv ---- */

#define SC(op) ((op)->counts)
#define SD(op) ((op)->counts + (op)->f->world)
#define RC(op) ((op)->counts + 2 * (op)->f->world)
#define RD(op) ((op)->counts + 3 * (op)->f->world)

/*
 * Round i - 1 of N - 1: the piece for rank + i goes, the piece from
 * rank - i comes.  On shm, where the receiver copies each piece out of
 * the sender's memory while holding its own queue's lock, a piece from
 * every peer at once made the senders spin on that lock: with 4 ranks on
 * 2 CPUs, the rounds took 10-25% less time than one round did at 16 and
 * 64 MiB (shemb-bench comm).
 *
 * Headers go both ways with both peers of the round, and the piece for
 * rank + i waits for that rank's header, that is until it is in the
 * round too.  shm completes a lane's sends in the order they were
 * posted: a piece sent to a rank still in an earlier round would hold
 * back the completion of every later send, the ones that rank waits for
 * among them.
 */
static int pairwise_round(struct op *op, int i, const char *sb, char *rb)
{
	struct fab *f = op->f;
	int w = f->world, r = i - 1, to = (f->rank + i) % w;
	int from = (f->rank - i + w) % w, hdr_from, hdr_to, lo, rc;

	hdr_from = op->rounds[r].nx;
	rc = exchange_headers(op, r, from, SC(op)[from], RC(op)[from],
			      NULL);
	hdr_to = op->rounds[r].nx;
	if (to == from)
		hdr_to = hdr_from;
	else if (!rc)
		rc = exchange_headers(op, r, to, SC(op)[to], RC(op)[to],
				      NULL);
	lo = op->rounds[r].nx;
	if (!rc)
		rc = add_chunks(op, r, false, from, rb + RD(op)[from],
				RC(op)[from]);
	if (rc)
		return rc;
	if (to != from) {
		gate(op, r, hdr_from, lo);
		lo = op->rounds[r].nx;
	}
	rc = add_chunks(op, r, true, to, (void *)(sb + SD(op)[to]),
			SC(op)[to]);
	if (!rc)
		gate(op, r, hdr_to, lo);
	return rc;
}

static int pairwise_rounds(struct op *op, const char *sb, char *rb)
{
	int rc = alloc_rounds(op, op->f->world - 1, false);

	for (int i = 1; !rc && i < op->f->world; i++)
		rc = pairwise_round(op, i, sb, rb);
	return rc;
}

/* One round: headers to and from every peer, then all the pieces. */
static int one_round(struct op *op, const char *sb, char *rb)
{
	struct fab *f = op->f;
	int rc = alloc_rounds(op, 1, true);

	for (int i = 1; !rc && i < f->world; i++) {
		int p = first_peers_differ(f, i);

		rc = exchange_pieces(op, 0, p, rb + RD(op)[p], RC(op)[p],
				     sb + SD(op)[p], SC(op)[p]);
	}
	return rc;
}


/* Pairwise on the bulk lane where the transport asks for it; the
 * exchanges of lookups and backward steps (the urgent lane) stay in one
 * round, where every peer's rows may land as soon as they can. */
static int build_alltoallv(struct op *op)
{
	struct fab *f = op->f;
	const char *sb = op->c.sendbuf;
	char *rb = op->c.recvbuf;

	if (SC(op)[f->rank] != RC(op)[f->rank]) {
		snprintf(op->why, sizeof(op->why),
			 "sends %zu bytes to itself but expects %zu",
			 SC(op)[f->rank], RC(op)[f->rank]);
		return SHEMB_EINVAL;
	}
	op->self_src = sb + SD(op)[f->rank];
	op->self_dst = rb + RD(op)[f->rank];
	op->self_len = SC(op)[f->rank];
	op->pull = pulls(op);
	if (f->pairwise && f->world > 2 && op->lane == LANE_BULK)
		return pairwise_rounds(op, sb, rb);
	return one_round(op, sb, rb);
}

static int build_allgatherv(struct op *op)
{
	struct fab *f = op->f;
	char *rb = op->c.recvbuf;
	size_t mine = op->c.sendcount;
	int rc = alloc_rounds(op, 1, true);

	if (RC(op)[f->rank] != mine) {
		snprintf(op->why, sizeof(op->why),
			 "sends %zu bytes but expects %zu from itself", mine,
			 RC(op)[f->rank]);
		return SHEMB_EINVAL;
	}
	op->self_src = op->c.sendbuf;
	op->self_dst = rb + RD(op)[f->rank];
	op->self_len = mine;
	op->pull = pulls(op);
	for (int i = 1; !rc && i < f->world; i++) {
		int p = first_peers_differ(f, i);

		rc = exchange_pieces(op, 0, p, rb + RD(op)[p], RC(op)[p],
				     op->c.sendbuf, mine);
	}
	return rc;
}

/* ---- barrier ---- */

static int build_barrier(struct op *op)
{
	struct fab *f = op->f;
	int n = f->world, rounds = 0, rc;

	while ((1 << rounds) < n)
		rounds++;
	rc = alloc_rounds(op, rounds, false);
	for (int r = 0; !rc && r < rounds; r++) {
		int to = (f->rank + (1 << r)) % n;
		int from = (f->rank - (1 << r) % n + n) % n;

		fill_header(op, to, 0, 0);
		rc = add_header(op, r, from, false);
		if (!rc)
			rc = add_header(op, r, to, true);
	}
	return rc;
}

/* ---- allreduce ---- */

static size_t elem(const struct op *op)
{
	return shemb__reduce_elem_size(op->c.dtype);
}

/* Sum the N buffers in rank order: every rank gets the same bits. */
static int reduce_all_in_order(struct op *op, int round)
{
	size_t bytes = op->c.count * elem(op);
	char *slots = op->scratch;

	memcpy(op->c.recvbuf, slots, bytes);
	for (int p = 1; p < op->f->world; p++)
		shemb__reduce(op->c.dtype, op->c.op, op->c.recvbuf,
			      slots + (size_t)p * bytes, op->c.count);
	return 0;
}

static int build_allreduce_small(struct op *op)
{
	struct fab *f = op->f;
	size_t bytes = op->c.count * elem(op);
	char *slots = shemb__fab_scratch(op, (size_t)f->world * bytes);
	int rc = alloc_rounds(op, 1, true);

	if (!slots)
		return SHEMB_ENOMEM;
	if (rc)
		return rc;
	memcpy(slots + (size_t)f->rank * bytes, op->c.sendbuf, bytes);
	op->rounds[0].after = reduce_all_in_order;
	for (int i = 1; !rc && i < f->world; i++) {
		int p = first_peers_differ(f, i);

		rc = exchange_pieces(op, 0, p, slots + (size_t)p * bytes,
				     bytes, slots + (size_t)f->rank * bytes,
				     bytes);
	}
	return rc;
}

/* Segment k of the ring: elements [start, start + len). */
static void ring_segment(const struct op *op, int k, size_t *start,
			 size_t *len)
{
	size_t n = op->c.count, w = (size_t)op->f->world;
	size_t base = n / w, extra = n % w, kk = (size_t)k;

	*start = kk * base + (kk < extra ? kk : extra);
	*len = base + (kk < extra);
}

static int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* A chunk of reduce-scatter round s landed in the scratch buffer: it
 * plus this rank's own share of it (still as sent: each segment is
 * reduced once per rank), into the result. */
static int ring_add_chunk(struct op *op, const struct xfer *x)
{
	size_t start, len, e = elem(op);
	size_t off = (size_t)((const char *)x->buf - (const char *)op->scratch);
	size_t at;

	ring_segment(op, mod(op->f->rank - op->cur - 1, op->f->world), &start,
		     &len);
	at = start * e + off;
	shemb__reduce3(op->c.dtype, op->c.op, (char *)op->c.recvbuf + at,
		       (const char *)op->c.sendbuf + at, x->buf, x->len / e);
	return 0;
}

/*
 * Round r of the ring: a segment from left, one to right.  The segment
 * to right waits for right's header of the round, sent as right enters
 * it: a rank runs a round ahead of its right neighbour at times, and a
 * segment no receive matches yet would hold back the completion of the
 * lane's later sends (see pairwise_round), the ones that neighbour waits
 * for among them.  Round 0's headers are the call's (exchanged by
 * build_allreduce_ring); later rounds send the same header again, to
 * left.  The first data from left waits for left's header, later data
 * for nothing: the receives are posted as the round begins.
 */
static int ring_round(struct op *op, int r, int left_hdr, int right_hdr)
{
	struct fab *f = op->f;
	int n = f->world, right = (f->rank + 1) % n, left = mod(f->rank - 1, n);
	bool scatter = r < n - 1;
	int s = scatter ? r : r - (n - 1);
	int send_seg = scatter ? mod(f->rank - s, n) : mod(f->rank + 1 - s, n);
	int recv_seg = scatter ? mod(f->rank - s - 1, n) : mod(f->rank - s, n);
	char *acc = op->c.recvbuf;
	/* round 0 sends this rank's own data: no copy into recvbuf first */
	char *from = r == 0 ? (char *)op->c.sendbuf : acc;
	size_t ss, sl, rs, rl, e = elem(op);
	int rc = 0, lo;

	ring_segment(op, send_seg, &ss, &sl);
	ring_segment(op, recv_seg, &rs, &rl);
	if (r > 0) {
		right_hdr = op->rounds[r].nx;
		rc = add_header(op, r, right, false);
		if (!rc)
			rc = add_header(op, r, left, true);
	}
	lo = op->rounds[r].nx;
	if (!rc)
		rc = add_chunks(op, r, false, left,
				scatter ? op->scratch : acc + rs * e, rl * e);
	if (!rc && r == 0 && left != right)
		gate(op, 0, left_hdr, lo);
	/* round 0's receives wait for left's header (with 2 ranks, the
	 * gate below is left's); later ones for none, since this rank's
	 * header of the round tells left to send, and a segment no receive
	 * matches would hold back left's later sends */
	if (r > 0 || left != right)
		lo = op->rounds[r].nx;
	if (!rc)
		rc = add_chunks(op, r, true, right, from + ss * e, sl * e);
	if (!rc)
		gate(op, r, right_hdr, lo);
	if (scatter)
		op->rounds[r].on_chunk = ring_add_chunk;
	return rc;
}

static int build_allreduce_ring(struct op *op)
{
	struct fab *f = op->f;
	int n = f->world, right = (f->rank + 1) % n, left = mod(f->rank - 1, n);
	size_t bytes = op->c.count * elem(op), first, most;
	int rc = alloc_rounds(op, 2 * (n - 1), false), left_hdr, right_hdr = 0;

	ring_segment(op, 0, &first, &most);
	if (rc || !shemb__fab_scratch(op, most * elem(op)))
		return rc ? rc : SHEMB_ENOMEM;
	if (!rc && left != right)
		rc = exchange_headers(op, 0, right, bytes, bytes, NULL);
	left_hdr = op->rounds[0].nx; /* then left's: receive, send */
	if (left == right)
		right_hdr = left_hdr;
	if (!rc)
		rc = exchange_headers(op, 0, left, bytes, bytes, NULL);
	for (int r = 0; !rc && r < 2 * (n - 1); r++)
		rc = ring_round(op, r, left_hdr, right_hdr);
	return rc;
}

/* ---- headers ---- */

static const char *kind_name(int kind)
{
	static const char *const names[] = { "?", "alltoallv", "allgatherv",
					     "allreduce", "barrier",
					     "closing its context" };

	return kind >= 1 && kind <= 5 ? names[kind] : "?";
}

/*
 * A peer refused the call (fabric/README.md): the op goes on with the
 * other ranks and ends with the first refusing peer's status and detail;
 * what waits for this header (the data both ways with the peer) never
 * runs.  SHEMB__HDR_REFUSED, or SHEMB_EINVAL for a malformed one.
 */
static int take_refusal(struct op *op, int peer, size_t len)
{
	const struct shemb__hdr *h = shemb__hdr_in(op, peer);

	if (h->refused >= 0 || len != sizeof(*h) + h->why_len) {
		snprintf(op->why, sizeof(op->why), "rank %d sent a malformed "
			 "refusal", peer);
		return SHEMB_EINVAL;
	}
	if (op->refused)
		return SHEMB__HDR_REFUSED; /* the first one's kept */
	op->refused = h->refused;
	if (op->refusing)
		return SHEMB__HDR_REFUSED; /* this rank's own detail stays */
	if (h->why_len)
		snprintf(op->why, sizeof(op->why), "rank %d: %.*s", peer,
			 (int)h->why_len, (const char *)(h + 1));
	else
		snprintf(op->why, sizeof(op->why), "rank %d: %s", peer,
			 shemb_strerror(h->refused));
	return SHEMB__HDR_REFUSED;
}

/*
 * The same call (kind, number, lane) with counts that disagree with the
 * peer's, which finds the same disagreement in this rank's header: as with
 * a refusal, what waits for the header never runs, the data the peer sent
 * without waiting is taken and dropped (engine.c), and the op ends with
 * SHEMB_EINVAL and the first such detail once the transfers with the
 * other ranks are done; those ranks' calls, consistent, succeed.  Nothing
 * is left posted or unreceived.  SHEMB__HDR_REFUSED.
 */
static int disagree(struct op *op, int peer)
{
	const struct shemb__hdr *h = shemb__hdr_in(op, peer);
	const struct shemb__hdr *mine = shemb__hdr_out(op, peer);

	if (op->refused)
		return SHEMB__HDR_REFUSED; /* the first one's kept */
	op->refused = SHEMB_EINVAL;
	snprintf(op->why, sizeof(op->why), "%s: rank %d sends %llu bytes to "
		 "this rank and expects %llu; this rank expects %llu from it "
		 "and sends %llu", kind_name(op->kind), peer,
		 (unsigned long long)h->bytes, (unsigned long long)h->expect,
		 (unsigned long long)mine->expect,
		 (unsigned long long)mine->bytes);
	return SHEMB__HDR_REFUSED;
}

/* A peer's header against this rank's own call: 0, SHEMB__HDR_REFUSED
 * (take_refusal, disagree), or SHEMB_EINVAL with the disagreement in
 * op->why. */
static int check_header(struct op *op, int peer, size_t len)
{
	const struct shemb__hdr *h = shemb__hdr_in(op, peer);
	const struct shemb__hdr *mine = shemb__hdr_out(op, peer);
	char *why = op->why;
	size_t n = sizeof(op->why);

	if (len < sizeof(*h) || h->magic != HDR_MAGIC ||
	    h->from != (uint32_t)peer)
		snprintf(why, n, "rank %d sent a malformed header", peer);
	else if (h->kind != op->kind || h->seq != op->seq)
		snprintf(why, n, "collective call %u: rank %d is in %s (its "
			 "call %u), this rank in %s", op->seq, peer,
			 kind_name(h->kind), h->seq, kind_name(op->kind));
	else if (h->lane != (uint32_t)op->lane)
		snprintf(why, n, "collective call %u: rank %d gives it a "
			 "priority %s SHEMB_PRIO_DENSE, this rank one %s: give "
			 "it the same priority on every rank", op->seq, peer,
			 h->lane == LANE_URGENT ? "above" : "at or below",
			 op->lane == LANE_URGENT ? "above" : "at or below");
	else if (h->refused)
		return take_refusal(op, peer, len);
	else if (op->refusing)
		return 0; /* it takes nothing from the peer */
	else if (op->kind == SHEMB__ALLREDUCE &&
		 (h->count != op->c.count || h->dtype != op->c.dtype ||
		  h->op != op->c.op))
		snprintf(why, n, "allreduce: rank %d reduces %llu values of "
			 "dtype %d with op %d, this rank %zu of dtype %d with "
			 "op %d", peer, (unsigned long long)h->count, h->dtype,
			 h->op, op->c.count, op->c.dtype, op->c.op);
	else if (h->bytes != mine->expect || h->expect != mine->bytes)
		return disagree(op, peer);
	else
		return 0;
	return SHEMB_EINVAL;
}

/* Where the piece from peer goes: an allreduce's in its slot of the
 * scratch buffer (build_allreduce_small). */
static char *piece_from(const struct op *op, int peer)
{
	if (op->kind == SHEMB__ALLREDUCE)
		return (char *)op->scratch + (size_t)peer * op->c.count *
						     elem(op);
	return (char *)op->c.recvbuf + RD(op)[peer];
}

/* The piece a checked header carries (inlines()), into place: the flag
 * must be what this rank's count makes it, and the message as long as
 * the header says.  A build whose inline_max differs breaks the first. */
static int take_piece(struct op *op, int peer, size_t len)
{
	const struct shemb__hdr *h = shemb__hdr_in(op, peer);
	bool expected = inlines(op, h->bytes); /* bytes == this rank's count */
	size_t want = sizeof(*h) + (h->inlined ? h->bytes : 0);

	if (h->inlined != expected) {
		snprintf(op->why, sizeof(op->why), "collective call %u: rank "
			 "%d sends its piece of %llu bytes %s its header, this "
			 "rank expects it %s (a build of the library with "
			 "another limit)", op->seq, peer,
			 (unsigned long long)h->bytes,
			 h->inlined ? "with" : "apart from",
			 expected ? "with it" : "apart");
		return SHEMB_EINVAL;
	}
	if (len != want) {
		snprintf(op->why, sizeof(op->why), "rank %d sent a header "
			 "message of %zu bytes where it says %zu", peer, len,
			 want);
		return SHEMB_EINVAL;
	}
	if (h->inlined)
		memcpy(piece_from(op, peer), h + 1, h->bytes);
	return 0;
}

int shemb__coll_take_header(struct op *op, int peer, size_t len)
{
	int rc = check_header(op, peer, len);

	return rc || op->refusing ? rc : take_piece(op, peer, len);
}

/* A refusing op (whose rank moves no data): the bytes a peer, by its
 * header, sends this rank without waiting for this rank's header (a
 * piece of a one-round collective neither in its header nor held back,
 * exchange_pieces), which this rank must take all the same. */
size_t shemb__coll_ungated_bytes(const struct op *op, int peer)
{
	const struct shemb__hdr *h = shemb__hdr_in(op, peer);

	if (h->refused || h->inlined || !h->bytes || !op->inline_pieces ||
	    send_waits_for_header(op->f, h->bytes))
		return 0;
	return h->bytes;
}

int shemb__coll_build(struct fab *f, struct op *op)
{
	switch (op->kind) {
	case SHEMB__ALLTOALLV:
		return build_alltoallv(op);
	case SHEMB__ALLGATHERV:
		return build_allgatherv(op);
	case SHEMB__BARRIER:
	case SHEMB__CLOSE:
		return build_barrier(op);
	default:
		if (op->c.count * elem(op) <=
			    SHEMB__ALLREDUCE_ONE_ROUND_BYTES ||
		    op->c.count < (size_t)f->world)
			return build_allreduce_small(op);
		return build_allreduce_ring(op);
	}
}
