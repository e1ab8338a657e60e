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
/* A block of at least bytes, or NULL. */
void *shemb__pinned_get(struct shemb__pinned *p, size_t bytes);
/* Back into the cache (bytes as asked for). */
void shemb__pinned_put(struct shemb__pinned *p, void *block, size_t bytes);

#endif
