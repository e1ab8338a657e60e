/*
 * hostmem.h - host memory for row stores and staging, kept apart from the
 * host program's malloc: a private jemalloc arena, or mmap without jemalloc.
 */
#ifndef SHEMB_HOSTMEM_H
#define SHEMB_HOSTMEM_H

#include <stddef.h>

struct shemb__hostmem;

int shemb__hostmem_create(struct shemb__hostmem **hm);
void shemb__hostmem_destroy(struct shemb__hostmem *hm);

/* Page-aligned; zero-filled pages are not promised.  Blocks of 2 MiB and
 * more are advised for transparent huge pages. */
void *shemb__hostmem_alloc(struct shemb__hostmem *hm, size_t bytes);
void shemb__hostmem_free(struct shemb__hostmem *hm, void *p, size_t bytes);

/* Frees a block and gives its pages back to the kernel at once (a
 * table's rows), where shemb__hostmem_free keeps them for reuse. */
void shemb__hostmem_free_now(struct shemb__hostmem *hm, void *p,
			     size_t bytes);

/* The pages that the library's allocations have freed, in every arena,
 * back to the kernel: when a context is gone. */
void shemb__hostmem_release_all(void);

/* "jemalloc arena N" or "mmap" */
const char *shemb__hostmem_describe(const struct shemb__hostmem *hm);

#endif
