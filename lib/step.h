/*
 * step.h - one lookup or backward call: its bag sets copied in, grouped by
 * table, and the tables locked in a fixed order.
 */
#ifndef SHEMB_STEP_H
#define SHEMB_STEP_H

#include "lib/internal.h"
#include "lib/tier.h"

/* A lookup's statistics of one table, added to the table's once the
 * whole call succeeded: shemb_table_stats(3) counts successful calls. */
struct shemb__lookup_counts {
	uint64_t lookups, bags, ids, unique_ids, plan_ns, pool_ns;
};

struct shemb__group {
	shemb_table *table;
	int nsets;
	const struct shemb_bags **sets; /* this table's sets, call order */
	int *index;                     /* their positions in the call */
	struct shemb__lookup_counts counted;
	struct shemb__plan_begun begun; /* the tier's plan this call began */
};


struct shemb__step {
	shemb_ctx *ctx;
	int n;
	struct shemb_bags *bags;        /* the caller's sets, our layout */
	int ngroups;
	struct shemb__group *groups;    /* ascending table serial */
	const struct shemb_bags **set_ptrs;
	int *set_index;
	bool planned;                   /* a lookup that keeps its plan */
	int kind;                       /* enum shemb__dist_kind: lookup,
					 * read (across ranks: rows in their
					 * storage dtype whatever the wire
					 * dtype; counts in no statistics),
					 * prefetch or announcement */
	bool device_sets;               /* some set is SHEMB_MEM_DEVICE */
	bool outs_staged;               /* their outputs pooled on the host,
					 * copied to the device at the end */
	struct shemb__hostbuf *staged;  /* held until step_end: host copies
					 * of device buffers, and arrays of
					 * them (lib/hostbuf.h) */
	int nstaged;
	bool direct;                    /* device input used in place (the
					 * backend checks it) */
	struct shemb__parts *parts;     /* a started lookup's: which outputs
					 * are final, or NULL */
};

/* Group g's outputs are written: a started lookup tells its caller. */
void shemb__step_group_done(const struct shemb__step *st, int g);

/* Copy and group the caller's n bag sets; checks the structure of each
 * (table, pooling, counts, offsets, ids, weights).  On failure nothing is
 * held. */
int shemb__step_begin(struct shemb__step *st, shemb_ctx *ctx, int n,
		      const struct shemb_bags *bags);
void shemb__step_end(struct shemb__step *st);
/* ... of SHEMB_MEM_DEVICE sets read in place: only the sets' headers are
 * checked here (lookup.c has the backend check the arrays). */
int shemb__step_begin_direct(struct shemb__step *st, shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags);

/* The gradients of the step's sets as host memory: grad itself, or with
 * SHEMB_MEM_DEVICE sets an array whose device buffers are host copies
 * (freed by step_end). */
int shemb__step_host_grads(struct shemb__step *st, const float *const *grad,
			   const float ***out);

/* A lookup across ranks pools on the host: the outputs of its
 * SHEMB_MEM_DEVICE sets as host buffers (freed by step_end; the sets
 * are host memory from then on), out itself when it has none ... */
int shemb__step_host_outs(struct shemb__step *st, float *const *out,
			  float ***hout);
/* ... and, once the lookup is done, those buffers copied to out. */
int shemb__step_deliver_outs(struct shemb__step *st, float *const *out,
			     float *const *hout);

/* Lock every table of the step: shared for lookups, else exclusive.
 * Tables are taken in serial order, so concurrent calls cannot deadlock. */
void shemb__step_lock(struct shemb__step *st, bool exclusive);
void shemb__step_unlock(struct shemb__step *st);

/* lookup.c: pool each set of grp into out[its index], rows from store
 * (rows_of NULL: at the ids; else at rows_of[plan position]) */
int shemb__pool_group(struct shemb__step *st, struct shemb__group *grp,
		      const struct shemb__plan *plan, float *const *out,
		      const struct shemb__store *store, const int64_t *rows_of);
/* ... rows from the table's own store, through its device tier when it
 * has one (the plan's distinct ids are local rows: one rank, or a
 * replicated table) */
int shemb__pool_local(struct shemb__step *st, struct shemb__group *grp,
		      const struct shemb__plan *plan, float *const *out);
int shemb__lookup_for_read(struct shemb__step *st, float *const *out,
			   int status);
/* How a lookup step uses the rows it reads (enum shemb__rows_use). */
int shemb__lookup_use(const struct shemb__step *st);
int shemb__lookup_for_prefetch(struct shemb__step *st, int status,
			       bool announce);
/* A prefetch's (or announcement's) rows of table t on this rank. */
int shemb__prefetch_rows(const struct shemb__step *st, shemb_table *t,
			 int64_t n, const int64_t *rows, bool distinct);

/* lookup.c: whether the sets of a call are read in place, and with
 * planned (a training lookup, or the backward of one) also planned on the
 * device (dplan.c) */
bool shemb__device_direct(shemb_ctx *ctx, int n,
			  const struct shemb_bags *bags, bool planned);

/* dplan.c: the backward of a plan made on the device: its weights and
 * gradients, its sets against the plan's, and the checkpoint's record of
 * the rows it changes */
struct shemb__plan;
int shemb__dplan_check_grads(struct shemb__step *st, const float *const *grad);
int shemb__dplan_same_sets(shemb_ctx *ctx, const struct shemb__plan *p,
			   const struct shemb__group *grp);
int shemb__dplan_touch(shemb_table *t, const struct shemb__plan *p);

/* validate.c */
int shemb__check_set(shemb_ctx *ctx, const struct shemb_bags *b, int i);
int shemb__check_header(shemb_ctx *ctx, const struct shemb_bags *b, int i);
/* step.c: p (of a SHEMB_MEM_DEVICE set i) is the context's device memory,
 * or SHEMB_EINVAL recorded */
int shemb__check_device_ptr(shemb_ctx *ctx, const void *p, int i,
			    const char *what);
int shemb__check_rows_out(shemb_ctx *ctx, const struct shemb_bags *b, int i,
			  const void *buf, const char *what);
int shemb__check_grad(shemb_ctx *ctx, const struct shemb_bags *b, int i,
		      const float *grad);
int64_t shemb__set_rows(const struct shemb_bags *b);
int shemb__check_ids(shemb_ctx *ctx, const shemb_table *t, int64_t n,
		     const int64_t *ids, const char *where);

#endif
