/*
 * comm.h - the communication seam: collectives between the ranks of a
 * context, behind an ops table (libfabric in fabric/, a local "self" for
 * one rank, NCCL later).  The core builds validated argument structs; the
 * backend owns its operation objects.
 */
#ifndef SHEMB_COMM_H
#define SHEMB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shemb__op; /* a backend's collective in flight */

enum shemb__coll_kind {
	SHEMB__ALLTOALLV = 1,
	SHEMB__ALLGATHERV = 2,
	SHEMB__ALLREDUCE = 3,
	SHEMB__BARRIER = 4,
	SHEMB__CLOSE = 5     /* the last barrier of a closing context */
};

/* An allreduce of up to this many bytes is one exchange with every other
 * rank (every rank sends its whole buffer to each); larger ones go round a
 * ring, each rank sending 2 (N - 1) / N of the buffer to the next.  The
 * transports follow it, and the statistics count bytes by it. */
#define SHEMB__ALLREDUCE_ONE_ROUND_BYTES (64u * 1024u)

/* A collective's arguments; arrays have world_size entries and are copied
 * by the backend before start() returns. */
struct shemb__coll {
	int kind;
	const void *sendbuf;
	void *recvbuf;
	const size_t *sendcounts, *sdispls;  /* alltoallv */
	const size_t *recvcounts, *rdispls;  /* alltoallv, allgatherv */
	size_t sendcount;                    /* allgatherv */
	size_t count;                        /* allreduce: elements */
	int dtype, op;                       /* allreduce */
	int prio;                            /* enum shemb_priority */
	/* nonzero: this rank failed before it could take part (after the
	 * others were committed to the collective); the collective fails
	 * everywhere with this status, moving no data to or from this
	 * rank: here with the detail in why, either at once from start()
	 * or from the op it starts (which takes what the others sent
	 * before they knew: the fabric's alltoallv), and on the other
	 * ranks as "rank R: why" */
	int refuse;
	const char *why;
	/* for tests (the fabric's): nonzero fails the call on this rank
	 * with this status once its transfers are done, as a local step
	 * that fails there would; the other ranks may have finished it */
	int fail_late;
	/* the caller waits for it as soon as it started (no request of the
	 * application): the transport need not wake a thread to move it */
	bool waited_at_once;
};

struct shemb_comm_ops {
	size_t size;
	const char *name;
	/* start a collective; *op is the backend's handle; a failure's
	 * detail goes to why, and leaves nothing of the call posted (its
	 * buffers are the caller's again) */
	int (*start)(void *comm, const struct shemb__coll *c,
		     struct shemb__op **op, char *why, size_t len);
	/* *done = 1 with the op's status as return value when finished;
	 * a failure's detail goes to why */
	int (*test)(void *comm, struct shemb__op *op, int *done, char *why,
		    size_t len);
	int (*wait)(void *comm, struct shemb__op *op, char *why, size_t len);
	/* the caller is done with op: free it now or when it finishes */
	void (*release)(void *comm, struct shemb__op *op);
	/* sticky error of background progress (a peer left), 0 if none;
	 * msg gets the detail */
	int (*async_error)(void *comm, char *msg, size_t len);
	const char *(*describe)(void *comm);
	/* collective close: waits (bounded) for the other ranks, then frees;
	 * false when a thread stuck in the transport keeps it open (its
	 * memory left as it is): what it holds may still be touched */
	bool (*destroy)(void *comm);
	/* a thread that never comes back from the transport holds it, as
	 * far as can be told within the timeout: its code (and why), else
	 * 0.  NULL: a transport that cannot be stuck so */
	int (*stuck)(void *comm, char *why, size_t len);
	/* op failed (its status seen, not yet released): whether the
	 * transport may still write into its receive buffer or read its
	 * send buffer (transfers it cannot take back, a peer that may
	 * still copy a piece), so that the caller must keep both until
	 * the communicator is destroyed.  NULL: never */
	bool (*holds)(void *comm, struct shemb__op *op);
};

#endif
