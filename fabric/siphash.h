/*
 * siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed hash
 * with a 128-bit key, used here as a message authentication code.
 *
 * The 64-bit output is the function of the paper; the 128-bit output is
 * the variant of the reference implementation (the same rounds, with the
 * constants 0xee and 0xdd in the finalization).  Both read the key and
 * write the output as little-endian bytes, as the reference test vectors
 * do, so results are the same on every host.
 */
#ifndef SHEMB_SIPHASH_H
#define SHEMB_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SHEMB__SIPHASH_KEY_BYTES 16

uint64_t shemb__siphash24(const uint8_t key[SHEMB__SIPHASH_KEY_BYTES],
			  const void *msg, size_t len);

void shemb__siphash24_128(const uint8_t key[SHEMB__SIPHASH_KEY_BYTES],
			  const void *msg, size_t len, uint8_t out[16]);

#endif
