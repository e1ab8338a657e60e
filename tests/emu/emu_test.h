/*
 * emu_test.h - device memory of the emulated device (tests/emu/) for a
 * test's own buffers: the module is loaded before the library loads it
 * (dlopen() then gives both the same one) and named to the library as
 * its GPU module.
 */
#ifndef SHEMB_EMU_TEST_H
#define SHEMB_EMU_TEST_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
	void *(*alloc)(size_t);
	void (*free)(void *);
	void (*copy)(void *, const void *, size_t);
	void (*fill)(void *, int, size_t);
} emu;

/* 0, or -1 with the reason in why when path is not the emulated device's
 * module. */
static inline int emu_load(const char *path, char *why, size_t len)
{
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;

	if (!h) {
		snprintf(why, len, "%s", path ? dlerror() : "no module named");
		return -1;
	}
	*(void **)&emu.alloc = dlsym(h, "shemb__emu_alloc");
	*(void **)&emu.free = dlsym(h, "shemb__emu_free");
	*(void **)&emu.copy = dlsym(h, "shemb__emu_copy");
	*(void **)&emu.fill = dlsym(h, "shemb__emu_fill");
	if (!emu.alloc || !emu.free || !emu.copy || !emu.fill) {
		snprintf(why, len, "%s is not the emulated device", path);
		return -1;
	}
	setenv("SHEMB_CUDA_PLUGIN", path, 1);
	return 0;
}

static inline void *emu_alloc(size_t n)
{
	void *p = emu.alloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

#endif
