/*
 * backend.c - struct shemb_mem_ops for a CUDA device.  Stores marked
 * on_device (tables without a device tier, and device tiers) live in
 * device memory and run the kernels of the .cu files; host stores (the
 * rows under a device tier, staging) and all host-side work (scratch
 * memory, conversions, coalescing host gradients) go to the library's
 * CPU backend, lent to this one.
 *
 * Record moves (the device tiers' loads and write-backs) run on a
 * second device context of the same device: a stream, staging and lock
 * of their own, so a tier's background loads overlap the kernels of
 * calls on other tables instead of waiting for them.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "gpu/cuda.h"
#include "gpu/gpu.h"
#include "gpu/pinned.h"

#define INIT_BLOCK_ROWS 65536
#define WRITE_CHUNK_ROWS 65536

struct gpu {
	const struct shemb__gpu_host *host;
	struct shemb__cuda *cuda;
	struct shemb__cuda *copy;       /* record moves */
	struct shemb__pinned *pinned;
	void *cpu;
	char desc[1664];
};

#define CPU (be->host->cpu_ops)

int shemb__gpu_backend_create(const struct shemb__gpu_host *host,
			      struct shemb__pool *pool, const char *isa,
			      int dev, void *stream, void **out, char *why,
			      size_t len)
{
	struct gpu *be = calloc(1, sizeof(*be));
	int rc;

	if (!be)
		return SHEMB_ENOMEM;
	be->host = host;
	rc = shemb__cuda_open(dev, stream, &be->cuda, why, len);
	if (!rc)
		rc = shemb__cuda_open(dev, NULL, &be->copy, why, len);
	if (!rc && !(be->pinned = shemb__pinned_create(be->cuda)))
		rc = SHEMB_ENOMEM;
	if (!rc) {
		rc = host->cpu_create(pool, isa, &be->cpu);
		if (rc)
			snprintf(why, len, "cannot set up its CPU side");
	}
	if (rc) {
		shemb__gpu_backend_destroy(be);
		return rc;
	}
	*out = be;
	return 0;
}

void shemb__gpu_backend_destroy(void *p)
{
	struct gpu *be = p;

	if (!be)
		return;
	shemb__pinned_destroy(be->pinned);
	shemb__cuda_close(be->copy);
	shemb__cuda_close(be->cuda);
	if (be->cpu)
		be->host->cpu_destroy(be->cpu);
	free(be);
}

static int store_alloc(void *p, struct shemb__store *s)
{
	struct gpu *be = p;

	if (!s->on_device)
		return CPU->store_alloc(be->cpu, s);
	return shemb__cuda_alloc(be->cuda, s->bytes, &s->base);
}

static void store_free(void *p, struct shemb__store *s)
{
	struct gpu *be = p;

	if (!s->on_device) {
		CPU->store_free(be->cpu, s);
		return;
	}
	shemb__cuda_free(be->cuda, s->base);
	s->base = NULL;
}

/* A host copy of up to n records of s, for staging.  Page-locked where
 * the cache gives it (up to SHEMB__PINNED_MAX bytes), so that the tiers'
 * loads and write-backs and the initial rows cross at the full speed of
 * the bus; else from the CPU side. */
struct twin {
	struct shemb__store h;
	bool pinned;
};

static int host_twin(struct gpu *be, const struct shemb__store *s, int64_t n,
		     struct twin *t)
{
	struct shemb__store *h = &t->h;
	size_t bytes;

	*h = *s;
	h->on_device = 0;
	h->rows = n;
	h->bytes = (size_t)n * s->stride;
	bytes = h->bytes ? h->bytes : 1;
	h->base = shemb__pinned_get(be->pinned, bytes);
	t->pinned = h->base != NULL;
	if (!h->base)
		h->base = CPU->scratch_alloc(be->cpu, bytes);
	return h->base ? 0 : SHEMB_ENOMEM;
}

static void host_twin_free(struct gpu *be, struct twin *t)
{
	size_t bytes = t->h.bytes ? t->h.bytes : 1;

	if (t->pinned)
		shemb__pinned_put(be->pinned, t->h.base, bytes);
	else
		CPU->scratch_free(be->cpu, t->h.base, bytes);
}

/* Initial records are made on the host (lib/rowinit.c, the same values
 * as every backend) a block at a time and copied up. */
static int init_rows(void *p, struct shemb__store *s,
		     const struct shemb__init_spec *spec)
{
	struct gpu *be = p;
	int64_t block = s->rows < INIT_BLOCK_ROWS ? s->rows : INIT_BLOCK_ROWS;
	struct twin t;
	int rc;

	if (!s->on_device)
		return CPU->init_rows(be->cpu, s, spec);
	if (s->rows == 0)
		return 0;
	rc = host_twin(be, s, block, &t);
	for (int64_t r = 0; !rc && r < s->rows; r += block) {
		struct shemb__init_spec sp = *spec;

		t.h.rows = s->rows - r < block ? s->rows - r : block;
		sp.row_base = spec->row_base + r;
		rc = CPU->init_rows(be->cpu, &t.h, &sp);
		if (!rc)
			rc = shemb__cuda_copy(be->cuda,
					      (char *)s->base +
						      (size_t)r * s->stride,
					      t.h.base,
					      (size_t)t.h.rows * s->stride);
	}
	if (t.h.base)
		host_twin_free(be, &t);
	return rc;
}

/* A host store pooled into device memory: pooled on the host, then
 * copied up. */
static int pool_host_to_device(struct gpu *be,
			       const struct shemb__pool_job *job)
{
	int64_t rows = job->pooling == SHEMB_POOL_NONE ? job->nids
						       : job->nbags;
	size_t bytes = (size_t)rows * (size_t)job->store->dim * sizeof(float);
	struct shemb__pool_job j = *job;
	int rc;

	j.out = CPU->scratch_alloc(be->cpu, bytes ? bytes : 1);
	j.out_mem = SHEMB_MEM_HOST;
	if (!j.out)
		return SHEMB_ENOMEM;
	rc = CPU->gather_pool(be->cpu, &j);
	if (!rc)
		rc = shemb__cuda_copy(be->cuda, job->out, j.out, bytes);
	CPU->scratch_free(be->cpu, j.out, bytes ? bytes : 1);
	return rc;
}

static int gather_pool(void *p, const struct shemb__pool_job *job)
{
	struct gpu *be = p;

	if (job->store->on_device)
		return shemb__cuda_pool(be->cuda, job);
	if (job->out_mem == SHEMB_MEM_DEVICE)
		return pool_host_to_device(be, job);
	return CPU->gather_pool(be->cpu, job);
}

static int apply_updates(void *p, const struct shemb__update_job *job)
{
	struct gpu *be = p;

	if (!job->store->on_device)
		return CPU->apply_updates(be->cpu, job);
	return shemb__cuda_update(be->cuda, job, NULL, 0);
}

/* Gradients are host memory and the store is not read. */
static int coalesce(void *p, const struct shemb__update_job *job, float *out,
		    int expand)
{
	struct gpu *be = p;

	return CPU->coalesce(be->cpu, job, out, expand);
}

static int grad_squares(void *p, const struct shemb__update_job *job,
			float *out, int per_column)
{
	struct gpu *be = p;

	if (!job->store->on_device)
		return CPU->grad_squares(be->cpu, job, out, per_column);
	return shemb__cuda_update(be->cuda, job, out, per_column);
}

static size_t row_bytes(const struct gpu *be, const struct shemb__store *s,
			int dtype)
{
	return (size_t)s->dim * be->host->dtype_size(dtype);
}

static int read_rows(void *p, const struct shemb__store *s, int64_t n,
		     const int64_t *ids, void *out, int dtype)
{
	struct gpu *be = p;
	size_t sb = row_bytes(be, s, s->dtype);
	void *tmp;
	int rc;

	if (!s->on_device)
		return CPU->read_rows(be->cpu, s, n, ids, out, dtype);
	if (dtype == s->dtype)
		return shemb__cuda_rows_out(be->cuda, s, n, ids, out);
	tmp = CPU->scratch_alloc(be->cpu, (size_t)n * sb + 1);
	if (!tmp)
		return SHEMB_ENOMEM;
	rc = shemb__cuda_rows_out(be->cuda, s, n, ids, tmp);
	if (!rc)
		rc = CPU->convert(be->cpu, out, dtype,
				  row_bytes(be, s, dtype), tmp, s->dtype, sb,
				  n, s->dim);
	CPU->scratch_free(be->cpu, tmp, (size_t)n * sb + 1);
	return rc;
}

struct id_at {
	int64_t id, at;
};

static int by_id_then_at(const void *a, const void *b)
{
	const struct id_at *x = a, *y = b;

	if (x->id != y->id)
		return (x->id > y->id) - (x->id < y->id);
	return (x->at > y->at) - (x->at < y->at);
}

/* Of a repeated id, the last row wins, as on the CPU: the positions of
 * the rows to write, one per distinct id, into keep; their count. */
static int64_t last_of_each(const int64_t *ids, int64_t n, struct id_at *tmp,
			    int64_t *keep)
{
	int64_t m = 0;

	for (int64_t i = 0; i < n; i++)
		tmp[i] = (struct id_at){ ids[i], i };
	qsort(tmp, (size_t)n, sizeof(*tmp), by_id_then_at);
	for (int64_t i = 0; i < n; i++)
		if (i + 1 == n || tmp[i + 1].id != tmp[i].id)
			keep[m++] = tmp[i].at;
	return m;
}

/* One chunk: the kept rows converted to the store's dtype, packed, with
 * their ids, then written. */
static int write_chunk(struct gpu *be, struct shemb__store *s, int64_t n,
		       const int64_t *ids, const char *in, int dtype,
		       const float *reset, char *stage, int64_t *sel_ids,
		       struct id_at *tmp, int64_t *keep)
{
	size_t ub = row_bytes(be, s, dtype), sb = row_bytes(be, s, s->dtype);
	int64_t m = last_of_each(ids, n, tmp, keep);
	int rc = 0;

	for (int64_t k = 0; k < m && !rc; k++) {
		sel_ids[k] = ids[keep[k]];
		rc = CPU->convert(be->cpu, stage + (size_t)k * sb, s->dtype, sb,
				  in + (size_t)keep[k] * ub, dtype, ub, 1,
				  s->dim);
	}
	if (!rc)
		rc = shemb__cuda_rows_in(be->cuda, s, m, sel_ids, stage, reset);
	return rc;
}

static int write_rows(void *p, struct shemb__store *s, int64_t n,
		      const int64_t *ids, const void *in, int dtype,
		      const float *reset_state)
{
	struct gpu *be = p;
	int64_t chunk = n < WRITE_CHUNK_ROWS ? n : WRITE_CHUNK_ROWS;
	size_t ub = row_bytes(be, s, dtype);
	char *stage;
	int64_t *sel, *keep;
	struct id_at *tmp;
	int rc = SHEMB_ENOMEM;

	if (!s->on_device)
		return CPU->write_rows(be->cpu, s, n, ids, in, dtype,
				       reset_state);
	if (n == 0)
		return 0;
	stage = malloc((size_t)chunk * row_bytes(be, s, s->dtype));
	sel = malloc((size_t)chunk * sizeof(*sel));
	keep = malloc((size_t)chunk * sizeof(*keep));
	tmp = malloc((size_t)chunk * sizeof(*tmp));
	if (stage && sel && keep && tmp)
		rc = 0;
	for (int64_t i = 0; i < n && !rc; i += chunk) {
		int64_t m = n - i < chunk ? n - i : chunk;

		rc = write_chunk(be, s, m, ids + i,
				 (const char *)in + (size_t)i * ub, dtype,
				 reset_state, stage, sel, tmp, keep);
	}
	free(stage);
	free(sel);
	free(keep);
	free(tmp);
	return rc;
}

/* Host records to a device store: packed on the host when they are not
 * already contiguous, then scattered on the device. */
static int records_up(struct gpu *be, struct shemb__store *dst,
		      const int64_t *dst_at, const struct shemb__store *src,
		      const int64_t *src_at, int64_t n)
{
	struct twin t;
	int rc;

	if (!src_at)
		return shemb__cuda_records_in(be->copy, dst, dst_at, n,
					      src->base);
	rc = host_twin(be, src, n, &t);
	if (!rc)
		rc = CPU->copy_records(be->cpu, &t.h, NULL, src, src_at, n);
	if (!rc)
		rc = shemb__cuda_records_in(be->copy, dst, dst_at, n,
					    t.h.base);
	if (t.h.base)
		host_twin_free(be, &t);
	return rc;
}

static int records_down(struct gpu *be, struct shemb__store *dst,
			const int64_t *dst_at, const struct shemb__store *src,
			const int64_t *src_at, int64_t n)
{
	struct twin t;
	int rc;

	if (!dst_at)
		return shemb__cuda_records_out(be->copy, src, src_at, n,
					       dst->base);
	rc = host_twin(be, src, n, &t);
	if (!rc)
		rc = shemb__cuda_records_out(be->copy, src, src_at, n,
					     t.h.base);
	if (!rc)
		rc = CPU->copy_records(be->cpu, dst, dst_at, &t.h, NULL, n);
	if (t.h.base)
		host_twin_free(be, &t);
	return rc;
}

static int copy_records(void *p, struct shemb__store *dst,
			const int64_t *dst_at, const struct shemb__store *src,
			const int64_t *src_at, int64_t n)
{
	struct gpu *be = p;

	if (n == 0)
		return 0;
	if (dst->stride != src->stride)
		return SHEMB_EINTERNAL;
	if (!dst->on_device && !src->on_device)
		return CPU->copy_records(be->cpu, dst, dst_at, src, src_at, n);
	if (dst->on_device && src->on_device)
		return shemb__cuda_records_dd(be->copy, dst, dst_at, src,
					      src_at, n);
	if (dst->on_device)
		return records_up(be, dst, dst_at, src, src_at, n);
	return records_down(be, dst, dst_at, src, src_at, n);
}

static int convert(void *p, void *dst, int dst_dtype, size_t dst_stride,
		   const void *src, int src_dtype, size_t src_stride,
		   int64_t rows, int cols)
{
	struct gpu *be = p;

	return CPU->convert(be->cpu, dst, dst_dtype, dst_stride, src, src_dtype,
			    src_stride, rows, cols);
}

static void *scratch_alloc(void *p, size_t bytes)
{
	struct gpu *be = p;

	return CPU->scratch_alloc(be->cpu, bytes);
}

static void scratch_free(void *p, void *ptr, size_t bytes)
{
	struct gpu *be = p;

	CPU->scratch_free(be->cpu, ptr, bytes);
}

static int synchronize(void *p)
{
	struct gpu *be = p;

	return shemb__cuda_sync(be->cuda);
}

static const char *describe(void *p)
{
	struct gpu *be = p;

	snprintf(be->desc, sizeof(be->desc),
		 "cuda: %s; record moves: %s; host rows: %s",
		 shemb__cuda_describe(be->cuda),
		 shemb__cuda_describe(be->copy), CPU->describe(be->cpu));
	return be->desc;
}

static int transfer(void *p, void *dst, const void *src, size_t bytes)
{
	struct gpu *be = p;

	return shemb__cuda_copy(be->cuda, dst, src, bytes);
}

static int mem_of(void *p, const void *ptr)
{
	struct gpu *be = p;

	static const int mem[] = { SHEMB_MEM_HOST, SHEMB_MEM_DEVICE,
				   SHEMB__MEM_OTHER_DEVICE };

	return mem[shemb__cuda_is_device(be->cuda, ptr)];
}

int shemb__gpu_uuid(void *p, unsigned char uuid[16])
{
	struct gpu *be = p;

	return shemb__cuda_uuid(be->cuda, uuid);
}

static int check_bags(void *p, const struct shemb__pool_job *job,
		      int64_t rows, int64_t bad[3])
{
	struct gpu *be = p;

	return shemb__cuda_check(be->cuda, job, rows, bad);
}

static void *host_alloc(void *p, size_t bytes)
{
	struct gpu *be = p;

	return shemb__pinned_get(be->pinned, bytes);
}

static void host_free(void *p, void *ptr, size_t bytes)
{
	struct gpu *be = p;

	shemb__pinned_put(be->pinned, ptr, bytes);
}

static void *device_alloc(void *p, size_t bytes)
{
	struct gpu *be = p;
	void *d = NULL;

	return shemb__cuda_alloc(be->cuda, bytes, &d) ? NULL : d;
}

static void device_free(void *p, void *ptr)
{
	struct gpu *be = p;

	shemb__cuda_free(be->cuda, ptr);
}

static int plan_device(void *p, const struct shemb__dplan_job *job,
		       int64_t *nunique)
{
	struct gpu *be = p;

	return shemb__cuda_plan(be->cuda, job, nunique);
}

static int device_differ(void *p, const void *a, const void *b, size_t n,
			 int *differ)
{
	struct gpu *be = p;

	return shemb__cuda_differ(be->cuda, a, b, n, differ);
}

static int device_finite(void *p, const float *f, int64_t n, int64_t *bad)
{
	struct gpu *be = p;

	return shemb__cuda_finite(be->cuda, f, n, bad);
}

#ifdef HAVE_NCCL
int shemb__gpu_nccl_open(void *p, int nranks, int rank, const void *id,
			 int timeout_ms, void **comm, char *why, size_t len)
{
	struct gpu *be = p;

	return shemb__nccl_open(be->cuda, nranks, rank, id, timeout_ms, comm,
				why, len);
}
#endif

const struct shemb_mem_ops shemb__gpu_mem_ops = {
	.size = sizeof(struct shemb_mem_ops),
	.name = "cuda",
	.store_alloc = store_alloc,
	.store_free = store_free,
	.init_rows = init_rows,
	.gather_pool = gather_pool,
	.apply_updates = apply_updates,
	.coalesce = coalesce,
	.grad_squares = grad_squares,
	.read_rows = read_rows,
	.write_rows = write_rows,
	.copy_records = copy_records,
	.convert = convert,
	.scratch_alloc = scratch_alloc,
	.scratch_free = scratch_free,
	.synchronize = synchronize,
	.describe = describe,
	.transfer = transfer,
	.mem_of = mem_of,
	.check_bags = check_bags,
	.host_alloc = host_alloc,
	.host_free = host_free,
	.device_alloc = device_alloc,
	.device_free = device_free,
	.plan_device = plan_device,
	.device_differ = device_differ,
	.device_finite = device_finite,
};
