/*
 * crc32c.c - see crc32c.h.  Thirty lines, against a dependency: the
 * instruction gives several GB/s, more than the disks checkpoints go to.
 */
#include "lib/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[256];

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[i] = c;
	}
}

static uint32_t by_table(uint32_t crc, const unsigned char *p, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, make_table);
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
by_instruction(uint32_t crc, const unsigned char *p, size_t n)
{
	uint64_t c = crc;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	crc = (uint32_t)c;
	while (n--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t shemb__crc32c(uint32_t crc, const void *p, size_t n)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~by_instruction(crc, p, n);
#endif
	return ~by_table(crc, p, n);
}

uint32_t shemb__crc32c_portable(uint32_t crc, const void *p, size_t n)
{
	return ~by_table(~crc, p, n);
}
