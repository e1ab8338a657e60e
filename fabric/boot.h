/*
 * boot.h - the out-of-band rendezvous of a job's ranks, over TCP.
 *
 * Rank 0 listens at the root address ("host:port", bound to that address
 * only); every other rank connects, proves it knows the job key by answering
 * a challenge, and says its rank and the world size it expects.  Rank 0
 * admits each rank once, and only with the right key and world size.  The
 * ranks then exchange small fixed-size blobs (fabric addresses, host names)
 * with shemb__boot_allgather(), relayed by rank 0.  The connections stay
 * open afterwards, idle, as a liveness channel: a rank whose process ends
 * closes them, rank 0 sees it and tells the others.
 *
 * Every call is bounded by the configured timeout (resolving a host name
 * through DNS excepted: getaddrinfo() has no timeout).  Errors are returned
 * as negative SHEMB_E* codes with a message in err (always NUL-terminated
 * when errlen > 0; err may be NULL with errlen 0).
 *
 * Threads: shemb__boot_poll_left() may be called from another thread while
 * shemb__boot_allgather() runs; it then returns what is already known
 * without waiting.  No call may run concurrently with shemb__boot_close().
 *
 * The wire protocol, and what the job key protects, is described in
 * fabric/boot_proto.h.
 */
#ifndef SHEMB_BOOT_H
#define SHEMB_BOOT_H

#include <stddef.h>

struct shemb__boot;

struct shemb__boot_cfg {
	int rank;
	int world_size;      /* 2 .. 65535 */
	const char *root;    /* "host:port", "[v6addr]:port" */
	int root_fd;         /* rank 0: > 0, a listening socket bound to the
			      * root address, taken instead of binding it
			      * (one bound elsewhere is ignored); 0: none */
	const char *job_key; /* NULL or "": no key (any peer that knows the
			      * protocol is admitted) */
	int timeout_ms;      /* > 0: bound of open and of each allgather;
			      * rank 0 gives each connection half of it (at
			      * most 5 s) to answer its challenge */
};

/*
 * Join the job: rank 0 binds and listens, then admits world_size - 1 ranks;
 * the others connect (retrying while the root is not up yet) and are
 * admitted.  It is a barrier: on every rank it returns 0 only once every
 * rank has been admitted; an admitted rank whose connection closes before
 * then frees its rank for another attempt.  Returns 0, or:
 *   SHEMB_EINVAL     bad configuration (root not host:port, rank outside
 *                    the world ...), or rank 0 refused this rank (wrong
 *                    key, another world size, its rank already joined),
 *                    with rank 0's reason in err;
 *   SHEMB_ETIMEDOUT  not every rank joined (rank 0 names the missing ones,
 *                    and tells the ranks it admitted) or the root was not
 *                    reachable within the timeout;
 *   SHEMB_EIO        the root address cannot be bound (in use: another
 *                    job?) or resolved;
 *   SHEMB_EPEER      the root closed the connection during the rendezvous;
 *   SHEMB_ENOMEM.
 * A rank that reaches a job already started is refused (SHEMB_EINVAL) when
 * that job's rank 0 calls shemb__boot_poll_left(), else it times out.
 */
int shemb__boot_open(const struct shemb__boot_cfg *cfg,
		     struct shemb__boot **boot, char *err, size_t errlen);

/*
 * Collective: every rank gives len bytes (len the same on every rank,
 * at most 64 KiB); all receives world_size * len bytes, rank r's at r * len.
 * Returns 0, SHEMB_EINVAL (lengths differ between ranks, or len over the
 * limit), SHEMB_ESTATE (the ranks have not called it the same number of
 * times), SHEMB_ETIMEDOUT, SHEMB_EPEER (a rank left), SHEMB_ENOMEM.
 * Rank 0 reports a failure it finds to every rank, so all fail alike.
 * A failure is final: later calls return it again (an argument refused
 * before anything is sent excepted).
 */
int shemb__boot_allgather(struct shemb__boot *boot, const void *mine,
			  void *all, size_t len, char *err, size_t errlen);

/* The local IP address (numeric, NUL-terminated) of this rank's connection
 * to the root (rank 0: the address it listens on, its first one when the
 * root name has several), for binding endpoints to the interface the other
 * ranks can reach.  0, SHEMB_EIO (not known), or SHEMB_EINVAL (a NULL
 * argument, or len too small: INET6_ADDRSTRLEN always suffices). */
int shemb__boot_local_ip(const struct shemb__boot *boot, char *ip,
			 size_t len);

/*
 * Liveness, without blocking: -1 while every rank is known alive, else the
 * number of a rank that has left (its connection closed: the process ended,
 * was killed, or closed its context).  Rank 0 learns it from the closed
 * connection and tells the others; a rank that loses its connection to rank
 * 0 reports rank 0.  Once a rank is reported, later calls keep reporting
 * the same rank (the first seen to leave).  A host that vanishes without
 * closing its sockets is found by TCP keepalive, within about the timeout.
 * One poll() with a zero timeout per call; rank 0 also answers ranks that
 * try to join after the start.
 */
int shemb__boot_poll_left(struct shemb__boot *boot);

/* Close the connections (and rank 0's listener). NULL is a no-op. */
void shemb__boot_close(struct shemb__boot *boot);

#endif
