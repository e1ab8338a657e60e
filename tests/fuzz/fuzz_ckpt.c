/*
 * fuzz_ckpt.c - arbitrary bytes into the checkpoint parsers
 * (lib/ckpt_format.c): a MANIFEST, or a shard file's header, as the
 * first byte says.  What a parser accepts must obey the format's limits
 * and encode back to the very bytes it came from; a broken invariant
 * aborts, so the fuzzer reports it like a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt.h"
#include "lib/crc32c.h"
#include "shemb.h"
#include "tests/fuzz/fuzz_ckpt.h"

#define CHECK(cond)                                                      \
	do {                                                             \
		if (!(cond))                                             \
			abort();                                         \
	} while (0)

static void manifest(const uint8_t *p, size_t n)
{
	struct shemb__ckpt_manifest m;
	unsigned char *again;
	size_t len;
	char why[128];

	if (shemb__ckpt_manifest_parse(p, n, &m, why, sizeof(why))) {
		CHECK(strlen(why) > 0 && strlen(why) < sizeof(why));
		return;
	}
	CHECK(m.rows > 0 && m.rows <= SHEMB_MAX_ROWS);
	CHECK(m.dim > 0 && m.dim <= SHEMB_MAX_DIM);
	CHECK(m.nfiles > 0 && m.nfiles <= SHEMB__CKPT_MAX_FILES);
	CHECK(strlen(m.name) <= SHEMB__CKPT_MAX_NAME);
	for (uint32_t i = 0; i < m.nfiles; i++) {
		CHECK(m.files[i].rank < m.world);
		CHECK(m.files[i].col0 + m.files[i].ncols <= m.dim);
		CHECK(m.files[i].nrecords <= m.rows);
	}
	CHECK(shemb__ckpt_manifest_encode(&m, &again, &len) == 0);
	CHECK(len == n && !memcmp(again, p, n));
	free(again);
	shemb__ckpt_manifest_free(&m);
}

static void shard(const uint8_t *p, size_t n)
{
	unsigned char head[SHEMB__CKPT_HEADER] = { 0 }, again[sizeof(head)];
	struct shemb__ckpt_shard s;
	char why[96];

	memcpy(head, p, n < sizeof(head) ? n : sizeof(head));
	if (shemb__ckpt_shard_parse(head, &s, why, sizeof(why)))
		return;
	shemb__ckpt_shard_encode(&s, again);
	CHECK(!memcmp(again, head, sizeof(head)));
}

/* The bytes with their last four replaced by the checksum of the rest. */
static void signed_manifest(const uint8_t *p, size_t n)
{
	uint8_t *copy;
	uint32_t crc;

	if (n < 4)
		return;
	copy = malloc(n);
	CHECK(copy);
	memcpy(copy, p, n);
	crc = shemb__crc32c(0, copy, n - 4);
	for (int i = 0; i < 4; i++)
		copy[n - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
	manifest(copy, n);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % FUZZ_CKPT_MODES) {
	case FUZZ_CKPT_MANIFEST:
		manifest(data + 1, size - 1);
		break;
	case FUZZ_CKPT_SHARD:
		shard(data + 1, size - 1);
		break;
	default:
		signed_manifest(data + 1, size - 1);
		break;
	}
	return 0;
}
