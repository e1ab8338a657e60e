/*
 * fuzz_boot.c - arbitrary bytes into the rendezvous' parser, its receive
 * buffer and rank 0's admission of a connection (fabric/boot_proto.h).
 * The first byte picks the part to drive (fuzz_boot.h); a broken
 * invariant aborts, so the fuzzer reports it like a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "fabric/boot_proto.h"
#include "tests/fuzz/fuzz_boot.h"

/* The largest TABLE the parser accepts here: big enough for bodies the
 * fuzzer can write, small enough to keep buffers small. */
#define TABLE_MAX 4096
#define MAX_MSGS 64

const uint8_t fuzz_boot_snonce[16] = {
	0x6e, 0x6f, 0x6e, 0x63, 0x65, 0x2d, 0x66, 0x6f,
	0x72, 0x2d, 0x66, 0x75, 0x7a, 0x7a, 0x69, 0x6e,
};

#define CHECK(cond)                                                      \
	do {                                                             \
		if (!(cond))                                             \
			abort();                                         \
	} while (0)

struct seen {
	uint16_t type;
	uint32_t seq, len;
	size_t size;
};

static void check_text(const char *s, size_t cap)
{
	size_t n = strlen(s);

	CHECK(n < cap);
	for (size_t i = 0; i < n; i++)
		CHECK(s[i] >= 0x20 && s[i] < 0x7f);
}

/* Every decoder on a parsed message, with buffers of awkward sizes. */
static void decode(const struct shemb__boot_msg *m)
{
	struct shemb__boot_join j;
	char one[1], small[8], big[SHEMB__BOOT_REASON_MAX + 8];
	uint32_t v;
	int code;

	CHECK(m->size == SHEMB__BOOT_HDR + (size_t)m->len);
	if (shemb__boot_get_join(m, &j) == 0)
		CHECK(m->type == SHEMB__BOOT_JOIN);
	if (shemb__boot_get_u32(m, &v) == 0)
		CHECK(m->len == 4);
	if (shemb__boot_get_reason(m, &code, big, sizeof(big)) == 0) {
		check_text(big, sizeof(big));
		shemb__boot_get_reason(m, &code, small, sizeof(small));
		check_text(small, sizeof(small));
		shemb__boot_get_reason(m, &code, one, sizeof(one));
		CHECK(one[0] == '\0');
	}
}

/* Parse a whole stream at once; returns how many messages it holds and
 * whether it ends malformed (*bad) or incomplete. */
static int parse_stream(const uint8_t *p, size_t n, struct seen *out,
			int *bad)
{
	int count = 0;

	*bad = 0;
	while (count < MAX_MSGS) {
		struct shemb__boot_msg m;
		const char *why;
		int v = shemb__boot_parse(p, n, TABLE_MAX, &m, &why);

		if (v == SHEMB__BOOT_BAD) {
			CHECK(why != NULL);
			*bad = 1;
			break;
		}
		if (v == SHEMB__BOOT_MORE) {
			CHECK(m.size > n);
			CHECK(m.size <= SHEMB__BOOT_HDR + TABLE_MAX +
					       SHEMB__BOOT_BLOB_MAX);
			break;
		}
		CHECK(m.size <= n && m.body == p + SHEMB__BOOT_HDR);
		decode(&m);
		out[count++] = (struct seen){ m.type, m.seq, m.len, m.size };
		p += m.size;
		n -= m.size;
	}
	return count;
}

/* The buffer, fed in chunks sized by the input itself, must find the
 * same messages as the parser on the whole stream. */
static void chunks(const uint8_t *p, size_t n)
{
	struct seen want[MAX_MSGS];
	struct shemb__boot_rx rx = { .table_max = TABLE_MAX };
	int bad, count = parse_stream(p, n, want, &bad), got = 0, v = 0;
	size_t off = 0;

	while (got < count) {
		struct shemb__boot_msg m;
		const char *why;
		size_t chunk = off < n ? (size_t)(p[off] % 23) + 1 : 0;

		if (chunk > n - off)
			chunk = n - off;
		off += shemb__boot_rx_feed(&rx, p + off, chunk);
		while (got < count &&
		       (v = shemb__boot_rx_next(&rx, &m, &why)) ==
			       SHEMB__BOOT_ONE) {
			CHECK(m.type == want[got].type &&
			      m.seq == want[got].seq &&
			      m.len == want[got].len);
			shemb__boot_rx_consume(&rx, m.size);
			got++;
		}
		CHECK(v != SHEMB__BOOT_BAD);
		if (off == n && got < count)
			CHECK(0);
	}
	if (bad && count < MAX_MSGS) {
		struct shemb__boot_msg m;
		const char *why;

		/* the rest must be found malformed too, once fed */
		shemb__boot_rx_feed(&rx, p + off, n - off);
		CHECK(shemb__boot_rx_next(&rx, &m, &why) == SHEMB__BOOT_BAD);
	}
	shemb__boot_rx_free(&rx);
}

/* Give the first JOIN of the stream the MAC rank 0 expects. */
static void sign_join(uint8_t *p, size_t n, const uint8_t *key)
{
	struct shemb__boot_msg m;
	struct shemb__boot_join j;
	const char *why;

	if (shemb__boot_parse(p, n, 0, &m, &why) != SHEMB__BOOT_ONE ||
	    shemb__boot_get_join(&m, &j) != 0)
		return;
	shemb__boot_mac(key, "JOIN", fuzz_boot_snonce, j.cnonce, j.rank,
			j.world, j.mac);
	shemb__boot_put_join(p + SHEMB__BOOT_HDR, &j);
}

/* 1 when the stream starts with a JOIN that carries the right MAC. */
static int join_is_signed(const uint8_t *p, size_t n,
			  const struct shemb__boot_admit *ad)
{
	struct shemb__boot_msg m;
	struct shemb__boot_join j;
	uint8_t want[SHEMB__BOOT_MAC];
	const char *why;

	if (shemb__boot_parse(p, n, 0, &m, &why) != SHEMB__BOOT_ONE ||
	    shemb__boot_get_join(&m, &j) != 0)
		return 0;
	shemb__boot_mac(ad->key, "JOIN", fuzz_boot_snonce, j.cnonce, j.rank,
			j.world, want);
	return memcmp(want, j.mac, sizeof(want)) == 0;
}

static void check_verdict(int v, const struct shemb__boot_hs *hs,
			  const struct shemb__boot_admit *ad, int signed_join)
{
	if (v == SHEMB__HS_ACCEPT) {
		/* nobody gets in without the key */
		CHECK(signed_join);
		CHECK(hs->rank > 0 && hs->rank < ad->world_size);
		CHECK(!ad->joined[hs->rank]);
	}
	if (v == SHEMB__HS_REJECT || v == SHEMB__HS_DROP)
		CHECK(hs->why[0] != '\0');
	if (v == SHEMB__HS_REJECT)
		check_text(hs->why, sizeof(hs->why));
	if (hs->taken)
		CHECK(v == SHEMB__HS_REJECT && ad->joined[hs->rank]);
}

static void admission(const uint8_t *data, size_t size, int sign)
{
	struct shemb__boot_admit ad;
	struct shemb__boot_hs hs;
	uint8_t joined[9] = { 0 }, *p;
	size_t n, off = 0;
	int v = SHEMB__HS_MORE, signed_join;

	if (size < 2)
		return;
	ad.world_size = 2 + data[0] % 8;
	for (int r = 1; r < ad.world_size; r++)
		joined[r] = (data[1] >> r) & 1;
	ad.joined = joined;
	shemb__boot_derive_key(FUZZ_BOOT_KEY, ad.key);
	n = size - 2;
	p = malloc(n ? n : 1);
	CHECK(p != NULL);
	memcpy(p, data + 2, n);
	if (sign)
		sign_join(p, n, ad.key);
	signed_join = join_is_signed(p, n, &ad);

	memset(&hs, 0, sizeof(hs));
	memcpy(hs.snonce, fuzz_boot_snonce, sizeof(hs.snonce));
	while (v == SHEMB__HS_MORE && off < n) {
		size_t chunk = (size_t)(p[off] % 13) + 1;

		if (chunk > n - off)
			chunk = n - off;
		off += shemb__boot_rx_feed(&hs.rx, p + off, chunk);
		v = shemb__boot_hs_step(&hs, &ad);
		check_verdict(v, &hs, &ad, signed_join);
	}
	shemb__boot_rx_free(&hs.rx);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen seen[MAX_MSGS];
	int bad;

	if (size == 0)
		return 0;
	switch (data[0] % FUZZ_BOOT_MODES) {
	case FUZZ_BOOT_PARSE:
		parse_stream(data + 1, size - 1, seen, &bad);
		break;
	case FUZZ_BOOT_CHUNKS:
		chunks(data + 1, size - 1);
		break;
	case FUZZ_BOOT_SIGNED:
		admission(data + 1, size - 1, 1);
		break;
	case FUZZ_BOOT_ADMIT:
		admission(data + 1, size - 1, 0);
		break;
	}
	return 0;
}
