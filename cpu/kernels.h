/*
 * kernels.h - CPU kernels, built once per instruction set and chosen at run
 * time, so the installed library runs on any x86-64 and uses AVX-512 where
 * the machine has it.
 */
#ifndef SHEMB_KERNELS_H
#define SHEMB_KERNELS_H

#include <stdint.h>

#include "lib/mem_ops.h"

struct shemb__kernels {
	const char *isa;
	/* pool bags [b0, b1) of a SUM, MEAN or MAX job */
	void (*pool_bags)(const struct shemb__pool_job *job, int64_t b0,
			  int64_t b1);
	/* copy out ids [i0, i1) of a POOL_NONE job (one row per id) */
	void (*pool_ids)(const struct shemb__pool_job *job, int64_t i0,
			 int64_t i1);
	/* coalesce and apply the optimizer to distinct rows [u0, u1) */
	void (*update_rows)(const struct shemb__update_job *job, int64_t u0,
			    int64_t u1);
	/* gradient rows of distinct rows [u0, u1) into out: one per row
	 * ([nunique][dim]), or with expand one per position ([nids][dim],
	 * in job->pos order) */
	void (*coalesce_rows)(const struct shemb__update_job *job, int64_t u0,
			      int64_t u1, float *out, int expand);
	/* squares of the gradients of distinct rows [u0, u1) as the update
	 * would use them, per column or summed (mem_ops.h) */
	void (*grad_squares)(const struct shemb__update_job *job, int64_t u0,
			     int64_t u1, float *out, int per_column);
	/* initial fp32 values of local rows r0 .. r0 + n - 1 ([n][dim];
	 * spec->shard maps them to ids and columns) */
	void (*init_rows)(const struct shemb__init_spec *spec, int64_t r0,
			  int64_t n, int dim, float *out);
	/* convert n values between fp32 and a storage dtype */
	void (*load_f32)(int dtype, const void *src, float *dst, int64_t n);
	void (*store_f32)(int dtype, void *dst, const float *src, int64_t n);
};

extern const struct shemb__kernels shemb__kernels_generic;
#ifdef HAVE_X86_KERNELS
extern const struct shemb__kernels shemb__kernels_avx2;
extern const struct shemb__kernels shemb__kernels_avx512;
#endif

/*
 * The best kernels this CPU runs, or those named by want ("generic", "avx2",
 * "avx512"; NULL or "" for the best).  NULL when want names a set this CPU
 * or build lacks.
 */
const struct shemb__kernels *shemb__kernels_select(const char *want);

#endif
