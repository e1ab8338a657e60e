/*
 * lookup.c - shemb_lookup: check, plan (unless NO_GRAD), gather and pool.
 *
 * Plans of every table of the call are built before any output is written
 * and stored only when the whole call succeeds, so a failed call leaves
 * each table's last plan as it was.
 */
#include "lib/internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/dist.h"
#include "lib/plan.h"
#include "lib/parts.h"
#include "lib/serve.h"
#include "lib/step.h"
#include "lib/stepq.h"

static void add_shared_time(struct shemb__step *st, uint64_t ns)
{
	int64_t total = 0;

	for (int i = 0; i < st->n; i++)
		total += st->bags[i].nids + 1;
	for (int i = 0; i < st->n; i++)
		SHEMB__STAT_ADD(st->bags[i].table, validate_ns,
				ns * (uint64_t)(st->bags[i].nids + 1) /
					(uint64_t)total);
}

static struct shemb__plan *take_spare(shemb_table *t)
{
	struct shemb__plan *p;

	pthread_mutex_lock(&t->plan_lock);
	p = t->spare;
	t->spare = NULL;
	pthread_mutex_unlock(&t->plan_lock);
	return p;
}

/* Keep plan as the table's current one; the one it replaces is recycled. */
static void commit_plan(shemb_table *t, struct shemb__plan *plan)
{
	struct shemb__plan *old, *drop = NULL;

	pthread_mutex_lock(&t->plan_lock);
	old = t->plan;
	t->plan = plan;
	if (old) {
		drop = t->spare;
		t->spare = old;
	}
	pthread_mutex_unlock(&t->plan_lock);
	shemb__plan_free(t->ctx, drop);
}

static void give_back(shemb_table *t, struct shemb__plan *plan)
{
	struct shemb__plan *drop = plan;

	pthread_mutex_lock(&t->plan_lock);
	if (!t->spare) {
		t->spare = plan;
		drop = NULL;
	}
	pthread_mutex_unlock(&t->plan_lock);
	shemb__plan_free(t->ctx, drop);
}

static int build_plans(struct shemb__step *st, struct shemb__plan **plans)
{
	for (int g = 0; g < st->ngroups; g++) {
		struct shemb__group *grp = &st->groups[g];
		uint64_t t0 = shemb__now_ns();
		int rc;

		plans[g] = take_spare(grp->table);
		if (st->direct)
			rc = shemb__dplan_build(grp->table, grp->nsets,
						grp->sets, &plans[g]);
		else
			rc = shemb__plan_build(grp->table, grp->nsets,
					       grp->sets, &plans[g]);
		if (rc)
			return shemb__fail(st->ctx, rc,
					   "table '%s': the step plan of %d "
					   "sets failed: %s", grp->table->name,
					   grp->nsets,
					   st->direct ? st->ctx->mem->describe(
								st->ctx->be)
						      : "no memory");
		if (st->kind != SHEMB__DIST_LOOKUP)
			continue; /* reads and prefetches count in no
				   * statistics but the tier's */
		grp->counted.plan_ns += shemb__now_ns() - t0;
		grp->counted.unique_ids += (uint64_t)plans[g]->nunique;
	}
	return 0;
}

/* The pooling of set b from store, as the set gives it (ids, weights). */
static struct shemb__pool_job set_job(const struct shemb_bags *b,
				      const struct shemb__store *store,
				      int in_mem)
{
	return (struct shemb__pool_job){
		.store = store,
		.pooling = b->pooling,
		.nbags = b->nbags,
		.nids = b->nids,
		.offsets = b->offsets,
		.ids = b->ids,
		.weights = b->weights,
		.out_mem = b->mem,
		.in_mem = in_mem,
	};
}

int shemb__pool_group(struct shemb__step *st, struct shemb__group *grp,
		      const struct shemb__plan *plan, float *const *out,
		      const struct shemb__store *store, const int64_t *rows_of)
{
	shemb_table *t = grp->table;
	uint64_t t0 = shemb__now_ns();
	int64_t base = 0; /* without a plan: the sets' ids in call order */

	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb_bags *b = grp->sets[s];
		const struct shemb__plan_set *ps = plan ? &plan->sets[s] : NULL;
		struct shemb__pool_job job = set_job(b, store, st->direct
							       ? SHEMB_MEM_DEVICE
							       : SHEMB_MEM_HOST);
		int rc;

		if (rows_of)
			job.ids = rows_of + (ps ? ps->pos_base : base);
		job.out = out[grp->index[s]];
		if (ps && b->pooling == SHEMB_POOL_MAX)
			job.argmax = (plan->on_device ? plan->dev.argmax
						      : plan->argmax) +
				     ps->argmax_off;
		job.pos_base = ps ? ps->pos_base : 0;
		rc = t->ctx->mem->gather_pool(t->ctx->be, &job);

		base += b->nids;
		if (rc)
			return shemb__fail(st->ctx, rc, "table '%s': lookup "
					   "failed in the backend", t->name);
		if (shemb__step_reads(st))
			continue; /* a read counts in no statistics */
		grp->counted.lookups++;
		grp->counted.bags += (uint64_t)b->nbags;
		grp->counted.ids += (uint64_t)b->nids;
	}
	if (!shemb__step_reads(st))
		grp->counted.pool_ns += shemb__now_ns() - t0;
	return 0;
}

/* The call's statistics (each group's counted) into its tables', if it
 * succeeded (rc 0). */
static void commit_counts(struct shemb__step *st, int rc)
{
	for (int g = 0; g < st->ngroups; g++) {
		struct shemb__lookup_counts *c = &st->groups[g].counted;
		shemb_table *t = st->groups[g].table;

		if (!rc) {
			SHEMB__STAT_ADD(t, lookups, c->lookups);
			SHEMB__STAT_ADD(t, bags, c->bags);
			SHEMB__STAT_ADD(t, ids, c->ids);
			SHEMB__STAT_ADD(t, unique_ids, c->unique_ids);
			SHEMB__STAT_ADD(t, plan_ns, c->plan_ns);
			SHEMB__STAT_ADD(t, pool_ns, c->pool_ns);
		}
		memset(c, 0, sizeof(*c));
	}
}

/* A lookup without a plan of a table with a device tier: its ids, all
 * sets in call order, acquired as they are (the tier finds the distinct
 * rows by hashing, cheaper than a plan's sort). */
/* The ids of grp's sets in call order: the first set's own when it is
 * the only one, else a copy into *all (to free); NULL without memory. */
static const int64_t *group_ids(struct shemb__step *st,
				const struct shemb__group *grp, int64_t *n,
				int64_t **all)
{
	*n = 0;
	*all = NULL;
	if (grp->nsets == 1) {
		*n = grp->sets[0]->nids;
		return grp->sets[0]->ids;
	}
	for (int s = 0; s < grp->nsets; s++)
		*n += grp->sets[s]->nids;
	*all = malloc(((size_t)*n + 1) * sizeof(**all));
	if (!*all) {
		shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
		return NULL;
	}
	*n = 0;
	for (int s = 0; s < grp->nsets; s++)
		for (int64_t i = 0; i < grp->sets[s]->nids; i++)
			(*all)[(*n)++] = grp->sets[s]->ids[i];
	return *all;
}

static int pool_unplanned(struct shemb__step *st,
			  struct shemb__group *grp, float *const *out)
{
	shemb_table *t = grp->table;
	struct shemb__rows_view v;
	int64_t *all, n;
	const int64_t *ids = group_ids(st, grp, &n, &all);
	int rc;

	if (!ids)
		return SHEMB_ENOMEM;
	rc = shemb__rows_acquire(t, n, ids, false, SHEMB__ROWS_LOOKUP, &v);
	if (!rc)
		rc = shemb__pool_group(st, grp, NULL, out, v.store, v.at);
	shemb__rows_release(t, &v);
	free(all);
	return rc;
}

/* A prefetch or announcement on one rank: the tier finds the distinct
 * rows by hashing, no plan needed. */
static int ahead_local(struct shemb__step *st,
		       const struct shemb__group *grp)
{
	int64_t *all, n;
	const int64_t *ids = group_ids(st, grp, &n, &all);
	int rc;

	if (!ids)
		return SHEMB_ENOMEM;
	rc = shemb__prefetch_rows(st, grp->table, n, ids, false);
	free(all);
	return rc;
}

/* A serving table's rows of the version current when the pooling began,
 * which a reload frees only once this reader left (serve.c). */
static int pool_serving(struct shemb__step *st,
			struct shemb__group *grp,
			const struct shemb__plan *plan, float *const *out)
{
	struct shemb__version *ver = shemb__serve_enter(grp->table);
	int rc = shemb__pool_group(st, grp, plan, out, &ver->store, NULL);

	shemb__serve_leave(ver);
	return rc;
}

int shemb__pool_local(struct shemb__step *st, struct shemb__group *grp,
		      const struct shemb__plan *plan, float *const *out)
{
	shemb_table *t = grp->table;
	struct shemb__rows_view v;
	int64_t *rows_of;
	int rc;

	if (shemb__read_only(t))
		return pool_serving(st, grp, plan, out);
	if (!shemb__tiered(t))
		return shemb__pool_group(st, grp, plan, out, &t->store, NULL);
	if (!plan)
		return pool_unplanned(st, grp, out);
	if (shemb__step_reads(st)) /* a read: one POOL_NONE set, any size */
		return shemb__tier_read(t, grp->sets[0]->nids,
					grp->sets[0]->ids, out[grp->index[0]],
					SHEMB_F32);
	rows_of = malloc(((size_t)plan->nids + 1) * sizeof(*rows_of));
	if (!rows_of)
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	rc = shemb__rows_acquire(t, plan->nunique, plan->unique, true,
				 shemb__lookup_use(st), &v);
	if (!rc) {
		shemb__plan_unique_of(plan, rows_of);
		for (int64_t p = 0; p < plan->nids; p++)
			rows_of[p] = v.at[rows_of[p]];
		rc = shemb__pool_group(st, grp, plan, out, v.store, rows_of);
	}
	shemb__rows_release(t, &v);
	free(rows_of);
	return rc;
}

int shemb__lookup_use(const struct shemb__step *st)
{
	if (shemb__step_reads(st))
		return SHEMB__ROWS_READ;
	return st->planned ? SHEMB__ROWS_PLANNED : SHEMB__ROWS_LOOKUP;
}

static int check_outputs(struct shemb__step *st, float *const *out)
{
	if (st->n > 0 && !out)
		return shemb__fail(st->ctx, SHEMB_EINVAL, "out is NULL");
	for (int i = 0; i < st->n; i++) {
		if (shemb__check_rows_out(st->ctx, &st->bags[i], i, out[i],
					  "out"))
			return SHEMB_EINVAL;
		if (st->bags[i].mem == SHEMB_MEM_DEVICE &&
		    shemb__check_device_ptr(st->ctx, out[i], i, "out"))
			return SHEMB_EINVAL;
	}
	return 0;
}

/*
 * Across ranks, every table needs its plan (the distinct ids to route),
 * planned or not, and the ranks meet even when this one's input failed
 * its checks (status), so that all fail together.
 */
/* Whether table g of a lookup keeps the plan built for it: a serving
 * table never does (no backward trains it), the others unless the
 * lookup asked for none. */
static bool keeps_plan(const struct shemb__step *st, int g)
{
	return st->planned && !shemb__read_only(st->groups[g].table);
}

/* A lookup asked for a plan keeps one unless every table of the call is
 * a serving table (shemb_table_reload(3)): then it is made as one
 * without. */
static bool plans_kept(const struct shemb__step *st, bool asked)
{
	for (int g = 0; asked && g < st->ngroups; g++)
		if (!shemb__read_only(st->groups[g].table))
			return true;
	return false;
}

static struct shemb__plan **alloc_plans(struct shemb__step *st, int *rc)
{
	struct shemb__plan **plans;

	if (*rc)
		return NULL;
	plans = calloc((size_t)st->ngroups + 1, sizeof(*plans));
	if (!plans)
		*rc = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	return plans;
}

/* The plans kept, the device tiers told (shemb__tier_lookup_settle) and
 * the call's statistics counted, once it is over.  Still under the
 * tables' locks: a backward, which holds them exclusively, never sees a
 * plan change under it. */
static void settle_plans(struct shemb__step *st, struct shemb__plan **plans,
			 int rc)
{
	commit_counts(st, rc);
	for (int g = 0; st->kind == SHEMB__DIST_LOOKUP && g < st->ngroups;
	     g++)
		shemb__tier_lookup_settle(st->groups[g].table, !rc,
					  &st->groups[g].begun);
	for (int g = 0; plans && g < st->ngroups; g++) {
		if (!plans[g])
			continue;
		if (rc || !keeps_plan(st, g))
			give_back(st->groups[g].table, plans[g]);
		else
			commit_plan(st->groups[g].table, plans[g]);
	}
	free(plans);
}

/* Device outputs are written once the lookup is done: across ranks the
 * rows are pooled on the host. */
static int lookup_across(struct shemb__step *st, struct shemb__plan **plans,
			 float *const *out, int rc, int kind)
{
	int was = shemb__traffic_prio(st->ctx, SHEMB_PRIO_LOOKUP);
	float **hout = (float **)out;

	if (!rc)
		rc = shemb__step_host_outs(st, out, &hout);
	rc = shemb__dist_lookup(st, plans, hout, rc, kind);
	if (!rc)
		rc = shemb__step_deliver_outs(st, out, hout);
	shemb__traffic_prio(st->ctx, was);
	return rc;
}

static int run_lookup(struct shemb__step *st, float *const *out,
		      bool planned, int status, int kind)
{
	bool dist = shemb__distributed(st->ctx);
	bool need_plans = planned || dist; /* tiers hash their rows */
	struct shemb__plan **plans = NULL;
	int rc = status;

	if (st->ngroups == 0 && !dist)
		return rc;
	planned = plans_kept(st, planned);
	st->planned = planned;
	st->kind = kind;
	if (need_plans)
		plans = alloc_plans(st, &rc);
	shemb__step_lock(st, false);
	for (int g = 0; kind == SHEMB__DIST_LOOKUP && g < st->ngroups; g++)
		if (keeps_plan(st, g))
			shemb__tier_plan_begin(st->groups[g].table,
					       &st->groups[g].begun);
	if (!rc && need_plans)
		rc = build_plans(st, plans);
	if (dist)
		rc = lookup_across(st, plans, out, rc, kind);
	for (int g = 0; !dist && !rc && g < st->ngroups; g++) {
		rc = shemb__dist_ahead(kind)
			     ? ahead_local(st, &st->groups[g])
			     : shemb__pool_local(st, &st->groups[g],
						 plans ? plans[g] : NULL, out);
		if (!rc)
			shemb__step_group_done(st, g);
	}
	settle_plans(st, plans, rc);
	shemb__step_unlock(st);
	return rc;
}

int shemb__lookup_then_begin(struct shemb__step *st, shemb_ctx *ctx,
			     const struct shemb__then *then)
{
	uint64_t t0 = shemb__now_ns();
	int rc;

	if (then->flags & ~SHEMB_LOOKUP_NO_GRAD)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "unknown lookup flags 0x%x", then->flags);
	rc = shemb__step_begin(st, ctx, then->n, then->bags);
	if (rc)
		return rc;
	st->parts = then->parts;
	st->planned = plans_kept(st, !(then->flags & SHEMB_LOOKUP_NO_GRAD));
	st->kind = SHEMB__DIST_LOOKUP;
	rc = check_outputs(st, then->out);
	if (!rc)
		add_shared_time(st, shemb__now_ns() - t0);
	else
		shemb__step_end(st);
	return rc;
}

struct shemb__plan **shemb__lookup_then_plans(struct shemb__step *st,
					      int *rc)
{
	struct shemb__plan **plans = alloc_plans(st, rc);

	if (!*rc)
		*rc = build_plans(st, plans);
	return plans;
}

void shemb__lookup_then_end(struct shemb__step *st,
			    struct shemb__plan **plans, int rc)
{
	settle_plans(st, plans, rc);
	shemb__step_end(st);
}

/*
 * A lookup of device bag sets on one rank, of tables whose rows are all
 * in device memory, reads the sets in place: the backend checks them
 * (the kernels would otherwise need host copies of every id), then
 * pools them; a training lookup also plans them on the device
 * (dplan.c).  The backward of such a lookup takes the same path.
 */
bool shemb__device_direct(shemb_ctx *ctx, int n,
			  const struct shemb_bags *bags, bool planned)
{
	size_t stride = bags ? bags->size : 0;

	if (n <= 0 || !ctx->mem->check_bags || shemb__distributed(ctx) ||
	    (planned && !shemb__dplan_possible(ctx)) ||
	    stride < offsetof(struct shemb_bags, mem) + sizeof(int))
		return false;
	for (int i = 0; i < n; i++) {
		const struct shemb_bags *b =
			(const void *)((const char *)bags + (size_t)i * stride);
		const shemb_table *t = b->table;

		if (b->size != stride || b->mem != SHEMB_MEM_DEVICE || !t ||
		    t->ctx != ctx || t->tier || !t->store.on_device ||
		    (planned && shemb__read_only(t)))
			return false;
	}
	return true;
}

static int bad_device_set(struct shemb__step *st, int i, const int64_t *bad)
{
	const struct shemb_bags *b = &st->bags[i];
	shemb_ctx *ctx = st->ctx;
	int64_t id = 0;

	if (bad[0] >= 0)
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: offsets[%lld] "
				   "breaks the CSR form (offsets start at 0, "
				   "never decrease and end at nids %lld)", i,
				   (long long)bad[0], (long long)b->nids);
	if (bad[1] >= 0) {
		ctx->mem->transfer(ctx->be, &id, b->ids + bad[1], sizeof(id));
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d] (table '%s') "
				   "ids[%lld]: id %lld outside [0, %lld)", i,
				   b->table->name, (long long)bad[1],
				   (long long)id,
				   (long long)b->table->attr.rows);
	}
	return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: weights[%lld] is "
			   "not finite", i, (long long)bad[2]);
}
static int check_device_sets(struct shemb__step *st)
{
	for (int i = 0; i < st->n; i++) {
		const struct shemb_bags *b = &st->bags[i];
		struct shemb__pool_job job = set_job(b, &b->table->store,
						     SHEMB_MEM_DEVICE);
		int64_t bad[3];
		int rc = st->ctx->mem->check_bags(st->ctx->be, &job,
						  b->table->attr.rows, bad);

		if (rc)
			return shemb__fail(st->ctx, rc, "bags[%d]: checking "
					   "device input failed: %s", i,
					   st->ctx->mem->describe(st->ctx->be));
		if (bad[0] >= 0 || bad[1] >= 0 || bad[2] >= 0)
			return bad_device_set(st, i, bad);
	}
	return 0;
}

static int lookup_direct(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			 float *const *out, bool planned,
			 struct shemb__parts *parts)
{
	struct shemb__plan **plans = NULL;
	struct shemb__step st;
	int rc = shemb__step_begin_direct(&st, ctx, n, bags);

	if (!rc)
		rc = check_outputs(&st, out);
	if (!rc && planned)
		plans = alloc_plans(&st, &rc);
	if (rc) {
		shemb__step_end(&st);
		return rc;
	}
	st.kind = SHEMB__DIST_LOOKUP;
	st.planned = planned;
	st.parts = parts;
	shemb__step_lock(&st, false);
	rc = check_device_sets(&st);
	if (!rc && planned)
		rc = build_plans(&st, plans);
	for (int g = 0; !rc && g < st.ngroups; g++) {
		struct shemb__group *grp = &st.groups[g];
		const struct shemb__plan *plan = plans ? plans[g] : NULL;

		/* a serving table takes no lock: its readers are counted */
		if (shemb__read_only(grp->table))
			rc = pool_serving(&st, grp, plan, out);
		else
			rc = shemb__pool_group(&st, grp, plan, out,
					       &grp->table->store, NULL);
		if (!rc)
			shemb__step_group_done(&st, g);
	}
	settle_plans(&st, plans, rc);
	shemb__step_unlock(&st);
	shemb__step_end(&st);
	return rc;
}

/* A backend's calls return once their work is done (on a GPU, once the
 * context's stream has run it), so what pool_group wrote is final; but
 * device outputs pooled on the host are written only at the end. */
void shemb__step_group_done(const struct shemb__step *st, int g)
{
	if (st->parts && !st->outs_staged)
		shemb__parts_mark(st->parts, st->groups[g].index,
				  st->groups[g].nsets);
}

/* Unknown flags: across ranks, this rank's part runs as a refusal, so
 * that the other ranks fail the step too (naming this rank) and every
 * rank stays in step. */
static int refuse_flags(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			float *const *out, unsigned flags)
{
	char why[256];
	int rc = shemb__fail(ctx, SHEMB_EINVAL, "unknown lookup flags 0x%x",
			     flags);

	if (!shemb__distributed(ctx))
		return rc;
	snprintf(why, sizeof(why), "%s", shemb_ctx_last_error(ctx));
	rc = shemb__lookup_refuse(ctx, n, bags, out, flags, SHEMB_EINVAL);
	/* a peer lost or a timeout says more than the refusal */
	if (rc == SHEMB_EPEER || rc == SHEMB_ETIMEDOUT)
		return rc;
	return shemb__fail(ctx, SHEMB_EINVAL, "%s", why);
}

int shemb__lookup_now(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
		      float *const *out, unsigned flags,
		      struct shemb__parts *parts)
{
	struct shemb__step st;
	uint64_t t0 = shemb__now_ns();
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	if (flags & ~SHEMB_LOOKUP_NO_GRAD)
		return refuse_flags(ctx, n, bags, out, flags);
	if (shemb__device_direct(ctx, n, bags, !(flags & SHEMB_LOOKUP_NO_GRAD)))
		return lookup_direct(ctx, n, bags, out,
				     !(flags & SHEMB_LOOKUP_NO_GRAD), parts);
	rc = shemb__step_begin(&st, ctx, n, bags);
	if (rc && !shemb__distributed(ctx))
		return rc;
	st.parts = parts;
	if (!rc)
		rc = check_outputs(&st, out);
	if (!rc)
		add_shared_time(&st, shemb__now_ns() - t0);
	if (!rc || shemb__distributed(ctx))
		rc = run_lookup(&st, out, !(flags & SHEMB_LOOKUP_NO_GRAD), rc,
				SHEMB__DIST_LOOKUP);
	shemb__step_end(&st);
	return rc;
}

int shemb__lookup_refuse(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			 float *const *out, unsigned flags, int status)
{
	struct shemb__step st;
	int rc;

	flags &= SHEMB_LOOKUP_NO_GRAD; /* unknown ones: refused all the same */
	rc = shemb__step_begin(&st, ctx, n, bags);
	rc = run_lookup(&st, out, !(flags & SHEMB_LOOKUP_NO_GRAD),
			rc ? rc : status, SHEMB__DIST_LOOKUP);
	shemb__step_end(&st);
	return rc;
}

/* The lookup behind shemb_table_read_rows() of a table across ranks: st
 * holds one POOL_NONE set of the ids, out one fp32 buffer. */
int shemb__lookup_for_read(struct shemb__step *st, float *const *out,
			   int status)
{
	return run_lookup(st, out, false, status, SHEMB__DIST_READ);
}

/* shemb_prefetch() and shemb_announce(): st holds the checked bag sets */
int shemb__lookup_for_prefetch(struct shemb__step *st, int status,
			       bool announce)
{
	return run_lookup(st, NULL, false, status,
			  announce ? SHEMB__DIST_ANNOUNCE
				   : SHEMB__DIST_PREFETCH);
}

int shemb__prefetch_rows(const struct shemb__step *st, shemb_table *t,
			 int64_t n, const int64_t *rows, bool distinct)
{
	return st->kind == SHEMB__DIST_ANNOUNCE
		       ? shemb__tier_announce(t, n, rows, distinct)
		       : shemb__tier_prefetch(t, n, rows, distinct);
}

SHEMB_API int shemb_lookup(shemb_ctx *ctx, int n,
			   const struct shemb_bags *bags, float *const *out,
			   unsigned flags)
{
	shemb_request *req;
	int rc;

	if (!ctx || !shemb__stepq_busy(ctx))
		return shemb__lookup_now(ctx, n, bags, out, flags, NULL);
	rc = shemb_lookup_start(ctx, n, bags, out, flags, &req);
	return rc ? rc : shemb__request_finish(req);
}

SHEMB_API int shemb_lookup_start(shemb_ctx *ctx, int n,
				 const struct shemb_bags *bags,
				 float *const *out, unsigned flags,
				 shemb_request **req)
{
	return shemb__request_step(ctx, SHEMB__STEP_LOOKUP, n, bags,
				   (void *const *)out, flags, req);
}
