/*
 * boot_client.c - a rank other than 0: reach rank 0 (retrying while it is
 * not up yet), answer its challenge, wait until every rank has joined;
 * then allgathers through rank 0 and news of ranks that left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/boot_int.h"
#include "shemb.h"

/* Pause between attempts to reach rank 0: doubles from the first to the
 * last value. */
#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 500
/* The longest one connect() may take, so that an address that drops
 * packets leaves time to try the others of the name. */
#define CONNECT_MAX_MS 2000
/* Reads per poll_left call, so that a peer that floods cannot hold the
 * caller. */
#define POLL_READS 16

enum wait_result {
	GOT_MSG = 1,
	GOT_CLOSED = -1,     /* end of stream, reset, or a write failed */
	GOT_TIMEOUT = -2,
	GOT_BAD = -3,        /* malformed: *why */
	GOT_NOMEM = -4
};

/* Send what is queued and wait for the next message from rank 0; it
 * stays in p->rx until consumed. */
static int next_msg(struct shemb__boot_peer *p, uint64_t deadline,
		    struct shemb__boot_msg *m, const char **why)
{
	int write_failed = 0;

	for (;;) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		int v = shemb__boot_rx_next(&p->rx, m, why);
		long n;

		if (v == SHEMB__BOOT_ONE)
			return GOT_MSG;
		if (v == SHEMB__BOOT_BAD)
			return GOT_BAD;
		/* after a failed write, still read what rank 0 said before
		 * it closed: a refusal or a failure is worth more than
		 * "closed" */
		if (!write_failed && shemb__boot_peer_flush(p) < 0)
			write_failed = 1;
		n = shemb__boot_recv(p->fd, &p->rx);
		if (n > 0)
			continue;
		if (n == -ENOMEM)
			return GOT_NOMEM;
		if (n != -EAGAIN || write_failed)
			return GOT_CLOSED;
		pfd.events |= shemb__boot_out_events(p);
		v = shemb__boot_poll(&pfd, 1, deadline);
		if (v == 0)
			return GOT_TIMEOUT;
		if (v < 0)
			return GOT_CLOSED;
	}
}

/* Codes rank 0 may report in ABORT and FAIL; anything else is taken as
 * a failure of rank 0. */
static int known_code(int code)
{
	switch (code) {
	case SHEMB_EINVAL:
	case SHEMB_ENOMEM:
	case SHEMB_ESTATE:
	case SHEMB_EIO:
	case SHEMB_EPEER:
	case SHEMB_ETIMEDOUT:
		return code;
	}
	return SHEMB_EPEER;
}

/* ---- the handshake ---- */

struct join_state {
	struct shemb__boot *b;
	uint64_t deadline;
	uint8_t snonce[SHEMB__BOOT_NONCE];
	struct shemb__boot_join j;
	char *err;
	size_t errlen;
};

/* Closed before its verdict on this rank: try again.  Rank 0 drops a
 * connection without a word when its handshake takes too long or when
 * more connections than it serves at once are in theirs (a burst of
 * ranks, or strangers, at the start of a large job). */
#define RETRY 1

static int refused(struct join_state *s, const struct shemb__boot_msg *m)
{
	char why[SHEMB__BOOT_REASON_MAX + 1];
	int code;

	shemb__boot_get_reason(m, &code, why, sizeof(why));
	return shemb__boot_err(s->err, s->errlen, SHEMB_EINVAL,
			       "rank 0 at %s refused rank %d: %s", s->b->root,
			       s->b->rank, why);
}

/* What went wrong while waiting for rank 0 at one stage of the handshake:
 * stage says what rank 0 was expected to send. */
static int unexpected(struct join_state *s, int got, const char *why,
		      const char *stage)
{
	struct shemb__boot *b = s->b;

	switch (got) {
	case GOT_CLOSED:
		return shemb__boot_err(s->err, s->errlen, SHEMB_EPEER,
				       "rank 0 at %s closed the connection before it sent %s",
				       b->root, stage);
	case GOT_TIMEOUT:
		return shemb__boot_err(s->err, s->errlen, SHEMB_ETIMEDOUT,
				       "rank %d: rank 0 at %s did not send %s within %d ms",
				       b->rank, b->root, stage, b->timeout_ms);
	case GOT_NOMEM:
		return shemb__boot_err(s->err, s->errlen, SHEMB_ENOMEM,
				       "rank %d: out of memory", b->rank);
	case GOT_BAD:
		return shemb__boot_err(s->err, s->errlen, SHEMB_EPEER,
				       "rank 0 at %s sent a malformed message instead of %s (%s)",
				       b->root, stage, why);
	}
	return shemb__boot_err(s->err, s->errlen, SHEMB_EPEER,
			       "rank 0 at %s sent a message of another kind instead of %s",
			       b->root, stage);
}

static int not_a_root(struct join_state *s, const struct shemb__boot_msg *m,
		      const char *why)
{
	if (m->version && m->version != SHEMB__BOOT_VERSION)
		return shemb__boot_err(s->err, s->errlen, SHEMB_EINVAL,
			"rank 0 at %s speaks version %u of the rendezvous protocol, rank %d version %u: run the same libshemb on every rank",
			s->b->root, m->version, s->b->rank,
			SHEMB__BOOT_VERSION);
	return shemb__boot_err(s->err, s->errlen, SHEMB_EINVAL,
		"%s answers, but not as a libshemb rank 0 (%s); is another service on that port?",
		s->b->root, why);
}

/* CHALLENGE in, JOIN out. */
static int answer_challenge(struct join_state *s)
{
	struct shemb__boot_peer *p = &s->b->peer[0];
	struct shemb__boot_msg m;
	uint8_t body[SHEMB__BOOT_JOIN_LEN];
	const char *why = NULL;
	int got = next_msg(p, s->deadline, &m, &why);

	if (got == GOT_CLOSED)
		return RETRY;
	if (got == GOT_BAD)
		return not_a_root(s, &m, why);
	if (got != GOT_MSG)
		return unexpected(s, got, why, "its challenge");
	if (m.type == SHEMB__BOOT_REJECT)
		return refused(s, &m);
	if (m.type != SHEMB__BOOT_CHALLENGE)
		return unexpected(s, 0, NULL, "its challenge");
	memcpy(s->snonce, m.body, SHEMB__BOOT_NONCE);
	shemb__boot_rx_consume(&p->rx, m.size);

	s->j.rank = (uint32_t)s->b->rank;
	s->j.world = (uint32_t)s->b->world_size;
	if (shemb__boot_random(s->j.cnonce, sizeof(s->j.cnonce)) != 0)
		return shemb__boot_err(s->err, s->errlen, SHEMB_EIO,
				       "rank %d: no random numbers for the handshake",
				       s->b->rank);
	shemb__boot_mac(s->b->key, "JOIN", s->snonce, s->j.cnonce, s->j.rank,
			s->j.world, s->j.mac);
	shemb__boot_put_join(body, &s->j);
	if (shemb__boot_txq_push(&p->tx, SHEMB__BOOT_JOIN, 0, body,
				 sizeof(body)) != 0)
		return shemb__boot_err(s->err, s->errlen, SHEMB_ENOMEM,
				       "rank %d: out of memory", s->b->rank);
	return 0;
}

/* ACCEPT (checked: rank 0 must know the key too) or REJECT. */
static int hear_verdict(struct join_state *s)
{
	struct shemb__boot_peer *p = &s->b->peer[0];
	struct shemb__boot_msg m;
	uint8_t want[SHEMB__BOOT_MAC];
	const char *why = NULL;
	int got = next_msg(p, s->deadline, &m, &why);

	if (got == GOT_CLOSED)
		return RETRY;
	if (got != GOT_MSG)
		return unexpected(s, got, why, "its verdict on this rank");
	if (m.type == SHEMB__BOOT_REJECT)
		return refused(s, &m);
	if (m.type != SHEMB__BOOT_ACCEPT)
		return unexpected(s, 0, NULL, "its verdict on this rank");
	shemb__boot_mac(s->b->key, "ACPT", s->snonce, s->j.cnonce, s->j.rank,
			s->j.world, want);
	if (!shemb__boot_mac_equal(want, m.body))
		return shemb__boot_err(s->err, s->errlen, SHEMB_EINVAL,
			"the process at %s admitted rank %d without knowing this job's key: it is not this job's rank 0",
			s->b->root, s->b->rank);
	shemb__boot_rx_consume(&p->rx, m.size);
	return 0;
}

/* READY once every rank is in, or ABORT when rank 0 gives up. */
static int wait_ready(struct join_state *s)
{
	struct shemb__boot_peer *p = &s->b->peer[0];
	struct shemb__boot_msg m;
	char why[SHEMB__BOOT_REASON_MAX + 1];
	const char *bad = NULL;
	int got = next_msg(p, s->deadline, &m, &bad), code;

	if (got == GOT_TIMEOUT)
		return shemb__boot_err(s->err, s->errlen, SHEMB_ETIMEDOUT,
			"rank %d was admitted by rank 0, but not every rank joined within %d ms",
			s->b->rank, s->b->timeout_ms);
	if (got != GOT_MSG)
		return unexpected(s, got, bad, "the start of the job");
	if (m.type == SHEMB__BOOT_ABORT) {
		shemb__boot_get_reason(&m, &code, why, sizeof(why));
		return shemb__boot_err(s->err, s->errlen, known_code(code),
				       "%s", why);
	}
	if (m.type != SHEMB__BOOT_READY)
		return unexpected(s, 0, NULL, "the start of the job");
	shemb__boot_rx_consume(&p->rx, m.size);
	return 0;
}

static void note_local_ip(struct shemb__boot *b)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(b->peer[0].fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    shemb__boot_numeric_ip((struct sockaddr *)&ss, b->local_ip,
				   sizeof(b->local_ip)) != 0)
		b->local_ip[0] = '\0';
}

static int handshake(struct join_state *s, int fd)
{
	struct shemb__boot *b = s->b;
	int rc;

	shemb__boot_peer_init(&b->peer[0], fd);
	shemb__boot_tune_socket(fd, b->timeout_ms);
	rc = answer_challenge(s);
	if (rc == 0)
		rc = hear_verdict(s);
	if (rc == 0)
		rc = wait_ready(s);
	if (rc == 0)
		note_local_ip(b);
	else
		shemb__boot_peer_close(&b->peer[0]);
	return rc;
}

/* ---- reaching rank 0 ---- */

/* Linux completes a connect() to a local port that nobody listens on
 * with the socket itself, once in a while, when it picks that very port
 * as the source: that is no rank 0. */
static int connected_to_itself(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);

	return getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
	       getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 &&
	       ml == pl && memcmp(&me, &peer, ml) == 0;
}

/* 0 with *fdp connected, or the errno of the failure. */
static int connect_once(const struct addrinfo *ai, uint64_t deadline,
			int *fdp)
{
	struct pollfd pfd = { .events = POLLOUT };
	uint64_t until = shemb__boot_now_ms() + CONNECT_MAX_MS;
	socklen_t sl = sizeof(int);
	int e = 0, r;
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);

	if (fd < 0)
		return errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
	    errno != EINPROGRESS && errno != EINTR) {
		e = errno;
		close(fd);
		return e;
	}
	pfd.fd = fd;
	r = shemb__boot_poll(&pfd, 1, until < deadline ? until : deadline);
	if (r == 0)
		e = ETIMEDOUT;
	else if (r < 0)
		e = -r;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0)
		e = errno;
	else if (!e && connected_to_itself(fd))
		e = ECONNREFUSED;
	if (e) {
		close(fd);
		return e;
	}
	*fdp = fd;
	return 0;
}

/* Try every address of the name once: 0 joined, RETRY, or an error. */
static int try_addresses(struct join_state *s, struct addrinfo *res,
			 char *last, size_t lastlen)
{
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = -1, rc, e = connect_once(ai, s->deadline, &fd);

		if (e) {
			snprintf(last, lastlen, "%s", strerror(e));
			continue;
		}
		rc = handshake(s, fd);
		if (rc != RETRY)
			return rc;
		snprintf(last, lastlen, "rank 0 closed the connection before "
			 "its verdict on this rank");
	}
	return RETRY;
}

static int resolve(struct join_state *s, struct addrinfo **res, char *last,
		   size_t lastlen)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV,
	};
	char host[SHEMB__BOOT_MSG_LEN], port[8];
	int rc;

	shemb__boot_split_root(s->b->root, host, sizeof(host), port,
			       sizeof(port));
	rc = getaddrinfo(host, port, &hints, res);
	if (rc == 0)
		return 0;
	snprintf(last, lastlen, "cannot resolve %s: %s", host,
		 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
	/* a name may appear a little after the job starts (cluster DNS) */
	return rc == EAI_AGAIN || rc == EAI_NONAME || rc == EAI_FAIL ||
	       rc == EAI_SYSTEM ? RETRY : -1;
}

int shemb__boot_client_open(struct shemb__boot *b, char *err, size_t errlen)
{
	struct join_state s = {
		.b = b, .err = err, .errlen = errlen,
		.deadline = shemb__boot_now_ms() + (uint64_t)b->timeout_ms,
	};
	unsigned backoff = BACKOFF_FIRST_MS;
	char last[2 * SHEMB__BOOT_MSG_LEN] = "no attempt";
	int resolved_once = 0;

	for (;;) {
		struct addrinfo *res;
		int rc = resolve(&s, &res, last, sizeof(last));

		if (rc < 0)
			return shemb__boot_err(err, errlen, SHEMB_EIO,
					       "rank %d: %s", b->rank, last);
		if (rc == 0) {
			resolved_once = 1;
			rc = try_addresses(&s, res, last, sizeof(last));
			freeaddrinfo(res);
			if (rc != RETRY)
				return rc;
		}
		if (shemb__boot_now_ms() >= s.deadline)
			break;
		shemb__boot_nap(backoff, s.deadline);
		backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 :
							 BACKOFF_MAX_MS;
	}
	if (!resolved_once)
		return shemb__boot_err(err, errlen, SHEMB_EIO,
				       "rank %d: %s (tried for %d ms)", b->rank,
				       last, b->timeout_ms);
	return shemb__boot_err(err, errlen, SHEMB_ETIMEDOUT,
			       "rank %d could not reach rank 0 at %s within %d ms (last error: %s)",
			       b->rank, b->root, b->timeout_ms, last);
}

/* ---- after the rendezvous ---- */

/* A message that is neither the awaited table nor harmless: LEFT, FAIL,
 * ABORT.  Returns the sticky failure, or 0 to go on. */
static int news(struct shemb__boot *b, const struct shemb__boot_msg *m)
{
	char why[SHEMB__BOOT_REASON_MAX + 1];
	uint32_t r;
	int code;

	switch (m->type) {
	case SHEMB__BOOT_LEFT:
		if (shemb__boot_get_u32(m, &r) != 0 ||
		    r >= (uint32_t)b->world_size || (int)r == b->rank)
			r = 0;
		shemb__boot_mark_left(b, (int)r);
		return shemb__boot_failed(b, SHEMB_EPEER,
					  "allgather #%u: rank %u left the job",
					  b->seq, r);
	case SHEMB__BOOT_FAIL:
	case SHEMB__BOOT_ABORT:
		shemb__boot_get_reason(m, &code, why, sizeof(why));
		return shemb__boot_failed(b, known_code(code), "%s", why);
	}
	return shemb__boot_failed(b, SHEMB_EPEER,
				  "allgather #%u: rank 0 sent a message of type %u",
				  b->seq, m->type);
}

static int take_table(struct shemb__boot *b, const struct shemb__boot_msg *m,
		      void *all, size_t total)
{
	if (m->seq != b->seq)
		return shemb__boot_failed(b, SHEMB_ESTATE,
			"rank 0 sent the result of allgather #%u, rank %d is at #%u; every rank must call it the same number of times",
			m->seq, b->rank, b->seq);
	if (m->len != total)
		return shemb__boot_failed(b, SHEMB_EPEER,
			"allgather #%u: rank 0 sent %u bytes instead of %zu",
			b->seq, m->len, total);
	if (total)
		memcpy(all, m->body, total);
	return 0;
}

static int lost_root(struct shemb__boot *b, int got, const char *why)
{
	switch (got) {
	case GOT_TIMEOUT:
		return shemb__boot_failed(b, SHEMB_ETIMEDOUT,
			"allgather #%u: no result from rank 0 within %d ms",
			b->seq, b->timeout_ms);
	case GOT_NOMEM:
		return shemb__boot_failed(b, SHEMB_ENOMEM,
					  "rank %d: out of memory", b->rank);
	case GOT_BAD:
		shemb__boot_mark_left(b, 0);
		return shemb__boot_failed(b, SHEMB_EPEER,
			"allgather #%u: rank 0 sent a malformed message (%s)",
			b->seq, why);
	}
	shemb__boot_mark_left(b, 0);
	return shemb__boot_failed(b, SHEMB_EPEER,
				  "allgather #%u: rank 0 closed the connection",
				  b->seq);
}

int shemb__boot_client_allgather(struct shemb__boot *b, const void *mine,
				 void *all, size_t len, char *err,
				 size_t errlen)
{
	struct shemb__boot_peer *p = &b->peer[0];
	uint64_t deadline = shemb__boot_now_ms() + (uint64_t)b->timeout_ms;
	size_t total = (size_t)b->world_size * len;
	int rc = 0;

	b->seq++;
	if (total > p->rx.table_max)
		p->rx.table_max = (uint32_t)total;
	if (shemb__boot_txq_push_borrowed(&p->tx, SHEMB__BOOT_GATHER, b->seq,
					  mine, len) != 0)
		rc = shemb__boot_failed(b, SHEMB_ENOMEM, "rank %d: out of memory",
					b->rank);
	while (rc == 0) {
		struct shemb__boot_msg m;
		const char *why = NULL;
		int got = next_msg(p, deadline, &m, &why);

		if (got != GOT_MSG) {
			rc = lost_root(b, got, why);
			break;
		}
		if (m.type == SHEMB__BOOT_TABLE)
			rc = take_table(b, &m, all, total);
		else
			rc = news(b, &m);
		shemb__boot_rx_consume(&p->rx, m.size);
		if (m.type == SHEMB__BOOT_TABLE)
			break;
	}
	/* mine is the caller's again; a half-sent blob leaves the stream
	 * cut, which rank 0 sees as a failure of this rank */
	shemb__boot_txq_unborrow(&p->tx);
	if (rc)
		return shemb__boot_err(err, errlen, rc, "%s", b->failmsg);
	return 0;
}

void shemb__boot_client_poll(struct shemb__boot *b)
{
	struct shemb__boot_peer *p = &b->peer[0];
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };

	if (p->fd < 0) {
		shemb__boot_mark_left(b, 0);
		return;
	}
	if (poll(&pfd, 1, 0) <= 0)
		return;
	for (int i = 0; i < POLL_READS; i++) {
		struct shemb__boot_msg m;
		const char *why;
		long n = shemb__boot_recv(p->fd, &p->rx);
		int v;

		while ((v = shemb__boot_rx_next(&p->rx, &m, &why)) ==
		       SHEMB__BOOT_ONE) {
			uint32_t r;

			if (m.type == SHEMB__BOOT_LEFT &&
			    shemb__boot_get_u32(&m, &r) == 0 &&
			    r < (uint32_t)b->world_size && (int)r != b->rank)
				shemb__boot_mark_left(b, (int)r);
			else if (m.type == SHEMB__BOOT_ABORT)
				shemb__boot_mark_left(b, 0);
			/* anything else (a late table, FAIL) is stale */
			shemb__boot_rx_consume(&p->rx, m.size);
		}
		if (n == -ENOMEM)
			return;   /* try again at the next call */
		if (v == SHEMB__BOOT_BAD || n == 0 ||
		    (n < 0 && n != -EAGAIN)) {
			shemb__boot_mark_left(b, 0);
			return;
		}
		if (n == -EAGAIN)
			return;
	}
}
