/*
 * hostmem.c - private host memory.
 *
 * With jemalloc, every block comes from an arena created for this context
 * through mallocx(); the host program's malloc is never replaced (the
 * library only calls jemalloc's non-standard entry points).  Without it,
 * blocks are anonymous mappings.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "shemb.h"
#include "cpu/hostmem.h"

#define HUGE_PAGE ((size_t)2 << 20)

struct shemb__hostmem {
	unsigned arena;
	char desc[48];
};

static void advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	/* best effort: the kernel may have THP off, then this fails */
	if (bytes >= HUGE_PAGE)
		madvise(p, bytes, MADV_HUGEPAGE);
#endif
}

#ifdef HAVE_JEMALLOC

/*
 * The library's own copy of jemalloc (linked in, its symbols local) also
 * serves the library's malloc() calls, and a distributed step allocates
 * and frees its exchange buffers (rows of 32768 ids of 64 floats are
 * 8 MiB) every step.  By default jemalloc returns blocks of 8 MiB and
 * more to the kernel the moment they are freed, and lets freed pages
 * decay back to it over seconds even when the next step would take them
 * again: either way the pages of a step's buffers were faulted in anew,
 * more than half of the CPU time of a step at 4 ranks (shemb-bench
 * sched).  So freed pages stay with the library for its next step; a
 * table's rows go back to the kernel when the table is destroyed
 * (shemb__hostmem_free_now), everything else when a context is
 * (shemb__hostmem_release_all).  The host program's malloc is not this
 * one and is not affected.
 */
const char *malloc_conf = "oversize_threshold:0,dirty_decay_ms:-1,"
			  "muzzy_decay_ms:-1";

void shemb__hostmem_release_all(void)
{
	char name[64];

	/* this thread's cache of small blocks first, then every arena */
	mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	snprintf(name, sizeof(name), "arena.%u.purge",
		 (unsigned)MALLCTL_ARENAS_ALL);
	mallctl(name, NULL, NULL, NULL, 0);
}

int shemb__hostmem_create(struct shemb__hostmem **out)
{
	struct shemb__hostmem *hm = calloc(1, sizeof(*hm));
	size_t sz = sizeof(hm->arena);

	if (!hm)
		return SHEMB_ENOMEM;
	if (mallctl("arenas.create", &hm->arena, &sz, NULL, 0)) {
		free(hm);
		return SHEMB_ENOMEM;
	}
	snprintf(hm->desc, sizeof(hm->desc), "jemalloc arena %u", hm->arena);
	*out = hm;
	return 0;
}

void shemb__hostmem_destroy(struct shemb__hostmem *hm)
{
	char name[64];

	if (!hm)
		return;
	snprintf(name, sizeof(name), "arena.%u.destroy", hm->arena);
	mallctl(name, NULL, NULL, NULL, 0);
	free(hm);
}

static int arena_flags(const struct shemb__hostmem *hm, size_t bytes)
{
	size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 4096;

	return MALLOCX_ARENA(hm->arena) | MALLOCX_TCACHE_NONE |
	       MALLOCX_ALIGN(align);
}

void *shemb__hostmem_alloc(struct shemb__hostmem *hm, size_t bytes)
{
	void *p;

	if (bytes == 0)
		bytes = 1;
	p = mallocx(bytes, arena_flags(hm, bytes));
	if (p)
		advise_huge(p, bytes);
	return p;
}

void shemb__hostmem_free(struct shemb__hostmem *hm, void *p, size_t bytes)
{
	if (p)
		sdallocx(p, bytes ? bytes : 1, arena_flags(hm, bytes ? bytes : 1));
}

/*
 * Only the block's own whole pages: blocks of HUGE_PAGE and more start on
 * one (arena_flags) and fill theirs, where a smaller one may share a page
 * with blocks still in use.  The arena reuses the range as it reuses any
 * freed one, without counting on its content.
 */
void shemb__hostmem_free_now(struct shemb__hostmem *hm, void *p,
			     size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (p && bytes >= HUGE_PAGE)
		madvise(p, bytes / page * page, MADV_DONTNEED);
	shemb__hostmem_free(hm, p, bytes);
}

#else /* !HAVE_JEMALLOC */

int shemb__hostmem_create(struct shemb__hostmem **out)
{
	struct shemb__hostmem *hm = calloc(1, sizeof(*hm));

	if (!hm)
		return SHEMB_ENOMEM;
	snprintf(hm->desc, sizeof(hm->desc), "mmap");
	*out = hm;
	return 0;
}

void shemb__hostmem_destroy(struct shemb__hostmem *hm)
{
	free(hm);
}

static size_t map_size(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) / page * page;
}

void *shemb__hostmem_alloc(struct shemb__hostmem *hm, size_t bytes)
{
	void *p;

	if (bytes == 0)
		bytes = 1;
	p = mmap(NULL, map_size(bytes), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	advise_huge(p, bytes);
	return p;
}

void shemb__hostmem_free(struct shemb__hostmem *hm, void *p, size_t bytes)
{
	if (p)
		munmap(p, map_size(bytes ? bytes : 1));
}

/* Blocks are unmapped as they are freed: nothing is kept to return. */
void shemb__hostmem_free_now(struct shemb__hostmem *hm, void *p,
			     size_t bytes)
{
	shemb__hostmem_free(hm, p, bytes);
}

void shemb__hostmem_release_all(void)
{
}

#endif

const char *shemb__hostmem_describe(const struct shemb__hostmem *hm)
{
	return hm->desc;
}
