/*
 * boot_proto.h - the wire protocol of the rendezvous (fabric/boot.h), and
 * its parser.  Nothing here touches a socket, so that the parser and the
 * root's admission of a connection can be tested and fuzzed on plain bytes.
 *
 * Every message is a 16-byte header and a body; integers are little-endian:
 *
 *   offset size field
 *        0    4 magic    "SHBT" (0x53 0x48 0x42 0x54)
 *        4    2 version  SHEMB__BOOT_VERSION (1)
 *        6    2 type     enum shemb__boot_type
 *        8    4 seq      allgather number in GATHER, TABLE, FAIL; else 0
 *       12    4 len      bytes of body that follow the header
 *
 * Magic and version keep these offsets in every version of the protocol,
 * so that each side can name the other's version.  Every type has a body
 * size limit (below); TABLE's is set by the receiver, who knows the world
 * size.  A receiver drops a connection at the first byte that breaks the
 * magic and as soon as a header announces more than its type allows, so
 * it never buffers more than one well-formed message.
 *
 * Rendezvous; rank 0 is the root, r a connecting rank:
 *
 *   0 -> r  CHALLENGE  snonce[16]                    fresh random nonce
 *   r -> 0  JOIN       rank u32, world u32, cnonce[16], mac[16]
 *                      mac = MAC(k, "JOIN" snonce cnonce rank world)
 *   0 -> r  ACCEPT     mac[16] = MAC(k, "ACPT" snonce cnonce rank world)
 *        or REJECT     reason (1..256 bytes of text); rank 0 then closes
 *   0 -> r  READY      empty: every rank has been admitted
 *        or ABORT      code i32, reason: rank 0 gave up (a rank missing)
 *
 * A connection that arrives after READY gets REJECT at once, instead of
 * CHALLENGE.  Allgather number s (1, 2, ... on every rank):
 *
 *   r -> 0  GATHER     seq s, rank r's blob (at most 64 KiB)
 *   0 -> r  TABLE      seq s, world x blob bytes, rank i's blob at i x len
 *        or FAIL       seq s, code i32, reason (lengths or numbers differ)
 *
 * Afterwards the connections stay open, silent, for liveness:
 *
 *   0 -> r  LEFT       rank u32: that rank's connection to rank 0 closed
 *
 * MAC is SipHash-2-4 with its 128-bit output.  The key k is SipHash-2-4-128
 * of the job key string under a fixed, public key, so the job key itself
 * never travels; no key is the empty string's k.  The nonces bind every
 * answer to one connection, so a recorded JOIN is worth nothing later, and
 * ACCEPT proves to the joining rank that rank 0 knows the key as well.  A
 * recorded exchange still lets an eavesdropper test guesses of the key
 * offline: job keys should be random (16 bytes or more from a launcher),
 * not words.
 */
#ifndef SHEMB_BOOT_PROTO_H
#define SHEMB_BOOT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define SHEMB__BOOT_MAGIC 0x54424853u /* "SHBT" read as little-endian */
#define SHEMB__BOOT_VERSION 1
#define SHEMB__BOOT_HDR 16
#define SHEMB__BOOT_NONCE 16
#define SHEMB__BOOT_MAC 16
#define SHEMB__BOOT_KEY 16
#define SHEMB__BOOT_REASON_MAX 256
#define SHEMB__BOOT_BLOB_MAX 65536
#define SHEMB__BOOT_JOIN_LEN (8 + SHEMB__BOOT_NONCE + SHEMB__BOOT_MAC)

enum shemb__boot_type {
	SHEMB__BOOT_CHALLENGE = 1,
	SHEMB__BOOT_JOIN = 2,
	SHEMB__BOOT_ACCEPT = 3,
	SHEMB__BOOT_REJECT = 4,
	SHEMB__BOOT_READY = 5,
	SHEMB__BOOT_ABORT = 6,
	SHEMB__BOOT_GATHER = 7,
	SHEMB__BOOT_TABLE = 8,
	SHEMB__BOOT_FAIL = 9,
	SHEMB__BOOT_LEFT = 10
};

/* Results of the parser. */
enum {
	SHEMB__BOOT_BAD = -1, /* malformed: drop the connection */
	SHEMB__BOOT_MORE = 0, /* incomplete: read more bytes */
	SHEMB__BOOT_ONE = 1   /* one complete message */
};

struct shemb__boot_msg {
	uint16_t version;
	uint16_t type;
	uint32_t seq;
	uint32_t len;          /* body bytes */
	const uint8_t *body;   /* inside the parsed buffer */
	size_t size;           /* ONE: header + body; MORE: bytes needed */
};

struct shemb__boot_join {
	uint32_t rank, world;
	uint8_t cnonce[SHEMB__BOOT_NONCE];
	uint8_t mac[SHEMB__BOOT_MAC];
};

/*
 * Parse the message at the start of buf[0..n).  table_max bounds a TABLE
 * body (a rank sets it from its world size and blob length; rank 0, which
 * receives no TABLE, passes 0).  ONE: msg describes it, msg->size bytes
 * long.  MORE: msg->size is how many bytes are needed at least (the whole
 * message once the header is in).  BAD: *why says what is wrong (static
 * text); msg->version is set when the version was the problem.
 */
int shemb__boot_parse(const void *buf, size_t n, uint32_t table_max,
		      struct shemb__boot_msg *msg, const char **why);

/* Body decoders; 0, or -1 when the body does not fit the type. */
int shemb__boot_get_join(const struct shemb__boot_msg *m,
			 struct shemb__boot_join *j);
int shemb__boot_get_u32(const struct shemb__boot_msg *m, uint32_t *v);
/* REJECT, ABORT, FAIL: the code (0 for REJECT) and the reason as a C string,
 * characters outside printable ASCII replaced by '?'. */
int shemb__boot_get_reason(const struct shemb__boot_msg *m, int *code,
			   char *text, size_t len);

/* Write a header; encode a whole message into out (cap bytes), returning
 * its size or 0 when it does not fit. */
void shemb__boot_put_hdr(uint8_t *hdr, uint16_t type, uint32_t seq,
			 uint32_t len);
size_t shemb__boot_encode(uint8_t *out, size_t cap, uint16_t type,
			  uint32_t seq, const void *body, size_t len);
void shemb__boot_put_join(uint8_t body[SHEMB__BOOT_JOIN_LEN],
			  const struct shemb__boot_join *j);
size_t shemb__boot_encode_join(uint8_t *out, size_t cap,
			       const struct shemb__boot_join *j);
/* REJECT (code ignored), ABORT, FAIL; the reason is cut at 256 bytes. */
size_t shemb__boot_encode_reason(uint8_t *out, size_t cap, uint16_t type,
				 uint32_t seq, int code, const char *reason);

/* Authentication. */
void shemb__boot_derive_key(const char *job_key,
			    uint8_t key[SHEMB__BOOT_KEY]);
void shemb__boot_mac(const uint8_t key[SHEMB__BOOT_KEY], const char label[4],
		     const uint8_t snonce[SHEMB__BOOT_NONCE],
		     const uint8_t cnonce[SHEMB__BOOT_NONCE], uint32_t rank,
		     uint32_t world, uint8_t mac[SHEMB__BOOT_MAC]);
/* 1 when equal; the time taken does not depend on where they differ. */
int shemb__boot_mac_equal(const uint8_t *a, const uint8_t *b);
/* n random bytes from the kernel; 0 or a negative errno. */
int shemb__boot_random(void *buf, size_t n);

/*
 * A receive buffer that holds at most one message beyond what has been
 * consumed: it grows to the size the next message needs and no further.
 */
struct shemb__boot_rx {
	uint8_t *buf;
	size_t len, cap;
	uint32_t table_max;   /* passed to the parser */
	int got_bytes;        /* anything ever arrived */
};

/* Room to read into: *room bytes at *p (0 when a whole message, or a
 * malformed one, is waiting to be taken).  0, or -1 when out of memory. */
int shemb__boot_rx_room(struct shemb__boot_rx *rx, uint8_t **p,
			size_t *room);
/* Account for n bytes just read into the room. */
void shemb__boot_rx_added(struct shemb__boot_rx *rx, size_t n);
/* Copy bytes in (for callers without a socket); returns how many fitted. */
size_t shemb__boot_rx_feed(struct shemb__boot_rx *rx, const void *p,
			   size_t n);
/* Parse the message at the front; it stays valid until rx_consume(). */
int shemb__boot_rx_next(struct shemb__boot_rx *rx, struct shemb__boot_msg *m,
			const char **why);
void shemb__boot_rx_consume(struct shemb__boot_rx *rx, size_t n);
void shemb__boot_rx_free(struct shemb__boot_rx *rx);

/*
 * Rank 0's admission of one connection, after it has sent CHALLENGE:
 * feed the bytes received into hs->rx and call hs_step().
 */
struct shemb__boot_admit {
	int world_size;
	uint8_t key[SHEMB__BOOT_KEY];
	const uint8_t *joined;  /* world_size flags: rank admitted already */
};

enum shemb__boot_verdict {
	SHEMB__HS_MORE = 0,   /* wait for more bytes */
	SHEMB__HS_ACCEPT,     /* admit hs->rank; send ACCEPT with hs->mac */
	SHEMB__HS_REJECT,     /* send REJECT with hs->why, then close */
	SHEMB__HS_DROP        /* close without an answer; hs->why says why */
};

struct shemb__boot_hs {
	struct shemb__boot_rx rx;
	uint8_t snonce[SHEMB__BOOT_NONCE];
	int rank;             /* ACCEPT, and REJECT of a rank taken: the rank */
	int taken;            /* REJECT because the rank has joined already */
	uint8_t mac[SHEMB__BOOT_MAC];
	char why[SHEMB__BOOT_REASON_MAX];
};

int shemb__boot_hs_step(struct shemb__boot_hs *hs,
			const struct shemb__boot_admit *ad);

#endif
