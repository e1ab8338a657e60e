/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of checkpoint files: the
 * SSE4.2 instruction where the CPU has it, else a table.
 */
#ifndef SHEMB_CRC32C_H
#define SHEMB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc of the bytes before (0 to start), extended by n bytes at p. */
uint32_t shemb__crc32c(uint32_t crc, const void *p, size_t n);
/* ... by the table alone (the tests compare both ways) */
uint32_t shemb__crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
