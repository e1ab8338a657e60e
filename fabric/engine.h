/*
 * engine.h - the progress engine of the libfabric communicator.
 *
 * A collective is an op: a list of rounds, each a set of transfers (tagged
 * sends and receives of at most one chunk) and an optional local step run
 * when the round's transfers are done (a reduction).  The engine posts the
 * transfers of every op in flight from one queue, receives before sends,
 * reads the completion queue, moves ops from round to round, and fails
 * them on a mismatched header, a peer that left, or a timeout.  All of it
 * runs under one lock, from a progress thread or from the callers' waits,
 * except the reading of the bulk lane's completion queue (engine.c).
 *
 * The queues are ordered by the ops' priority (ties: first come, first
 * served), and each op has at most max_chunks data sends in flight: a
 * collective of a higher priority overtakes the chunks of bulk ones that
 * wait.  Ops above SHEMB_PRIO_DENSE (a lookup's and a backward's
 * exchanges, barriers, urgent ones of the application) travel on a
 * second endpoint, the urgent lane, with a completion queue of its own
 * that is read first: a provider that moves each endpoint's messages in
 * order (shm) would otherwise make them wait behind every chunk of the
 * bulk ones already handed over.  Control messages take that lane too.
 *
 * Tags: [63:62] class, [61:32] op sequence number, [31:19] round,
 * [18:0] chunk.  Receives name their source, so ranks need no tag bits.
 *
 * The data receives from a peer wait for that peer's header: when calls
 * disagree, no data lands in a buffer sized for something else (and no
 * receive is truncated, which some providers answer by dropping the
 * connection).  In collectives of several rounds with data (a ring,
 * pairwise alltoallv), the data sends to a peer wait for its header of
 * the round too: shm completes a lane's sends in the order they were
 * posted, so a send to a peer not yet in the round would hold back the
 * completion of the sends that peer waits for (coll.c).  Over shm, so
 * do the sends of one-round collectives that shm does not inject: the
 * peer may not have started the call, and may wait for another
 * collective first.
 */
#ifndef SHEMB_ENGINE_H
#define SHEMB_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "lib/comm.h"
#include "lib/spares.h"

#define TAG_DATA 0ull
#define TAG_HDR 1ull
#define TAG_CTRL 2ull
#define TAG_SEQ_BITS 30
#define TAG_ROUND_BITS 13
#define TAG_CHUNK_BITS 19
#define MAX_ROUNDS (1 << TAG_ROUND_BITS)
#define MAX_CHUNKS (1 << TAG_CHUNK_BITS)
#define MAX_WORLD 4096
#define MAX_EARLY 64                 /* ops failed elsewhere, not started */
#define MAX_RECVS 1024
#define NLANES 2
#define LANE_BULK 0
#define LANE_URGENT 1
#define CTRL_RX 4                    /* receives kept for control messages */
#define NSINKS 3                     /* a failed op's sinks (settle.c) */

/* Sent first to each peer of an op: what this rank is doing, so that
 * calls that disagree fail on both sides instead of mixing data. */
struct shemb__hdr {
	uint32_t magic;
	uint16_t kind;
	uint8_t dtype, op;
	uint32_t seq;
	uint32_t lane;       /* where the data travels (the priority's) */
	uint32_t from;
	uint32_t inlined;    /* 1: the piece follows in this message */
	int32_t refused;     /* a SHEMB_E* code: the sender refuses the
			      * call (it failed before it could take part)
			      * and moves no data in it; why_len bytes of
			      * its detail follow */
	uint32_t why_len;
	uint64_t bytes;      /* bytes the sender sends to the receiver */
	uint64_t expect;     /* bytes the sender expects from the receiver */
	uint64_t count;      /* allreduce elements */
	uint64_t addr;       /* single copy (cma.c): where the sender's
			      * bytes for the receiver start, in its memory */
};

/* Told to a peer when this rank fails an op they share, with its
 * account of the messages of the op it sent that peer (settle.c); and
 * the answer of a rank that finished the op (CTRL_FINISHED). */
#define CTRL_RELAYED 1u      /* why names the rank that failed it */
#define CTRL_FINISHED 2u     /* the sender finished the op: it sent what
			      * the receiver's op expects from it */
#define CTRL_UNSETTLED 4u    /* the sender cannot settle the op (no
			      * memory for it): the receiver does not
			      * wait for it to */
#define CTRL_DISAGREED 8u    /* calls of the op disagreed: the peers may
			      * have built other collectives (mop.c) */
#define CTRL_EVERYTHING 16u  /* with CTRL_FINISHED, no account: the op
			      * succeeded at the sender and is freed
			      * (mop.c) */

/* The last ops that succeeded here and were freed, by seq: where ops do
 * not settle, a peer that failed one of them still gets its answer. */
#define SUCCEEDED_RING 64

struct shemb__ctrl {
	uint32_t magic;
	uint32_t seq;
	uint32_t from;
	int32_t status;
	uint32_t flags;
	uint32_t sent[NLANES];
	uint32_t round0;             /* the round of the first of them */
	uint32_t acks;               /* of sent[LANE_URGENT], the empty
				      * messages of single copies made */
	char why[160];
};

/* The accounts of an op that peers failed before this rank started it:
 * the first one's status and reason, and the sum of their counts. */
/* One peer's account of an op. */
struct peer_account {
	uint32_t sent[NLANES];
	uint32_t round0;
};

struct early {
	struct shemb__ctrl c;
	int heard;
	struct peer_account *by_peer; /* where ops do not settle: each
				      * peer's account (mop.c), or NULL */
};

/* The last calls this rank failed at their start without an op, each
 * with the accounts that came for it while there was no op to take them
 * (kept: mop.c takes them up once it has the memory for one).  Their
 * room is made with the engine: they come during a shortage. */
#define UNSETTLED_RING 8

struct unsettled {
	uint32_t seq;
	int heard;
	bool kept;
	struct peer_account *early;  /* world of them */
};

struct fab;
struct op;
struct ctrl_tx;

/* A local peer's process (peer_proc.c). */
struct peer_proc {
	int pidfd;                   /* -1: unchecked */
	bool ended;
	uint64_t next_check_ns;      /* asked again no sooner than this */
};

struct xfer {
	struct fi_context2 fctx;     /* first: the CQ hands it back */
	struct op *op;
	struct xfer *next;           /* in the post queue */
	void *buf;
	size_t len;
	uint64_t tag;
	int peer;
	bool send, posted, is_hdr, is_ctrl;
	bool handed;                 /* handed to libfabric once */
	bool dropped;                /* gated by a header that refused or
				      * disagreed: never runs */
	bool sink;                   /* a receive of any message of a
				      * failed op (settle.c) ... */
	int sink_lane;               /* ... on this lane */
	bool landed;                 /* a receive that completed and checked
				      * out, or an ack whose empty message
				      * came */
	bool gated;                  /* posted only once the peer's
				      * header checked out */
	int gate_lo, gate_hi;        /* header receive: the transfers it
				      * gates, indices in its round */
	struct mr_slot *mr;          /* registration, when the provider
				      * wants one */
	/* single copy (cma.c): a receive that copies its chunk out of the
	 * peer's memory (pull), then sends it an empty message (pulled); a
	 * send that only waits for that message (ack) */
	bool pull, pulled, ack;
	bool drain;                  /* a receive of data sent to a rank
				      * that refused the call, into
				      * f->discard (engine.c, drain()) */
	bool drain_late;             /* a drain of a failed op over shm
				      * (mop.c) ... */
	bool late;                   /* ... not posted yet */
	bool cancel_later;           /* a receive on the bulk lane to
				      * cancel once no thread reads that
				      * lane (mop.c) */
	int run_pos, run_after;      /* a data receive: its place among the
				      * chunks from its peer in its round,
				      * and how many follow it there */
	bool released;               /* ... queued though that place is
				      * beyond the window (queue.c,
				      * hold_receive()) */
	size_t off;                  /* pull: the chunk's offset in the
				      * peer's piece */
	size_t copied;               /* pull: bytes of it copied so far */
};

/* A refusing op's receives of what the peers sent it (engine.c,
 * drain()). */
struct drain {
	struct drain *next;
	int n;
	struct xfer x[];
};

struct round {
	struct xfer *x;
	int nx;
	/* local work on each data chunk received, as it lands (so a long
	 * reduction never holds up the transfers of other collectives);
	 * 0 or a SHEMB_E* code */
	int (*on_chunk)(struct op *op, const struct xfer *x);
	/* local work once all transfers are done; 0 or a SHEMB_E* code */
	int (*after)(struct op *op, int round);
};

struct op {
	struct fab *f;
	struct op *next;             /* in the engine's list */
	int kind;
	uint32_t seq;
	int prio;                    /* higher: its transfers go first */
	int lane;                    /* LANE_BULK or LANE_URGENT */
	bool pull;                   /* its data moves by single copy */
	int status;
	bool done, released;
	bool aborted;                /* failed with its transfers cut short
				      * (shemb__fab_fail_op), not ended as a
				      * refusal once they were done */
	int cur, nrounds;
	struct round *rounds;
	int pending;                 /* transfers of this round not done */
	int posted;                  /* transfers handed to libfabric */
	int chunks_queued;           /* data sends queued or posted: at most
				      * max_chunks */
	struct xfer *defer_head, *defer_tail; /* data sends beyond that,
				      * queued as earlier ones complete */
	uint64_t last_ns;            /* last completion, for the timeout */
	char *hdr_out;               /* per peer, hdr_stride bytes apart: */
	char *hdr_in;                /* a header, then room for a piece
				      * that travels with it (coll.c) */
	size_t hdr_stride;
	bool inline_pieces;          /* small pieces travel in the headers'
				      * messages (one-round ops) */
	struct shemb__coll c;        /* the arguments, arrays copied below */
	/* alltoallv, allgatherv: this rank's own piece, copied by the start
	 * once the transfers are posted (and outside the lock), so that the
	 * copy overlaps them */
	const void *self_src;
	void *self_dst;
	size_t self_len;
	size_t *counts;              /* 4 x world: sendcounts, sdispls,
				      * recvcounts, rdispls */
	void *scratch;               /* allreduce: incoming data */
	size_t scratch_len;
	/* A refusal (fabric/README.md): this rank refuses the call
	 * (refusing), or a peer's header said it did, or the counts of a
	 * peer disagree with this rank's; refused is the status the op ends
	 * with once the transfers with the other ranks are done, why its
	 * detail */
	bool refusing;
	int refused;
	struct drain *drains;        /* receives of the data peers sent
				      * before they could know of it */
	char why[256];               /* the failure, for the caller */
	/* Settling a failed op (settle.c): every rank accounts for the
	 * messages of the op it sent each other; what was sent here is
	 * received (sinks), what nothing will match is cancelled, and only
	 * then are the op's buffers given back */
	bool relayed;                /* why names the rank that failed it */
	bool settling;               /* accounts were sent to the peers */
	bool settled;                /* every message accounted for came;
				      * receives left were cancelled */
	bool ghost;                  /* a spare: no memory for the op */
	bool unsettled;              /* this rank cannot settle it (no
				      * memory, not even a ghost) */
	int heard;                   /* peers whose account came */
	uint32_t caught[NLANES];     /* messages of op received here */
	uint32_t expect[NLANES];     /* ... that the accounts name */
	uint64_t settle_ns;          /* when settling began */
	/* Where ops do not settle (mop.c): after it failed, op waits for
	 * the peers' accounts (heard) and receives what they sent it */
	bool mopping;
	bool orphan;                 /* made for a call that failed here at
				      * its start */
	bool lane_set;               /* an orphan's lane, from an account */
	bool late_cancelled;         /* its late receives left on the
				      * urgent lane, at the timeout */
	bool disagreed;              /* it failed as calls that disagree
				      * (another collective, another lane):
				      * the peers' messages need not follow
				      * its receives (mop.c) */
	bool mop_wait;               /* its caller waits until every
				      * message sent for it came and its
				      * receives came back */
	uint64_t mop_ns;             /* when it failed */
	int late_queued;             /* its drains not posted yet */
	struct peer_account *early_sent; /* the accounts that came
				      * before it started, peer by peer */
	struct xfer sink[NSINKS];
};

struct fab {
	int rank, world;
	struct shemb__boot *boot;    /* NULL when the host's oob was used */
	char provider[64];
	char desc[224];

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av[NLANES];
	struct fid_cq *cq[NLANES];
	struct fid_ep *ep[NLANES];
	fi_addr_t *peers;            /* lane by lane, world each */
	bool mr_local;               /* provider wants registered buffers */

	size_t chunk[NLANES];        /* messages are cut in these, lane by
				      * lane */
	size_t pull_chunk;           /* ... and single copies (cma.c) */
	size_t pull_slice;           /* a single copy's syscalls, at most */
	/* shm completes a lane's sends in the order they were posted, and a
	 * send of more than it injects completes once its receiver takes it:
	 * such a send to a peer not yet in the call would hold back the
	 * completion of every later one (coll.c, exchange_pieces) */
	bool sends_in_order;
	size_t inject_size;
	size_t inline_max;           /* a piece of at most this many bytes
				      * travels in its header's message
				      * (coll.c, inline_limit) */
	bool pairwise;               /* bulk alltoallv of 3 or more ranks in
				      * pairwise rounds (coll.c), on shm
				      * without single copy */
	int max_chunks[NLANES];      /* data sends of an op in flight, at
				      * most, lane by lane */
	int timeout_ms;
	int progress_mode;
	int slice_us;                /* the progress thread asks for it */

	pthread_mutex_t lock;
	pthread_cond_t nap;          /* the progress thread's sleep, cut short
				      * to stop it, and where it stood back
				      * for waiters, when it has work
				      * (progress.c); finishing ops must not
				      * wake it */
	bool thread_stands_back;     /* it sleeps while waiters move the
				      * transfers */
	uint64_t stand_back_ns;      /* for at most this long */
	pthread_t thread;
	bool have_thread;
	atomic_bool stop;
	/* sleeping waiters (wedge.c): an op finished, or the engine is
	 * wedged; never held around a libfabric call */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cond;
	atomic_int wedged;           /* SHEMB_EPEER once the lock could not
				      * be had within the timeout */
	char wedge_why[256];
	int waiters_progressing;     /* callers driving progress on both
				      * lanes themselves: the thread stands
				      * back meanwhile */
	unsigned urgent_batches;     /* batches read from the urgent lane */
	atomic_int urgent_waiting;   /* urgent_waiters, for single copies
				      * without the lock (engine.c) */
	int urgent_waiters;          /* callers driving the urgent lane only:
				      * the thread stands back while no bulk
				      * op is active, or while the bulk lane
				      * is held (progress.c) */
	uint64_t bulk_hold_until;    /* the thread leaves the bulk lane alone
				      * until then while urgent waiters
				      * wait */
	bool bulk_reader;            /* a thread reads the bulk lane's
				      * completions (without the lock) */
	uint64_t bulk_read_ns;       /* ... since then */
	int bulk_cancels;            /* receives marked cancel_later */
	atomic_int callers;          /* callers waiting for the lock: the
				      * thread lets them in (a collective
				      * started meanwhile must not wait for
				      * the busy ones to finish) */

	uint32_t next_seq;
	struct op *ops;
	_Atomic unsigned long wrong_messages; /* receives dropped
					       * (wrong_message) */
	_Atomic unsigned long late_acks; /* single copies' empty messages
					  * taken by late receives (mop.c) */
	int active;                  /* ops not done */
	int active_bulk;             /* ... of them on the bulk lane */
	_Atomic uint64_t finished;   /* ops that finished, ever (sleeping
				      * waiters read it without the lock) */
	struct xfer *rq_head, *rq_tail; /* receives waiting to be posted */
	struct xfer *sq_head, *sq_tail; /* sends waiting to be posted */
	struct xfer *nq_head, *nq_tail; /* the empty messages of single
					 * copies made, in their order */
	int sends_posted[NLANES], recvs_posted[NLANES];
	int max_recvs;               /* receives posted on a lane, at most */
	bool settles;                /* failed ops settle: fi_cancel() is
				      * safe (settle.c) */
	uint64_t next_check_ns;      /* liveness and timeouts */
	struct mr_slot *mrs;         /* registration cache (mr_local) */
	uint64_t mr_key;             /* the last key asked for */

	/* control messages (another rank failed an op we share) */
	struct xfer ctrl_rx[CTRL_RX];
	struct shemb__ctrl ctrl_buf[CTRL_RX];
	unsigned ctrl_rx_unposted;   /* bit i: ctrl_rx[i] to post again */
	struct ctrl_tx *ctrl_backlog; /* not yet accepted by libfabric */
	struct ctrl_tx *ctrl_sent;    /* in flight */
	struct shemb__spares ctrl_spares; /* for a rank without memory */
	bool ctrl_records;            /* never injected (a test's switch) */
	bool no_ghosts;               /* no spare ops (a test's switch) */
	unsigned refuse_one_in;       /* about one post in this many is
				       * refused as by a full queue
				       * (FI_EAGAIN); a test's switch */
	uint64_t refuse_state;        /* its generator */
	_Atomic unsigned long test_refusals; /* posts it refused */
	_Atomic unsigned long lane_calls[NLANES]; /* calls started on each
						   * lane (tests) */
	struct early early[MAX_EARLY]; /* aborts of ops not started */
	int nearly;
	struct shemb__spares op_spares; /* ops for a start without memory,
				      * so that it can settle */
	struct unsettled unsettled[UNSETTLED_RING]; /* ops failed here
				      * without one: not answered as
				      * finished */
	unsigned nunsettled;
	struct peer_account *unsettled_room; /* their early accounts */
	uint32_t succeeded[SUCCEEDED_RING];
	unsigned nsucceeded;

	/* The largest scratch buffer of a finished allreduce, kept for the
	 * next: buffers this large come from the allocator's eagerly purged
	 * arena, and faulting them in again costs as much as the reduction. */
	void *spare;
	size_t spare_len;
	/* Memory given back when a start finds none, so that the op can
	 * still be built and run (comm.c, RESERVE_BYTES); NULL once used,
	 * until a start can take it again */
	void *reserve;
	void *discard;               /* where drained data lands: a chunk
				      * of either lane, or a header */
	size_t discard_len;

	struct peer_proc *peer_proc; /* shm: each peer's process
				      * (peer_proc.c) */
	/* single copy (cma.c): whether every rank can read every other's
	 * memory, their pids, the chunks waiting to be copied (by
	 * priority), and whether a thread copies one (without the lock) */
	bool cma;
	uint64_t cma_probe;          /* what the peers read at create */
	int32_t *cma_pid;
	struct xfer *pq_head, *pq_tail;
	bool puller;
	int failed;                  /* sticky: SHEMB_EPEER once a rank left */
	char fail_why[256];
};

/* Headers take the urgent lane whatever their op's: ranks whose calls
 * disagree (another collective, a priority of the other lane) still meet
 * there and find out from the headers.  So do the empty messages of
 * single copies: the bulk lane's receives cannot be posted while a
 * thread reads its completions (engine.c, post_queue). */
static inline int shemb__xfer_lane(const struct xfer *x)
{
	if (x->sink)
		return x->sink_lane;
	return x->is_hdr || x->pull || x->ack ? LANE_URGENT : x->op->lane;
}

/* The queue x waits in to be posted: a pulled chunk's empty message is a
 * send, an ack waits among the sends whose part it takes. */
static inline bool shemb__xfer_in_sends(const struct xfer *x)
{
	return x->send || x->pulled;
}

/* A message this rank sends: a send of data or a header, or a single
 * copy's empty message. */
static inline bool shemb__xfer_sends_message(const struct xfer *x)
{
	return (x->send && !x->ack) || x->pulled;
}

/* A receive of a peer's message: of data, a header, or a single copy's
 * empty message (ack); a chunk to copy is none until it is copied. */
static inline bool shemb__xfer_takes_message(const struct xfer *x)
{
	return !shemb__xfer_sends_message(x) && !x->pull;
}

/* The header this rank sends to peer in op, and the one it receives. */
static inline struct shemb__hdr *shemb__hdr_out(const struct op *op, int peer)
{
	return (struct shemb__hdr *)(op->hdr_out + (size_t)peer *
					     op->hdr_stride);
}

static inline struct shemb__hdr *shemb__hdr_in(const struct op *op, int peer)
{
	return (struct shemb__hdr *)(op->hdr_in + (size_t)peer *
					    op->hdr_stride);
}

static inline fi_addr_t *shemb__fab_peer(struct fab *f, int lane, int rank)
{
	return &f->peers[(size_t)lane * (size_t)f->world + (size_t)rank];
}

/* engine.c */
uint64_t shemb__fab_tag(uint64_t cls, uint32_t seq, int round, int chunk);
/* x first, or last, in a queue, whatever its priority. */
void shemb__fab_push_front(struct xfer **head, struct xfer **tail,
			   struct xfer *x);
void shemb__fab_push_back(struct xfer **head, struct xfer **tail,
			  struct xfer *x);
/* The round's work on a data chunk just received; false if it failed
 * the op. */
bool shemb__fab_on_chunk(struct fab *f, struct op *op, const struct xfer *x);
/* A transfer of op, done, came back from libfabric. */
void shemb__fab_gave_back(struct fab *f, struct op *op);
/* pull.c: copy the first chunk waiting for a single copy, or what is
 * left of it, without the lock: 1 if some of it was copied. */
int shemb__fab_run_pull(struct fab *f);
/* ops.c: the reserve a start without memory gives back (true if there
 * was one), and takes again. */
bool shemb__fab_give_back_reserve(struct fab *f);
void shemb__fab_take_reserve(struct fab *f);
/* comm.c: the communicator freed, its endpoint closed. */
void shemb__fab_free(struct fab *f);
void shemb__fab_enqueue_round(struct fab *f, struct op *op);
void shemb__fab_fail_op(struct fab *f, struct op *op, int status,
			const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* op failed with transfers on its caller's buffers still libfabric's
 * (they complete or the endpoint closes), or with pieces of them still
 * open to a peer's single copy, or is not done (shemb_comm_ops.holds) */
bool shemb__fab_op_holds(const struct op *op);
/* Move transfers along: post, read completions (the bulk lane's too, if
 * bulk), check liveness; the completions handled. */
int shemb__fab_progress(struct fab *f, bool bulk);
/* Hand the transfers waiting to libfabric, without reading completions. */
void shemb__fab_post(struct fab *f);
/* fail.c: every op fails since peer's process ended; a transfer (or
 * what else was done with peer) failed with err (why says it), waiting
 * briefly for news of a death; a rank the rendezvous says left; an op
 * that moved nothing for the timeout */
void shemb__fab_peer_ended(struct fab *f, int peer);
/* The end of a wait of ms under the engine's lock, at most half the
 * timeout: a caller kept from the lock for the whole timeout takes the
 * engine for wedged (wedge.c). */
uint64_t shemb__fab_locked_wait_until(const struct fab *f, uint64_t ms);
void shemb__fab_transfer_failed(struct fab *f, struct op *op, int peer,
				int err, const char *what, const char *why);
void shemb__fab_check_liveness(struct fab *f);
void shemb__fab_check_timeouts(struct fab *f, uint64_t now);
/* wedge.c: the lock, for calls of the application (ahead of the progress
 * thread), within the timeout: 0, or SHEMB_EPEER with the reason in why
 * (the engine is wedged: every later call fails so). */
int shemb__fab_lock(struct fab *f, char *why, size_t len);
/* 0, or the code of a wedged engine (and why) */
int shemb__fab_wedged(struct fab *f, char *why, size_t len);
/* Whether a thread never comes back from libfabric: the lock not had
 * within the timeout, or a read of the bulk lane that has not returned
 * for as long; the engine is then wedged (its code, and why). */
int shemb__fab_probe(struct fab *f, char *why, size_t len);
/* An op finished (counted in finished): sleeping waiters look again. */
void shemb__fab_op_done(struct fab *f);
/* Without the lock: sleep until an op finishes after the gen-th
 * (finished), the engine wedges or WAKE_MS pass, then take the lock as
 * shemb__fab_lock() does, the engine taken for wedged when its bulk
 * lane's read (done without the lock) has lasted the timeout. */
#define WAKE_MS 100
int shemb__fab_sleep_done(struct fab *f, uint64_t gen, char *why,
			  size_t len);
/* A context whose engine is wedged or whose thread did not end: the
 * engine is left to that thread (see wedge.c). */
void shemb__fab_leave_wedged(struct fab *f);
/* Join the progress thread within the timeout; false: it did not end
 * (stuck in libfabric, or behind a thread that is), and is left alone. */
bool shemb__fab_join(struct fab *f);
static inline bool shemb__fab_callers_waiting(struct fab *f)
{
	return atomic_load_explicit(&f->callers, memory_order_relaxed) > 0;
}
/* progress.c */
int shemb__fab_start_thread(struct fab *f);
/* A caller starts or stops waiting for an urgent collective (with the
 * lock); the first one holds the bulk lane back (progress.c). */
void shemb__fab_urgent_wait_begin(struct fab *f);
void shemb__fab_urgent_wait_end(struct fab *f);
/* A caller that moved the transfers on both lanes stops (with the
 * lock): the last one wakes the thread if collectives are in flight. */
void shemb__fab_waiter_leaves(struct fab *f);
/* A collective started that no caller waits for yet (with the lock):
 * the thread, if it stood back for callers that left, moves it. */
void shemb__fab_unwatched_start(struct fab *f);
/* false: the thread did not end (see shemb__fab_join) */
bool shemb__fab_stop_thread(struct fab *f);
void shemb__fab_free_op(struct op *op);
/* What a build of op made (rounds, headers, counts, scratch), freed: op
 * can be built again. */
void shemb__fab_clear_op(struct op *op);
/* comm.c: op, failed here before it could take part, built again as a
 * refusal with status and op->why (fabric/README.md): 0, or SHEMB_ENOMEM
 * or SHEMB_EINVAL with the detail in op->why. */
int shemb__fab_build_refusal(struct op *op, int status);
/* A scratch buffer of at least len bytes for op (the spare when it fits),
 * which shemb__fab_free_op() hands back as the spare. */
void *shemb__fab_scratch(struct op *op, size_t len);
/* ctrl.c */
/* The records that let a rank without memory still tell every peer of
 * the ops it fails: 0 or SHEMB_ENOMEM. */
int shemb__fab_ctrl_spares(struct fab *f);
/* Before telling the others, from a caller: the records of messages sent
 * taken back when the spares run low. */
void shemb__fab_ctrl_reap(struct fab *f);
void shemb__fab_post_ctrl_rx(struct fab *f);
/* SHEMB_FABRIC_EAGAIN: refuse this post as a full queue would (tests) */
bool shemb__fab_refused_for_test(struct fab *f);
void shemb__fab_free_ctrl(struct fab *f);
/* A completion of a control message handled (true), or not one. */
bool shemb__fab_ctrl_done(struct fab *f, struct xfer *x, int err);
/* Hand the control messages waiting to libfabric, as it takes them. */
void shemb__fab_flush_ctrl(struct fab *f);
/* The status a peer failed this op with before it started here, else 0;
 * takes the record of it, and the peers' accounts (settle.c) */
int shemb__fab_early_abort(struct fab *f, struct op *op);
/* Tell every other rank that this rank failed op (op->status, op->why),
 * with its account of what it sent each (settle.c): they fail it too */
void shemb__fab_tell_all(struct fab *f, struct op *op);
/* An account (not an answer) for an op not started here, kept until it
 * starts (shemb__fab_early_abort takes it) */
void shemb__fab_note_early(struct fab *f, const struct shemb__ctrl *c);
uint64_t shemb__fab_now_ns(void);
/* The same clock, coarser and cheaper: for timeouts of milliseconds. */
uint64_t shemb__fab_coarse_ns(void);

/* settle.c: a failed op's messages between the ranks, taken up */
/* The messages of op this rank sent peer, lane by lane, the round of the
 * first (0 if none), and how many were single copies' empty messages:
 * into c's sent, round0 and acks. */
void shemb__fab_settle_account(const struct op *op, int peer,
			       struct shemb__ctrl *c);
/* The same for what op expects from peer: every receive of its
 * messages, posted or not. */
void shemb__fab_settle_expected(const struct op *op, int peer,
				struct shemb__ctrl *c);
/* Whether op failed and its caller waits until it settles: accounts or
 * transfers outstanding, the engine not failed, the timeout not past. */
bool shemb__fab_settle_pending(const struct op *op);
/* op just failed (not the engine): tell the peers, take up their
 * messages. */
void shemb__fab_settle_begin(struct fab *f, struct op *op);
/* A peer's account of op (or its answer that it finished op). */
void shemb__fab_settle_hear(struct fab *f, struct op *op,
			    const struct shemb__ctrl *c);
/* After a transfer of a settling op completed: settled yet? */
void shemb__fab_settle_check(struct fab *f, struct op *op);
/* A sink's completion (err: 0 or an FI_E* code). */
void shemb__fab_sink_done(struct fab *f, struct xfer *x, int err);
/* The tag bits a sink ignores: the round and the chunk. */
uint64_t shemb__fab_sink_ignore(void);
/* op failed at its start, before it joined the engine's list: the
 * others are told, and it settles there, released (its caller has the
 * error, and no handle), or is freed where ops do not settle. */
void shemb__fab_settle_unstarted(struct fab *f, struct op *op, int status);
/* The spare ops that let a start without memory settle: 0 or
 * SHEMB_ENOMEM; one (zeroed), after a bounded wait for one where all
 * are settling, or NULL. */
int shemb__fab_ghost_spares(struct fab *f);
struct op *shemb__fab_ghost(struct fab *f);
/* none's call failed here at its start without an op: recorded, so
 * that no account for it is answered as finished (ctrl.c), with the
 * accounts that came before, taken from none. */
void shemb__fab_note_unsettled(struct fab *f, struct op *none);
/* op succeeded and is freed: where ops do not settle, its seq is kept,
 * so that a peer that failed the call is answered (ctrl.c). */
void shemb__fab_note_succeeded(struct fab *f, const struct op *op);
struct unsettled *shemb__fab_unsettled(struct fab *f, uint32_t seq);
/* The room of the ring's accounts: 0 or SHEMB_ENOMEM. */
int shemb__fab_unsettled_room(struct fab *f);
/* A ghost's memory, a spare again (else freed). */
void shemb__fab_drop_op(struct op *op);
/* Stop settling op (a peer cannot, or its accounts did not come within
 * the timeout): its sinks are cancelled, and it holds what it holds. */
void shemb__fab_settle_give_up(struct fab *f, struct op *op);
/* A peer that never started op tells it could not settle (c): op's
 * receives of what it never sent are cancelled, and op gives up. */
void shemb__fab_settle_unstarted_peer(struct fab *f, struct op *op,
				      const struct shemb__ctrl *c);
/* Accounts not come within the timeout are given up. */
void shemb__fab_settle_timeouts(struct fab *f, uint64_t now);
/* mop.c, where ops do not settle: op just failed (not the engine); a
 * peer's account of op, whose unreceived messages are then received;
 * whether op must stay allocated for that; accounts not come within
 * the timeout given up. */
void shemb__fab_mop_begin(struct fab *f, struct op *op);
void shemb__fab_mop_hear(struct fab *f, struct op *op,
			 const struct shemb__ctrl *c);
bool shemb__fab_mop_pending(const struct op *op);
void shemb__fab_mop_timeouts(struct fab *f, uint64_t now);
/* Whether every peer accounted for op (no peer reads its pieces). */
bool shemb__fab_mop_heard_all(const struct op *op);
/* Whether op's caller still waits for its mopping up; a transfer of op,
 * failed, came back; the cancels held back while a thread read the bulk
 * lane, made (with the lock, no thread reading it). */
bool shemb__fab_mop_waits(const struct op *op);
void shemb__fab_mop_gave_back(struct fab *f, struct op *op);
void shemb__fab_mop_cancel_deferred(struct fab *f);
/* An op, done, for a call seq that failed here without one, to receive
 * what the peers sent for it; NULL where ops settle or without memory. */
struct op *shemb__fab_mop_orphan(struct fab *f, uint32_t seq);
/* op failed at its start, its rounds never built (or cleared), where
 * ops do not settle: kept as an orphan, true if so; early: the accounts
 * that came before it started, peer by peer, or NULL (freed here). */
bool shemb__fab_mop_unstarted(struct fab *f, struct op *op,
			      struct peer_account *early);
/* Orphans for the calls failed here without an op whose accounts were
 * kept for want of memory, now that there may be some; an account of
 * such a call kept, no orphan made for it. */
void shemb__fab_mop_kept(struct fab *f);
/* The op of call seq in the engine's list, or NULL. */
struct op *shemb__fab_find_op(struct fab *f, uint32_t seq);
void shemb__fab_mop_keep(struct fab *f, const struct shemb__ctrl *c);
/* engine.c, for settle.c: op's transfers waiting to be posted, taken out
 * of the queues; a transfer queued to be posted; op freed if nothing
 * keeps it. */
void shemb__fab_unqueue(struct fab *f, struct op *op);
void shemb__fab_enqueue(struct fab *f, struct xfer *x);
/* queue.c: x after every transfer of the queue of its op's priority or
 * above; and, x completed, what its op's bounds held back queued */
void shemb__fab_insert_by_prio(struct xfer **head, struct xfer **tail,
			       struct xfer *x);
void shemb__fab_queue_room(struct fab *f, struct xfer *x);
void shemb__fab_maybe_free(struct fab *f, struct op *op);
/* Room in f->discard for any message of either lane: false if none. */
bool shemb__fab_discard_room(struct fab *f);

/* coll.c: build an op's rounds (headers, chunks, local steps); a
 * peer's header, landed in len bytes, checked against this rank's call
 * and the piece it carries (if any) copied into place: 0, or
 * SHEMB_EINVAL (op->why) */
int shemb__coll_build(struct fab *f, struct op *op);
/* A header that refuses the call (it was taken): what the header gates
 * never runs. */
#define SHEMB__HDR_REFUSED 1
int shemb__coll_take_header(struct op *op, int peer, size_t len);
size_t shemb__coll_ungated_bytes(const struct op *op, int peer);
/* The bytes a data chunk of op holds at most. */
size_t shemb__coll_chunk(const struct op *op);
/* The bytes of a piece that travel in its header's message, at most
 * (f->inline_max), for the transport and world size of f. */
size_t shemb__coll_inline_limit(const struct fab *f);

/* ep.c */
int shemb__ep_open(struct fab *f, const char *provider, const char *node,
		   char *err, size_t errlen);
int shemb__ep_name(struct fab *f, int lane, void *name, size_t *len);
int shemb__ep_insert_peers(struct fab *f, int lane, const void *names,
			   size_t slot, char *err, size_t errlen);
void shemb__ep_close(struct fab *f);
/* The descriptor for x's buffer (registering it if the provider wants
 * registered memory), and its release once x completed. */
void *shemb__ep_desc(struct fab *f, struct xfer *x);
void shemb__ep_undesc(struct fab *f, struct xfer *x);

/* cma.c: whether every rank can read every other's memory and none
 * turned single copy off (f->cma), through one or two exchanges by
 * gather (every rank calls it): 0, or SHEMB_ENOTSUP on every rank where
 * a rank required it (want 1) and it cannot be had */
typedef int (*shemb__cma_allgather_fn)(struct fab *f, void *arg,
				       const void *mine, void *all,
				       size_t len, char *err, size_t errlen);
int shemb__cma_setup(struct fab *f, int want, bool shm,
		     shemb__cma_allgather_fn gather, void *arg, char *err,
		     size_t errlen);
void shemb__cma_close(struct fab *f);
/* Copy len bytes from remote_addr in peer's memory to buf: 0, or an
 * errno */
int shemb__cma_pull(const struct fab *f, int peer, void *buf,
		    uint64_t remote_addr, size_t len);

/* peer_proc.c: whether a local peer's process has ended */
void shemb__peer_procs_open(struct fab *f, const void *names, size_t slot);
bool shemb__peer_proc_ended(struct fab *f, int rank);
void shemb__peer_procs_close(struct fab *f);

#endif
