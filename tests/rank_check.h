/*
 * rank_check.h - the checks of the programs that run as ranks under
 * shemb-run (tests/coll_rank.c, tests/dist_rank.c): a failure names the
 * rank and the line and ends the process, which ends the job.  The
 * including file defines `int rank` first.
 */
#ifndef SHEMB_RANK_CHECK_H
#define SHEMB_RANK_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <shemb.h>

#define FAIL(...)                                                            \
	do {                                                                 \
		fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__,     \
			__LINE__);                                           \
		fprintf(stderr, __VA_ARGS__);                                \
		fprintf(stderr, "\n");                                       \
		exit(1);                                                     \
	} while (0)

/* call must return 0; c is the context whose last error explains it */
#define CHECK_RC(c, call)                                                    \
	do {                                                                 \
		int rc_ = (call);                                            \
		if (rc_)                                                     \
			FAIL("%s = %d (%s): %s", #call, rc_,                 \
			     shemb_strerror(rc_), shemb_ctx_last_error(c));  \
	} while (0)

/* splitmix64's finaliser: inputs as a function of their indices */
static inline uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif
