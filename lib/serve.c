/*
 * serve.c - versions of a read_only table's rows (serve.h) and
 * shemb_table_reload.
 */
#include "lib/serve.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/ckpt_io.h"
#include "lib/stepq.h"
#include "lib/table.h"

int shemb__serve_init(shemb_table *t)
{
	struct shemb__version *v;

	if (!shemb__read_only(t))
		return 0;
	v = calloc(1, sizeof(*v));
	if (!v)
		return SHEMB_ENOMEM;
	v->store = t->store;
	atomic_init(&v->readers, 0);
	atomic_store(&t->serving, v);
	return 0;
}

void shemb__serve_fini(shemb_table *t)
{
	struct shemb__version *v = atomic_exchange(&t->serving, NULL);

	while (v) {
		struct shemb__version *next = v->retired;

		free(v);
		v = next;
	}
}

struct shemb__version *shemb__serve_enter(shemb_table *t)
{
	for (;;) {
		struct shemb__version *v = atomic_load(&t->serving);

		atomic_fetch_add(&v->readers, 1);
		/* still current: a reload that swapped it meanwhile waits
		 * for this reader */
		if (atomic_load(&t->serving) == v)
			return v;
		atomic_fetch_sub(&v->readers, 1);
	}
}

void shemb__serve_leave(struct shemb__version *v)
{
	atomic_fetch_sub(&v->readers, 1);
}

/* Until no lookup reads v: they pool one call's bags, so not long. */
static void drain(struct shemb__version *v)
{
	for (int spins = 0; atomic_load(&v->readers) > 0; spins++) {
		struct timespec nap = { .tv_nsec = 50000 };

		if (spins < 100)
			sched_yield();
		else
			nanosleep(&nap, NULL);
	}
}

static int check_reload(shemb_table *t, const char *dir)
{
	if (!dir)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "dir is NULL");
	if (!shemb__read_only(t))
		return shemb__fail(t->ctx, SHEMB_EPERM, "table '%s' is not "
				   "read_only: only a serving table is "
				   "reloaded", t->name);
	if (shemb__distributed(t->ctx))
		return shemb__fail(t->ctx, SHEMB_ENOTSUP, "table '%s': a "
				   "reload across ranks is not supported",
				   t->name);
	return 0;
}

/* The new rows in a store of the table's layout. */
static int new_version(shemb_table *t, const char *dir,
		       const struct shemb__ckpt_manifest *m,
		       struct shemb__version **out)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__version *v = calloc(1, sizeof(*v));
	int rc;

	if (!v)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	pthread_rwlock_rdlock(&t->rows_lock);
	v->store = t->store;
	pthread_rwlock_unlock(&t->rows_lock);
	v->store.base = NULL;
	rc = shemb__budget_claim(ctx, t->name, "a second copy of its rows "
				 "for a reload", v->store.bytes,
				 v->store.on_device);
	if (rc) {
		free(v);
		return rc;
	}
	rc = t->store.bytes ? ctx->mem->store_alloc(ctx->be, &v->store) : 0;
	if (rc) {
		shemb__budget_release(ctx, v->store.bytes, v->store.on_device);
		free(v);
		return shemb__fail(ctx, rc, "table '%s': no memory for a "
				   "second copy of its rows", t->name);
	}
	atomic_init(&v->readers, 0);
	rc = shemb__ckpt_read_into(t, dir, m, &v->store);
	if (rc) {
		if (v->store.base)
			ctx->mem->store_free(ctx->be, &v->store);
		shemb__budget_release(ctx, v->store.bytes, v->store.on_device);
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/* Published; once the old version's readers are gone its rows are
 * freed (it stays, retired: see serve.h), and the reload's claim on the
 * budget goes with them.  The table's lock keeps out the calls that read
 * t->store (row reads, saves) meanwhile. */
static void publish(shemb_table *t, struct shemb__version *v,
		    uint64_t step)
{
	struct shemb__version *old;

	pthread_rwlock_wrlock(&t->rows_lock);
	old = atomic_load(&t->serving);
	v->retired = old;
	atomic_store(&t->serving, v);
	drain(old);
	t->store = v->store;
	t->step = step;
	shemb__ckpt_forget(t); /* every row changed: the next save is whole */
	pthread_rwlock_unlock(&t->rows_lock);
	if (old->store.base)
		t->ctx->mem->store_free(t->ctx->be, &old->store);
	shemb__budget_release(t->ctx, old->store.bytes, old->store.on_device);
	old->store.base = NULL;
}

SHEMB_API int shemb_table_reload(shemb_table *t, const char *dir)
{
	struct shemb__ckpt_manifest m = { 0 };
	struct shemb__version *v = NULL;
	int rc;

	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	rc = shemb__stepq_drain(t->ctx);
	if (!rc)
		rc = check_reload(t, dir);
	if (!rc)
		rc = shemb__ckpt_read_manifest(t->ctx, dir, &m);
	if (!rc)
		rc = shemb__ckpt_same_table(t, &m);
	if (!rc)
		rc = new_version(t, dir, &m, &v);
	if (!rc)
		publish(t, v, m.step);
	shemb__ckpt_manifest_free(&m);
	return rc;
}
