/*
 * backend.c - struct shemb_mem_ops for host memory: every operation is cut
 * into tasks for the context's thread pool and runs the chosen kernels.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "cpu/convert.h"
#include "cpu/cpu.h"
#include "cpu/hostmem.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "lib/rowinit.h"

#define INIT_BLOCK_ROWS 1024
#define COPY_BLOCK_ROWS 256
#define WRITE_CHUNK_ROWS 65536

struct cpu {
	struct shemb__pool *pool;
	struct shemb__hostmem *hm;
	const struct shemb__kernels *k;
	char desc[128];
};

int shemb__cpu_create(struct shemb__pool *pool, const char *isa, void **out)
{
	struct cpu *be = calloc(1, sizeof(*be));
	int rc;

	if (!be)
		return SHEMB_ENOMEM;
	be->pool = pool;
	be->k = shemb__kernels_select(isa);
	if (!be->k) {
		free(be);
		return SHEMB_ENOTSUP;
	}
	rc = shemb__hostmem_create(&be->hm);
	if (rc) {
		free(be);
		return rc;
	}
	snprintf(be->desc, sizeof(be->desc), "cpu (%s kernels, %s, %d threads)",
		 be->k->isa, shemb__hostmem_describe(be->hm),
		 shemb__pool_nthreads(pool));
	*out = be;
	return 0;
}

void shemb__cpu_destroy(void *p)
{
	struct cpu *be = p;

	if (!be)
		return;
	shemb__hostmem_destroy(be->hm);
	free(be);
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static char *record(const struct shemb__store *s, int64_t id)
{
	return (char *)s->base + (size_t)id * s->stride;
}

/* ---- store ---- */

static int store_alloc(void *p, struct shemb__store *s)
{
	struct cpu *be = p;

	s->base = shemb__hostmem_alloc(be->hm, s->bytes);
	return s->base ? 0 : SHEMB_ENOMEM;
}

static void store_free(void *p, struct shemb__store *s)
{
	struct cpu *be = p;

	/* a table's rows, often gigabytes */
	shemb__hostmem_free_now(be->hm, s->base, s->bytes);
	s->base = NULL;
}

/* Zero the padding of a record and set its optimizer state, so a record's
 * every byte is defined. */
static void reset_record_tail(const struct shemb__store *s, char *rec,
			      float state_init)
{
	size_t row = shemb__row_bytes(s->dtype, s->dim);
	float *st = (float *)(rec + s->state_off);

	memset(rec + row, 0, s->state_off - row);
	for (int i = 0; i < s->nstate; i++)
		st[i] = state_init;
	memset(rec + s->state_off + (size_t)s->nstate * sizeof(float), 0,
	       s->stride - s->state_off - (size_t)s->nstate * sizeof(float));
}

struct init_task {
	struct cpu *be;
	struct shemb__store *s;
	const struct shemb__init_spec *spec;
	atomic_int rc;	/* set by any task that fails, read after the join */
};

static void init_block(void *arg, int64_t task)
{
	struct init_task *t = arg;
	const struct shemb__store *s = t->s;
	int64_t r0 = task * INIT_BLOCK_ROWS;
	int64_t nr = s->rows - r0 < INIT_BLOCK_ROWS ? s->rows - r0
						    : INIT_BLOCK_ROWS;
	float *vals = malloc((size_t)nr * (size_t)s->dim * sizeof(float));
	struct shemb__block dst = { record(s, r0), s->dtype, s->stride };
	struct shemb__block src = { vals, SHEMB_F32,
				    (size_t)s->dim * sizeof(float) };

	if (!vals) {
		atomic_store_explicit(&t->rc, SHEMB_ENOMEM,
				      memory_order_relaxed);
		return;
	}
	t->be->k->init_rows(t->spec, t->spec->row_base + r0, nr, s->dim,
			    vals);
	for (int64_t r = 0; r < nr; r++)
		reset_record_tail(s, record(s, r0 + r), t->spec->state_init);
	shemb__convert2d(t->be->k, dst, src, nr, s->dim);
	free(vals);
}

static int init_rows(void *p, struct shemb__store *s,
		     const struct shemb__init_spec *spec)
{
	struct init_task t = { p, s, spec, 0 };
	struct cpu *be = p;

	shemb__pool_run(be->pool, ceil_div(s->rows, INIT_BLOCK_ROWS),
			init_block, &t);
	return atomic_load_explicit(&t.rc, memory_order_relaxed);
}

/* ---- lookup ---- */

struct pool_task {
	const struct shemb__kernels *k;
	const struct shemb__pool_job *job;
	int64_t n, per_task;
};

static void pool_task_run(void *arg, int64_t task)
{
	struct pool_task *t = arg;
	int64_t b0 = task * t->per_task;
	int64_t b1 = b0 + t->per_task < t->n ? b0 + t->per_task : t->n;

	if (t->job->pooling == SHEMB_POOL_NONE)
		t->k->pool_ids(t->job, b0, b1);
	else
		t->k->pool_bags(t->job, b0, b1);
}

static int gather_pool(void *p, const struct shemb__pool_job *job)
{
	struct cpu *be = p;
	struct pool_task t = { be->k, job, 0, 0 };
	int64_t ntasks;

	t.n = job->pooling == SHEMB_POOL_NONE ? job->nids : job->nbags;
	if (t.n == 0)
		return 0;
	ntasks = shemb__pool_split(be->pool, t.n, 16);
	t.per_task = ceil_div(t.n, ntasks);
	shemb__pool_run(be->pool, ceil_div(t.n, t.per_task), pool_task_run,
			&t);
	return 0;
}

/* ---- backward ---- */

/* One kernel over a job's distinct rows, cut into tasks. */
struct unique_task {
	const struct shemb__kernels *k;
	const struct shemb__update_job *job;
	int64_t per_task;
	float *out;
	int flag;
	void (*run)(const struct unique_task *t, int64_t u0, int64_t u1);
};

static void unique_task_run(void *arg, int64_t task)
{
	struct unique_task *t = arg;
	int64_t u0 = task * t->per_task;
	int64_t u1 = u0 + t->per_task < t->job->nunique ? u0 + t->per_task
							: t->job->nunique;

	t->run(t, u0, u1);
}

static int per_unique(struct cpu *be, struct unique_task *t)
{
	int64_t n = t->job->nunique;

	if (n == 0)
		return 0;
	t->k = be->k;
	t->per_task = ceil_div(n, shemb__pool_split(be->pool, n, 16));
	shemb__pool_run(be->pool, ceil_div(n, t->per_task), unique_task_run,
			t);
	return 0;
}

static void run_update(const struct unique_task *t, int64_t u0, int64_t u1)
{
	t->k->update_rows(t->job, u0, u1);
}

static void run_coalesce(const struct unique_task *t, int64_t u0,
			 int64_t u1)
{
	t->k->coalesce_rows(t->job, u0, u1, t->out, t->flag);
}

static void run_squares(const struct unique_task *t, int64_t u0, int64_t u1)
{
	t->k->grad_squares(t->job, u0, u1, t->out, t->flag);
}

static int apply_updates(void *p, const struct shemb__update_job *job)
{
	struct unique_task t = { .job = job, .run = run_update };

	return per_unique(p, &t);
}

static int coalesce(void *p, const struct shemb__update_job *job, float *out,
		    int expand)
{
	struct unique_task t = { .job = job, .out = out, .flag = expand,
				 .run = run_coalesce };

	return per_unique(p, &t);
}

static int grad_squares(void *p, const struct shemb__update_job *job,
			float *out, int per_column)
{
	struct unique_task t = { .job = job, .out = out, .flag = per_column,
				 .run = run_squares };

	return per_unique(p, &t);
}

/* ---- rows in and out ---- */

struct copy_task {
	struct cpu *be;
	const struct shemb__store *s;
	int64_t n;
	const int64_t *ids;
	void *user;         /* read: out; write: staging */
	int dtype;          /* of the user's buffer */
	const void *in;     /* write only */
	int rc;
};

/* Task number task's rows, and a row's bytes in each format. */
struct copy_block {
	int64_t i0, nr;
	size_t ub, sb;      /* user's row, stored row */
};

static struct copy_block block_of(const struct copy_task *t, int64_t task)
{
	struct copy_block b;

	b.i0 = task * COPY_BLOCK_ROWS;
	b.nr = t->n - b.i0 < COPY_BLOCK_ROWS ? t->n - b.i0 : COPY_BLOCK_ROWS;
	b.ub = (size_t)t->s->dim * shemb__dtype_size(t->dtype);
	b.sb = shemb__row_bytes(t->s->dtype, t->s->dim);
	return b;
}

static void read_block(void *arg, int64_t task)
{
	struct copy_task *t = arg;
	const struct shemb__store *s = t->s;
	struct copy_block b = block_of(t, task);
	int64_t i0 = b.i0, nr = b.nr;
	size_t ub = b.ub, sb = b.sb;
	char *out = (char *)t->user + (size_t)i0 * ub;
	char *stage;

	if (t->dtype == s->dtype) {
		for (int64_t i = 0; i < nr; i++)
			memcpy(out + (size_t)i * ub, record(s, t->ids[i0 + i]),
			       ub);
		return;
	}
	stage = malloc((size_t)nr * sb);
	if (!stage) {
		t->rc = SHEMB_ENOMEM;
		return;
	}
	for (int64_t i = 0; i < nr; i++)
		memcpy(stage + (size_t)i * sb, record(s, t->ids[i0 + i]), sb);
	shemb__convert2d(t->be->k, (struct shemb__block){ out, t->dtype, ub },
			 (struct shemb__block){ stage, s->dtype, sb }, nr,
			 s->dim);
	free(stage);
}

static int read_rows(void *p, const struct shemb__store *s, int64_t n,
		     const int64_t *ids, void *out, int dtype)
{
	struct copy_task t = { p, s, n, ids, out, dtype, NULL, 0 };
	struct cpu *be = p;

	shemb__pool_run(be->pool, ceil_div(n, COPY_BLOCK_ROWS), read_block, &t);
	return t.rc;
}

/* Convert one block of the caller's rows into storage format. */
static void stage_block(void *arg, int64_t task)
{
	struct copy_task *t = arg;
	struct copy_block b = block_of(t, task);

	shemb__convert2d(t->be->k,
			 (struct shemb__block){ (char *)t->user + (size_t)b.i0
						* b.sb, t->s->dtype, b.sb },
			 (struct shemb__block){ (char *)t->in + (size_t)b.i0
						* b.ub, t->dtype, b.ub },
			 b.nr, t->s->dim);
}

/* Rows are staged in parallel, then stored in id order, so that a repeated
 * id ends with its last row. */
static int write_chunk(struct cpu *be, struct shemb__store *s, int64_t n,
		       const int64_t *ids, const void *in, int dtype,
		       const float *reset_state, void *stage)
{
	struct copy_task t = { be, s, n, ids, stage, dtype, in, 0 };
	size_t sb = shemb__row_bytes(s->dtype, s->dim);

	shemb__pool_run(be->pool, ceil_div(n, COPY_BLOCK_ROWS), stage_block,
			&t);
	if (t.rc)
		return t.rc;
	for (int64_t i = 0; i < n; i++) {
		char *rec = record(s, ids[i]);

		memcpy(rec, (char *)stage + (size_t)i * sb, sb);
		if (reset_state)
			memcpy(rec + s->state_off, reset_state,
			       (size_t)s->nstate * sizeof(float));
	}
	return 0;
}

static int write_rows(void *p, struct shemb__store *s, int64_t n,
		      const int64_t *ids, const void *in, int dtype,
		      const float *reset_state)
{
	struct cpu *be = p;
	size_t sb = shemb__row_bytes(s->dtype, s->dim);
	size_t ub = (size_t)s->dim * shemb__dtype_size(dtype);
	int64_t chunk = n < WRITE_CHUNK_ROWS ? n : WRITE_CHUNK_ROWS;
	void *stage;
	int rc = 0;

	if (n == 0)
		return 0;
	stage = shemb__hostmem_alloc(be->hm, (size_t)chunk * sb);
	if (!stage)
		return SHEMB_ENOMEM;
	for (int64_t i = 0; i < n && !rc; i += chunk) {
		int64_t m = n - i < chunk ? n - i : chunk;

		rc = write_chunk(be, s, m, ids + i,
				 (const char *)in + (size_t)i * ub, dtype,
				 reset_state, stage);
	}
	shemb__hostmem_free(be->hm, stage, (size_t)chunk * sb);
	return rc;
}

struct records_task {
	struct shemb__store *dst;
	const struct shemb__store *src;
	const int64_t *dst_at, *src_at;
	int64_t n;
};

static void records_block(void *arg, int64_t task)
{
	const struct records_task *t = arg;
	int64_t i0 = task * COPY_BLOCK_ROWS;
	int64_t i1 = i0 + COPY_BLOCK_ROWS < t->n ? i0 + COPY_BLOCK_ROWS : t->n;

	for (int64_t i = i0; i < i1; i++)
		memcpy(record(t->dst, t->dst_at ? t->dst_at[i] : i),
		       record(t->src, t->src_at ? t->src_at[i] : i),
		       t->src->stride);
}

static int copy_records(void *p, struct shemb__store *dst,
			const int64_t *dst_at, const struct shemb__store *src,
			const int64_t *src_at, int64_t n)
{
	struct records_task t = { dst, src, dst_at, src_at, n };
	struct cpu *be = p;

	shemb__pool_run(be->pool, ceil_div(n, COPY_BLOCK_ROWS), records_block,
			&t);
	return 0;
}

/* ---- conversion ---- */

struct convert_task {
	const struct shemb__kernels *k;
	struct shemb__block dst, src;
	int64_t rows;
	int cols;
};

static void convert_block(void *arg, int64_t task)
{
	struct convert_task *t = arg;
	int64_t r0 = task * COPY_BLOCK_ROWS;
	int64_t nr = t->rows - r0 < COPY_BLOCK_ROWS ? t->rows - r0
						    : COPY_BLOCK_ROWS;
	struct shemb__block d = t->dst, s = t->src;

	d.ptr = (char *)d.ptr + (size_t)r0 * d.stride;
	s.ptr = (char *)s.ptr + (size_t)r0 * s.stride;
	shemb__convert2d(t->k, d, s, nr, t->cols);
}

static int convert(void *p, void *dst, int dst_dtype, size_t dst_stride,
		   const void *src, int src_dtype, size_t src_stride,
		   int64_t rows, int cols)
{
	struct cpu *be = p;
	struct convert_task t = {
		be->k, { dst, dst_dtype, dst_stride },
		{ (void *)src, src_dtype, src_stride }, rows, cols
	};

	shemb__pool_run(be->pool, ceil_div(rows, COPY_BLOCK_ROWS),
			convert_block, &t);
	return 0;
}

/* ---- misc ---- */

static void *scratch_alloc(void *p, size_t bytes)
{
	struct cpu *be = p;

	return shemb__hostmem_alloc(be->hm, bytes);
}

static void scratch_free(void *p, void *ptr, size_t bytes)
{
	struct cpu *be = p;

	shemb__hostmem_free(be->hm, ptr, bytes);
}

static int synchronize(void *p)
{
	return 0; /* every CPU operation completes before it returns */
}

static const char *describe(void *p)
{
	return ((struct cpu *)p)->desc;
}

const struct shemb_mem_ops shemb__cpu_mem_ops = {
	.size = sizeof(struct shemb_mem_ops),
	.name = "cpu",
	.store_alloc = store_alloc,
	.store_free = store_free,
	.init_rows = init_rows,
	.gather_pool = gather_pool,
	.apply_updates = apply_updates,
	.coalesce = coalesce,
	.grad_squares = grad_squares,
	.convert = convert,
	.read_rows = read_rows,
	.write_rows = write_rows,
	.copy_records = copy_records,
	.scratch_alloc = scratch_alloc,
	.scratch_free = scratch_free,
	.synchronize = synchronize,
	.describe = describe,
};
