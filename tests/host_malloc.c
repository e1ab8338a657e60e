/*
 * host_malloc.c - a program linked with -lshemb keeps its own allocator:
 * malloc and C++ operator new resolve where they would without libshemb
 * (libc and libstdc++, or a sanitizer's runtime), never to libshemb or a
 * jemalloc, and jemalloc's API is not exported.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shemb.h>

static const char *owner(const char *sym)
{
	void *p = dlsym(RTLD_DEFAULT, sym);
	Dl_info info;

	if (!p)
		return NULL;
	if (!dladdr(p, &info) || !info.dli_fname)
		return "?";
	return info.dli_fname;
}

static int expect_host_owner(const char *sym)
{
	const char *o = owner(sym);

	if (o && (strstr(o, "libshemb") || strstr(o, "jemalloc"))) {
		printf("FAIL: %s comes from %s\n", sym, o);
		return 1;
	}
	printf("%s: %s\n", sym, o ? o : "(not loaded)");
	return 0;
}

int main(void)
{
	shemb_ctx *ctx = NULL;
	shemb_table *t = NULL;
	struct shemb_table_attr a;
	int fail = 0;

	/* Create a table so that the library's allocator is in use. */
	shemb_table_attr_init(&a);
	a.rows = 1000;
	a.dim = 8;
	if (shemb_ctx_create(NULL, &ctx) || shemb_table_create(ctx, &a, &t)) {
		printf("FAIL: setup: %s\n", shemb_ctx_last_error(ctx));
		return 1;
	}
	fail |= expect_host_owner("malloc");
	fail |= expect_host_owner("free");
	fail |= expect_host_owner("calloc");
	fail |= expect_host_owner("_Znwm");
	fail |= expect_host_owner("_ZdlPv");
	if (owner("mallocx") || owner("mallctl")) {
		printf("FAIL: jemalloc's API is visible to the host program\n");
		fail = 1;
	}
	free(malloc(1 << 20)); /* the host's malloc still works */
	shemb_ctx_destroy(ctx);
	return fail;
}
