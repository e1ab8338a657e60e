/*
 * boot_io.c - the rendezvous' socket plumbing: a clock, poll() with a
 * deadline, per-connection send queues, non-blocking reads into the
 * receive buffer, socket options, and the "host:port" syntax.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fabric/boot_int.h"

/* Segments handed to one sendmsg(). */
#define IOV_BATCH 16

uint64_t shemb__boot_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int ms_until(uint64_t deadline)
{
	uint64_t now = shemb__boot_now_ms();

	if (now >= deadline)
		return 0;
	return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

int shemb__boot_poll(struct pollfd *p, nfds_t n, uint64_t deadline)
{
	for (;;) {
		int r = poll(p, n, ms_until(deadline));

		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

void shemb__boot_nap(unsigned ms, uint64_t deadline)
{
	uint64_t end = shemb__boot_now_ms() + ms;

	if (end > deadline)
		end = deadline;
	while (shemb__boot_now_ms() < end)
		poll(NULL, 0, ms_until(end));
}

/* ---- send queue ---- */

static int txq_add(struct shemb__boot_txq *q, uint8_t *own,
		   const uint8_t *data, size_t len)
{
	if (q->n == q->cap && q->head > 0) {
		memmove(q->seg, q->seg + q->head,
			(q->n - q->head) * sizeof(*q->seg));
		q->n -= q->head;
		q->head = 0;
	}
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 8;
		struct shemb__boot_seg *s = realloc(q->seg, cap * sizeof(*s));

		if (!s)
			return -1;
		q->seg = s;
		q->cap = cap;
	}
	q->seg[q->n++] = (struct shemb__boot_seg){
		.own = own, .data = data, .len = len,
	};
	return 0;
}

static int txq_add_owned(struct shemb__boot_txq *q, uint8_t *buf,
			 size_t len)
{
	if (len == 0 || txq_add(q, buf, buf, len) != 0) {
		free(buf);
		return -1;
	}
	return 0;
}

int shemb__boot_txq_push(struct shemb__boot_txq *q, uint16_t type,
			 uint32_t seq, const void *body, size_t len)
{
	size_t size = SHEMB__BOOT_HDR + len;
	uint8_t *buf = malloc(size);

	if (!buf)
		return -1;
	return txq_add_owned(q, buf, shemb__boot_encode(buf, size, type, seq,
							body, len));
}

int shemb__boot_txq_push_reason(struct shemb__boot_txq *q, uint16_t type,
				uint32_t seq, int code, const char *reason)
{
	size_t size = SHEMB__BOOT_HDR + 4 + SHEMB__BOOT_REASON_MAX;
	uint8_t *buf = malloc(size);

	if (!buf)
		return -1;
	return txq_add_owned(q, buf, shemb__boot_encode_reason(buf, size, type,
							       seq, code,
							       reason));
}

int shemb__boot_txq_push_borrowed(struct shemb__boot_txq *q, uint16_t type,
				  uint32_t seq, const void *body,
				  size_t len)
{
	uint8_t *hdr = malloc(SHEMB__BOOT_HDR);
	size_t mark = q->n - q->head;

	if (!hdr || len > UINT32_MAX) {
		free(hdr);
		return -1;
	}
	shemb__boot_put_hdr(hdr, type, seq, (uint32_t)len);
	if (txq_add_owned(q, hdr, SHEMB__BOOT_HDR) != 0)
		return -1;
	if (len && txq_add(q, NULL, body, len) != 0) {
		/* take the header back: nothing of it has been sent */
		q->n = q->head + mark;
		free(hdr);
		return -1;
	}
	return 0;
}

int shemb__boot_txq_pending(const struct shemb__boot_txq *q)
{
	return q->head < q->n;
}

void shemb__boot_txq_free(struct shemb__boot_txq *q)
{
	for (size_t i = q->head; i < q->n; i++)
		free(q->seg[i].own);
	free(q->seg);
	memset(q, 0, sizeof(*q));
}

int shemb__boot_txq_unborrow(struct shemb__boot_txq *q)
{
	size_t out = q->head;

	/* A borrowed body always follows its own header segment. */
	for (size_t i = q->head; i < q->n; i++) {
		struct shemb__boot_seg *s = &q->seg[i];

		if (s->own)
			continue;
		if (s->off > 0 || i == q->head || s[-1].off > 0) {
			shemb__boot_txq_free(q);
			return 1;
		}
	}
	for (size_t i = q->head; i < q->n; i++) {
		int header = i + 1 < q->n && !q->seg[i + 1].own;

		if (!q->seg[i].own)
			continue;
		if (header)
			free(q->seg[i].own);
		else
			q->seg[out++] = q->seg[i];
	}
	q->n = out;
	return 0;
}

/* Account for w bytes written from the front of the queue. */
static void txq_advance(struct shemb__boot_txq *q, size_t w)
{
	while (w > 0 && q->head < q->n) {
		struct shemb__boot_seg *s = &q->seg[q->head];
		size_t take = s->len - s->off < w ? s->len - s->off : w;

		s->off += take;
		w -= take;
		if (s->off == s->len) {
			free(s->own);
			q->head++;
		}
	}
	if (q->head == q->n)
		q->head = q->n = 0;
}

int shemb__boot_peer_flush(struct shemb__boot_peer *p)
{
	struct shemb__boot_txq *q = &p->tx;

	while (shemb__boot_txq_pending(q)) {
		struct iovec iov[IOV_BATCH];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t w;

		for (size_t i = q->head; i < q->n && mh.msg_iovlen < IOV_BATCH;
		     i++) {
			struct shemb__boot_seg *s = &q->seg[i];

			iov[mh.msg_iovlen] = (struct iovec){
				.iov_base = (void *)(s->data + s->off),
				.iov_len = s->len - s->off,
			};
			mh.msg_iovlen++;
		}
		/* MSG_NOSIGNAL: a closed peer must not raise SIGPIPE in the
		 * host program. */
		w = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 1 :
									 -errno;
		txq_advance(q, (size_t)w);
	}
	return 0;
}

long shemb__boot_recv(int fd, struct shemb__boot_rx *rx)
{
	uint8_t *dst;
	size_t room;

	if (shemb__boot_rx_room(rx, &dst, &room) != 0)
		return -ENOMEM;
	if (room == 0)
		return -EAGAIN;
	for (;;) {
		ssize_t r = recv(fd, dst, room, MSG_DONTWAIT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		shemb__boot_rx_added(rx, (size_t)r);
		return (long)r;
	}
}

void shemb__boot_peer_init(struct shemb__boot_peer *p, int fd)
{
	memset(p, 0, sizeof(*p));
	p->fd = fd;
}

void shemb__boot_peer_close(struct shemb__boot_peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	shemb__boot_txq_free(&p->tx);
	shemb__boot_rx_free(&p->rx);
}

/* ---- sockets and addresses ---- */

static void set_int(int fd, int level, int name, int v)
{
	/* best effort: a missing option only weakens dead-host detection */
	(void)setsockopt(fd, level, name, &v, sizeof(v));
}

void shemb__boot_tune_socket(int fd, int timeout_ms)
{
	int secs = timeout_ms / 1000;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	/* A host that dies without closing its sockets (power, network)
	 * sends no FIN; keepalive probes find it within about the timeout,
	 * and the connection then reads as closed: the rank has left. */
	set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, secs / 2 > 1 ? secs / 2 : 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, secs / 6 > 1 ? secs / 6 : 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
	set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, timeout_ms);
}

static int valid_port(const char *s)
{
	long v = 0;

	if (!*s || strlen(s) > 5)
		return 0;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return 0;
		v = v * 10 + (*c - '0');
	}
	return v >= 1 && v <= 65535;
}

static int copy_part(char *dst, size_t cap, const char *src, size_t n)
{
	if (n == 0 || n >= cap)
		return -1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

int shemb__boot_split_root(const char *root, char *host, size_t hostlen,
			   char *port, size_t portlen)
{
	const char *colon, *close;

	if (root[0] == '[') {
		close = strchr(root, ']');
		if (!close || close[1] != ':')
			return -1;
		if (copy_part(host, hostlen, root + 1, close - root - 1) != 0)
			return -1;
		colon = close + 1;
	} else {
		colon = strrchr(root, ':');
		if (!colon)
			return -1;
		/* "::1:5000" could be read two ways */
		if (memchr(root, ':', colon - root))
			return -2;
		if (copy_part(host, hostlen, root, colon - root) != 0)
			return -1;
	}
	if (!valid_port(colon + 1) ||
	    copy_part(port, portlen, colon + 1, strlen(colon + 1)) != 0)
		return -1;
	return 0;
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

void shemb__boot_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN + 16], port[8];

	if (getnameinfo(sa, sa_len(sa), ip, sizeof(ip), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, len, "(unknown address)");
		return;
	}
	if (sa->sa_family == AF_INET6)
		snprintf(buf, len, "[%s]:%s", ip, port);
	else
		snprintf(buf, len, "%s:%s", ip, port);
}

int shemb__boot_numeric_ip(const struct sockaddr *sa, char *buf, size_t len)
{
	return getnameinfo(sa, sa_len(sa), buf, (socklen_t)len, NULL, 0,
			   NI_NUMERICHOST) == 0 ? 0 : -1;
}

/* Append "r" or "r-end" to the list; 1 once the list is cut short. */
static int append_range(char *buf, size_t len, size_t *off, int r, int end)
{
	const char *sep = *off ? ", " : "";

	if (*off + 32 >= len) {
		snprintf(buf + *off, len - *off, "%s...", sep);
		return 1;
	}
	if (end == r)
		*off += (size_t)snprintf(buf + *off, len - *off, "%s%d", sep,
					 r);
	else
		*off += (size_t)snprintf(buf + *off, len - *off, "%s%d-%d",
					 sep, r, end);
	return 0;
}

int shemb__boot_rank_list(const uint8_t *flags, int world, char *buf,
			  size_t len)
{
	size_t off = 0;
	int count = 0, cut = 0;

	buf[0] = '\0';
	for (int r = 1; r < world; r++) {
		int end = r;

		if (flags[r])
			continue;
		while (end + 1 < world && !flags[end + 1])
			end++;
		count += end - r + 1;
		if (!cut)
			cut = append_range(buf, len, &off, r, end);
		r = end;
	}
	return count;
}

/* ---- errors ---- */

int shemb__boot_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int shemb__boot_failed(struct shemb__boot *b, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->failmsg, sizeof(b->failmsg), fmt, ap);
	va_end(ap);
	b->failed = code;
	return code;
}

void shemb__boot_mark_left(struct shemb__boot *b, int r)
{
	int none = -1;

	atomic_compare_exchange_strong(&b->left, &none, r);
}
