/*
 * fuzz_ckpt_corpus.c - the checkpoint fuzz target over a built-in corpus,
 * with the normal compiler, so that every "make check" exercises it:
 * well-formed MANIFESTs and shard headers, every truncation of them and
 * every single-bit flip; a flipped or cut MANIFEST must be refused (its
 * checksum).
 *
 *   fuzz_ckpt_corpus               run the corpus (exit status 0: passed)
 *   fuzz_ckpt_corpus --write DIR   write it as seed files for libFuzzer
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt.h"
#include "shemb.h"
#include "tests/fuzz/fuzz_ckpt.h"

#define MAX_INPUT 4096

static const char *write_dir;
static long ninputs, seeds;

static void run(uint8_t mode, const unsigned char *p, size_t n, bool seed)
{
	uint8_t in[MAX_INPUT + 1];

	in[0] = mode;
	memcpy(in + 1, p, n);
	LLVMFuzzerTestOneInput(in, n + 1);
	ninputs++;
	if (seed && write_dir) {
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed-%ld", write_dir,
			 seeds++);
		f = fopen(path, "wb");
		if (!f || fwrite(in, 1, n + 1, f) != n + 1 || fclose(f)) {
			perror(path);
			exit(1);
		}
	}
}

static bool manifest_ok(const unsigned char *p, size_t n)
{
	struct shemb__ckpt_manifest m;
	char why[128];
	int rc = shemb__ckpt_manifest_parse(p, n, &m, why, sizeof(why));

	shemb__ckpt_manifest_free(&m);
	return rc == 0;
}

/* A manifest of world files (and, with layers 2, of an incremental
 * save's second layer); the mutations of it must all fail. */
static void manifests(uint32_t world, int opt, const char *name, int layers)
{
	struct shemb__ckpt_file files[8];
	struct shemb__ckpt_manifest m = {
		.generation = 0x1234, .rows = 100, .dim = 8,
		.dtype = SHEMB_BF16, .optimizer = (uint32_t)opt,
		.table_id = 3, .seed = 9, .step = 17, .lr = 0.5f,
		.eps = 1e-8f, .beta1 = 0.9f, .beta2 = 0.999f,
		.shard = SHEMB_SHARD_COLUMN, .world = world,
		.nfiles = world * (uint32_t)layers, .files = files,
	};
	unsigned char *p;
	size_t n;

	snprintf(m.name, sizeof(m.name), "%s", name);
	for (uint32_t r = 0; r < m.nfiles; r++)
		files[r] = (struct shemb__ckpt_file){
			.generation = m.generation - (r < world) *
							     (uint64_t)(layers -
									1),
			.rank = r % world, .col0 = 8 * (r % world) / world,
			.ncols = 8 * (r % world + 1) / world -
				 8 * (r % world) / world,
			.nrecords = 100, .crc = 7 * r,
		};
	for (uint32_t r = 0; r < m.nfiles; r++) {
		files[r].nstate = opt == SHEMB_OPT_ADAM ? 2 * files[r].ncols
				  : opt == SHEMB_OPT_SGD ? 0
							 : files[r].ncols;
		files[r].bytes = SHEMB__CKPT_HEADER +
				 100 * shemb__ckpt_record_bytes(
					       files[r].ncols, m.dtype,
					       files[r].nstate);
	}
	if (shemb__ckpt_manifest_encode(&m, &p, &n) || !manifest_ok(p, n)) {
		fprintf(stderr, "a well-formed manifest was refused\n");
		exit(1);
	}
	run(FUZZ_CKPT_MANIFEST, p, n, true);
	run(FUZZ_CKPT_SIGNED, p, n, true);
	for (size_t k = 0; k < n; k++) {
		run(FUZZ_CKPT_SIGNED, p, k, false);
		run(FUZZ_CKPT_MANIFEST, p, k, false);
		if (manifest_ok(p, k)) {
			fprintf(stderr, "a manifest cut to %zu bytes passed\n",
				k);
			exit(1);
		}
	}
	for (size_t bit = 0; bit < 8 * n; bit++) {
		p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		run(FUZZ_CKPT_MANIFEST, p, n, false);
		run(FUZZ_CKPT_SIGNED, p, n, false);
		if (manifest_ok(p, n)) {
			fprintf(stderr, "a flip of bit %zu passed\n", bit);
			exit(1);
		}
		p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	free(p);
}

static void shards(void)
{
	struct shemb__ckpt_shard s = { .rank = 1, .generation = 0x1234,
				       .nrecords = 50, .rows = 100,
				       .col0 = 4, .ncols = 4,
				       .dtype = SHEMB_F32, .nstate = 8,
				       .dim = 8 };
	unsigned char h[SHEMB__CKPT_HEADER];

	shemb__ckpt_shard_encode(&s, h);
	run(FUZZ_CKPT_SHARD, h, sizeof(h), true);
	for (size_t k = 0; k < sizeof(h); k++)
		run(FUZZ_CKPT_SHARD, h, k, false);
	for (size_t bit = 0; bit < 8 * sizeof(h); bit++) {
		h[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		run(FUZZ_CKPT_SHARD, h, sizeof(h), false);
		h[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write"))
		write_dir = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
		return 2;
	}
	manifests(1, SHEMB_OPT_SGD, "one", 1);
	manifests(3, SHEMB_OPT_ADAM, "three ranks", 1);
	manifests(4, SHEMB_OPT_ADAGRAD, "", 1);
	manifests(2, SHEMB_OPT_ADAM, "two layers", 2);
	shards();
	printf("%ld inputs\n", ninputs);
	return 0;
}
