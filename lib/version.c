/*
 * version.c - the version of the loaded library and its build features.
 */
#include "lib/internal.h"

#define STR2(x) #x
#define STR(x) STR2(x)

#ifdef HAVE_JEMALLOC
#define FEAT_JEMALLOC " jemalloc"
#else
#define FEAT_JEMALLOC " mmap-arena"
#endif
#ifdef HAVE_LIBFABRIC
#define FEAT_FABRIC " libfabric"
#else
#define FEAT_FABRIC ""
#endif
#ifdef HAVE_X86_KERNELS
#define FEAT_X86 " avx2 avx512"
#else
#define FEAT_X86 ""
#endif

SHEMB_API unsigned shemb_version(void)
{
	return SHEMB_VERSION_NUMBER;
}

SHEMB_API const char *shemb_version_string(void)
{
	return STR(SHEMB_VERSION_MAJOR) "." STR(SHEMB_VERSION_MINOR) "." STR(
		SHEMB_VERSION_PATCH) " (cpu" FEAT_JEMALLOC FEAT_X86 FEAT_FABRIC ")";
}
