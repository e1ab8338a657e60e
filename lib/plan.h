/*
 * plan.h - the step plan of one table: its distinct ids and, for each, the
 * positions of the batch that use it.  Made by a lookup, used by the
 * backward of that lookup (and later by the exchange between ranks).
 */
#ifndef SHEMB_PLAN_H
#define SHEMB_PLAN_H

#include "lib/internal.h"

/* One bag set (a struct shemb_bags of the call) as the plan sees it. */
struct shemb__plan_set {
	int pooling;
	int weighted;
	int64_t nbags;        /* the caller's bags */
	int64_t nids;
	int64_t bag_base;     /* plan bag index of bag 0 */
	int64_t pos_base;     /* plan position of id 0 */
	int64_t plan_bags;    /* nbags, or nids for POOL_NONE */
	int64_t argmax_off;   /* MAX: offset of its [nbags][dim] in argmax */
	int64_t offsets_off;  /* where its nbags + 1 offsets are in offsets */
};

struct shemb__plan {
	int nsets;
	struct shemb__plan_set *sets;
	int64_t nids;         /* positions, all sets together */
	int64_t nbags;        /* plan bags, all sets together */
	int64_t nunique;
	int64_t *unique;      /* distinct ids, ascending */
	int32_t *seg;         /* nunique + 1 */
	int32_t *pos;         /* positions grouped by id, ascending in a group */
	int32_t *bag_of;      /* plan bag of each position */
	int32_t *argmax;      /* MAX sets: position giving each output value */
	int64_t nargmax;
	int64_t *ids;         /* the lookup's ids and offsets, all sets, for */
	int64_t *offsets;     /* the backward to check its bags against */
	int64_t noffsets;

	/* capacities, so a recycled plan reuses its buffers */
	int cap_sets;
	int64_t cap_ids, cap_argmax, cap_offsets;
	struct shemb__route *route; /* the exchange between ranks (dist.h) */
	uint64_t *keys;       /* id << pos_bits | position: sort buffers */
	uint64_t *keys_tmp;
	int pos_bits;

	/* A device plan (dplan.c): the arrays above that the backward
	 * reads, in device memory instead, in one block of dev_cap bytes
	 * (kept when the plan is recycled); the host arrays are unused. */
	bool on_device;
	struct {
		int64_t *ids, *offsets, *unique;
		int32_t *seg, *pos, *bag_of, *argmax;
	} dev;
	void *dev_block;
	size_t dev_cap;
};

/* Most ids of a table of `rows` rows that one call may hold: each id and
 * its position must pack into 64 bits (2^31 - 1 for tables up to 2^33
 * rows, 2^24 at 2^40 rows). */
int64_t shemb__plan_max_ids(int64_t rows);

/* Build the plan of the bag sets `sets` (all of one table) into *plan,
 * reusing (*plan)'s buffers when it is not NULL. */
int shemb__plan_build(shemb_table *t, int nsets,
		      const struct shemb_bags *const *sets,
		      struct shemb__plan **plan);

void shemb__plan_free(shemb_ctx *ctx, struct shemb__plan *plan);

/* The layout of the sets in the plan (plan_set), without their arrays;
 * plan->sets has room for nsets.  Counts of ids, bags, argmax values
 * and offsets come out in plan. */
void shemb__plan_describe(struct shemb__plan *p, int dim, int nsets,
			  const struct shemb_bags *const *sets);
/* Room for nsets sets in plan->sets. */
int shemb__plan_reserve_sets(struct shemb__plan *p, int nsets);
/* Room for the arrays of the plan as described. */
int shemb__plan_reserve(shemb_ctx *ctx, struct shemb__plan *p);

/* dplan.c: a plan of bag sets in device memory, made on the device;
 * the same reuse of *plan as plan_build.  Its sets' arrays must be
 * checked first. */
bool shemb__dplan_possible(const shemb_ctx *ctx);
int shemb__dplan_build(shemb_table *t, int nsets,
		       const struct shemb_bags *const *sets,
		       struct shemb__plan **plan);
void shemb__dplan_release(shemb_ctx *ctx, struct shemb__plan *plan);
/* A device plan made a host plan, for a backward of host sets. */
int shemb__dplan_to_host(shemb_ctx *ctx, struct shemb__plan *plan);

/* Each position's index in plan->unique, into out[plan->nids]. */
void shemb__plan_unique_of(const struct shemb__plan *plan, int64_t *out);


#endif
