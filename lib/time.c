/*
 * time.c - a monotonic clock for the phase timers of the statistics.
 */
#include "lib/internal.h"

#include <time.h>

uint64_t shemb__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
