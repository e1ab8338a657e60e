/*
 * boot_proto.c - the rendezvous messages: parser, encoders, the MAC, the
 * receive buffer, and rank 0's decision on a JOIN.  No sockets here (see
 * boot_proto.h for the protocol).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "fabric/boot_proto.h"
#include "fabric/siphash.h"

/* Receive buffers start at this size, so that small messages that arrive
 * together are read with one call. */
#define RX_MIN 512

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- parser ---- */

/* Body sizes each type allows; TABLE's upper bound is the caller's. */
static int body_limits(uint16_t type, uint32_t table_max, uint32_t *lo,
		       uint32_t *hi)
{
	switch (type) {
	case SHEMB__BOOT_CHALLENGE:
		*lo = *hi = SHEMB__BOOT_NONCE;
		return 0;
	case SHEMB__BOOT_JOIN:
		*lo = *hi = SHEMB__BOOT_JOIN_LEN;
		return 0;
	case SHEMB__BOOT_ACCEPT:
		*lo = *hi = SHEMB__BOOT_MAC;
		return 0;
	case SHEMB__BOOT_REJECT:
		*lo = 1;
		*hi = SHEMB__BOOT_REASON_MAX;
		return 0;
	case SHEMB__BOOT_READY:
		*lo = *hi = 0;
		return 0;
	case SHEMB__BOOT_ABORT:
	case SHEMB__BOOT_FAIL:
		*lo = 4;
		*hi = 4 + SHEMB__BOOT_REASON_MAX;
		return 0;
	case SHEMB__BOOT_GATHER:
		*lo = 0;
		*hi = SHEMB__BOOT_BLOB_MAX;
		return 0;
	case SHEMB__BOOT_TABLE:
		*lo = 0;
		*hi = table_max;
		return 0;
	case SHEMB__BOOT_LEFT:
		*lo = *hi = 4;
		return 0;
	}
	return -1;
}

static int has_seq(uint16_t type)
{
	return type == SHEMB__BOOT_GATHER || type == SHEMB__BOOT_TABLE ||
	       type == SHEMB__BOOT_FAIL;
}

/* Magic and version are checked on partial headers too, so that a peer
 * that speaks something else is dropped at its first bytes. */
static int check_prefix(const uint8_t *p, size_t n,
			struct shemb__boot_msg *msg, const char **why)
{
	static const uint8_t magic[4] = { 'S', 'H', 'B', 'T' };

	if (n == 0)
		return SHEMB__BOOT_MORE;
	if (memcmp(p, magic, n < 4 ? n : 4) != 0) {
		*why = "not a libshemb rendezvous message (wrong magic)";
		return SHEMB__BOOT_BAD;
	}
	if (n < 6)
		return SHEMB__BOOT_MORE;
	msg->version = get_le16(p + 4);
	if (msg->version != SHEMB__BOOT_VERSION) {
		*why = "another version of the rendezvous protocol";
		return SHEMB__BOOT_BAD;
	}
	return SHEMB__BOOT_MORE;
}

int shemb__boot_parse(const void *buf, size_t n, uint32_t table_max,
		      struct shemb__boot_msg *msg, const char **why)
{
	const uint8_t *p = buf;
	uint32_t lo, hi;

	memset(msg, 0, sizeof(*msg));
	*why = NULL;
	if (check_prefix(p, n, msg, why) == SHEMB__BOOT_BAD)
		return SHEMB__BOOT_BAD;
	if (n < SHEMB__BOOT_HDR) {
		msg->size = SHEMB__BOOT_HDR;
		return SHEMB__BOOT_MORE;
	}
	msg->type = get_le16(p + 6);
	msg->seq = get_le32(p + 8);
	msg->len = get_le32(p + 12);
	if (body_limits(msg->type, table_max, &lo, &hi) != 0) {
		*why = "unknown message type";
		return SHEMB__BOOT_BAD;
	}
	if (msg->len < lo || msg->len > hi) {
		*why = msg->len > hi ? "message longer than its type allows" :
				       "message shorter than its type needs";
		return SHEMB__BOOT_BAD;
	}
	if (msg->seq != 0 && !has_seq(msg->type)) {
		*why = "sequence number on a message that has none";
		return SHEMB__BOOT_BAD;
	}
	msg->size = SHEMB__BOOT_HDR + (size_t)msg->len;
	if (n < msg->size)
		return SHEMB__BOOT_MORE;
	msg->body = p + SHEMB__BOOT_HDR;
	return SHEMB__BOOT_ONE;
}

/* ---- bodies ---- */

int shemb__boot_get_join(const struct shemb__boot_msg *m,
			 struct shemb__boot_join *j)
{
	const uint8_t *p = m->body;

	if (m->type != SHEMB__BOOT_JOIN || m->len != SHEMB__BOOT_JOIN_LEN)
		return -1;
	j->rank = get_le32(p);
	j->world = get_le32(p + 4);
	memcpy(j->cnonce, p + 8, SHEMB__BOOT_NONCE);
	memcpy(j->mac, p + 8 + SHEMB__BOOT_NONCE, SHEMB__BOOT_MAC);
	return 0;
}

int shemb__boot_get_u32(const struct shemb__boot_msg *m, uint32_t *v)
{
	if (m->len != 4)
		return -1;
	*v = get_le32(m->body);
	return 0;
}

int shemb__boot_get_reason(const struct shemb__boot_msg *m, int *code,
			   char *text, size_t len)
{
	const uint8_t *p = m->body;
	size_t n = m->len, i;

	*code = 0;
	if (m->type == SHEMB__BOOT_ABORT || m->type == SHEMB__BOOT_FAIL) {
		if (n < 4)
			return -1;
		*code = (int32_t)get_le32(p);
		p += 4;
		n -= 4;
	} else if (m->type != SHEMB__BOOT_REJECT) {
		return -1;
	}
	if (len == 0)
		return 0;
	/* The text goes into error messages, maybe onto a terminal. */
	for (i = 0; i < n && i + 1 < len; i++)
		text[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	text[i] = '\0';
	return 0;
}

void shemb__boot_put_hdr(uint8_t *hdr, uint16_t type, uint32_t seq,
			 uint32_t len)
{
	put_le32(hdr, SHEMB__BOOT_MAGIC);
	put_le16(hdr + 4, SHEMB__BOOT_VERSION);
	put_le16(hdr + 6, type);
	put_le32(hdr + 8, seq);
	put_le32(hdr + 12, len);
}

size_t shemb__boot_encode(uint8_t *out, size_t cap, uint16_t type,
			  uint32_t seq, const void *body, size_t len)
{
	if (len > UINT32_MAX || cap < SHEMB__BOOT_HDR ||
	    cap - SHEMB__BOOT_HDR < len)
		return 0;
	shemb__boot_put_hdr(out, type, seq, (uint32_t)len);
	if (len)
		memcpy(out + SHEMB__BOOT_HDR, body, len);
	return SHEMB__BOOT_HDR + len;
}

void shemb__boot_put_join(uint8_t body[SHEMB__BOOT_JOIN_LEN],
			  const struct shemb__boot_join *j)
{
	put_le32(body, j->rank);
	put_le32(body + 4, j->world);
	memcpy(body + 8, j->cnonce, SHEMB__BOOT_NONCE);
	memcpy(body + 8 + SHEMB__BOOT_NONCE, j->mac, SHEMB__BOOT_MAC);
}

size_t shemb__boot_encode_join(uint8_t *out, size_t cap,
			       const struct shemb__boot_join *j)
{
	uint8_t body[SHEMB__BOOT_JOIN_LEN];

	shemb__boot_put_join(body, j);
	return shemb__boot_encode(out, cap, SHEMB__BOOT_JOIN, 0, body,
				  sizeof(body));
}

size_t shemb__boot_encode_reason(uint8_t *out, size_t cap, uint16_t type,
				 uint32_t seq, int code, const char *reason)
{
	uint8_t body[4 + SHEMB__BOOT_REASON_MAX];
	size_t n = strlen(reason), off = 0;

	if (type != SHEMB__BOOT_REJECT) {
		put_le32(body, (uint32_t)code);
		off = 4;
	} else if (n == 0) {
		reason = "refused";
		n = strlen(reason);
	}
	if (n > SHEMB__BOOT_REASON_MAX)
		n = SHEMB__BOOT_REASON_MAX;
	memcpy(body + off, reason, n);
	return shemb__boot_encode(out, cap, type, seq, body, off + n);
}

/* ---- authentication ---- */

void shemb__boot_derive_key(const char *job_key,
			    uint8_t key[SHEMB__BOOT_KEY])
{
	/* A public key: this derivation hides nothing, it only turns a
	 * string of any length into the 128 bits SipHash takes. */
	static const uint8_t kdf_key[SHEMB__SIPHASH_KEY_BYTES] = {
		'l', 'i', 'b', 's', 'h', 'e', 'm', 'b',
		'-', 'b', 'o', 'o', 't', '-', 'v', '1'
	};

	if (!job_key)
		job_key = "";
	shemb__siphash24_128(kdf_key, job_key, strlen(job_key), key);
}

void shemb__boot_mac(const uint8_t key[SHEMB__BOOT_KEY], const char label[4],
		     const uint8_t snonce[SHEMB__BOOT_NONCE],
		     const uint8_t cnonce[SHEMB__BOOT_NONCE], uint32_t rank,
		     uint32_t world, uint8_t mac[SHEMB__BOOT_MAC])
{
	uint8_t in[4 + 2 * SHEMB__BOOT_NONCE + 8];

	memcpy(in, label, 4);
	memcpy(in + 4, snonce, SHEMB__BOOT_NONCE);
	memcpy(in + 4 + SHEMB__BOOT_NONCE, cnonce, SHEMB__BOOT_NONCE);
	put_le32(in + 4 + 2 * SHEMB__BOOT_NONCE, rank);
	put_le32(in + 8 + 2 * SHEMB__BOOT_NONCE, world);
	shemb__siphash24_128(key, in, sizeof(in), mac);
}

int shemb__boot_mac_equal(const uint8_t *a, const uint8_t *b)
{
	volatile uint8_t diff = 0;

	for (int i = 0; i < SHEMB__BOOT_MAC; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

static int urandom_bytes(uint8_t *p, size_t n)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (n > 0) {
		ssize_t got = read(fd, p, n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO;
			break;
		}
		p += got;
		n -= (size_t)got;
	}
	close(fd);
	return rc;
}

int shemb__boot_random(void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == ENOSYS)
			return urandom_bytes(p, n);
		if (got < 0)
			return -errno;
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

/* ---- receive buffer ---- */

int shemb__boot_rx_room(struct shemb__boot_rx *rx, uint8_t **p,
			size_t *room)
{
	struct shemb__boot_msg m;
	const char *why;
	size_t want;

	*room = 0;
	*p = NULL;
	if (shemb__boot_parse(rx->buf, rx->len, rx->table_max, &m, &why) !=
	    SHEMB__BOOT_MORE)
		return 0;
	want = m.size < RX_MIN ? RX_MIN : m.size;
	if (rx->cap < want) {
		uint8_t *nb = realloc(rx->buf, want);

		if (!nb)
			return -1;
		rx->buf = nb;
		rx->cap = want;
	}
	*p = rx->buf + rx->len;
	*room = rx->cap - rx->len;
	return 0;
}

void shemb__boot_rx_added(struct shemb__boot_rx *rx, size_t n)
{
	rx->len += n;
	if (n)
		rx->got_bytes = 1;
}

size_t shemb__boot_rx_feed(struct shemb__boot_rx *rx, const void *p,
			   size_t n)
{
	const uint8_t *src = p;
	size_t done = 0;

	while (done < n) {
		uint8_t *dst;
		size_t room;

		if (shemb__boot_rx_room(rx, &dst, &room) != 0 || room == 0)
			break;
		if (room > n - done)
			room = n - done;
		memcpy(dst, src + done, room);
		shemb__boot_rx_added(rx, room);
		done += room;
	}
	return done;
}

int shemb__boot_rx_next(struct shemb__boot_rx *rx, struct shemb__boot_msg *m,
			const char **why)
{
	return shemb__boot_parse(rx->buf, rx->len, rx->table_max, m, why);
}

void shemb__boot_rx_consume(struct shemb__boot_rx *rx, size_t n)
{
	if (n > rx->len)
		n = rx->len;
	memmove(rx->buf, rx->buf + n, rx->len - n);
	rx->len -= n;
	/* A big table is read once; do not keep its buffer for the idle
	 * liveness connection. */
	if (rx->len == 0 && rx->cap > 4 * SHEMB__BOOT_BLOB_MAX) {
		free(rx->buf);
		rx->buf = NULL;
		rx->cap = 0;
	}
}

void shemb__boot_rx_free(struct shemb__boot_rx *rx)
{
	free(rx->buf);
	rx->buf = NULL;
	rx->len = rx->cap = 0;
}

/* ---- rank 0's decision on a JOIN ---- */

__attribute__((format(printf, 3, 4)))
static int verdict(struct shemb__boot_hs *hs, int v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(hs->why, sizeof(hs->why), fmt, ap);
	va_end(ap);
	return v;
}

/* The key is checked first: a peer without it learns nothing about the
 * job, not even its size. */
static int judge(struct shemb__boot_hs *hs, const struct shemb__boot_admit *ad,
		 const struct shemb__boot_join *j)
{
	uint8_t want[SHEMB__BOOT_MAC];

	shemb__boot_mac(ad->key, "JOIN", hs->snonce, j->cnonce, j->rank,
			j->world, want);
	if (!shemb__boot_mac_equal(want, j->mac))
		return verdict(hs, SHEMB__HS_REJECT,
			       "wrong job key (this rank's key differs from rank 0's)");
	if (j->world != (uint32_t)ad->world_size)
		return verdict(hs, SHEMB__HS_REJECT,
			       "world size %u, but the job has %d ranks",
			       j->world, ad->world_size);
	if (j->rank == 0)
		return verdict(hs, SHEMB__HS_REJECT,
			       "rank 0 is the root of this job; it does not join");
	if (j->rank >= j->world)
		return verdict(hs, SHEMB__HS_REJECT,
			       "rank %u is outside the world of %d ranks (0..%d)",
			       j->rank, ad->world_size, ad->world_size - 1);
	hs->rank = (int)j->rank;
	if (ad->joined[j->rank]) {
		hs->taken = 1;
		return verdict(hs, SHEMB__HS_REJECT, "rank %u has joined already",
			       j->rank);
	}
	shemb__boot_mac(ad->key, "ACPT", hs->snonce, j->cnonce, j->rank,
			j->world, hs->mac);
	return SHEMB__HS_ACCEPT;
}

int shemb__boot_hs_step(struct shemb__boot_hs *hs,
			const struct shemb__boot_admit *ad)
{
	struct shemb__boot_msg m;
	struct shemb__boot_join j;
	const char *why;
	int r = shemb__boot_rx_next(&hs->rx, &m, &why);

	hs->rank = -1;
	hs->taken = 0;
	if (r == SHEMB__BOOT_MORE)
		return SHEMB__HS_MORE;
	if (r == SHEMB__BOOT_BAD && m.version &&
	    m.version != SHEMB__BOOT_VERSION)
		return verdict(hs, SHEMB__HS_DROP,
			       "protocol version %u (this rank 0 speaks %u)",
			       m.version, SHEMB__BOOT_VERSION);
	if (r == SHEMB__BOOT_BAD)
		return verdict(hs, SHEMB__HS_DROP, "%s", why);
	if (m.type != SHEMB__BOOT_JOIN)
		return verdict(hs, SHEMB__HS_DROP,
			       "message of type %u instead of JOIN", m.type);
	/* Nothing may follow JOIN before rank 0 answers. */
	if (hs->rx.len != m.size)
		return verdict(hs, SHEMB__HS_DROP, "data after JOIN");
	shemb__boot_get_join(&m, &j);
	shemb__boot_rx_consume(&hs->rx, m.size);
	return judge(hs, ad, &j);
}
