/*
 * boot_root.c - rank 0 during the rendezvous: admit world_size - 1 ranks
 * at the listeners of boot_listen.c.
 *
 * One poll() loop serves the listeners, every connection still in its
 * handshake and the ranks admitted so far.  Each connection gets a fresh
 * challenge and has a bounded time to answer; whatever it sends is
 * judged by shemb__boot_hs_step() (boot_proto.c), so garbage, half
 * messages and silent peers cost rank 0 one slot for a few seconds at
 * most and never block the loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/boot_int.h"
#include "shemb.h"

/* Connections accepted per wake-up of the loop, so that a flood of them
 * does not starve the connections already there. */
#define ACCEPT_BATCH 16
/* After accept() ran out of descriptors, try again after this long. */
#define ACCEPT_PAUSE_MS 100

struct pending {
	struct shemb__boot_peer c;  /* c.rx unused: hs.rx gets the bytes */
	struct shemb__boot_hs hs;
	uint64_t since, deadline;
	int closing;                /* REJECT queued: close once sent */
};

struct admission {
	struct shemb__boot *b;
	struct shemb__boot_admit ad;
	uint8_t *joined;
	int njoined;
	uint64_t deadline;
	int handshake_ms;
	struct pending pend[SHEMB__BOOT_MAX_PENDING];
	int npend;
	uint64_t listen_resume;     /* accept() paused until then */
	int fatal;                  /* an error that ends the rendezvous */
	int nrejected, ndropped;
	char last_reject[SHEMB__BOOT_MSG_LEN];
	char last_drop[SHEMB__BOOT_MSG_LEN];
	char accept_error[96];
};

/* ---- connections in their handshake ---- */

static void note(char *dst, const char *who, const char *why)
{
	snprintf(dst, SHEMB__BOOT_MSG_LEN, "%.80s: %.160s", who, why);
}

static void remove_pending(struct admission *a, int i)
{
	a->pend[i] = a->pend[--a->npend];
}

static void drop_pending(struct admission *a, int i, const char *why)
{
	struct pending *p = &a->pend[i];

	if (!p->closing) {
		a->ndropped++;
		note(a->last_drop, p->c.name, why);
	}
	shemb__boot_peer_close(&p->c);
	shemb__boot_rx_free(&p->hs.rx);
	remove_pending(a, i);
}

/* Room for one more: the oldest connection that has not answered its
 * challenge yet goes, rather than a rank whose JOIN is being read (its
 * rank tries again: boot_client.c). */
static void evict_oldest(struct admission *a)
{
	int old = -1;

	for (int i = 0; i < a->npend; i++) {
		const struct pending *p = &a->pend[i];

		if (p->hs.rx.got_bytes || p->closing)
			continue;
		if (old < 0 || p->since < a->pend[old].since)
			old = i;
	}
	if (old < 0) { /* every one has: the oldest of all */
		old = 0;
		for (int i = 1; i < a->npend; i++)
			if (a->pend[i].since < a->pend[old].since)
				old = i;
	}
	drop_pending(a, old, "dropped: too many connections in their "
		     "handshake at once");
}

static void add_pending(struct admission *a, int fd,
			const struct sockaddr *sa)
{
	struct pending *p;
	uint64_t now = shemb__boot_now_ms();

	if (a->npend == SHEMB__BOOT_MAX_PENDING)
		evict_oldest(a);
	p = &a->pend[a->npend];
	memset(p, 0, sizeof(*p));
	shemb__boot_peer_init(&p->c, fd);
	shemb__boot_name(sa, p->c.name, sizeof(p->c.name));
	shemb__boot_tune_socket(fd, a->b->timeout_ms);
	p->since = now;
	p->deadline = now + a->handshake_ms;
	if (shemb__boot_random(p->hs.snonce, sizeof(p->hs.snonce)) != 0) {
		close(fd);
		a->fatal = SHEMB_EIO;
		return;
	}
	a->npend++;
	if (shemb__boot_txq_push(&p->c.tx, SHEMB__BOOT_CHALLENGE, 0,
				 p->hs.snonce, sizeof(p->hs.snonce)) != 0)
		drop_pending(a, a->npend - 1, "out of memory");
	else if (shemb__boot_peer_flush(&p->c) < 0)
		drop_pending(a, a->npend - 1, "send failed");
}

/* Errors accept() passes on from a connection that failed before it was
 * taken: that connection is gone, the listener is fine. */
static int accept_transient(int e)
{
	return e == EINTR || e == ECONNABORTED || e == EPROTO ||
	       e == ENETDOWN || e == ENOPROTOOPT || e == EHOSTDOWN ||
	       e == ENONET || e == EHOSTUNREACH || e == EOPNOTSUPP ||
	       e == ENETUNREACH || e == EPERM;
}

static void accept_some(struct admission *a, int lfd)
{
	for (int n = 0; n < ACCEPT_BATCH && !a->fatal; n++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			add_pending(a, fd, (struct sockaddr *)&ss);
			continue;
		}
		if (accept_transient(errno))
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			/* out of descriptors or memory: the connection
			 * waits in the backlog; try again a little later */
			snprintf(a->accept_error, sizeof(a->accept_error),
				 "%s", strerror(errno));
			a->listen_resume = shemb__boot_now_ms() +
					   ACCEPT_PAUSE_MS;
		}
		return;
	}
}

static void reject_pending(struct admission *a, int i)
{
	struct pending *p = &a->pend[i];
	struct shemb__boot_hs *hs = &p->hs;
	char why[SHEMB__BOOT_REASON_MAX + SHEMB__BOOT_NAME + 32];

	if (hs->taken)
		snprintf(why, sizeof(why), "%s (its connection is from %s)",
			 hs->why, a->b->peer[hs->rank].name);
	else
		snprintf(why, sizeof(why), "%s", hs->why);
	a->nrejected++;
	note(a->last_reject, p->c.name, why);
	if (shemb__boot_txq_push_reason(&p->c.tx, SHEMB__BOOT_REJECT, 0, 0,
					why) != 0) {
		drop_pending(a, i, "out of memory");
		return;
	}
	p->closing = 1;
	if (shemb__boot_peer_flush(&p->c) != 1)
		drop_pending(a, i, "rejected");
}

static void admit(struct admission *a, int i)
{
	struct pending *p = &a->pend[i];
	int r = p->hs.rank;
	struct shemb__boot_peer *peer = &a->b->peer[r];
	int rc;

	*peer = p->c;              /* the connection and its send queue */
	peer->rx = p->hs.rx;       /* empty: the JOIN was consumed */
	rc = shemb__boot_txq_push(&peer->tx, SHEMB__BOOT_ACCEPT, 0, p->hs.mac,
				  SHEMB__BOOT_MAC);
	/* p is reused from here on */
	remove_pending(a, i);
	if (rc != 0 || shemb__boot_peer_flush(peer) < 0) {
		shemb__boot_peer_close(peer);
		return;
	}
	a->joined[r] = 1;
	a->njoined++;
}

static void read_pending(struct admission *a, int i)
{
	struct pending *p = &a->pend[i];

	for (;;) {
		long n = shemb__boot_recv(p->c.fd, &p->hs.rx);

		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			drop_pending(a, i, n == 0 ? "closed the connection without joining" :
						    strerror((int)-n));
			return;
		}
		switch (shemb__boot_hs_step(&p->hs, &a->ad)) {
		case SHEMB__HS_MORE:
			continue;
		case SHEMB__HS_DROP:
			drop_pending(a, i, p->hs.why);
			return;
		case SHEMB__HS_REJECT:
			reject_pending(a, i);
			return;
		case SHEMB__HS_ACCEPT:
			admit(a, i);
			return;
		}
	}
}

static void serve_pending(struct admission *a, int i, short revents)
{
	struct pending *p = &a->pend[i];

	if (shemb__boot_txq_pending(&p->c.tx)) {
		int f = shemb__boot_peer_flush(&p->c);

		if (f < 0) {
			drop_pending(a, i, "send failed");
			return;
		}
		if (f == 0 && p->closing) {
			drop_pending(a, i, "rejected");
			return;
		}
	}
	if (!p->closing && (revents & (POLLIN | POLLHUP | POLLERR)))
		read_pending(a, i);
}

static void expire_pending(struct admission *a, uint64_t now)
{
	char why[64];

	snprintf(why, sizeof(why), "did not join within %d ms",
		 a->handshake_ms);
	for (int i = a->npend - 1; i >= 0; i--)
		if (now >= a->pend[i].deadline)
			drop_pending(a, i, why);
}

/* ---- admitted ranks, before every rank is in ---- */

static void unjoin(struct admission *a, int r, const char *why)
{
	char who[SHEMB__BOOT_NAME + 24];

	snprintf(who, sizeof(who), "rank %d (%s)", r, a->b->peer[r].name);
	a->ndropped++;
	note(a->last_drop, who, why);
	shemb__boot_peer_close(&a->b->peer[r]);
	a->joined[r] = 0;
	a->njoined--;
}

/* A rank admitted early waits silently for READY; if it goes away, its
 * rank is free again and may join anew. */
static void watch_admitted(struct admission *a, int r, short revents)
{
	struct shemb__boot_peer *p = &a->b->peer[r];
	char byte;
	ssize_t n;

	if ((revents & POLLOUT) && shemb__boot_peer_flush(p) < 0) {
		unjoin(a, r, "send failed");
		return;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP)))
		return;
	do
		n = recv(p->fd, &byte, 1, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n == 0 || (n < 0 && errno != EAGAIN))
		unjoin(a, r, "left before every rank joined");
	else if (n > 0)
		unjoin(a, r, "sent data before every rank joined");
}

/* ---- the loop ---- */

static int fill_pollfds(struct admission *a, uint64_t now, uint64_t *wake)
{
	struct shemb__boot *b = a->b;
	struct pollfd *pfd = b->pfd;
	int n = 0;

	*wake = a->deadline;
	for (int i = 0; i < b->nlisten; i++)
		pfd[n++] = (struct pollfd){
			.fd = now >= a->listen_resume ? b->lfd[i] : -1,
			.events = POLLIN,
		};
	if (now < a->listen_resume && a->listen_resume < *wake)
		*wake = a->listen_resume;
	for (int i = 0; i < a->npend; i++) {
		struct pending *p = &a->pend[i];

		pfd[n++] = (struct pollfd){
			.fd = p->c.fd,
			.events = (p->closing ? 0 : POLLIN) |
				  shemb__boot_out_events(&p->c),
		};
		if (p->deadline < *wake)
			*wake = p->deadline;
	}
	for (int r = 1; r < b->world_size; r++)
		pfd[n++] = (struct pollfd){
			.fd = b->peer[r].fd,
			.events = POLLIN | POLLRDHUP |
				  shemb__boot_out_events(&b->peer[r]),
		};
	return n;
}

static void dispatch(struct admission *a)
{
	struct shemb__boot *b = a->b;
	struct pollfd *pfd = b->pfd;
	struct pollfd *pend_pfd = pfd + b->nlisten;
	struct pollfd *rank_pfd = pend_pfd + a->npend;

	/* Ranks first, then handshakes from the last one down (removing
	 * one moves the last into its place), then new connections. */
	for (int r = 1; r < b->world_size; r++)
		if (rank_pfd[r - 1].fd >= 0 && rank_pfd[r - 1].revents)
			watch_admitted(a, r, rank_pfd[r - 1].revents);
	for (int i = a->npend - 1; i >= 0; i--)
		if (pend_pfd[i].revents)
			serve_pending(a, i, pend_pfd[i].revents);
	for (int i = 0; i < b->nlisten; i++)
		if (pfd[i].fd >= 0 && (pfd[i].revents & POLLIN))
			accept_some(a, b->lfd[i]);
}

static int admit_all(struct admission *a, char *err, size_t errlen)
{
	while (a->njoined < a->b->world_size - 1 && !a->fatal) {
		uint64_t now = shemb__boot_now_ms(), wake;
		int n, r;

		if (now >= a->deadline)
			return SHEMB_ETIMEDOUT;
		expire_pending(a, now);
		n = fill_pollfds(a, now, &wake);
		r = shemb__boot_poll(a->b->pfd, (nfds_t)n, wake);
		if (r < 0)
			return shemb__boot_err(err, errlen, SHEMB_EIO,
					       "rank 0: poll failed: %s",
					       strerror(-r));
		if (r > 0)
			dispatch(a);
	}
	if (a->fatal)
		return shemb__boot_err(err, errlen, a->fatal,
				       "rank 0: no random numbers for the challenge");
	return 0;
}

/* ---- the end of the rendezvous ---- */

static void close_pending(struct admission *a, const char *reason)
{
	for (int i = a->npend - 1; i >= 0; i--) {
		struct pending *p = &a->pend[i];

		/* a short answer into an idle socket: sent at once or never */
		shemb__boot_txq_push_reason(&p->c.tx, SHEMB__BOOT_REJECT, 0, 0,
					    reason);
		shemb__boot_peer_flush(&p->c);
		p->closing = 1;
		drop_pending(a, i, reason);
	}
}

static int give_up(struct admission *a, int rc, char *err, size_t errlen)
{
	struct shemb__boot *b = a->b;
	char miss[160], msg[2 * SHEMB__BOOT_MSG_LEN];
	int count = shemb__boot_rank_list(a->joined, b->world_size, miss,
				  sizeof(miss));
	size_t off;

	off = (size_t)snprintf(msg, sizeof(msg),
			       "rank 0 gave up after %d ms: %s %s did not join",
			       b->timeout_ms, count == 1 ? "rank" : "ranks",
			       miss);
	if (a->nrejected && off < sizeof(msg))
		off += (size_t)snprintf(msg + off, sizeof(msg) - off,
				"; %d connection(s) refused, the last from %s",
				a->nrejected, a->last_reject);
	if (a->ndropped && off < sizeof(msg))
		off += (size_t)snprintf(msg + off, sizeof(msg) - off,
				"; %d connection(s) dropped, the last from %s",
				a->ndropped, a->last_drop);
	if (a->accept_error[0] && off < sizeof(msg))
		snprintf(msg + off, sizeof(msg) - off,
			 "; accepting connections failed: %s", a->accept_error);
	close_pending(a, "rank 0 gave up waiting for the other ranks");
	for (int r = 1; r < b->world_size; r++)
		if (b->peer[r].fd >= 0)
			shemb__boot_txq_push_reason(&b->peer[r].tx,
						    SHEMB__BOOT_ABORT, 0, rc,
						    msg);
	shemb__boot_root_drain(b, 200);
	return shemb__boot_err(err, errlen, rc, "%s", msg);
}

static void start_job(struct admission *a)
{
	struct shemb__boot *b = a->b;

	close_pending(a, "every rank of this job has joined already");
	for (int r = 1; r < b->world_size; r++)
		if (shemb__boot_txq_push(&b->peer[r].tx, SHEMB__BOOT_READY, 0,
					 NULL, 0) != 0)
			shemb__boot_root_lost(b, r);
	/* READY is small and the sockets idle: this takes no time unless a
	 * rank has stopped reading, and that rank's loss shows in poll_left */
	shemb__boot_root_drain(b, 1000);
}

int shemb__boot_root_open(struct shemb__boot *b, char *err, size_t errlen)
{
	struct admission *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return shemb__boot_err(err, errlen, SHEMB_ENOMEM,
				       "rank 0: out of memory");
	a->b = b;
	a->joined = calloc((size_t)b->world_size, 1);
	if (!a->joined) {
		free(a);
		return shemb__boot_err(err, errlen, SHEMB_ENOMEM,
				       "rank 0: out of memory");
	}
	a->ad.world_size = b->world_size;
	a->ad.joined = a->joined;
	memcpy(a->ad.key, b->key, sizeof(a->ad.key));
	a->handshake_ms = b->timeout_ms / 2 < SHEMB__BOOT_HANDSHAKE_MS ?
				  b->timeout_ms / 2 : SHEMB__BOOT_HANDSHAKE_MS;
	if (a->handshake_ms < 1)
		a->handshake_ms = 1;
	a->deadline = shemb__boot_now_ms() + (uint64_t)b->timeout_ms;

	rc = shemb__boot_root_listen(b, err, errlen);
	if (rc == 0)
		rc = admit_all(a, err, errlen);
	if (rc == SHEMB_ETIMEDOUT)
		rc = give_up(a, rc, err, errlen);
	else if (rc == 0)
		start_job(a);
	else
		close_pending(a, "rank 0 failed");
	free(a->joined);
	free(a);
	return rc;
}
