/*
 * boot_relay.c - rank 0 after the rendezvous: it relays allgathers (every
 * rank's blob in, the whole table out) and watches the idle connections
 * for ranks that leave, telling the others.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/boot_int.h"
#include "shemb.h"

/* Late connections turned away per call of poll_left. */
#define LATE_BATCH 4

static void tell_left(struct shemb__boot *b, int r)
{
	const uint8_t body[4] = { (uint8_t)r, (uint8_t)(r >> 8),
				  (uint8_t)(r >> 16), (uint8_t)(r >> 24) };

	for (int i = 1; i < b->world_size; i++) {
		struct shemb__boot_peer *p = &b->peer[i];

		/* a failed write shows up as a closed connection at the next
		 * poll; nothing to do about it here */
		if (p->fd >= 0 &&
		    shemb__boot_txq_push(&p->tx, SHEMB__BOOT_LEFT, 0, body,
					 sizeof(body)) == 0)
			shemb__boot_peer_flush(p);
	}
}

void shemb__boot_root_lost(struct shemb__boot *b, int r)
{
	if (b->peer[r].fd < 0)
		return;
	shemb__boot_peer_close(&b->peer[r]);
	shemb__boot_mark_left(b, r);
	tell_left(b, r);
}

/* Write what each rank's socket takes now; b->pfd gets those with more
 * to write.  Returns how many. */
static int flush_ranks(struct shemb__boot *b)
{
	int n = 0;

	for (int r = 1; r < b->world_size; r++) {
		struct shemb__boot_peer *p = &b->peer[r];

		if (p->fd < 0 || !shemb__boot_txq_pending(&p->tx))
			continue;
		if (shemb__boot_peer_flush(p) < 0)
			shemb__boot_root_lost(b, r);
		else if (shemb__boot_txq_pending(&p->tx))
			b->pfd[n++] = (struct pollfd){ .fd = p->fd,
						       .events = POLLOUT };
	}
	return n;
}

void shemb__boot_root_drain(struct shemb__boot *b, unsigned ms)
{
	uint64_t deadline = shemb__boot_now_ms() + ms;
	int n;

	while ((n = flush_ranks(b)) > 0)
		if (shemb__boot_poll(b->pfd, (nfds_t)n, deadline) <= 0)
			return;
}

static void tell_failure(struct shemb__boot *b)
{
	for (int r = 1; r < b->world_size; r++)
		if (b->peer[r].fd >= 0)
			shemb__boot_txq_push_reason(&b->peer[r].tx,
						    SHEMB__BOOT_FAIL, b->seq,
						    b->failed, b->failmsg);
	shemb__boot_root_drain(b, 200);
}

/* ---- allgather: collect ---- */

struct gather {
	struct shemb__boot *b;
	uint8_t *all;
	size_t len;
	uint8_t *got;               /* world_size flags */
	int missing;
};

static int take_blob(struct gather *g, int r)
{
	struct shemb__boot *b = g->b;
	struct shemb__boot_peer *p = &b->peer[r];
	struct shemb__boot_msg m;
	const char *why;
	int v = shemb__boot_rx_next(&p->rx, &m, &why);

	if (v == SHEMB__BOOT_MORE)
		return 0;
	if (v == SHEMB__BOOT_BAD)
		return shemb__boot_failed(b, SHEMB_EPEER,
			"allgather #%u: rank %d sent a malformed message (%s)",
			b->seq, r, why);
	if (m.type != SHEMB__BOOT_GATHER)
		return shemb__boot_failed(b, SHEMB_EPEER,
			"allgather #%u: rank %d sent a message of type %u instead of its blob",
			b->seq, r, m.type);
	if (m.seq != b->seq)
		return shemb__boot_failed(b, SHEMB_ESTATE,
			"allgather #%u: rank %d is at allgather #%u; every rank must call it the same number of times",
			b->seq, r, m.seq);
	if (m.len != g->len)
		return shemb__boot_failed(b, SHEMB_EINVAL,
			"allgather #%u: rank %d gave %u bytes, rank 0 gave %zu; every rank must give the same length",
			b->seq, r, m.len, g->len);
	if (m.len)
		memcpy(g->all + (size_t)r * g->len, m.body, m.len);
	shemb__boot_rx_consume(&p->rx, m.size);
	g->got[r] = 1;
	g->missing--;
	return 0;
}

static int rank_gone(struct gather *g, int r)
{
	shemb__boot_root_lost(g->b, r);
	return shemb__boot_failed(g->b, SHEMB_EPEER,
				  "allgather #%u: rank %d left the job",
				  g->b->seq, r);
}

static int read_blob(struct gather *g, int r)
{
	struct shemb__boot_peer *p = &g->b->peer[r];

	while (!g->got[r]) {
		long n = shemb__boot_recv(p->fd, &p->rx);
		int rc;

		if (n == -EAGAIN)
			return 0;
		if (n == -ENOMEM)
			return shemb__boot_failed(g->b, SHEMB_ENOMEM,
						  "rank 0: out of memory");
		if (n <= 0)
			return rank_gone(g, r);
		rc = take_blob(g, r);
		if (rc)
			return rc;
	}
	return 0;
}

static int fill_gather_pollfds(struct gather *g)
{
	struct shemb__boot *b = g->b;

	for (int r = 1; r < b->world_size; r++) {
		struct shemb__boot_peer *p = &b->peer[r];
		short ev = (g->got[r] ? 0 : POLLIN) |
			   shemb__boot_out_events(p);

		/* a rank done with this round is left out unless it has
		 * bytes to take: its hang-up waits for the next poll_left */
		b->pfd[r - 1] = (struct pollfd){ ev ? p->fd : -1, ev, 0 };
	}
	return b->world_size - 1;
}

static int timed_out(struct gather *g)
{
	char who[160];
	int count;

	count = shemb__boot_rank_list(g->got, g->b->world_size, who,
				      sizeof(who));
	return shemb__boot_failed(g->b, SHEMB_ETIMEDOUT,
		"allgather #%u: rank 0 waited %d ms for %s %s",
		g->b->seq, g->b->timeout_ms, count == 1 ? "rank" : "ranks",
		who);
}

static int collect(struct gather *g, uint64_t deadline)
{
	struct shemb__boot *b = g->b;
	int rc = 0;

	/* blobs that arrived before this call are buffered already */
	for (int r = 1; r < b->world_size; r++)
		if ((rc = take_blob(g, r)) != 0)
			return rc;
	while (g->missing > 0) {
		int n = fill_gather_pollfds(g);
		int ready = shemb__boot_poll(b->pfd, (nfds_t)n, deadline);

		if (ready == 0)
			return timed_out(g);
		if (ready < 0)
			return shemb__boot_failed(b, SHEMB_EIO,
						  "rank 0: poll failed: %s",
						  strerror(-ready));
		for (int r = 1; r < b->world_size; r++) {
			short rev = b->pfd[r - 1].revents;

			if (!rev || b->pfd[r - 1].fd < 0)
				continue;
			if ((rev & POLLOUT) &&
			    shemb__boot_peer_flush(&b->peer[r]) < 0)
				return rank_gone(g, r);
			if (!g->got[r] && (rev & (POLLIN | POLLHUP | POLLERR)))
				rc = read_blob(g, r);
			else if (rev & (POLLHUP | POLLERR))
				rc = rank_gone(g, r);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- allgather: hand out ---- */

static int undelivered(struct gather *g)
{
	struct shemb__boot *b = g->b;
	char who[160];
	int count;

	/* got[] now marks the ranks that have their table */
	for (int r = 1; r < b->world_size; r++) {
		struct shemb__boot_peer *p = &b->peer[r];

		g->got[r] = p->fd < 0 || !shemb__boot_txq_pending(&p->tx);
		/* the table half sent: the stream cannot be resumed */
		if (!g->got[r] && shemb__boot_txq_unborrow(&p->tx))
			shemb__boot_root_lost(b, r);
	}
	count = shemb__boot_rank_list(g->got, b->world_size, who,
				      sizeof(who));
	return shemb__boot_failed(b, SHEMB_ETIMEDOUT,
		"allgather #%u: %s %s did not take the result within %d ms",
		b->seq, count == 1 ? "rank" : "ranks", who, b->timeout_ms);
}

/* A rank that leaves now does not fail the call: rank 0 has every blob,
 * and the others learn of the loss as LEFT after their table. */
static int deliver(struct gather *g, uint64_t deadline)
{
	struct shemb__boot *b = g->b;
	size_t total = (size_t)b->world_size * g->len;

	for (int r = 1; r < b->world_size; r++)
		if (b->peer[r].fd >= 0 &&
		    shemb__boot_txq_push_borrowed(&b->peer[r].tx,
						  SHEMB__BOOT_TABLE, b->seq,
						  g->all, total) != 0)
			return shemb__boot_failed(b, SHEMB_ENOMEM,
						  "rank 0: out of memory");
	for (;;) {
		int n = flush_ranks(b);

		if (n == 0)
			return 0;
		if (shemb__boot_poll(b->pfd, (nfds_t)n, deadline) <= 0)
			return undelivered(g);
	}
}

int shemb__boot_root_allgather(struct shemb__boot *b, const void *mine,
			       void *all, size_t len, char *err,
			       size_t errlen)
{
	uint64_t deadline = shemb__boot_now_ms() + (uint64_t)b->timeout_ms;
	struct gather g = {
		.b = b, .all = all, .len = len,
		.missing = b->world_size - 1,
	};
	int rc;

	b->seq++;
	g.got = calloc((size_t)b->world_size, 1);
	if (!g.got) {
		rc = shemb__boot_failed(b, SHEMB_ENOMEM, "rank 0: out of memory");
	} else {
		if (len)
			memcpy(all, mine, len);
		rc = collect(&g, deadline);
		if (rc == 0)
			rc = deliver(&g, deadline);
		free(g.got);
	}
	if (rc == 0)
		return 0;
	tell_failure(b);
	return shemb__boot_err(err, errlen, rc, "%s", b->failmsg);
}

/* ---- liveness ---- */

/* After READY nobody may join; a rank restarted, or another job's rank
 * pointed at this port, hears so at once instead of waiting. */
static void refuse_late(struct shemb__boot *b, int lfd)
{
	uint8_t msg[SHEMB__BOOT_HDR + SHEMB__BOOT_REASON_MAX];
	size_t n = shemb__boot_encode_reason(msg, sizeof(msg),
		SHEMB__BOOT_REJECT, 0, 0,
		"every rank of this job has joined already; a job cannot be joined once it has started");

	for (int i = 0; i < LATE_BATCH; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		/* a short answer into a new socket: sent whole or not at all */
		(void)send(fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		close(fd);
	}
}

void shemb__boot_root_poll(struct shemb__boot *b)
{
	struct pollfd *pfd = b->pfd;
	int nr = b->world_size - 1, n = 0;

	/* POLLRDHUP without POLLIN: a hang-up is seen even while an early
	 * blob of the next allgather waits unread in the socket. */
	for (int r = 1; r < b->world_size; r++)
		pfd[n++] = (struct pollfd){
			.fd = b->peer[r].fd,
			.events = POLLRDHUP |
				  shemb__boot_out_events(&b->peer[r]),
		};
	for (int i = 0; i < b->nlisten; i++)
		pfd[n++] = (struct pollfd){ b->lfd[i], POLLIN, 0 };
	if (poll(pfd, (nfds_t)n, 0) <= 0)
		return;
	for (int r = 1; r <= nr; r++) {
		struct shemb__boot_peer *p = &b->peer[r];
		short rev = pfd[r - 1].revents;

		if ((rev & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) ||
		    ((rev & POLLOUT) && shemb__boot_peer_flush(p) < 0))
			shemb__boot_root_lost(b, r);
	}
	for (int i = 0; i < b->nlisten; i++)
		if (pfd[nr + i].revents & POLLIN)
			refuse_late(b, b->lfd[i]);
}
