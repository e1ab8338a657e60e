/*
 * fuzz_boot.h - the rendezvous fuzz target (fuzz_boot.c), shared with the
 * program that runs it over a built-in corpus (fuzz_boot_corpus.c).
 */
#ifndef SHEMB_FUZZ_BOOT_H
#define SHEMB_FUZZ_BOOT_H

#include <stddef.h>
#include <stdint.h>

/* What the first input byte selects (modulo FUZZ_BOOT_MODES). */
enum {
	FUZZ_BOOT_PARSE = 0,   /* the parser over a stream of messages */
	FUZZ_BOOT_CHUNKS = 1,  /* the receive buffer, fed in chunks */
	FUZZ_BOOT_SIGNED = 2,  /* rank 0's admission, a JOIN's MAC made right */
	FUZZ_BOOT_ADMIT = 3,   /* rank 0's admission, bytes as they come */
	FUZZ_BOOT_MODES = 4
};

/* Admission inputs: mode byte, world byte, joined-flags byte, then the
 * bytes of the connection.  The job key and challenge are fixed. */
#define FUZZ_BOOT_KEY "fuzz-job-key"
extern const uint8_t fuzz_boot_snonce[16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
