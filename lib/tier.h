/*
 * tier.h - tiered row storage: a device tier of row slots over the host
 * rows, or over a file (the cold tier) for tables larger than host memory.
 *
 * Kernels only ever see one store and record numbers in it.  A table
 * without a device tier hands out its host store and the rows themselves;
 * a table with one makes the rows a call needs resident first, pins them
 * while the call runs, and hands out the device store and slot numbers.
 * The row-to-slot index, the eviction order and the dirty bits live on the
 * host, in lib/, for every backend.
 */
#ifndef SHEMB_TIER_H
#define SHEMB_TIER_H

#include "lib/internal.h"

struct shemb__tier;

/* The plan a planned lookup began in a table's device tier, and whether
 * the one before it was still open: what the call gives back if it
 * fails (tier_plan.c).  plan 0: it began none. */
struct shemb__plan_begun {
	uint64_t plan;
	bool was_open;
};

/* How a call uses the rows it acquires. */
enum shemb__rows_use {
	SHEMB__ROWS_READ = 0,   /* lookups and reads */
	SHEMB__ROWS_WRITE = 1,  /* updates and writes: dirty at release */
	SHEMB__ROWS_LOOKUP = 2, /* a lookup: READ (and counts the hits
				 * on rows a prefetch loaded) */
	SHEMB__ROWS_PREFETCH = 3,
	SHEMB__ROWS_PLANNED = 4 /* a lookup that keeps its plan: its rows
				 * go last until the plan's backward */
};

/* The rows of one kernel call, as the kernel addresses them. */
struct shemb__rows_view {
	struct shemb__store *store;
	const int64_t *at;      /* per requested row: its record in store */
	int64_t *owned;         /* what `at` points to, when allocated */
	int64_t *slots;         /* distinct pinned slots (device tier) */
	int64_t nslots;
	int use;
};

/* tier.c */
int shemb__tier_create(shemb_table *t, const struct shemb__init_spec *spec);
void shemb__tier_destroy(shemb_table *t);

/*
 * Make local rows rows[0 .. n) usable by a kernel and keep them so until
 * shemb__rows_release() (which every acquire needs, failed or not).
 * `distinct`: the caller knows rows has no repeats.  Without a device
 * tier it costs nothing.  Fails with SHEMB_ENOMEM (more distinct rows than
 * slots) or SHEMB_EIO (the cold tier failed), detail recorded; no row's
 * value is lost or changed.
 */
int shemb__rows_acquire(shemb_table *t, int64_t n, const int64_t *rows,
			bool distinct, int use, struct shemb__rows_view *v);
void shemb__rows_release(shemb_table *t, struct shemb__rows_view *v);

/* The rows of v, acquired to be written, were not (the call failed
 * first): released, they are not marked changed, and no write-back
 * follows for them. */
static inline void shemb__rows_unwritten(struct shemb__rows_view *v)
{
	if (v->use == SHEMB__ROWS_WRITE)
		v->use = SHEMB__ROWS_READ;
}

/* Load what fits of local rows rows[0 .. n) (`distinct`: without
 * repeats); under SHEMB_CACHE_LOOKAHEAD, unless the caller announces its
 * steps itself, it also announces this one. */
int shemb__tier_prefetch(shemb_table *t, int64_t n, const int64_t *rows,
			 bool distinct);

/* tier_rows.c: read_rows / write_rows of the backend on local rows,
 * through the device tier in passes when the table has one (any n) */
int shemb__tier_read(shemb_table *t, int64_t n, const int64_t *rows,
		     void *out, int dtype);
int shemb__tier_write(shemb_table *t, int64_t n, const int64_t *rows,
		      const void *in, int dtype, const float *reset_state);

/* Whole records (row and optimizer state, in the table's record layout,
 * t->store.stride apart) of local rows rows[0 .. n) into buf, or (write)
 * from it, through the device tier in passes (`distinct`: rows has no
 * repeats). */
int shemb__tier_records(shemb_table *t, int64_t n, const int64_t *rows,
			void *buf, bool write, bool distinct);

/* Queue the rows of a coming step (any order, `distinct` as above) for
 * SHEMB_CACHE_LOOKAHEAD, without loading them; each lookup of the table
 * uses up the oldest queued step.  Other policies ignore it. */
int shemb__tier_announce(shemb_table *t, int64_t n, const int64_t *rows,
			 bool distinct);
/* A lookup of t is over: a successful one uses up the oldest announced
 * step; a failed one gives back the plan it began (b, from plan_begin),
 * so that the rows of the plan before it keep their place for its
 * backward. */
void shemb__tier_lookup_settle(shemb_table *t, bool ok,
			       const struct shemb__plan_begun *b);

/* A planned lookup of t starts (its rows are kept for its backward; *b
 * says which plan it began, for lookup_settle), or the backward that
 * ends it is done. */
void shemb__tier_plan_begin(shemb_table *t, struct shemb__plan_begun *b);
void shemb__tier_plan_end(shemb_table *t);
/* Local rows rows[0 .. n) that are resident join the open plan, as if its
 * lookup had read them: a relaxed lookup reads its early rows before its
 * plan can begin (the backward before it ends the last one). */
void shemb__tier_plan_mark(shemb_table *t, int64_t n, const int64_t *rows);

/* tier_loader.c: prefetch loads in the context's loader thread.  queue:
 * n distinct local rows of t, -1 when it cannot (then load them now);
 * wait: until t has none queued; stop: at context destroy. */
int shemb__loader_queue(shemb_table *t, int64_t n, const int64_t *rows);
void shemb__loader_wait(shemb_table *t);
void shemb__loader_stop(shemb_ctx *ctx);

/* Write every dirty slot back. */
int shemb__tier_flush(shemb_table *t);

static inline bool shemb__tiered(const shemb_table *t)
{
	return t->tier != NULL;
}

#endif
