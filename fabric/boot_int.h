/*
 * boot_int.h - inside the rendezvous: the handle, connections with their
 * queues, and the pieces boot.c, boot_root.c and boot_client.c share.
 */
#ifndef SHEMB_BOOT_INT_H
#define SHEMB_BOOT_INT_H

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "fabric/boot.h"
#include "fabric/boot_proto.h"

/* Rank 0 listens on at most this many addresses (a name can resolve to
 * an IPv4 and an IPv6 address of this host). */
#define SHEMB__BOOT_MAX_LISTEN 8
/* "[ipv6]:port" of a peer, for messages. */
#define SHEMB__BOOT_NAME 64
/* Ranks in a job: bounds the tables rank 0 keeps, and keeps
 * world size x 64 KiB allgathers within a 32-bit length. */
#define SHEMB__BOOT_MAX_WORLD 65535
/* Connections still in their handshake that rank 0 serves at once; when
 * more arrive, the oldest of them is dropped (a flood cannot lock the real
 * ranks out). */
#define SHEMB__BOOT_MAX_PENDING 64
/* A connection has half the timeout, and at most this long, to answer
 * the challenge: a stalled one is gone while rank 0 still waits for the
 * real ranks. */
#define SHEMB__BOOT_HANDSHAKE_MS 5000
#define SHEMB__BOOT_MSG_LEN 256

/* Bytes waiting to be written to one connection, in order.  A segment
 * either owns its bytes or borrows them from the caller (the table of an
 * allgather, sent to every rank from one buffer). */
struct shemb__boot_seg {
	uint8_t *own;
	const uint8_t *data;
	size_t len, off;
};

struct shemb__boot_txq {
	struct shemb__boot_seg *seg;
	size_t head, n, cap;        /* seg[head..n) wait */
};

struct shemb__boot_peer {
	int fd;                     /* -1 once closed */
	struct shemb__boot_rx rx;
	struct shemb__boot_txq tx;
	char name[SHEMB__BOOT_NAME];
};

struct shemb__boot {
	int rank, world_size, timeout_ms;
	char root[SHEMB__BOOT_MSG_LEN];
	uint8_t key[SHEMB__BOOT_KEY];

	int root_fd;                /* rank 0: > 0, a listener to take */
	bool root_fd_held;          /* ... taken (boot_listen.c) */
	int nlisten;                /* rank 0 */
	int lfd[SHEMB__BOOT_MAX_LISTEN];
	/* rank 0: peer[r] is rank r's connection (peer[0] unused);
	 * other ranks: peer[0] is the connection to rank 0 */
	struct shemb__boot_peer *peer;
	struct pollfd *pfd;         /* world_size + MAX_LISTEN entries */
	char local_ip[INET6_ADDRSTRLEN];

	/* guards the connections: allgather holds it, poll_left only tries */
	pthread_mutex_t lock;
	uint32_t seq;               /* allgathers started */
	int failed;                 /* sticky failure of an allgather */
	char failmsg[SHEMB__BOOT_MSG_LEN];
	atomic_int left;            /* the first rank seen to leave, or -1 */
};

/* ---- boot_io.c ---- */

uint64_t shemb__boot_now_ms(void);
/* poll() until deadline (ms of now_ms), EINTR handled; n ready, 0 on
 * timeout, or a negative errno. */
int shemb__boot_poll(struct pollfd *p, nfds_t n, uint64_t deadline);
/* Sleep until deadline or for ms, whichever comes first. */
void shemb__boot_nap(unsigned ms, uint64_t deadline);

int shemb__boot_txq_push(struct shemb__boot_txq *q, uint16_t type,
			 uint32_t seq, const void *body, size_t len);
int shemb__boot_txq_push_reason(struct shemb__boot_txq *q, uint16_t type,
				uint32_t seq, int code, const char *reason);
/* A message whose body stays the caller's until the queue is flushed. */
int shemb__boot_txq_push_borrowed(struct shemb__boot_txq *q, uint16_t type,
				  uint32_t seq, const void *body,
				  size_t len);
int shemb__boot_txq_pending(const struct shemb__boot_txq *q);
/* Forget borrowed bytes; 1 when some were still unsent, which leaves the
 * stream cut in the middle of a message. */
int shemb__boot_txq_unborrow(struct shemb__boot_txq *q);
void shemb__boot_txq_free(struct shemb__boot_txq *q);

/* Write what the socket takes now: 0 all sent, 1 some left, or a
 * negative errno. */
int shemb__boot_peer_flush(struct shemb__boot_peer *p);
/* Read what the socket has (as far as the buffer has room): bytes read,
 * 0 at end of stream, -EAGAIN when nothing (or no room), or a negative
 * errno.  -ENOMEM when the buffer cannot grow. */
long shemb__boot_recv(int fd, struct shemb__boot_rx *rx);
void shemb__boot_peer_init(struct shemb__boot_peer *p, int fd);
/* POLLOUT while something waits to be written, for a pollfd's events. */
static inline short shemb__boot_out_events(const struct shemb__boot_peer *p)
{
	return shemb__boot_txq_pending(&p->tx) ? POLLOUT : 0;
}
void shemb__boot_peer_close(struct shemb__boot_peer *p);

/* Non-blocking, no delay, keepalive tuned so a dead host shows up within
 * about timeout_ms. */
void shemb__boot_tune_socket(int fd, int timeout_ms);
int shemb__boot_split_root(const char *root, char *host, size_t hostlen,
			   char *port, size_t portlen);
void shemb__boot_name(const struct sockaddr *sa, char *buf, size_t len);
int shemb__boot_numeric_ip(const struct sockaddr *sa, char *buf,
			   size_t len);

/* The ranks 1..world-1 whose flag is 0, as "2, 5-9, 12" (cut short with
 * "..." when buf is full); returns how many there are. */
int shemb__boot_rank_list(const uint8_t *flags, int world, char *buf,
			  size_t len);

__attribute__((format(printf, 4, 5)))
int shemb__boot_err(char *err, size_t errlen, int code, const char *fmt,
		    ...);
/* Record a sticky allgather failure and return its code. */
__attribute__((format(printf, 3, 4)))
int shemb__boot_failed(struct shemb__boot *b, int code, const char *fmt,
		       ...);
/* Note that rank r left (the first one sticks). */
void shemb__boot_mark_left(struct shemb__boot *b, int r);

/* ---- boot_root.c, boot_client.c ---- */

int shemb__boot_root_open(struct shemb__boot *b, char *err, size_t errlen);
/* boot_listen.c: rank 0's listeners at b->root, into b->lfd. */
int shemb__boot_root_listen(struct shemb__boot *b, char *err, size_t errlen);
/* Let a later context take the inherited listener again. */
void shemb__boot_listen_release(struct shemb__boot *b);
int shemb__boot_root_allgather(struct shemb__boot *b, const void *mine,
			       void *all, size_t len, char *err,
			       size_t errlen);
void shemb__boot_root_poll(struct shemb__boot *b);
/* Hand queued messages (LEFT, FAIL) to the sockets for up to ms. */
void shemb__boot_root_drain(struct shemb__boot *b, unsigned ms);
/* Rank r's connection closed: close it, note it, tell the others. */
void shemb__boot_root_lost(struct shemb__boot *b, int r);

int shemb__boot_client_open(struct shemb__boot *b, char *err,
			    size_t errlen);
int shemb__boot_client_allgather(struct shemb__boot *b, const void *mine,
				 void *all, size_t len, char *err,
				 size_t errlen);
void shemb__boot_client_poll(struct shemb__boot *b);

#endif
