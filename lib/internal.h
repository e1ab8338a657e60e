/*
 * internal.h - the core's view of contexts, tables and step plans.
 *
 * Nothing here is installed.  lib/ is backend-neutral: it reaches memory and
 * kernels only through struct shemb_mem_ops (lib/mem_ops.h).
 */
#ifndef SHEMB_INTERNAL_H
#define SHEMB_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shemb.h"
#include "lib/mem_ops.h"
#include "lib/shard.h"
#include "lib/spares.h"

#define SHEMB__HIDDEN __attribute__((visibility("hidden")))

/*
 * Memory rule: in a jemalloc build, malloc() and free() inside the library
 * are those of the library's private, hidden copy of jemalloc, not the host
 * program's.  Never free() memory that another library allocated (strdup,
 * getline, asprintf ...), and never hand our malloc()ed memory to another
 * library to free.
 */

struct shemb__pool;
struct shemb__jobq;

struct shemb_ctx {
	struct shemb_ctx_attr attr;
	uint64_t serial;              /* tags this context's error details */
	const struct shemb_mem_ops *mem;
	void *be;                     /* the backend's own state */
	bool device_rows;             /* tables without a device tier, and
				       * device tiers, are device memory */
	struct shemb__pool *pool;     /* threads for the core's own loops */
	struct shemb__jobq *loader;   /* prefetch loads (tier_loader.c) */
	struct shemb__jobq *steps;    /* steps started without waiting */
	atomic_bool steps_stuck;      /* ... whose thread never comes back
				       * from the transport (stepq.c) */
	uint64_t host_budget;         /* bytes of row storage allowed */
	atomic_uint_fast64_t host_used;
	uint64_t device_budget;       /* bytes of device tiers allowed */
	atomic_uint_fast64_t device_used;

	const struct shemb_comm_ops *comm_ops; /* self, or libfabric */
	void *comm;
	atomic_int traffic_prio;      /* priority of the library's own
				       * collectives: that of the step
				       * running (steps run one at a time) */
	const struct shemb_comm_ops *dev_comm_ops; /* NCCL for device */
	void *dev_comm;                            /* buffers, or NULL */
	char root[256];               /* effective root and provider, for */
	char provider[64];            /* shemb_ctx_get_attr */

	pthread_mutex_t lock;         /* guards the fields below */
	struct shemb_table *tables;   /* doubly linked, newest first */
	struct shemb_request *requests; /* not yet released */
	struct shemb__spares request_spares; /* for a start that finds no
					      * memory (collectives.c) */
	struct shemb__staging *staging; /* host copies of failed device
					 * collectives, kept until destroy */
	struct shemb__held *held;     /* buffers failed collectives may
				       * still touch (held.c) */
	struct shemb__spares held_spares; /* records for when there is
					   * no memory */
	bool held_all;                /* ... all of the library's, having
				       * had no memory to remember one */
	uint64_t next_table_id;       /* INT64_MAX + 1: none left */
	uint64_t next_table_serial;
	uint64_t tables_created;      /* successfully: numbers them alike
				       * on every rank */
	uint64_t *rank_bytes;         /* world > 1: table bytes each rank
				       * holds, for choosing owners */
	uint64_t *rank_budget;        /* ... and each rank's host budget,
				       * learnt at the first table */
};

/* Cumulative counters; relaxed atomics, since lookups run concurrently. */
struct shemb__stats {
	atomic_uint_fast64_t lookups, backwards, bags, ids, unique_ids;
	atomic_uint_fast64_t rows_updated;
	atomic_uint_fast64_t validate_ns, plan_ns, pool_ns, update_ns;
	atomic_uint_fast64_t sent_bytes, received_bytes, exchange_ns;
	atomic_uint_fast64_t phase_ns[3];
	atomic_uint_fast64_t cache_hits, cache_misses, cache_evictions;
	atomic_uint_fast64_t cache_writebacks, cache_bytes_in, cache_bytes_out;
	atomic_uint_fast64_t prefetch_hits;
	atomic_uint_fast64_t relaxed_lookups;
	atomic_uint_fast64_t early_rows;
	/* [phase][0 sent, 1 received][rank]: 3 * 2 * world entries */
	atomic_uint_fast64_t *peer_bytes;
};

struct shemb__plan;
struct shemb__tier;
struct shemb__staging;
struct shemb__held;

struct shemb_table {
	shemb_ctx *ctx;
	struct shemb_table *prev, *next;
	uint64_t serial;              /* lock order in multi-table calls */
	uint64_t created;             /* its place among the tables made
				       * (the same on every rank: steps
				       * compare it; serial may differ) */
	uint64_t next_id_before;      /* the context's next automatic id */
	uint64_t next_id_after;       /* before and after the create (0:
				       * not moved yet) */
	struct shemb_table_attr attr; /* effective; attr.name -> name */
	char *name;
	char *cold_path;              /* attr.cold_path's copy */
	struct shemb__shard shard;    /* which rows and columns are here */
	bool accounted;               /* in ctx->rank_bytes */
	struct shemb__store store;    /* this rank's part (base NULL when
				       * its rows are in a cold file) */
	struct shemb__tier *tier;     /* device tier, or NULL (tier.h) */
	uint64_t step;                /* backward steps applied (Adam) */

	/* Lookups hold it shared; backward, row writes and set_lr hold it
	 * exclusive, so a lookup never sees a half-updated row. */
	pthread_rwlock_t rows_lock;

	pthread_mutex_t plan_lock;    /* guards plan and spare */
	struct shemb__plan *plan;     /* of the last planned lookup */
	struct shemb__plan *spare;    /* recycled buffers */

	struct shemb__stats stats;

	/* the last save (ckpt_save.c): its generation, and since it one bit
	 * per local row changed (NULL before the first save); saves of the
	 * table take their turns under save_lock */
	uint64_t ckpt_gen;
	uint8_t *ckpt_dirty;
	pthread_mutex_t save_lock;

	/* read_only: the rows lookups read (lib/serve.h) */
	struct shemb__version *_Atomic serving;
};

/* error.c */
SHEMB__HIDDEN int shemb__fail(const shemb_ctx *ctx, int code,
			      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* log.c */
SHEMB__HIDDEN void shemb__log(const shemb_ctx *ctx, int level,
			      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* attr.c: copy a caller's sized struct into ours, and fill a caller's
 * sized struct with our defaults (see attr.c) */
SHEMB__HIDDEN int shemb__copy_sized(void *dst, size_t dst_size,
				    const void *src, size_t min_size);
SHEMB__HIDDEN void shemb__init_sized(void *attr, size_t size,
				     const void *defaults, size_t our_size);

/* collectives.c */
SHEMB__HIDDEN void shemb__requests_free_all(shemb_ctx *ctx);
struct shemb__coll;
/* Run a collective of the library's own to its end, with the priority of
 * the step running; the detail of a failure is recorded. */
SHEMB__HIDDEN int shemb__coll_run(shemb_ctx *ctx, const struct shemb__coll *c);
/* ... without waiting (*req: see shemb_test, shemb_wait) */
SHEMB__HIDDEN int shemb__coll_start(shemb_ctx *ctx,
				    const struct shemb__coll *c,
				    shemb_request **req);
/* Set that priority (enum shemb_priority); returns the one it replaces. */
SHEMB__HIDDEN int shemb__traffic_prio(shemb_ctx *ctx, int prio);
/* coll_staged.c: frees the host copies failed collectives left (context
 * destroy), unless the communicator could not be closed */
SHEMB__HIDDEN void shemb__staging_free_all(shemb_ctx *ctx, bool closed);

/* ident.c: rank and world size from the attrs or the environment */
SHEMB__HIDDEN int shemb__resolve_identity(struct shemb_ctx_attr *a);

/* connect.c: the context's communicator */
SHEMB__HIDDEN int shemb__comm_open(shemb_ctx *ctx);
SHEMB__HIDDEN void shemb__comm_close(shemb_ctx *ctx);
/* A thread holds the communicator and never comes back from the
 * transport, as far as can be told within the timeout: its code (and
 * why); else 0.  Blocks for up to the timeout. */
SHEMB__HIDDEN int shemb__comm_stuck(shemb_ctx *ctx, char *why, size_t len);
/* The context's timeout, ms */
SHEMB__HIDDEN int shemb__timeout_ms(const shemb_ctx *ctx);

/* shard.c: resolve a table's shard plan (SHEMB_EINVAL with the detail
 * recorded); account the bytes it puts on each rank */
SHEMB__HIDDEN int shemb__shard_plan(shemb_ctx *ctx,
				    const struct shemb_table_attr *a,
				    struct shemb__shard *s);
SHEMB__HIDDEN void shemb__shard_account(shemb_ctx *ctx,
					const struct shemb_table_attr *a,
					const struct shemb__shard *s, bool add);
SHEMB__HIDDEN const char *shemb__shard_name(int kind);
SHEMB__HIDDEN int shemb__shard_describe(const struct shemb__shard *s,
					char *buf, size_t len);

/* stats.c: count bytes of table t's part of phase with peer */
SHEMB__HIDDEN int shemb__stats_init(shemb_table *t);
SHEMB__HIDDEN void shemb__stats_free(shemb_table *t);
SHEMB__HIDDEN void shemb__stats_peer(shemb_table *t, int phase, int peer,
				     uint64_t sent, uint64_t received);

/* True when the context's tables and steps span more than one rank. */
static inline bool shemb__distributed(const shemb_ctx *ctx)
{
	return ctx->attr.world_size > 1;
}

/* time.c */
SHEMB__HIDDEN uint64_t shemb__now_ns(void);
/* CLOCK_REALTIME, ms from now: pthread_cond_timedwait's default clock,
 * and pthread_timedjoin_np's */
SHEMB__HIDDEN struct timespec shemb__deadline_in(int ms);

#define SHEMB__STAT_ADD(t, field, v)                                         \
	atomic_fetch_add_explicit(&(t)->stats.field, (uint64_t)(v),         \
				  memory_order_relaxed)

#endif
