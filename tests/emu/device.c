/*
 * device.c - gpu/cuda.h on the host, for tests on machines without a GPU.
 *
 * "Device memory" is memory mapped for it alone and kept inaccessible
 * (PROT_NONE) except while a call of this file runs: the library or
 * gpu/backend.c touching device memory from the host faults here, as a
 * kernel given host memory faults on a GPU.  The kernels are the CPU
 * backend's, run on the device's stores: this emulation checks what
 * moves where (staging, tiers, the device paths of lib/ and gpu/backend.c),
 * not the CUDA kernels, which only a GPU can run.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shemb.h"
#include "gpu/cuda.h"
#include "gpu/gpu.h"
#include "tests/emu/emu.h"

struct shemb__cuda {
	const struct shemb__gpu_host *host;
	const struct shemb_mem_ops *cpu_ops;
	void *cpu;
	char name[64];
};

/* Every device allocation of the process, as on a real device. */
/* Memory of device 0, the context's, or of device 1, another GPU of the
 * host as the library sees it: never its to read. */
struct block {
	char *base;
	size_t len;
	int dev;
};

static struct {
	pthread_mutex_t lock;
	struct block *v;
	size_t n, cap;
	size_t used;         /* bytes mapped, at most CAPACITY */
	int depth;           /* calls of this file running */
} heap = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The device's memory: as on a real one, more cannot be had. */
#define CAPACITY ((size_t)2 << 30)

_Thread_local struct shemb__emu_open shemb__emu_next;

static void protect_all(int prot)
{
	for (size_t i = 0; i < heap.n; i++)
		if (mprotect(heap.v[i].base, heap.v[i].len, prot))
			abort();
}

void shemb__emu_enter(void)
{
	pthread_mutex_lock(&heap.lock);
	if (heap.depth++ == 0)
		protect_all(PROT_READ | PROT_WRITE);
	pthread_mutex_unlock(&heap.lock);
}

void shemb__emu_leave(void)
{
	pthread_mutex_lock(&heap.lock);
	if (--heap.depth == 0)
		protect_all(PROT_NONE);
	pthread_mutex_unlock(&heap.lock);
}

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return ((n ? n : 1) + pg - 1) / pg * pg;
}

static void *alloc_on(int dev, size_t bytes)
{
	size_t len = page_round(bytes);
	void *p = NULL;

	pthread_mutex_lock(&heap.lock);
	if (len > CAPACITY - heap.used)
		goto out;
	if (heap.n == heap.cap) {
		size_t cap = heap.cap ? 2 * heap.cap : 64;
		struct block *v = realloc(heap.v, cap * sizeof(*v));

		if (!v)
			goto out;
		heap.v = v;
		heap.cap = cap;
	}
	p = mmap(NULL, len, heap.depth ? PROT_READ | PROT_WRITE : PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		p = NULL;
		goto out;
	}
	heap.v[heap.n++] = (struct block){ p, len, dev };
	heap.used += len;
out:
	pthread_mutex_unlock(&heap.lock);
	return p;
}

void *shemb__emu_alloc(size_t bytes)
{
	return alloc_on(0, bytes);
}

void *shemb__emu_alloc_other(size_t bytes)
{
	return alloc_on(1, bytes);
}

size_t shemb__emu_live(void)
{
	size_t n;

	pthread_mutex_lock(&heap.lock);
	n = heap.n;
	pthread_mutex_unlock(&heap.lock);
	return n;
}

void shemb__emu_free(void *p)
{
	pthread_mutex_lock(&heap.lock);
	for (size_t i = 0; p && i < heap.n; i++) {
		if (heap.v[i].base != p)
			continue;
		munmap(p, heap.v[i].len);
		heap.used -= heap.v[i].len;
		heap.v[i] = heap.v[--heap.n];
		break;
	}
	if (heap.n == 0) {
		free(heap.v);
		heap.v = NULL;
		heap.cap = 0;
	}
	pthread_mutex_unlock(&heap.lock);
}

/* As shemb__cuda_is_device(): 1 when p lies in an allocation of the
 * context's device, 2 of the other one, else 0 (host memory). */
static int on_device(const void *p)
{
	const char *c = p;
	int kind = 0;

	pthread_mutex_lock(&heap.lock);
	for (size_t i = 0; c && i < heap.n && !kind; i++)
		if (c >= heap.v[i].base && c < heap.v[i].base + heap.v[i].len)
			kind = 1 + heap.v[i].dev;
	pthread_mutex_unlock(&heap.lock);
	return kind;
}

void shemb__emu_copy(void *dst, const void *src, size_t n)
{
	shemb__emu_enter();
	memmove(dst, src, n);
	shemb__emu_leave();
}

void shemb__emu_fill(void *dst, int byte, size_t n)
{
	shemb__emu_enter();
	memset(dst, byte, n);
	shemb__emu_leave();
}

int shemb__cuda_open(int dev, void *stream, struct shemb__cuda **out,
		     char *why, size_t len)
{
	const struct shemb__emu_open *o = &shemb__emu_next;
	struct shemb__cuda *c;

	(void)stream;
	*out = NULL;
	if (dev != 0 || !o->host) {
		snprintf(why, len, "no such device (the emulation has one)");
		return SHEMB_ENODEV;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return SHEMB_ENOMEM;
	c->host = o->host;
	c->cpu_ops = o->host->cpu_ops;
	if (o->host->cpu_create(o->pool, o->isa, &c->cpu)) {
		snprintf(why, len, "the emulated device has no CPU kernels");
		free(c);
		return SHEMB_EINTERNAL;
	}
	snprintf(c->name, sizeof(c->name), "emulated device 0 (host memory)");
	*out = c;
	return 0;
}

void shemb__cuda_close(struct shemb__cuda *c)
{
	if (!c)
		return;
	c->host->cpu_destroy(c->cpu);
	free(c);
}

const char *shemb__cuda_describe(struct shemb__cuda *c)
{
	return c->name;
}

int shemb__cuda_alloc(struct shemb__cuda *c, size_t bytes, void **p)
{
	(void)c;
	*p = shemb__emu_alloc(bytes);
	return *p ? 0 : SHEMB_ENOMEM;
}

void shemb__cuda_free(struct shemb__cuda *c, void *p)
{
	(void)c;
	shemb__emu_free(p);
}

/* Page-locked memory is host memory like any other here. */
int shemb__cuda_host_alloc(struct shemb__cuda *c, size_t bytes, void **p)
{
	(void)c;
	*p = malloc(bytes ? bytes : 1);
	return *p ? 0 : SHEMB_ENOMEM;
}

void shemb__cuda_host_free(struct shemb__cuda *c, void *p)
{
	(void)c;
	free(p);
}

int shemb__cuda_copy(struct shemb__cuda *c, void *dst, const void *src,
		     size_t n)
{
	(void)c;
	shemb__emu_copy(dst, src, n);
	return 0;
}

int shemb__cuda_sync(struct shemb__cuda *c)
{
	(void)c;
	return 0;
}

int shemb__cuda_is_device(struct shemb__cuda *c, const void *p)
{
	(void)c;
	return on_device(p);
}

int shemb__cuda_uuid(struct shemb__cuda *c, unsigned char uuid[16])
{
	(void)c;
	memcpy(uuid, "shemb emulation", 16);
	return 0;
}

/* pool.cu's check_kernel, one position at a time */
static void check_input(const struct shemb__pool_job *job, int64_t rows,
			int64_t bad[3])
{
	const int64_t *off = job->offsets;

	for (int64_t i = 0; i <= job->nbags && bad[0] < 0; i++) {
		bool ok = i == 0 ? off[i] == 0 : off[i] >= off[i - 1];

		if (!ok || (i == job->nbags ? off[i] != job->nids
					    : off[i] > job->nids))
			bad[0] = i;
	}
	for (int64_t i = 0; i < job->nids; i++) {
		if (bad[1] < 0 && (job->ids[i] < 0 || job->ids[i] >= rows))
			bad[1] = i;
		if (bad[2] < 0 && job->weights &&
		    !isfinite(job->weights[i]))
			bad[2] = i;
	}
}

int shemb__cuda_check(struct shemb__cuda *c, const struct shemb__pool_job *job,
		      int64_t rows, int64_t bad[3])
{
	(void)c;
	bad[0] = bad[1] = bad[2] = -1;
	if (!job->offsets) {
		bad[0] = job->nids ? 0 : -1;
		return 0;
	}
	shemb__emu_enter();
	check_input(job, rows, bad);
	shemb__emu_leave();
	return 0;
}

int shemb__cuda_pool(struct shemb__cuda *c, const struct shemb__pool_job *job)
{
	int rc;

	shemb__emu_enter();
	rc = c->cpu_ops->gather_pool(c->cpu, job);
	shemb__emu_leave();
	return rc;
}

int shemb__cuda_update(struct shemb__cuda *c,
		       const struct shemb__update_job *job, float *squares,
		       int per_column)
{
	int rc;

	shemb__emu_enter();
	if (squares)
		rc = c->cpu_ops->grad_squares(c->cpu, job, squares,
					      per_column);
	else
		rc = c->cpu_ops->apply_updates(c->cpu, job);
	shemb__emu_leave();
	return rc;
}

/* n contiguous records of s's layout at host, as a host store */
static struct shemb__store packed(const struct shemb__store *s, int64_t n,
				  const void *host)
{
	struct shemb__store h = *s;

	h.base = (void *)host;
	h.on_device = 0;
	h.rows = n;
	h.bytes = (size_t)n * s->stride;
	return h;
}

static int records(struct shemb__cuda *c, struct shemb__store *dst,
		   const int64_t *dst_at, const struct shemb__store *src,
		   const int64_t *src_at, int64_t n)
{
	int rc;

	shemb__emu_enter();
	rc = c->cpu_ops->copy_records(c->cpu, dst, dst_at, src, src_at, n);
	shemb__emu_leave();
	return rc;
}

int shemb__cuda_records_out(struct shemb__cuda *c,
			    const struct shemb__store *s, const int64_t *at,
			    int64_t n, void *host)
{
	struct shemb__store h = packed(s, n, host);

	return records(c, &h, NULL, s, at, n);
}

int shemb__cuda_records_in(struct shemb__cuda *c, struct shemb__store *s,
			   const int64_t *at, int64_t n, const void *host)
{
	struct shemb__store h = packed(s, n, host);

	return records(c, s, at, &h, NULL, n);
}

int shemb__cuda_records_dd(struct shemb__cuda *c, struct shemb__store *dst,
			   const int64_t *dst_at,
			   const struct shemb__store *src,
			   const int64_t *src_at, int64_t n)
{
	return records(c, dst, dst_at, src, src_at, n);
}

int shemb__cuda_rows_out(struct shemb__cuda *c, const struct shemb__store *s,
			 int64_t n, const int64_t *ids, void *host)
{
	int rc;

	shemb__emu_enter();
	rc = c->cpu_ops->read_rows(c->cpu, s, n, ids, host, s->dtype);
	shemb__emu_leave();
	return rc;
}

int shemb__cuda_rows_in(struct shemb__cuda *c, struct shemb__store *s,
			int64_t n, const int64_t *ids, const void *host,
			const float *reset_state)
{
	int rc;

	shemb__emu_enter();
	rc = c->cpu_ops->write_rows(c->cpu, s, n, ids, host, s->dtype,
				    reset_state);
	shemb__emu_leave();
	return rc;
}

/* gpu/backend.c calls this in a build with NCCL; the emulated device's
 * module offers no NCCL (its plugin table has no nccl_open), so the
 * library never gets here. */
int shemb__nccl_open(struct shemb__cuda *c, int nranks, int rank,
		     const void *id, int timeout_ms, void **comm, char *why,
		     size_t len)
{
	(void)c;
	(void)nranks;
	(void)rank;
	(void)id;
	(void)timeout_ms;
	*comm = NULL;
	snprintf(why, len, "the emulated device has no NCCL");
	return SHEMB_ENOTSUP;
}
