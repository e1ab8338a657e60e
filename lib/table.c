/*
 * table.c - create and destroy tables, their row layout, their attributes.
 */
#define _GNU_SOURCE
#include "lib/internal.h"
#include "lib/ckpt_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/dist.h"
#include "lib/plan.h"
#include "lib/serve.h"
#include "lib/rowinit.h"
#include "lib/table.h"
#include "lib/tier.h"
#include "lib/stepq.h"

static size_t round_up(size_t x, size_t to)
{
	return (x + to - 1) / to * to;
}

static size_t next_pow2(size_t x)
{
	size_t p = 4;

	while (p < x)
		p *= 2;
	return p;
}

/* Optimizer state per record: none for an int8 table, which only
 * serves. */
static int state_floats(const struct shemb_table_attr *a, int ncols)
{
	return a->dtype == SHEMB_INT8 ? 0
				      : shemb__opt_state_floats(a->optimizer,
								ncols);
}

/*
 * A record is the row, then its optimizer state (fp32).  Records of up to
 * 32 bytes take a power of two, larger ones a multiple of 64: with the
 * store cache-line aligned, no record straddles more lines than it must.
 */
size_t shemb__record_bytes(const struct shemb_table_attr *a, int ncols)
{
	size_t raw = round_up(shemb__row_bytes(a->dtype, ncols), 4) +
		     (size_t)state_floats(a, ncols) * sizeof(float);

	return raw > 32 ? round_up(raw, 64) : next_pow2(raw);
}

static void layout(struct shemb__store *s, const struct shemb_table_attr *a,
		   const struct shemb__shard *sh)
{
	s->rows = sh->local_rows;
	s->dim = sh->ncols;
	s->dtype = a->dtype;
	s->nstate = state_floats(a, sh->ncols);
	s->state_off = round_up(shemb__row_bytes(a->dtype, sh->ncols), 4);
	s->stride = shemb__record_bytes(a, sh->ncols);
	s->bytes = (size_t)sh->local_rows * s->stride;
}

static struct shemb__init_spec init_spec(const struct shemb_table_attr *a,
					 const struct shemb__shard *sh)
{
	struct shemb__init_spec s = {
		.shard = sh,
		.kind = a->init,
		.seed = a->seed,
		.table_id = a->table_id,
		.state_init = a->optimizer == SHEMB_OPT_ADAM
				      ? 0.0f
				      : a->initial_accumulator,
	};

	switch (a->init) {
	case SHEMB_INIT_UNIFORM:
		s.a = a->init_low;
		s.b = a->init_high;
		break;
	case SHEMB_INIT_NORMAL:
		s.a = a->init_mean;
		s.b = a->init_std;
		break;
	case SHEMB_INIT_CONSTANT:
		s.a = a->init_value;
		break;
	}
	return s;
}

static char *copy_string(const char *src)
{
	size_t len = strlen(src) + 1;
	char *p = malloc(len);

	if (p)
		memcpy(p, src, len);
	return p;
}

/* Resolve the defaults that depend on the table: id, name, init range. */
static int resolve(shemb_table *t, const struct shemb_table_attr *a)
{
	shemb_ctx *ctx = t->ctx;
	char fallback[40];

	t->attr = *a;
	pthread_mutex_lock(&ctx->lock);
	if (t->attr.table_id < 0 && ctx->next_table_id > INT64_MAX) {
		pthread_mutex_unlock(&ctx->lock);
		return shemb__fail(ctx, SHEMB_EINVAL, "no automatic table_id "
				   "is left: a table of this context has "
				   "table_id INT64_MAX (give this one an id)");
	}
	if (t->attr.table_id < 0)
		t->attr.table_id = (int64_t)ctx->next_table_id;
	t->next_id_before = ctx->next_table_id;
	if ((uint64_t)t->attr.table_id + 1 > ctx->next_table_id)
		ctx->next_table_id = (uint64_t)t->attr.table_id + 1;
	t->next_id_after = ctx->next_table_id;
	t->serial = ctx->next_table_serial++;
	pthread_mutex_unlock(&ctx->lock);

	if (t->attr.init == SHEMB_INIT_UNIFORM && t->attr.init_low == 0 &&
	    t->attr.init_high == 0) {
		t->attr.init_high = (float)sqrt(1.0 / (double)t->attr.rows);
		t->attr.init_low = -t->attr.init_high;
	}
	snprintf(fallback, sizeof(fallback), "table%lld",
		 (long long)t->attr.table_id);
	t->name = copy_string(a->name ? a->name : fallback);
	t->attr.name = t->name;
	if (a->cold_path) {
		t->cold_path = copy_string(a->cold_path);
		t->attr.cold_path = t->cold_path;
	}
	if (!t->name || (a->cold_path && !t->cold_path))
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory for the table");
	return 0;
}

/*
 * Writers first: glibc's default rwlock lets a steady stream of lookups
 * (an inference server's) starve a backward or a row write for ever.  With
 * writers preferred, new lookups wait behind a waiting writer; no call
 * takes a table's lock twice, so this cannot deadlock.
 */
static void init_rows_lock(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(lock, &a);
	pthread_rwlockattr_destroy(&a);
}


/* This rank's rows: in host memory, or (a GPU context's table without a
 * device tier) in device memory, counted in the matching budget. */
static int alloc_rows(shemb_table *t)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__init_spec spec = init_spec(&t->attr, &t->shard);
	bool dev;
	int rc;

	layout(&t->store, &t->attr, &t->shard);
	if (t->attr.cold_path)
		return shemb__tier_create(t, &spec); /* rows in the file */
	dev = ctx->device_rows && !t->attr.cache_rows;
	t->store.on_device = dev;
	if (!dev && t->attr.host_mem_bytes &&
	    t->store.bytes > t->attr.host_mem_bytes)
		return shemb__fail(ctx, SHEMB_ENOMEM,
				   "table '%s' needs %zu bytes of host memory, "
				   "over its host_mem_bytes %llu (a cold_path "
				   "keeps its rows in a file)", t->name,
				   t->store.bytes,
				   (unsigned long long)t->attr.host_mem_bytes);
	rc = shemb__budget_claim(ctx, t->name, "its rows", t->store.bytes,
				 dev);
	if (rc || t->store.bytes == 0)
		return rc; /* with no bytes: no rows on this rank */
	rc = ctx->mem->store_alloc(ctx->be, &t->store);
	if (rc) {
		shemb__budget_release(ctx, t->store.bytes, dev);
		return shemb__fail(ctx, rc, "table '%s': cannot allocate %zu "
				   "bytes of %s memory: %s", t->name,
				   t->store.bytes, dev ? "device" : "host",
				   ctx->mem->describe(ctx->be));
	}
	rc = ctx->mem->init_rows(ctx->be, &t->store, &spec);
	if (rc)
		return shemb__fail(ctx, rc, "table '%s': initialising rows "
				   "failed", t->name);
	return shemb__tier_create(t, &spec);
}

static uint64_t mix_in(uint64_t h, uint64_t v)
{
	return shemb__mix64(h ^ v);
}

static uint64_t float_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Everything about a table that the ranks must agree on. */
static uint64_t fingerprint(const shemb_table *t)
{
	const struct shemb_table_attr *a = &t->attr;
	const float fl[] = { a->init_low, a->init_high, a->init_mean,
			     a->init_std, a->init_value, a->eps, a->beta1,
			     a->beta2, a->weight_decay, a->initial_accumulator,
			     a->lr };
	uint64_t h = mix_in(0, (uint64_t)a->rows);

	h = mix_in(h, (uint64_t)a->dim << 32 | (uint64_t)a->dtype);
	h = mix_in(h, (uint64_t)a->table_id);
	h = mix_in(h, a->seed);
	h = mix_in(h, (uint64_t)a->init << 32 | (uint64_t)a->optimizer);
	h = mix_in(h, (uint64_t)a->weight_decay_mode << 32 |
			      (uint32_t)a->wire_dtype);
	h = mix_in(h, (uint64_t)a->pool_at << 2 | (uint64_t)!!a->read_only << 1 |
			      (a->cache_rows > 0));
	h = mix_in(h, (uint64_t)t->shard.kind << 32 |
			      (uint32_t)t->shard.owner);
	for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++)
		h = mix_in(h, float_bits(fl[i]));
	return h;
}

/* Every rank's status of the creation so far, as shemb__dist_all_ok():
 * 0 when every rank got this far, else this rank's status or the first
 * failing rank's ("rank R failed to create table 'NAME' (...): ..."). */
static int created_so_far(shemb_ctx *ctx, const char *name, int status)
{
	char what[96];

	snprintf(what, sizeof(what), "to create table '%s'", name);
	return shemb__dist_all_ok(ctx, status, what);
}

/*
 * Creating a table with more than one rank is collective: every rank must
 * create the same tables with the same attributes in the same order (the
 * shard plans and the steps rely on it).  The ranks first share their
 * status (a rank whose own checks or allocations failed tells its code
 * and detail, so that every rank fails, not only the one that saw the
 * problem), then compare fingerprints of the attributes.
 */
static int same_on_every_rank(shemb_ctx *ctx, const shemb_table *t,
			      const char *name, int status)
{
	int world = ctx->attr.world_size, rc;
	uint64_t *all;

	rc = created_so_far(ctx, name, status);
	if (rc)
		return rc;
	all = calloc((size_t)world, 8);
	rc = shemb__allgather_word(ctx, fingerprint(t), all);
	for (int r = 1; !rc && r < world; r++)
		if (all[r] != all[0])
			rc = shemb__fail(ctx, SHEMB_EINVAL, "table '%s': rank "
					 "%d creates it unlike rank 0 (every "
					 "rank must create the same tables, "
					 "alike, in the same order)", name, r);
	free(all);
	return rc;
}

/* At the first table, every rank's host budget, for SHARD_AUTO. */
static int learn_budgets(shemb_ctx *ctx)
{
	uint64_t *all;
	int rc;

	if (ctx->rank_budget)
		return 0;
	all = calloc((size_t)ctx->attr.world_size, 8);
	rc = shemb__allgather_word(ctx, ctx->host_budget, all);
	if (rc)
		free(all);
	else
		ctx->rank_budget = all;
	return rc;
}

static void link_table(shemb_table *t)
{
	shemb_ctx *ctx = t->ctx;

	pthread_mutex_lock(&ctx->lock);
	t->created = ctx->tables_created++;
	t->next = ctx->tables;
	if (ctx->tables)
		ctx->tables->prev = t;
	ctx->tables = t;
	pthread_mutex_unlock(&ctx->lock);
}

static void unlink_table(shemb_table *t)
{
	shemb_ctx *ctx = t->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (t->prev)
		t->prev->next = t->next;
	else if (ctx->tables == t)
		ctx->tables = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&ctx->lock);
}

/* A failed create, with an automatic id or a given one, leaves the next
 * automatic id as it found it, unless another create moved it meanwhile:
 * ids keep following successful creations, alike on every rank (a rank
 * that refused the attributes never moved it). */
static void give_back_id(shemb_table *t)
{
	shemb_ctx *ctx = t->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (t->next_id_after && ctx->next_table_id == t->next_id_after)
		ctx->next_table_id = t->next_id_before;
	pthread_mutex_unlock(&ctx->lock);
}

static void table_free(shemb_table *t)
{
	shemb_ctx *ctx = t->ctx;

	shemb__tier_destroy(t);
	shemb__serve_fini(t);
	shemb__ckpt_forget(t);
	if (t->store.base) {
		ctx->mem->store_free(ctx->be, &t->store);
		shemb__budget_release(ctx, t->store.bytes,
				      t->store.on_device);
	}
	if (t->accounted)
		shemb__shard_account(ctx, &t->attr, &t->shard, false);
	shemb__plan_free(ctx, t->plan);
	shemb__plan_free(ctx, t->spare);
	shemb__stats_free(t);
	pthread_rwlock_destroy(&t->rows_lock);
	pthread_mutex_destroy(&t->plan_lock);
	pthread_mutex_destroy(&t->save_lock);
	free(t->name);
	free(t->cold_path);
	free(t);
}

static int copy_attr(shemb_ctx *ctx, const struct shemb_table_attr *attr,
		     struct shemb_table_attr *a)
{
	shemb_table_attr_init(a);
	if (shemb__copy_sized(a, sizeof(*a), attr, SHEMB__TABLE_ATTR_V1_SIZE))
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "attr->size %zu is not a struct "
				   "shemb_table_attr this library knows (set "
				   "it with shemb_table_attr_init)",
				   attr->size);
	return shemb__table_attr_check(ctx, a);
}

static int new_table(shemb_ctx *ctx, const struct shemb_table_attr *a,
		     shemb_table **out)
{
	shemb_table *t = calloc(1, sizeof(*t));
	int rc;

	*out = t;
	if (!t)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory for a table");
	t->ctx = ctx;
	init_rows_lock(&t->rows_lock);
	pthread_mutex_init(&t->plan_lock, NULL);
	pthread_mutex_init(&t->save_lock, NULL);
	rc = resolve(t, a);
	if (rc)
		return rc;
	if (shemb__stats_init(t))
		return shemb__fail(ctx, SHEMB_ENOMEM,
				   "no memory for the table");
	return shemb__shard_plan(ctx, &t->attr, &t->shard);
}

/* With more than one rank every step below meets the other ranks, even
 * after this rank failed: all of them fail together. */
SHEMB_API int shemb_table_create(shemb_ctx *ctx,
				 const struct shemb_table_attr *attr,
				 shemb_table **out)
{
	struct shemb_table_attr a;
	bool dist = ctx && shemb__distributed(ctx);
	const char *name;
	char where[96];
	shemb_table *t = NULL;
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	rc = shemb__stepq_drain(ctx); /* collective: keeps its place */
	if (rc)
		return rc;
	if (!attr || !out)
		rc = shemb__fail(ctx, SHEMB_EINVAL, "attr or table is NULL");
	else
		rc = copy_attr(ctx, attr, &a);
	if (!rc && a.dtype == SHEMB_INT8 &&
	    (dist || ctx->attr.device != SHEMB_DEVICE_CPU))
		rc = shemb__fail(ctx, SHEMB_ENOTSUP, "table '%s': SHEMB_INT8 "
				 "rows are served on one rank, on the CPU",
				 a.name ? a.name : "(unnamed)");
	if (out)
		*out = NULL;
	if (rc && !dist)
		return rc;
	if (dist) {
		int brc = learn_budgets(ctx);

		rc = rc ? rc : brc;
	}
	if (!rc)
		rc = new_table(ctx, &a, &t);
	name = t && t->name ? t->name : !rc && a.name ? a.name : "(unnamed)";
	if (dist)
		rc = same_on_every_rank(ctx, t, name, rc);
	if (!rc)
		rc = alloc_rows(t);
	if (!rc && shemb__serve_init(t))
		rc = shemb__fail(ctx, SHEMB_ENOMEM, "no memory for a table");
	if (dist)
		rc = created_so_far(ctx, name, rc); /* on every rank or none */
	if (rc) {
		if (t) {
			give_back_id(t);
			table_free(t);
		}
		return rc;
	}
	shemb__shard_account(ctx, &t->attr, &t->shard, true);
	t->accounted = true;
	link_table(t);
	shemb__shard_describe(&t->shard, where, sizeof(where));
	shemb__log(ctx, SHEMB_LOG_INFO,
		   "table '%s': %lld rows x %d, %s, %zu-byte records, %.1f "
		   "MiB here", t->name, (long long)t->attr.rows, t->attr.dim,
		   where, t->store.stride, (double)t->store.bytes / 1048576.0);
	*out = t;
	return 0;
}

SHEMB_API int shemb_table_destroy(shemb_table *t)
{
	if (!t)
		return 0;
	/* a stuck thread of started steps may still use the table */
	if (shemb__stepq_drain(t->ctx))
		return SHEMB_EPEER;
	unlink_table(t);
	table_free(t);
	return 0;
}

SHEMB_API int shemb_table_get_attr(const shemb_table *t,
				   struct shemb_table_attr *attr)
{
	size_t n;

	if (!t || !attr)
		return shemb__fail(t ? t->ctx : NULL, SHEMB_EINVAL,
				   "table or attr is NULL");
	if (attr->size < SHEMB__TABLE_ATTR_V1_SIZE)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "attr->size %zu is too small", attr->size);
	n = attr->size < sizeof(t->attr) ? attr->size : sizeof(t->attr);
	pthread_rwlock_rdlock((pthread_rwlock_t *)&t->rows_lock);
	memcpy((char *)attr + sizeof(size_t),
	       (const char *)&t->attr + sizeof(size_t), n - sizeof(size_t));
	pthread_rwlock_unlock((pthread_rwlock_t *)&t->rows_lock);
	return 0;
}

SHEMB_API int shemb_table_set_lr(shemb_table *t, float lr)
{
	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	if (shemb__stepq_drain(t->ctx)) /* steps started before: the old */
		return SHEMB_EPEER;
	if (!isfinite(lr) || lr < 0)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "table '%s': lr %g must be finite and >= 0",
				   t->name, (double)lr);
	if (shemb__read_only(t))
		return shemb__fail(t->ctx, SHEMB_EPERM, "table '%s' is "
				   "read_only", t->name);
	pthread_rwlock_wrlock(&t->rows_lock);
	t->attr.lr = lr;
	pthread_rwlock_unlock(&t->rows_lock);
	return 0;
}

SHEMB_API int shemb_ctx_plan_describe(const shemb_ctx *ctx, char *buf,
				      size_t len)
{
	const shemb_table *last;
	size_t need = 0;

	if (!ctx || (!buf && len))
		return shemb__fail(ctx, SHEMB_EINVAL, "ctx or buf is NULL");
	if (len)
		buf[0] = 0;
	pthread_mutex_lock((pthread_mutex_t *)&ctx->lock);
	last = ctx->tables;
	while (last && last->next)
		last = last->next;
	for (const shemb_table *t = last; t; t = t->prev) { /* oldest first */
		char where[96];
		int n;

		shemb__shard_describe(&t->shard, where, sizeof(where));
		n = snprintf(need < len ? buf + need : NULL,
			     need < len ? len - need : 0,
			     "table '%s' (id %lld): %lld rows x %d, %s\n",
			     t->name, (long long)t->attr.table_id,
			     (long long)t->attr.rows, t->attr.dim, where);
		if (n > 0)
			need += (size_t)n;
	}
	pthread_mutex_unlock((pthread_mutex_t *)&ctx->lock);
	return need > INT32_MAX ? INT32_MAX : (int)need;
}
