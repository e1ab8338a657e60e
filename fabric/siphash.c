/*
 * siphash.c - SipHash-2-4, written from the specification in "SipHash: a
 * fast short-input PRF" (Aumasson, Bernstein; INDOCRYPT 2012): two rounds
 * per 8-byte message word, four rounds of finalization.
 */
#include "fabric/siphash.h"

struct sipstate {
	uint64_t v0, v1, v2, v3;
};

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t x = 0;

	for (int i = 7; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

static void store_le64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t rotl(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

static void sipround(struct sipstate *s)
{
	s->v0 += s->v1;
	s->v1 = rotl(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = rotl(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = rotl(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = rotl(s->v2, 32);
}

static void compress(struct sipstate *s, uint64_t m)
{
	s->v3 ^= m;
	sipround(s);
	sipround(s);
	s->v0 ^= m;
}

static uint64_t finalize(struct sipstate *s, uint64_t mark)
{
	s->v2 ^= mark;
	for (int i = 0; i < 4; i++)
		sipround(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

/* Initialize with the key, absorb the message and its length; wide selects
 * the 128-bit output variant, which also marks v1 at the start. */
static void absorb(struct sipstate *s, const uint8_t *key, const uint8_t *m,
		   size_t len, int wide)
{
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
	uint64_t last = (uint64_t)(len & 0xff) << 56;
	size_t full = len & ~(size_t)7;

	s->v0 = k0 ^ 0x736f6d6570736575ull; /* "somepseu" */
	s->v1 = k1 ^ 0x646f72616e646f6dull; /* "dorandom" */
	s->v2 = k0 ^ 0x6c7967656e657261ull; /* "lygenera" */
	s->v3 = k1 ^ 0x7465646279746573ull; /* "tedbytes" */
	if (wide)
		s->v1 ^= 0xee;
	for (size_t i = 0; i < full; i += 8)
		compress(s, load_le64(m + i));
	for (size_t i = full; i < len; i++)
		last |= (uint64_t)m[i] << (8 * (i - full));
	compress(s, last);
}

uint64_t shemb__siphash24(const uint8_t key[SHEMB__SIPHASH_KEY_BYTES],
			  const void *msg, size_t len)
{
	struct sipstate s;

	absorb(&s, key, msg, len, 0);
	return finalize(&s, 0xff);
}

void shemb__siphash24_128(const uint8_t key[SHEMB__SIPHASH_KEY_BYTES],
			  const void *msg, size_t len, uint8_t out[16])
{
	struct sipstate s;

	absorb(&s, key, msg, len, 1);
	store_le64(out, finalize(&s, 0xee));
	s.v1 ^= 0xdd;
	for (int i = 0; i < 4; i++)
		sipround(&s);
	store_le64(out + 8, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
}
