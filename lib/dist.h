/*
 * dist.h - lookups and backward steps across ranks.
 *
 * A step is collective.  Every rank first checks its own input, then all
 * exchange one small record each way (lib/dist_meta.c): the status of
 * their checks, a signature of the call (kind, tables, shard plans) and
 * the size of the message that follows.  Any failure or disagreement
 * fails the step on every rank before a byte of a table changes.
 *
 * Lookup: each table's ids are deduplicated (the step plan), the distinct
 * ids go to their owners in one alltoallv for all tables of the call, the
 * owners answer with their rows (column-wise: their slice of each row) in
 * a second one, and each rank pools its bags from the rows it received,
 * with the same kernel and in the same order as a single process would.
 * The owners keep the ids they received (the route) for the backward.
 *
 * Backward: each rank turns the gradients of its bags into one gradient
 * row per distinct id (deterministic mode: one per id occurrence), sends
 * them to the owners in one alltoallv, and each owner sums the rows of a
 * row id in rank order and applies the optimizer once per row.
 * Replicated tables skip the lookup exchange and send their ids with
 * their gradients to every rank.
 */
#ifndef SHEMB_DIST_H
#define SHEMB_DIST_H

#include <string.h>

#include "lib/internal.h"
#include "lib/tier.h"
#include "lib/plan.h"
#include "lib/step.h"

enum shemb__dist_kind {
	SHEMB__DIST_LOOKUP = 1,
	SHEMB__DIST_BACKWARD = 2,
	SHEMB__DIST_READ = 3,
	SHEMB__DIST_WRITE = 4,
	SHEMB__DIST_PREFETCH = 5,
	SHEMB__DIST_ANNOUNCE = 6,
	SHEMB__DIST_EARLY = 7     /* a relaxed lookup's early rows */
};

struct shemb__then;

/* A read_rows() across ranks, made as a lookup. */
static inline bool shemb__step_reads(const struct shemb__step *st)
{
	return st->kind == SHEMB__DIST_READ;
}

/* Prefetches and announcements: lookups that move no rows. */
static inline bool shemb__dist_ahead(int kind)
{
	return kind == SHEMB__DIST_PREFETCH || kind == SHEMB__DIST_ANNOUNCE;
}

/* One table's part of a step's exchange, kept with its step plan. */
struct shemb__route {
	int world;
	int64_t nunique;
	/* this rank as requester: the distinct ids in the order they are
	 * sent, owner by owner (column-wise and replicated: all in order) */
	bool to_all;         /* every rank holds part of every row */
	int64_t *to_first;   /* [world + 1]: first slot of each owner */
	int64_t *unique_at;  /* [nunique]: slot -> index in plan->unique
			      * (to_all: the identity) */
	int32_t *owner_of;   /* [nunique]: owner of each distinct id */
	/* ... or, when the owners pool this rank's bags (dist_pool.c), for
	 * each owner its pairs (a bag and the owner's ids in it, in bag
	 * order) and their id occurrences */
	bool pooled;
	int64_t *pair_first; /* [world + 1] */
	int64_t *pair_bag;   /* plan bag of each pair */
	int32_t *pair_len;   /* its ids */
	int64_t *occ_first;  /* [world + 1] */
	int64_t *occ_id;     /* the ids, pair by pair */
	float *occ_coef;     /* their weights (MEAN: over the bag length) */
	/* this rank as owner: the ids received, rank by rank */
	int64_t *from_first; /* [world + 1] */
	int64_t *local;      /* local row of each received id */
	int64_t *occ;        /* its occurrences at the rank that sent it
			      * (pooled senders: 1) */
	float *coef;         /* its weight (rows sent whole: 1) */
	int64_t *pair;       /* pooled senders: its pair, else -1 */
	int64_t *npairs;     /* [world]: pairs of pooled senders, else -1 */
	int64_t nrecv;
};

void shemb__route_free(struct shemb__route *r);

/* The slots of the distinct ids sent to peer: its own, or all of them
 * when every rank holds part of every row. */
static inline void shemb__route_slots(const struct shemb__route *r, int peer,
				      int64_t *lo, int64_t *hi)
{
	*lo = r->to_all ? 0 : r->to_first[peer];
	*hi = r->to_all ? r->nunique : r->to_first[peer + 1];
}

/* The dtype of a table's rows and of its gradients between ranks. */
static inline int shemb__wire_rows(const shemb_table *t)
{
	return t->attr.wire_dtype == SHEMB_F32 ? t->attr.dtype
					       : t->attr.wire_dtype;
}

static inline int shemb__wire_grads(const shemb_table *t)
{
	return t->attr.wire_dtype;
}

/* Each table's part of a message starts 8-byte aligned; padding goes
 * out zeroed. */
static inline size_t shemb__pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static inline void *shemb__zero_pad(void *at, size_t used)
{
	memset((char *)at + used, 0, shemb__pad8(used) - used);
	return (char *)at + shemb__pad8(used);
}

static inline size_t shemb__dtype_bytes(int dtype)
{
	return dtype == SHEMB_F32 ? 4 : 2;
}

/* One alltoallv's buffers and per-peer byte counts. */
struct shemb__xchg {
	int world;
	size_t *scount, *sdispl, *rcount, *rdispl; /* [world] each */
	char *sbuf, *rbuf;
	size_t sbytes, rbytes;
};

int shemb__xchg_init(struct shemb__xchg *x, int world);
/* Allocate the buffers once the counts are set (displacements follow). */
int shemb__xchg_alloc(struct shemb__xchg *x);
int shemb__xchg_run(shemb_ctx *ctx, struct shemb__xchg *x);
/* ... without waiting: *req tracks it */
int shemb__xchg_start(shemb_ctx *ctx, struct shemb__xchg *x,
		      shemb_request **req);
/* ... a part of it: scount[p] bytes from soff[p] into this rank's piece
 * for peer p, rcount[p] bytes to roff[p] into the piece from p; displ:
 * room for 2 x world displacements. */
int shemb__xchg_start_part(shemb_ctx *ctx, const struct shemb__xchg *x,
			   const size_t *scount, const size_t *soff,
			   const size_t *rcount, const size_t *roff,
			   size_t *displ, shemb_request **req);
/* This rank's part in an exchange that it failed before it could start
 * (status, why): every rank's fails with them (struct shemb__coll's
 * refuse); returns status. */
int shemb__xchg_refuse(shemb_ctx *ctx, int status, const char *why);
/* Add ns to the phase time of every table of st. */
void shemb__phase_time(const struct shemb__step *st, int phase, uint64_t ns);
/* The buffers through shemb__coll_buf_free() (held.c). */
void shemb__xchg_free(shemb_ctx *ctx, struct shemb__xchg *x);

/*
 * The exchange that opens every step.  status: this rank's result so far
 * (its detail recorded); sig: the call's signature (0 when status is set);
 * x->scount: bytes this rank sends each peer next.  Returns 0 with
 * x->rcount set to the bytes each peer sends, or the status of the first
 * rank that failed (this rank's own first), with the detail recorded.
 * Every rank takes part whatever happens here (without memory for the
 * records, as a refusal of their exchange): a step that failed before it
 * still meets the others through it, with its status.
 */
int shemb__dist_agree(shemb_ctx *ctx, int kind, uint64_t sig, int status,
		      struct shemb__xchg *x);

/* ... and what every rank offers: *offers in, on return the bits every
 * rank set (0 on failure). */
enum {
	SHEMB__OFFER_RELAX = 1 /* the lookup queued next may run relaxed
				* (dist_relax.c) */
};
int shemb__dist_agree_offers(shemb_ctx *ctx, int kind, uint64_t sig,
			     int status, struct shemb__xchg *x,
			     unsigned *offers);

/* Every rank's 8 bytes, rank r's at all[r].  all may be NULL, where the
 * caller found no memory for it: the rank then takes part all the same,
 * refusing the call, which fails on every rank with SHEMB_ENOMEM (a rank
 * that left out a collective would leave the ranks out of step). */
int shemb__allgather_word(shemb_ctx *ctx, uint64_t mine, uint64_t *all);
/* Every rank's len bytes, rank r's at all + r * len (all NULL: as
 * above); the collective moves copies of its own (held.c), so mine and
 * all may be anywhere. */
int shemb__allgather_bytes(shemb_ctx *ctx, const void *mine, size_t len,
			   void *all);

/* After an exchange that may have failed on some ranks only (status:
 * this rank's, its detail recorded): 0 when every rank succeeded, else
 * this rank's status or the first failing rank's, with "rank R failed
 * <what> (<status described>): <the beginning of its detail>"
 * recorded. */
int shemb__dist_all_ok(shemb_ctx *ctx, int status, const char *what);

/* The signature of a step over st's tables. */
uint64_t shemb__dist_signature(int kind, const struct shemb__step *st);
/* h with table t mixed in, as every rank names it (dist_meta.c). */
uint64_t shemb__dist_mix_table(uint64_t h, const shemb_table *t);

/* dist_lookup.c: the exchanges of a lookup whose plans are built (every
 * table, planned or not); pools into out. */
int shemb__dist_lookup(struct shemb__step *st, struct shemb__plan **plans,
		       float *const *out, int status, int kind);

/* ... its pieces, for dist_relax.c: open routes the ids, meets the ranks
 * (status as for shemb__dist_agree) and packs *ids (initialised here),
 * or, without memory for them once the ranks agreed, refuses the ids'
 * exchange, which the caller then does not run (*refused, when given:
 * that refusal's status, else 0; what follows the exchange on the other
 * ranks must still follow here);
 * take_in reads what the peers asked for into the routes (at[]: where
 * each part starts); count_rows sets the rows exchange's counts;
 * rows_in: table g's bytes from owner p in it; row_bytes: of one row as
 * rank r holds it; read_owned: an owner's local rows, as they travel;
 * pool_rows: every table pooled from a rows exchange that has landed. */
int shemb__dist_lookup_open(struct shemb__step *st, struct shemb__plan **plans,
			    int status, int kind, struct shemb__xchg *ids,
			    int *refused);
int shemb__lookup_take_in(struct shemb__step *st, struct shemb__plan **plans,
			  const struct shemb__xchg *x, size_t *at);
void shemb__lookup_count_rows(struct shemb__step *st,
			      struct shemb__plan **plans,
			      struct shemb__xchg *x);
size_t shemb__lookup_rows_in(const struct shemb__step *st,
			     struct shemb__plan *const *plans, int g, int p);
size_t shemb__lookup_row_bytes(const struct shemb__step *st,
			       const shemb_table *t, int r);
size_t shemb__pooled_row_bytes(const shemb_table *t);
int shemb__lookup_read_owned(struct shemb__step *st, shemb_table *t,
			     int64_t n, const int64_t *rows, char *at);
/* What pooling the rows of a lookup takes, taken before they move (the
 * replicated tables pooled then), so that no rank fails once they came:
 * a failure before is refused in the exchange, which fails the call on
 * every rank. */
struct shemb__pool_bufs {
	char **base;          /* [ngroups]: rows of a table sent whole */
	int64_t **rows_of;    /* [ngroups]: the row of each position */
	const char **rows_at; /* [world]: tables pooled at the owners */
	size_t *at;           /* where each table's rows are, received */
};

int shemb__lookup_pool_prepare(struct shemb__step *st,
			       struct shemb__plan **plans, int world,
			       float *const *out, struct shemb__pool_bufs *b);
void shemb__lookup_pool_bufs_free(const struct shemb__step *st,
				  struct shemb__pool_bufs *b);
int shemb__lookup_pool_rows(struct shemb__step *st, struct shemb__plan **plans,
			    const struct shemb__xchg *rows, float *const *out,
			    const struct shemb__pool_bufs *b);

/* dist_backward.c: a backward whose plans were checked (status 0) or
 * not; applies every table's updates. */
int shemb__dist_backward(struct shemb__step *st, const float *const *grad,
			 int status);
/* ... in three parts, for a lookup to run between them (dist_relax.c):
 * open makes the gradient rows, meets the ranks (with offer's offers,
 * when set) and packs b->x; once b->x has landed, apply
 * updates every table; close frees b, whatever happened. */
struct shemb__dist_bwd {
	void *grads;          /* each table's gradient rows */
	struct shemb__xchg x; /* their exchange */
	uint64_t t0;
	int refused;          /* nonzero: open refused the exchange here
			       * (no memory once the ranks agreed), with
			       * this status; the others run it, and what
			       * they agreed to run beside it */
};
struct shemb__offer {
	/* this rank's offers, asked for at the last moment before the
	 * ranks meet (status: the backward's so far) */
	unsigned (*make)(void *arg, int status);
	void *arg;
	unsigned agreed;      /* on return: what every rank offered */
};
int shemb__dist_backward_open(struct shemb__step *st, const float *const *grad,
			      int status, struct shemb__offer *offer,
			      struct shemb__dist_bwd *b);
int shemb__dist_backward_apply(struct shemb__step *st,
			       struct shemb__dist_bwd *b);
void shemb__dist_backward_close(struct shemb__step *st,
				struct shemb__dist_bwd *b);

/* backward.c: the optimizer of t's next step; the backward view of the
 * sets of grp under plan p */
struct shemb__opt shemb__opt_of(const shemb_table *t);
/* The update job of plan p's distinct rows over store (opt not set). */
struct shemb__update_job shemb__plan_job(const struct shemb__plan *p,
					 struct shemb__store *store, int nsets,
					 const struct shemb__bwd_set *sets);
void shemb__bwd_sets(const struct shemb__group *grp,
		     const struct shemb__plan *p, const float *const *grad,
		     struct shemb__bwd_set *sets);

/* dist_relax.c: a backward (status: its own checks) with the lookup
 * queued behind it (then), which it runs with itself, relaxed, when every
 * rank can: then->ran says whether it did. */
int shemb__dist_relaxed(struct shemb__step *st, const float *const *grad,
			int status, struct shemb__then *then);
/* backward.c: st's tables are a step further, their plans used up (the
 * relaxed lookup's plans come after) */
void shemb__backward_done(const struct shemb__step *st);

/* dist_write.c: write_rows across ranks, after this rank's own checks
 * (status) */
int shemb__dist_write(shemb_table *t, int64_t n, const int64_t *ids,
		      const void *in, int dtype, const float *reset,
		      unsigned flags, int status);

/* dist_pool.c: bags pooled by the owners (see there) */
int shemb__pool_route(const struct shemb__step *st, int g,
		      struct shemb__plan *p);
size_t shemb__pool_ids_bytes(const struct shemb__route *r, int o);
int64_t shemb__pool_pack_ids(const struct shemb__route *r, int o, char *at);
int64_t shemb__pool_part_ids(const char *seg);
size_t shemb__pool_part_bytes(const char *seg, int64_t m);
int shemb__pool_intake(const shemb_table *t, struct shemb__route *r,
		       int peer, const char *seg, int64_t m, int64_t at);
int shemb__pool_serve(struct shemb__step *st, shemb_table *t,
		      const struct shemb__route *r, int peer, const char *seg,
		      int64_t m, char *out);
void shemb__pool_combine(const struct shemb__step *st, int g,
			 const struct shemb__plan *p, float *const *out,
			 const char *const *rows_at);
void shemb__pool_pack_grads(const struct shemb__step *st, int g,
			    const struct shemb__plan *p,
			    const float *const *grad, int o, char *at);
int shemb__pool_backward_coefs(const struct shemb__step *st, int g,
			       const struct shemb__plan *p, float **out);
void shemb__pool_take_coefs(struct shemb__route *r, int peer,
			    const char *coefs);

/* dist_dense.c: small replicated tables outside deterministic mode
 * exchange their gradients as one dense allreduce */
struct shemb__dense;
bool shemb__dense_replicated(const struct shemb__step *st,
			     const shemb_table *t);
int shemb__dense_prepare(struct shemb__step *st, int g, const float *rows,
			 struct shemb__dense **out);
int shemb__dense_reduce(struct shemb__step *st, int g, struct shemb__dense *d);
int shemb__dense_apply(struct shemb__step *st, int g, struct shemb__dense *d);
void shemb__dense_free(shemb_ctx *ctx, struct shemb__dense *d);

/* dist_route.c */
int shemb__route_build(const shemb_table *t, struct shemb__plan *p);
/* Owner side: the local row of an id a peer asked this rank for; or
 * SHEMB_EINTERNAL when this rank does not hold it (the ranks' tables
 * differ). */
static inline int shemb__route_local(const struct shemb__shard *sh,
				     int64_t id, int64_t *local)
{
	int o;

	if (id < 0 || id >= sh->rows)
		return SHEMB_EINTERNAL;
	shemb__shard_place(sh, id, &o, local);
	return o >= 0 && o != sh->rank ? SHEMB_EINTERNAL : 0;
}
int shemb__route_intake(const shemb_table *t, struct shemb__route *r,
			int peer, int64_t n, const int64_t *ids,
			const int64_t *occ, int64_t at);
int shemb__route_reserve_intake(struct shemb__route *r, int64_t nrecv);
void shemb__route_release_intake(struct shemb__route *r);

/* The owner's view of one table's gradient rows: distinct local rows,
 * ascending, and for each its contributions (a received row and its
 * weight) in rank order. */
struct shemb__merge {
	int64_t nunique;
	int64_t *unique;
	int32_t *seg;    /* nunique + 1 */
	int32_t *pos;    /* contributions, grouped by row */
	int32_t *row_of; /* contribution -> received row (the update
			  * kernel's bag_of) */
	float *coef;     /* contribution -> weight */
	int64_t nrows;   /* received rows */
	int64_t ncontrib;
};

/* Gradient rows that peer sends for table t's part of a backward, as the
 * owner's route knows it. */
int64_t shemb__route_rows_from(const struct shemb__route *r, int peer,
			       bool per_occurrence);

int shemb__merge_build(const struct shemb__route *r, bool per_occurrence,
		       struct shemb__merge *m);
void shemb__merge_free(struct shemb__merge *m);

#endif
