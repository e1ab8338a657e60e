/*
 * emu.h - the emulated device (tests/emu/): what its module offers the
 * tests beside the plugin table, and what its plugin hands its device
 * side.  See device.c.
 */
#ifndef SHEMB_TESTS_EMU_H
#define SHEMB_TESTS_EMU_H

#include <stddef.h>

struct shemb__gpu_host;
struct shemb__pool;

/* What the next shemb__cuda_open() on this thread builds its kernels
 * from: the plugin's create sets it before it opens the backend. */
struct shemb__emu_open {
	const struct shemb__gpu_host *host;
	struct shemb__pool *pool;
	const char *isa;
};

extern _Thread_local struct shemb__emu_open shemb__emu_next;

#define SHEMB__EMU_API __attribute__((visibility("default")))

/* Device memory: inaccessible to the host outside enter() ... leave().
 * The tests find these with dlsym(). */
SHEMB__EMU_API void *shemb__emu_alloc(size_t bytes);
/* ... of another device, which the context must refuse */
SHEMB__EMU_API void *shemb__emu_alloc_other(size_t bytes);
SHEMB__EMU_API void shemb__emu_free(void *p);
SHEMB__EMU_API void shemb__emu_copy(void *dst, const void *src, size_t n);
SHEMB__EMU_API void shemb__emu_fill(void *dst, int byte, size_t n);
/* Device allocations not freed yet: a leak check for the tests. */
SHEMB__EMU_API size_t shemb__emu_live(void);
/* Step plans made on the device, and checks of a backward run there
 * (plan.c): the tests tell the device path from the staged one. */
SHEMB__EMU_API unsigned long shemb__emu_plans(void);
SHEMB__EMU_API unsigned long shemb__emu_checks(void);
void shemb__emu_enter(void);
void shemb__emu_leave(void);

#endif
