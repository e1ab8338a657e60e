/*
 * cpu.h - the CPU backend: host row stores, the kernels, the thread pool.
 */
#ifndef SHEMB_CPU_H
#define SHEMB_CPU_H

#include "lib/mem_ops.h"

struct shemb__pool;

extern const struct shemb_mem_ops shemb__cpu_mem_ops;

/* isa: kernel variant to force ("generic", "avx2", "avx512") or NULL for
 * the best one.  SHEMB_ENOTSUP when this CPU lacks the one asked for. */
int shemb__cpu_create(struct shemb__pool *pool, const char *isa, void **be);
void shemb__cpu_destroy(void *be);

#endif
