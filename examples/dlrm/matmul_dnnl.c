/*
 * matmul_dnnl.c - the matrix product of matmul.h with oneDNN's matmul
 * primitive on the CPU.  Every oneDNN call of the example is in this file
 * (the v2 C API of oneDNN 2.x: a port to v3, which renamed the descriptor
 * calls, touches only this file).
 *
 * Making a primitive compiles a kernel for one shape, which costs far more
 * than running it on the small matrices of a training step; so primitives
 * are made once per shape (m, n, k, transposes, bias or not) and kept in a
 * list, with memory objects whose data pointers are set at each call.  A
 * step uses a dozen shapes, and a run only a few batch sizes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "examples/dlrm/matmul.h"

enum { ARG_A, ARG_B, ARG_BIAS, ARG_C, NARGS };

struct prim {
	int m, n, k;
	unsigned flags;
	bool bias;
	dnnl_primitive_t prim;
	dnnl_memory_t mem[NARGS];	/* data pointers set per call */
	struct prim *next;
};

struct dnnl_mm {
	struct matmul base;
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	struct prim *cache;
	char name[48];
};

static bool ok(dnnl_status_t st, const char *what)
{
	if (st == dnnl_success)
		return true;
	fprintf(stderr, "dlrm: oneDNN %s failed (status %d)\n", what, (int)st);
	return false;
}

/* Memory descriptors of the four arguments of one shape. */
static bool describe(const struct prim *p, dnnl_memory_desc_t *md)
{
	bool ta = p->flags & MATMUL_TRANS_A, tb = p->flags & MATMUL_TRANS_B;
	dnnl_dims_t a_dims = { p->m, p->k }, b_dims = { p->k, p->n };
	dnnl_dims_t bias_dims = { 1, p->n }, c_dims = { p->m, p->n };
	dnnl_dims_t a_strides = { ta ? 1 : p->k, ta ? p->m : 1 };
	dnnl_dims_t b_strides = { tb ? 1 : p->n, tb ? p->k : 1 };

	return ok(dnnl_memory_desc_init_by_strides(&md[ARG_A], 2, a_dims,
						   dnnl_f32, a_strides),
		  "memory_desc_init_by_strides") &&
	       ok(dnnl_memory_desc_init_by_strides(&md[ARG_B], 2, b_dims,
						   dnnl_f32, b_strides),
		  "memory_desc_init_by_strides") &&
	       ok(dnnl_memory_desc_init_by_tag(&md[ARG_BIAS], 2, bias_dims,
					       dnnl_f32, dnnl_ab),
		  "memory_desc_init_by_tag") &&
	       ok(dnnl_memory_desc_init_by_tag(&md[ARG_C], 2, c_dims,
					       dnnl_f32, dnnl_ab),
		  "memory_desc_init_by_tag");
}

static void prim_free(struct prim *p)
{
	for (int i = 0; i < NARGS; i++)
		if (p->mem[i])
			dnnl_memory_destroy(p->mem[i]);
	if (p->prim)
		dnnl_primitive_destroy(p->prim);
	free(p);
}

/* The primitive and memory objects of p's shape. */
static bool prim_build(struct dnnl_mm *d, struct prim *p)
{
	dnnl_memory_desc_t md[NARGS];
	dnnl_matmul_desc_t desc;
	dnnl_primitive_desc_t pd;
	dnnl_status_t st;

	if (!describe(p, md) ||
	    !ok(dnnl_matmul_desc_init(&desc, &md[ARG_A], &md[ARG_B],
				      p->bias ? &md[ARG_BIAS] : NULL,
				      &md[ARG_C]), "matmul_desc_init") ||
	    !ok(dnnl_primitive_desc_create(&pd, &desc, NULL, d->engine, NULL),
		"primitive_desc_create"))
		return false;
	st = dnnl_primitive_create(&p->prim, pd);
	dnnl_primitive_desc_destroy(pd);
	if (!ok(st, "primitive_create"))
		return false;
	for (int i = 0; i < NARGS; i++)
		if (!ok(dnnl_memory_create(&p->mem[i], &md[i], d->engine,
					   DNNL_MEMORY_NONE), "memory_create"))
			return false;
	return true;
}

/* The cached primitive of a shape, made at its first use. */
static struct prim *prim_get(struct dnnl_mm *d, unsigned flags, int m,
			     int n, int k, bool bias)
{
	struct prim *p;

	for (p = d->cache; p; p = p->next)
		if (p->m == m && p->n == n && p->k == k &&
		    p->flags == flags && p->bias == bias)
			return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	*p = (struct prim){ .m = m, .n = n, .k = k, .flags = flags,
			    .bias = bias };
	if (!prim_build(d, p)) {
		prim_free(p);
		return NULL;
	}
	p->next = d->cache;
	d->cache = p;
	return p;
}

/* k = 0: no product to run, C is the bias or zeros. */
static void bias_only(int m, int n, const float *bias, float *c)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
			c[(size_t)i * n + j] = bias ? bias[j] : 0.0f;
}

static int dnnl_run(struct matmul *mm, unsigned flags, int m, int n, int k,
		    const float *a, const float *b, const float *bias,
		    float *c)
{
	struct dnnl_mm *d = (struct dnnl_mm *)mm;
	/* oneDNN takes non-const handles; it only reads the inputs */
	void *ptr[NARGS] = { (void *)a, (void *)b, (void *)bias, c };
	static const int arg_id[NARGS] = { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS,
					   DNNL_ARG_BIAS, DNNL_ARG_DST };
	dnnl_exec_arg_t args[NARGS];
	struct prim *p;
	int nargs = 0;

	if (m < 0 || n < 0 || k < 0)
		return -1;
	if (k == 0)
		bias_only(m, n, bias, c);
	if (m == 0 || n == 0 || k == 0)
		return 0;
	p = prim_get(d, flags, m, n, k, bias != NULL);
	if (!p)
		return -1;
	for (int i = 0; i < NARGS; i++) {
		if (i == ARG_BIAS && !bias)
			continue;
		if (!ok(dnnl_memory_set_data_handle(p->mem[i], ptr[i]),
			"memory_set_data_handle"))
			return -1;
		args[nargs++] = (dnnl_exec_arg_t){ arg_id[i], p->mem[i] };
	}
	if (!ok(dnnl_primitive_execute(p->prim, d->stream, nargs, args),
		"primitive_execute") ||
	    !ok(dnnl_stream_wait(d->stream), "stream_wait"))
		return -1;
	return 0;
}

static void dnnl_destroy(struct matmul *mm)
{
	struct dnnl_mm *d = (struct dnnl_mm *)mm;

	while (d->cache) {
		struct prim *p = d->cache;

		d->cache = p->next;
		prim_free(p);
	}
	if (d->stream)
		dnnl_stream_destroy(d->stream);
	if (d->engine)
		dnnl_engine_destroy(d->engine);
	free(d);
}

static const struct matmul_ops dnnl_ops = {
	.run = dnnl_run,
	.destroy = dnnl_destroy,
};

/*
 * This oneDNN runs its kernels on OpenMP threads, and has no call of its
 * own to set how many.  libgomp is loaded with it, so its
 * omp_set_num_threads is looked up there rather than linked (the build
 * knows nothing of OpenMP); it sets the count for the calling thread,
 * the one that runs the products.
 */
static void set_threads(int threads)
{
	void (*set)(int);

	if (threads <= 0)
		return;
	*(void **)&set = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
	if (set)
		set(threads);
}

struct matmul *matmul_dnnl_create(int threads)
{
	struct dnnl_mm *d = calloc(1, sizeof(*d));
	const dnnl_version_t *v = dnnl_version();

	if (!d)
		return NULL;
	d->base.ops = &dnnl_ops;
	d->base.name = d->name;
	snprintf(d->name, sizeof(d->name), "oneDNN %d.%d.%d", v->major,
		 v->minor, v->patch);
	set_threads(threads);
	if (!ok(dnnl_engine_create(&d->engine, dnnl_cpu, 0), "engine_create") ||
	    !ok(dnnl_stream_create(&d->stream, d->engine,
				   dnnl_stream_default_flags),
		"stream_create")) {
		dnnl_destroy(&d->base);
		return NULL;
	}
	return &d->base;
}
