/*
 * convert_dnnl.c - dtype conversion through oneDNN reorders.  The only file
 * that calls oneDNN (v2 C API: dnnl_memory_desc_init_by_strides), so a port
 * to v3 touches this file alone.
 */
#include "config.h"

#include "shemb.h"
#include "cpu/convert.h"

#ifdef HAVE_DNNL

#include <dnnl.h>
#include <pthread.h>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define OMP_RUNTIME 1
#endif

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_create(void)
{
	if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
		engine = NULL;
}

static dnnl_data_type_t dnnl_type(int dtype)
{
	switch (dtype) {
	case SHEMB_F16:
		return dnnl_f16;
	case SHEMB_BF16:
		return dnnl_bf16;
	default:
		return dnnl_f32;
	}
}

static int describe(dnnl_memory_desc_t *md, struct shemb__block b,
		    int64_t rows, int cols)
{
	dnnl_dims_t dims = { rows, cols };
	dnnl_dims_t strides = { (dnnl_dim_t)(b.stride /
					     shemb__dtype_size(b.dtype)),
				1 };

	return dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_type(b.dtype),
						strides) != dnnl_success;
}

static int reorder(struct shemb__block dst, struct shemb__block src,
		   int64_t rows, int cols)
{
	dnnl_memory_desc_t dmd, smd;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t prim = NULL;
	dnnl_memory_t dm = NULL, sm = NULL;
	dnnl_stream_t stream = NULL;
	int bad = 1;

	if (describe(&dmd, dst, rows, cols) || describe(&smd, src, rows, cols))
		return 1;
	if (dnnl_reorder_primitive_desc_create(&pd, &smd, engine, &dmd, engine,
					       NULL) ||
	    dnnl_primitive_create(&prim, pd) ||
	    dnnl_memory_create(&sm, &smd, engine, src.ptr) ||
	    dnnl_memory_create(&dm, &dmd, engine, dst.ptr) ||
	    dnnl_stream_create(&stream, engine, dnnl_stream_default_flags))
		goto out;
	{
		dnnl_exec_arg_t args[2] = { { DNNL_ARG_FROM, sm },
					    { DNNL_ARG_TO, dm } };

		bad = dnnl_primitive_execute(prim, stream, 2, args) ||
		      dnnl_stream_wait(stream);
	}
out:
	dnnl_stream_destroy(stream);
	dnnl_memory_destroy(dm);
	dnnl_memory_destroy(sm);
	dnnl_primitive_destroy(prim);
	dnnl_primitive_desc_destroy(pd);
	return bad;
}

int shemb__convert2d_dnnl(struct shemb__block dst, struct shemb__block src,
			  int64_t rows, int cols)
{
	int bad;
#ifdef OMP_RUNTIME
	int saved;
#endif

	pthread_once(&engine_once, engine_create);
	if (!engine)
		return SHEMB_EINTERNAL;
#ifdef OMP_RUNTIME
	/* This oneDNN runs on OpenMP.  Our callers are already spread over
	 * the context's threads, so keep each reorder on its calling thread:
	 * a team of one starts no OpenMP threads.  The setting is per thread
	 * and restored, so the host's own OpenMP is left as it was. */
	saved = omp_get_max_threads();
	omp_set_num_threads(1);
#endif
	bad = reorder(dst, src, rows, cols);
#ifdef OMP_RUNTIME
	omp_set_num_threads(saved);
#endif
	return bad ? SHEMB_EINTERNAL : 0;
}

#else

int shemb__convert2d_dnnl(struct shemb__block dst, struct shemb__block src,
			  int64_t rows, int cols)
{
	return SHEMB_ENOTSUP;
}

#endif
