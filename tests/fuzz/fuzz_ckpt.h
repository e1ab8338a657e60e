/*
 * fuzz_ckpt.h - the checkpoint format's fuzz target (fuzz_ckpt.c),
 * shared with the program that runs it over a built-in corpus
 * (fuzz_ckpt_corpus.c).
 */
#ifndef SHEMB_FUZZ_CKPT_H
#define SHEMB_FUZZ_CKPT_H

#include <stddef.h>
#include <stdint.h>

/* What the first input byte selects (modulo FUZZ_CKPT_MODES). */
enum {
	FUZZ_CKPT_MANIFEST = 0, /* the rest is a MANIFEST */
	FUZZ_CKPT_SHARD = 1,    /* the rest is a shard file's header */
	FUZZ_CKPT_SIGNED = 2,   /* a MANIFEST whose checksum is made right,
				 * to reach the fields behind it */
	FUZZ_CKPT_MODES = 3
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
