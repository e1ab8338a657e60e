/*
 * pinned.h - page-locked host buffers for the copies between host and
 * device, kept for reuse (pinned.c).
 */
#ifndef SHEMB_GPU_PINNED_H
#define SHEMB_GPU_PINNED_H

#include <stddef.h>

struct shemb__cuda;
struct shemb__pinned;

struct shemb__pinned *shemb__pinned_create(struct shemb__cuda *c);
/* Frees every block; none may be in use. */
void shemb__pinned_destroy(struct shemb__pinned *p);
/* The largest block handed out: making page-locked memory costs more
 * than a copy of it, and blocks larger than this, which the cache would
 * mostly not keep, would be made at nearly every use. */
#define SHEMB__PINNED_MAX ((size_t)64 << 20)

/* A block of at least bytes, or NULL (none left, or more than
 * SHEMB__PINNED_MAX: the caller then uses pageable memory). */
void *shemb__pinned_get(struct shemb__pinned *p, size_t bytes);
/* Back into the cache (bytes as asked for). */
void shemb__pinned_put(struct shemb__pinned *p, void *block, size_t bytes);

#endif
