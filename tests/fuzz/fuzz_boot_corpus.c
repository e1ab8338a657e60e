/*
 * fuzz_boot_corpus.c - the rendezvous fuzz target over a built-in corpus,
 * with the normal compiler, so that every "make check" exercises it: each
 * message type well formed, every truncation of it, every single-bit flip,
 * and streams of several messages, in each mode of the target.
 *
 *   fuzz_boot_corpus               run the corpus (exit status 0: passed)
 *   fuzz_boot_corpus --write DIR   write it as seed files for libFuzzer
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/boot_proto.h"
#include "tests/fuzz/fuzz_boot.h"

#define MAX_INPUT 2048

struct sample {
	uint8_t bytes[MAX_INPUT];
	size_t len;
};

static struct sample samples[32];
static int nsamples;
static const char *write_dir;
static long ninputs;

static void add(const uint8_t *p, size_t n)
{
	struct sample *s = &samples[nsamples++];

	memcpy(s->bytes, p, n);
	s->len = n;
}

static void add_msg(uint16_t type, uint32_t seq, const void *body,
		    size_t len)
{
	uint8_t buf[MAX_INPUT];

	add(buf, shemb__boot_encode(buf, sizeof(buf), type, seq, body, len));
}

static void add_join(uint32_t rank, uint32_t world)
{
	struct shemb__boot_join j = { .rank = rank, .world = world };
	uint8_t key[SHEMB__BOOT_KEY], buf[MAX_INPUT];

	memset(j.cnonce, 0xa5, sizeof(j.cnonce));
	shemb__boot_derive_key(FUZZ_BOOT_KEY, key);
	shemb__boot_mac(key, "JOIN", fuzz_boot_snonce, j.cnonce, rank, world,
			j.mac);
	add(buf, shemb__boot_encode_join(buf, sizeof(buf), &j));
}

static void add_reason(uint16_t type, uint32_t seq, int code,
		       const char *text)
{
	uint8_t buf[MAX_INPUT];

	add(buf, shemb__boot_encode_reason(buf, sizeof(buf), type, seq, code,
					   text));
}

static void build_samples(void)
{
	uint8_t blob[300], stream[MAX_INPUT];
	size_t off = 0;

	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)(i * 7 + 1);
	add_msg(SHEMB__BOOT_CHALLENGE, 0, fuzz_boot_snonce, 16);
	add_join(1, 3);
	add_join(2, 3);
	add_join(0, 3);
	add_join(7, 3);
	add_join(1, 4);
	add_msg(SHEMB__BOOT_ACCEPT, 0, blob, 16);
	add_reason(SHEMB__BOOT_REJECT, 0, 0, "wrong job key");
	add_msg(SHEMB__BOOT_READY, 0, NULL, 0);
	add_reason(SHEMB__BOOT_ABORT, 0, -8, "rank 0 gave up: rank 2 did not join");
	add_msg(SHEMB__BOOT_GATHER, 1, blob, 40);
	add_msg(SHEMB__BOOT_GATHER, 3, NULL, 0);
	add_msg(SHEMB__BOOT_TABLE, 1, blob, sizeof(blob));
	add_reason(SHEMB__BOOT_FAIL, 2, -1, "lengths differ\x1b[31m");
	add_msg(SHEMB__BOOT_LEFT, 0, "\x02\0\0\0", 4);
	/* a stream: what a rank hears after joining */
	for (int i = 4; i < nsamples; i++) {
		if (off + samples[i].len > sizeof(stream))
			break;
		memcpy(stream + off, samples[i].bytes, samples[i].len);
		off += samples[i].len;
	}
	add(stream, off);
}

static void run(int mode, const uint8_t *p, size_t n)
{
	uint8_t in[MAX_INPUT + 4];
	size_t k = 0;

	in[k++] = (uint8_t)mode;
	if (mode == FUZZ_BOOT_SIGNED || mode == FUZZ_BOOT_ADMIT) {
		in[k++] = 1;          /* world size 3 */
		in[k++] = 0x04;       /* rank 2 has joined */
	}
	if (n > MAX_INPUT)
		n = MAX_INPUT;
	memcpy(in + k, p, n);
	k += n;
	ninputs++;
	if (!write_dir) {
		LLVMFuzzerTestOneInput(in, k);
		return;
	}
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%06ld", write_dir, ninputs);
	f = fopen(path, "wb");
	if (!f || fwrite(in, 1, k, f) != k || fclose(f) != 0) {
		fprintf(stderr, "fuzz_boot_corpus: cannot write %s: %s\n",
			path, strerror(errno));
		exit(1);
	}
}

static void variants(int mode, const struct sample *s)
{
	uint8_t buf[MAX_INPUT];

	run(mode, s->bytes, s->len);
	for (size_t cut = 0; cut < s->len; cut++)
		run(mode, s->bytes, cut);
	if (write_dir)
		return;       /* libFuzzer makes its own flips */
	for (size_t bit = 0; bit < 8 * s->len && bit < 8 * 64; bit++) {
		memcpy(buf, s->bytes, s->len);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		run(mode, buf, s->len);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0) {
		write_dir = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
		return 2;
	}
	build_samples();
	for (int mode = 0; mode < FUZZ_BOOT_MODES; mode++)
		for (int i = 0; i < nsamples; i++)
			variants(mode, &samples[i]);
	printf("fuzz_boot_corpus: %ld inputs %s\n", ninputs,
	       write_dir ? "written" : "passed");
	return 0;
}
