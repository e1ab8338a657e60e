/*
 * shemb.h - libshemb, sharded embedding tables for training and inference
 *
 * libshemb owns the embedding tables of a model: it stores their rows,
 * looks up pooled bags of rows, turns the gradient of the pooled outputs into
 * one gradient per distinct row and applies a sparse optimizer in place.
 *
 * Conventions (see shemb(7) for the full picture):
 *  - Every function returns 0 or a negative SHEMB_E* code; nothing is changed
 *    when a call fails.  shemb_ctx_last_error() gives a detail message.
 *  - Attribute structs start with `size_t size` and are filled with defaults
 *    by their *_attr_init() function, so they can grow without breaking
 *    programs built against an older header (a new field always makes the
 *    struct larger: none goes in the padding at its end).
 *  - Every create has a destroy that accepts NULL.
 *  - Batches are CSR bags, as PyTorch's EmbeddingBag takes them.
 *
 * This header needs no CUDA or libfabric header and is valid C99 and C++.
 */
#ifndef SHEMB_H
#define SHEMB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SHEMB_BUILDING_LIBRARY) && defined(__GNUC__)
#define SHEMB_API __attribute__((visibility("default")))
#else
#define SHEMB_API
#endif

/* ------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------ */

#define SHEMB_VERSION_MAJOR 0
#define SHEMB_VERSION_MINOR 1
#define SHEMB_VERSION_PATCH 0
#define SHEMB_VERSION_NUMBER                                                \
	(SHEMB_VERSION_MAJOR * 10000 + SHEMB_VERSION_MINOR * 100 +          \
	 SHEMB_VERSION_PATCH)

/* Version of the loaded library as MAJOR * 10000 + MINOR * 100 + PATCH;
 * compare with SHEMB_VERSION_NUMBER, the version of this header. */
SHEMB_API unsigned shemb_version(void);

/* The same version as "MAJOR.MINOR.PATCH", followed by the build's features,
 * e.g. "0.1.0 (cpu jemalloc avx2 avx512 libfabric)".  Static storage. */
SHEMB_API const char *shemb_version_string(void);

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

enum shemb_status {
	SHEMB_OK = 0,
	SHEMB_EINVAL = -1,    /* an argument is invalid */
	SHEMB_ENOMEM = -2,    /* out of memory, or over a memory budget */
	SHEMB_ESTATE = -3,    /* call out of order (backward without lookup) */
	SHEMB_ENOTSUP = -4,   /* not supported by this build or setup */
	SHEMB_ENODEV = -5,    /* the requested device is not available */
	SHEMB_EIO = -6,       /* a read or write of a file failed */
	SHEMB_EPEER = -7,     /* a peer rank failed or left */
	SHEMB_ETIMEDOUT = -8, /* a peer did not answer in time */
	SHEMB_ECORRUPT = -9,  /* stored data failed verification */
	SHEMB_EPERM = -10,    /* operation not allowed on this object */
	SHEMB_EINTERNAL = -11 /* unexpected failure inside the library */
};

/* Short static description of a status code ("invalid argument"). */
SHEMB_API const char *shemb_strerror(int code);

/* ------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------ */

typedef struct shemb_ctx shemb_ctx;
typedef struct shemb_table shemb_table;
typedef struct shemb_request shemb_request;

enum shemb_log_level {
	SHEMB_LOG_OFF = 0,
	SHEMB_LOG_ERROR = 1,
	SHEMB_LOG_WARN = 2,
	SHEMB_LOG_INFO = 3,
	SHEMB_LOG_DEBUG = 4
};

/* Receives one log line (no trailing newline), on the thread of the call
 * it is about. */
typedef void (*shemb_log_fn)(void *arg, int level, const char *msg);

/*
 * A host's own out-of-band allgather (MPI, PMIx ...), used once while a
 * context is created instead of the TCP rendezvous: every rank passes len
 * bytes in `mine`; `all` receives world_size * len bytes, rank r's at
 * r * len.  Returns 0, or non-zero on failure.  Called on the thread that
 * creates the context, by every rank in the same order.
 */
typedef int (*shemb_oob_allgather_fn)(void *arg, const void *mine,
				      void *all, size_t len);

enum shemb_progress {
	SHEMB_PROGRESS_THREAD = 0, /* a context thread drives transfers */
	SHEMB_PROGRESS_CALLER = 1  /* only the calls of the context do */
};

struct shemb_ctx_attr {
	size_t size;             /* sizeof(struct shemb_ctx_attr) */
	int nthreads;            /* threads that run kernels, the caller
				  * included; 0 = CPUs this process may use */
	int log_level;           /* enum shemb_log_level; default WARN */
	shemb_log_fn log_fn;     /* NULL = lines to stderr */
	void *log_arg;           /* passed to log_fn */
	uint64_t host_mem_bytes; /* budget for host row storage; 0 = the
				  * machine's physical memory */
	int rank;                /* this process's rank; -1 (default): from
				  * the environment, else 0 */
	int world_size;          /* number of ranks; 0 (default): from the
				  * environment, else 1 */
	/* fields below: more than one rank */
	const char *root;        /* rendezvous "host:port", where rank 0
				  * listens; NULL: SHEMB_ROOT */
	const char *job_key;     /* secret every rank presents; NULL:
				  * SHEMB_JOB_KEY, else none */
	const char *provider;    /* libfabric provider; NULL: SHEMB_PROVIDER,
				  * FI_PROVIDER, else shm when every rank is
				  * on one host and "tcp;ofi_rxm" if not */
	int progress;            /* enum shemb_progress; default THREAD */
	int timeout_ms;          /* a collective that moves no data this
				  * long fails (and NCCL's setup, and the
				  * start of or a wait for a collective
				  * over NCCL, are bounded by it);
				  * 0: 30000 */
	shemb_oob_allgather_fn oob_allgather; /* NULL: TCP rendezvous */
	void *oob_arg;
	size_t chunk_bytes;      /* messages are cut in chunks of this;
				  * 0: 4 MiB on shm (64 KiB for the
				  * collectives at or below
				  * SHEMB_PRIO_DENSE where a host runs
				  * more ranks than their CPUs), 1 MiB
				  * otherwise */
	int deterministic;       /* 1: gradients of a row are summed in the
				  * order of a single process given every
				  * rank's bag sets in rank order, so any
				  * world size gives the same bits (sends
				  * one gradient row per id occurrence
				  * instead of one per distinct row);
				  * 0 (default): per rank, then rank order */
	uint64_t device_mem_bytes; /* budget for the device tiers of all
				    * tables (cache_rows) and, in a
				    * SHEMB_DEVICE_CUDA context, the rows
				    * of the tables without one, which are
				    * then in GPU memory; 0 = no limit but
				    * the device's (the CPU backend's tier
				    * is host memory: it also counts in
				    * host_mem_bytes) */
	int prefetch_thread;     /* 0 (default): shemb_prefetch loads its
				  * rows in the call; 1: a thread of the
				  * context, started at the first prefetch,
				  * loads them while the caller goes on
				  * (for hosts with cores to spare) */
	int device;              /* enum shemb_device: where the kernels run
				  * and device tiers live; default CPU */
	int device_id;           /* SHEMB_DEVICE_CUDA: the CUDA device
				  * ordinal; -1 (default): rank modulo the
				  * devices this process sees */
	void *stream;            /* SHEMB_DEVICE_CUDA: a cudaStream_t that
				  * the context's device work is ordered
				  * on (collectives over NCCL run on a
				  * stream of their own, after the work
				  * queued here); NULL (default): a stream
				  * of the context's own */
	int chunks_in_flight;    /* data chunks a rank has handed to the
				  * transport and not yet seen sent, per
				  * collective: more keep bulk transfers
				  * streaming, fewer let a collective of
				  * a higher priority on the same lane
				  * (see enum shemb_priority) overtake
				  * sooner; 0 (default): 16 on shm (4 for
				  * those at or below SHEMB_PRIO_DENSE
				  * where a host runs more ranks than
				  * their CPUs), 32 otherwise; at most
				  * 256 */
	int single_copy;         /* on shm, the bulk collectives'
				  * alltoallv and allgatherv data: each
				  * receiver reads it straight out of the
				  * sender's memory (process_vm_readv(2)),
				  * in chunks of chunk_bytes (0: 1 MiB);
				  * 0 (default): where every rank may
				  * (else libfabric's messages), unless
				  * SHEMB_SINGLE_COPY=0; 1: required
				  * (SHEMB_ENOTSUP at create where it
				  * cannot be had); -1: never.
				  * shemb_ctx_get_attr: 1 in use, -1 not */
	int comm_slice_us;       /* the scheduling slice, in microseconds,
				  * that the threads moving collectives
				  * (the progress thread, the thread of
				  * started steps) ask of the kernel
				  * (Linux 6.12 or later; earlier kernels
				  * ignore it): a shorter slice has them
				  * run sooner when they wake or yield,
				  * where ranks share CPUs with busy
				  * application threads; 0 (default):
				  * 100; -1: the kernel's default;
				  * else 100 to 100000 */
};

/* Where a context's kernels run. */
enum shemb_device {
	SHEMB_DEVICE_CPU = 0,  /* host memory and the CPU (default) */
	SHEMB_DEVICE_CUDA = 1  /* an NVIDIA GPU: tables without a device
				* tier live in device memory, device tiers
				* (cache_rows) in device memory over host
				* memory; SHEMB_ENODEV at create when the
				* build or host has no usable GPU */
};

/* Fill attr with the installed library's defaults and set attr->size.
 * The inline form passes the struct's size as this header knows it, so a
 * library with a larger struct never writes past the caller's; bindings
 * from other languages call shemb_ctx_attr_init_size() themselves. */
SHEMB_API void shemb_ctx_attr_init_size(struct shemb_ctx_attr *attr,
					size_t size);
static inline void shemb_ctx_attr_init(struct shemb_ctx_attr *attr)
{
	shemb_ctx_attr_init_size(attr, sizeof(*attr));
}

/* Create a context: thread pool, allocator, CPU kernels for this machine,
 * and, with more than one rank, the connection to every other rank (a
 * collective call).  attr may be NULL for the defaults.  The environment
 * gives rank and world size when the attrs leave them to it: SHEMB_RANK
 * and SHEMB_WORLD_SIZE, or OMPI_COMM_WORLD_RANK / _SIZE, PMI_RANK /
 * PMI_SIZE, SLURM_PROCID / SLURM_NTASKS. */
SHEMB_API int shemb_ctx_create(const struct shemb_ctx_attr *attr,
			       shemb_ctx **ctx);

/* Destroy a context and every table still attached to it.  NULL is a no-op.
 * No other call may use the context or its tables during or after it.
 * With more than one rank it is collective: it waits (up to the timeout)
 * until every rank closes, unless a rank already failed.  SHEMB_EPEER
 * when its thread of started steps is stuck in the transport: the context
 * is then left as it is (see shemb_alltoallv(3), BUGS). */
SHEMB_API int shemb_ctx_destroy(shemb_ctx *ctx);

/* The context's effective attributes: rank, world size, thread count and
 * host budget resolved, the provider chosen and the root used (both point
 * into the context; job_key is NULL).  attr->size must be set. */
SHEMB_API int shemb_ctx_get_attr(const shemb_ctx *ctx,
				 struct shemb_ctx_attr *attr);

/* 0, or the error that background progress met (a peer failed: every
 * later collective of the context fails the same way), with its detail in
 * shemb_ctx_last_error(ctx). */
SHEMB_API int shemb_ctx_async_error(shemb_ctx *ctx);

/* Detail of the last failed call made on the calling thread with this
 * context (or with one of its tables); ctx NULL gives the detail of the
 * last failure that had no context, such as shemb_ctx_create.  Returns ""
 * when there is none.  Valid until the next failing call on this thread. */
SHEMB_API const char *shemb_ctx_last_error(const shemb_ctx *ctx);

/* ------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------ */

enum shemb_dtype {
	SHEMB_F32 = 0,  /* IEEE binary32 */
	SHEMB_F16 = 1,  /* IEEE binary16 */
	SHEMB_BF16 = 2, /* bfloat16 */
	SHEMB_F64 = 3,  /* IEEE binary64: shemb_allreduce only */
	SHEMB_I64 = 4,  /* int64_t: shemb_allreduce only */
	SHEMB_INT8 = 5  /* storage of read_only tables on one rank and the
			 * CPU: each row 8-bit codes with a row-wise scale
			 * and bias (value = code * scale + bias) */
};

enum shemb_init {
	SHEMB_INIT_UNIFORM = 0,  /* uniform in [init_low, init_high] */
	SHEMB_INIT_NORMAL = 1,   /* normal(init_mean, init_std) */
	SHEMB_INIT_ZEROS = 2,
	SHEMB_INIT_CONSTANT = 3  /* every value init_value */
};

enum shemb_optimizer {
	SHEMB_OPT_SGD = 0,
	SHEMB_OPT_ADAGRAD = 1,         /* one accumulator per value */
	SHEMB_OPT_ROWWISE_ADAGRAD = 2, /* one accumulator per row */
	SHEMB_OPT_ADAM = 3             /* lazy: only touched rows change */
};

enum shemb_weight_decay {
	SHEMB_WD_L2 = 0,       /* gradient += weight_decay * row */
	SHEMB_WD_DECOUPLED = 1 /* row -= lr * weight_decay * row (AdamW) */
};

/* Where the bags of a row-wise or table-wise table are pooled. */
enum shemb_pool_at {
	SHEMB_POOL_AT_AUTO = 0,      /* where fewer bytes cross (shemb(7)) */
	SHEMB_POOL_AT_REQUESTER = 1, /* owners send rows; the rank that
				      * asked pools them */
	SHEMB_POOL_AT_OWNER = 2      /* owners pool the ids of each bag they
				      * hold and send one row per bag */
};

/* Where a table's rows live when the context has more than one rank. */
enum shemb_shard {
	SHEMB_SHARD_AUTO = 0,      /* chosen by the library (shemb(7)) */
	SHEMB_SHARD_ROW = 1,       /* each row on one rank, by a hash of its
				    * id, so runs of ids spread */
	SHEMB_SHARD_COLUMN = 2,    /* every rank holds a slice of the
				    * columns of every row (EmbRace) */
	SHEMB_SHARD_TABLE = 3,     /* the whole table on one rank */
	SHEMB_SHARD_REPLICATED = 4 /* a full copy on every rank */
};

#define SHEMB_MAX_ROWS (INT64_C(1) << 40)
#define SHEMB_MAX_DIM 4096

struct shemb_table_attr {
	size_t size;          /* sizeof(struct shemb_table_attr) */
	const char *name;     /* copied; for messages; NULL = "table<id>" */
	int64_t rows;         /* 1 .. SHEMB_MAX_ROWS; no default */
	int dim;              /* 1 .. SHEMB_MAX_DIM; no default */
	int dtype;            /* storage: SHEMB_F32 (default), F16, BF16 */
	int64_t table_id;     /* mixed into initial values; -1 (default) =
			       * creation order in the context: 0, 1, ... */
	uint64_t seed;        /* initializer seed; default 0 */
	int init;             /* enum shemb_init; default UNIFORM */
	float init_low;       /* uniform range; when both are 0 (default) */
	float init_high;      /*  the range is +-sqrt(1 / rows) */
	float init_mean;      /* normal; default 0 */
	float init_std;       /* normal; default 1 */
	float init_value;     /* constant; default 0 */
	int optimizer;        /* enum shemb_optimizer; default SGD */
	float lr;             /* learning rate >= 0; default 0.01 */
	float eps;            /* Adagrad and Adam; > 0; default 1e-8 */
	float beta1;          /* Adam; [0, 1); default 0.9 */
	float beta2;          /* Adam; [0, 1); default 0.999 */
	float weight_decay;   /* >= 0; default 0 */
	int weight_decay_mode;     /* enum shemb_weight_decay; default L2 */
	float initial_accumulator; /* Adagrad state at start; >= 0; 0 */
	int shard;            /* enum shemb_shard; default AUTO */
	int shard_owner;      /* SHARD_TABLE: the rank holding it; -1
			       * (default): the rank with the most room
			       * left in its host budget */
	float expected_skew;  /* Zipf exponent the ids are expected to
			       * follow, for SHARD_AUTO; default 0 */
	int wire_dtype;       /* between ranks, lookup rows and gradients
			       * travel as SHEMB_F16 or SHEMB_BF16 (half the
			       * bytes of fp32, rounded); SHEMB_F32
			       * (default): rows as stored, gradients in
			       * fp32.  Reads and writes are always exact */
	int pool_at;          /* enum shemb_pool_at, for SUM and MEAN bags
			       * of row-wise and table-wise tables outside
			       * deterministic mode with wire_dtype F32;
			       * default AUTO */
	/* Tiers (shemb(7), TIERED STORAGE): */
	int64_t cache_rows;   /* rows of this rank's part kept in the device
			       * tier, where kernels read and update them:
			       * loaded when a call needs them, written
			       * back when evicted; a call needing more
			       * distinct rows than this fails with
			       * SHEMB_ENOMEM.  0 (default): no device
			       * tier, rows are used in host memory */
	int cache_policy;     /* enum shemb_cache_policy; default LRU */
	const char *cold_path; /* NULL (default): every row in host memory;
				* else rows live in this file (created or
				* truncated, removed at destroy; with more
				* than one rank, cold_path.<rank>), read and
				* written through the device tier, which it
				* needs (cache_rows > 0) */
	uint64_t host_mem_bytes; /* most host bytes this table's rows may
				  * take: over it without cold_path,
				  * SHEMB_ENOMEM; 0 (default): no limit but
				  * the context's */
	/* Serving (shemb_table_reload(3)): */
	int read_only;        /* 1: lookups from any number of threads at
			       * once take no lock and keep no plan; calls
			       * that change rows (backward, row writes,
			       * set_lr) give SHEMB_EPERM; needs
			       * cache_rows 0.  Default 0 */
};

/* Which row leaves a full device tier to make room. */
enum shemb_cache_policy {
	SHEMB_CACHE_LRU = 0,      /* least recently used */
	SHEMB_CACHE_LFU = 1,      /* least often used since the table was
				   * made (a 4-byte count per row; counts
				   * within a factor of 2 tie, then the
				   * least recently used goes) */
	SHEMB_CACHE_LOOKAHEAD = 2 /* as LFU, but never a row that an
				   * announced, not yet looked up step
				   * needs while any other row can go;
				   * of those, the one needed last first
				   * (shemb_announce) */
};

/* Fill attr with the installed library's defaults and set attr->size
 * (the sized form: see shemb_ctx_attr_init). */
SHEMB_API void shemb_table_attr_init_size(struct shemb_table_attr *attr,
					  size_t size);
static inline void shemb_table_attr_init(struct shemb_table_attr *attr)
{
	shemb_table_attr_init_size(attr, sizeof(*attr));
}

/* Create a table of attr->rows rows of attr->dim values, initialised so
 * that a value depends only on (seed, table_id, row, column).  Fails with
 * SHEMB_ENOMEM when its storage would exceed the context's host budget.
 * With more than one rank it is collective: every rank creates the same
 * tables alike in the same order, and the table exists on all or none. */
SHEMB_API int shemb_table_create(shemb_ctx *ctx,
				 const struct shemb_table_attr *attr,
				 shemb_table **table);

/* Destroy a table.  NULL is a no-op.  SHEMB_EPEER, the table left as it
 * is, when the context's thread of started steps is stuck in the
 * transport (shemb_alltoallv(3), BUGS). */
SHEMB_API int shemb_table_destroy(shemb_table *table);

/* The table's effective attributes: defaults resolved (table_id, name,
 * init range) and the current learning rate.  attr->size must be set;
 * attr->name points into the table and lives as long as it. */
SHEMB_API int shemb_table_get_attr(const shemb_table *table,
				   struct shemb_table_attr *attr);

/* Set the learning rate used by the next backward steps (finite, >= 0). */
SHEMB_API int shemb_table_set_lr(shemb_table *table, float lr);

/* Copy rows out as values of dtype (SHEMB_F32, F16 or BF16) into
 * out[n][dim].  Reading in the storage dtype is exact.  With more than one
 * rank it is collective: each rank gets its ids' rows from their owners. */
SHEMB_API int shemb_table_read_rows(shemb_table *table, int64_t n,
				    const int64_t *ids, void *out, int dtype);

/* Overwrite rows from in[n][dim] of dtype, rounding to the storage dtype
 * (round to nearest even).  Values must be finite, also once rounded (1e6
 * does not fit fp16); a repeated id takes the last of its rows.  Optimizer
 * state is kept, unless flags has SHEMB_WRITE_RESET_STATE.  With more than
 * one rank it is collective (the same flags on every rank): rows go to
 * their owners in the storage dtype and are stored rank by rank, so the
 * highest rank's last row of an id stays. */
#define SHEMB_WRITE_RESET_STATE (1u << 0)
SHEMB_API int shemb_table_write_rows(shemb_table *table, int64_t n,
				     const int64_t *ids, const void *in,
				     int dtype, unsigned flags);

/* ------------------------------------------------------------------------
 * Lookup and backward
 * ------------------------------------------------------------------------ */

enum shemb_pooling {
	SHEMB_POOL_SUM = 0,  /* sum of weight * row over the bag */
	SHEMB_POOL_MEAN = 1, /* that sum divided by the bag length */
	SHEMB_POOL_MAX = 2,  /* column-wise max of weight * row */
	SHEMB_POOL_NONE = 3  /* no pooling: one output row per id */
};

/*
 * One table's input to a step: nbags bags in CSR form.  Bag b holds
 * ids[offsets[b] .. offsets[b + 1] - 1].  offsets has nbags + 1 entries,
 * starts at 0, never decreases and ends at nids.  An empty bag pools to
 * zeros.  Arrays of this struct are read with the stride bags[0].size, so
 * every element must come from shemb_bags_init().
 */
struct shemb_bags {
	size_t size;            /* sizeof(struct shemb_bags) */
	shemb_table *table;
	int pooling;            /* enum shemb_pooling; default SUM */
	int dim;                /* 0, or the row width the caller's buffers
				 * assume: checked against the table's dim */
	int64_t nbags;          /* >= 0 */
	const int64_t *offsets; /* nbags + 1 entries; NULL when nbags == 0 */
	int64_t nids;           /* < 2^31 per table and call (fewer for
				 * tables of more than 2^33 rows: see
				 * shemb_lookup(3)) */
	const int64_t *ids;     /* 0 <= id < rows */
	const float *weights;   /* NULL, or one finite weight per id */
	int mem;                /* enum shemb_mem: where offsets, ids,
				 * weights and this set's output (lookup)
				 * or gradient (backward) are; default
				 * HOST */
};

/* Where a buffer of a call is. */
enum shemb_mem {
	SHEMB_MEM_HOST = 0,   /* host memory (default) */
	SHEMB_MEM_DEVICE = 1  /* memory of the context's CUDA device
			       * (a SHEMB_DEVICE_CUDA context) */
};

/* Fill bags with defaults and set bags->size (the sized form: see
 * shemb_ctx_attr_init). */
SHEMB_API void shemb_bags_init_size(struct shemb_bags *bags, size_t size);
static inline void shemb_bags_init(struct shemb_bags *bags)
{
	shemb_bags_init_size(bags, sizeof(*bags));
}

/* Lookup that will not be followed by a backward: keeps no step plan. */
#define SHEMB_LOOKUP_NO_GRAD (1u << 0)

/*
 * Look up n tables (features) at once: out[i] receives bags[i].nbags rows
 * of the table's dim floats (POOL_NONE: bags[i].nids rows).  A table may
 * appear more than once.  Unless flags has SHEMB_LOOKUP_NO_GRAD, the step
 * plan (distinct ids, and which positions use each) is kept for the
 * following shemb_backward() with the same bags.  With more than one
 * rank it is collective: every rank calls it with the same tables in the
 * same order (each with its own bags), and a failure on one rank fails it
 * on all (shemb(7)).
 */
SHEMB_API int shemb_lookup(shemb_ctx *ctx, int n,
			   const struct shemb_bags *bags, float *const *out,
			   unsigned flags);

/*
 * Backward of the last planned lookup of each table: grad[i] holds the
 * gradient of out[i] of that lookup (same shape).  Gradients are expanded
 * per id, summed per distinct row in position order, and each row is
 * updated once by its table's optimizer.  For each table, its bag sets
 * must be those it had in that lookup, in the same order (pooling, counts,
 * offsets, ids, weights given or not; weight values are taken from this
 * call): anything else gives SHEMB_EINVAL, no plan SHEMB_ESTATE.  Consumes
 * the plans.  With more than one rank it is collective, as shemb_lookup:
 * the owners of the rows sum the ranks' gradients in rank order.
 */
SHEMB_API int shemb_backward(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags,
			     const float *const *grad);

/*
 * shemb_lookup() and shemb_backward() without waiting: the step is queued
 * and *req completes when it is done (shemb_wait, shemb_test; its status
 * and detail are those the blocking call would give).  Steps of a context
 * run one at a time in the order they were started, on a thread of the
 * context, so a backward started after a lookup uses that lookup's plan,
 * and across ranks they meet in the same order.  Everything the call
 * points to (bags and their arrays, out or grad and their buffers) must
 * stay as it is until the request is done.  A blocking lookup or backward
 * made while steps are queued queues behind them; prefetches,
 * announcements, row reads and writes, table creation and destruction,
 * set_lr and flush wait for them; a collective started meanwhile is
 * queued and starts in its turn (all ranks start collectives in one
 * order), its request completing when it does.
 */
SHEMB_API int shemb_lookup_start(shemb_ctx *ctx, int n,
				 const struct shemb_bags *bags,
				 float *const *out, unsigned flags,
				 shemb_request **req);
SHEMB_API int shemb_backward_start(shemb_ctx *ctx, int n,
				   const struct shemb_bags *bags,
				   const float *const *grad,
				   shemb_request **req);

/*
 * One output of a lookup started without waiting: shemb_wait_part()
 * returns once out[i] (bag set i) is written, before the rest of the
 * lookup may be (tables are pooled one after another: the next layer can
 * start on the first); shemb_test_part() sets *done to 1 if it is, else
 * 0.  Either may be called any number of times, until the request is
 * freed, and neither consumes the status shemb_wait() reports.  A lookup
 * that failed gives its error (for every set).  On a CUDA context an
 * output is final only when the whole lookup is.
 */
SHEMB_API int shemb_wait_part(shemb_request *req, int i);
SHEMB_API int shemb_test_part(shemb_request *req, int i, int *done);

/*
 * Load into the device tier the rows that n bag sets (of the next step)
 * will need, so that their lookup finds them resident: call it for step
 * t + 1 before computing step t.  Tables without a device tier are
 * skipped.  With SHEMB_CACHE_LOOKAHEAD it also announces its step (see
 * shemb_announce), unless the caller announces steps itself.  Loads what
 * fits without evicting rows of the current step's planned lookup or of
 * announced steps: the rest is left for the lookup.  Nothing of the
 * tables' values changes.  With more than one rank it is collective, as
 * shemb_lookup: the ids travel to their owners.
 */
SHEMB_API int shemb_prefetch(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags);

/*
 * Tell the SHEMB_CACHE_LOOKAHEAD tiers of n bag sets' tables the rows a
 * coming step will need, without loading them: eviction then keeps the
 * rows announced steps need, and of those gives up first the one needed
 * last, as Belady's optimum would within the announced window.  Announce
 * steps in the order they will be looked up: each lookup of a table uses
 * up its oldest announced step.  At most 256 steps may wait; once a table
 * has announced steps, shemb_prefetch() loads without announcing.  Other
 * policies ignore it.  With more than one rank it is collective, as
 * shemb_lookup.
 */
SHEMB_API int shemb_announce(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags);

/*
 * Checkpoints (shemb-checkpoint(5)).  shemb_table_save writes the table's
 * rows, optimizer state and step count into the directory dir (which
 * every rank sees: a shared file system across hosts), replacing the
 * checkpoint there atomically: a crash leaves the old one or the new one.
 * shemb_table_load makes a table from the checkpoint in dir, whatever the
 * world size and shard plan that wrote it, every checksum verified
 * (SHEMB_ECORRUPT naming the file, and no table); attr NULL: the saved
 * attributes, with the shard plan SHEMB_SHARD_AUTO; else attr, whose
 * rows, dim, dtype and optimizer must be the checkpoint's (the dtype may
 * differ for a read_only table: the rows are converted).  Both are
 * collective.
 */
SHEMB_API int shemb_table_save(shemb_table *table, const char *dir,
			       unsigned flags);
/* flags of shemb_table_save: write only the rows changed since the
 * table's last save, when the checkpoint in dir is that save (else a
 * whole one); a load applies the saves in order. */
#define SHEMB_SAVE_INCREMENTAL 1u
SHEMB_API int shemb_table_load(shemb_ctx *ctx, const char *dir,
			       const struct shemb_table_attr *attr,
			       shemb_table **table);
/* Swap the rows of a read_only table for those of the checkpoint in dir
 * (same rows, dim and optimizer; rows of another dtype are converted)
 * while lookups go on: each lookup
 * reads the old rows or the new ones, never a mix.  One rank only
 * (SHEMB_ENOTSUP across ranks); a failure leaves the old rows. */
SHEMB_API int shemb_table_reload(shemb_table *table, const char *dir);

/* Write every changed row (and its optimizer state) of the table's device
 * tier back to host memory or its file; rows stay cached.  Not
 * collective: each rank flushes its own part. */
SHEMB_API int shemb_table_flush(shemb_table *table);

/* ------------------------------------------------------------------------
 * Collectives between ranks
 *
 * Every rank of the context makes the same collective calls in the same
 * order, as with MPI and NCCL.  Each call starts the collective and returns:
 * with req NULL it waits for it; otherwise *req tracks it, the buffers stay
 * the caller's until shemb_wait() or shemb_test() reports it done, and
 * shemb_request_free() releases the request.  Several collectives may be in
 * flight at once.  With one rank they are local copies (device buffers go
 * over NCCL when the context has it; see shemb_alltoallv(3)).  When a
 * collective fails, transfers of it may still be under way: keep its
 * buffers until shemb_ctx_destroy() (a peer that failed ends the job, and
 * mismatched calls are a program error).
 * ------------------------------------------------------------------------ */

/*
 * Priorities.  Of the transfers a rank has waiting, those of the
 * collective with the highest priority go first (ties: in the order the
 * collectives started).  Collectives above SHEMB_PRIO_DENSE move their data
 * on a lane of their own (a second endpoint of the transport), so they do
 * not wait for the chunks of those at or below it at all; on one lane, an
 * urgent exchange overtakes a bulk one under way once the chunks already
 * handed to the transport are sent (at most chunks_in_flight of each
 * collective).  Any int is a priority; give a collective the same one on
 * every rank (priorities on both sides of SHEMB_PRIO_DENSE fail it with
 * SHEMB_EINVAL).  The default order is EmbRace's:
 * the next forward's embedding traffic, then embedding gradients, then
 * dense gradients, in reverse layer order (give layer l, counted from
 * the input, SHEMB_PRIO_DENSE - l: the next forward needs layer 0 first).
 * A barrier moves no data and goes before everything.
 */
enum shemb_priority {
	SHEMB_PRIO_DENSE = 0,      /* shemb_alltoallv(), shemb_allgatherv(),
				    * shemb_allreduce() */
	SHEMB_PRIO_GRAD = 1000,    /* the exchanges of shemb_backward() */
	SHEMB_PRIO_LOOKUP = 2000   /* the exchanges of shemb_lookup(), its
				    * prefetches and announcements, and row
				    * reads */
};

enum shemb_reduce {
	SHEMB_REDUCE_SUM = 0,
	SHEMB_REDUCE_MAX = 1
};

/* Rank i sends sendcounts[j] bytes at sendbuf + sdispls[j] to every rank
 * j, and receives recvcounts[j] bytes from j at recvbuf + rdispls[j].  A
 * pair whose counts are 0 both ways exchanges no data; counts that
 * disagree between sender and receiver fail the collective with
 * SHEMB_EINVAL on those two ranks (the detail names the ranks and
 * counts), while the others finish it; the host transport checks this,
 * NCCL does not. */
SHEMB_API int shemb_alltoallv(shemb_ctx *ctx, const void *sendbuf,
			      const size_t *sendcounts, const size_t *sdispls,
			      void *recvbuf, const size_t *recvcounts,
			      const size_t *rdispls, shemb_request **req);

/* Every rank's sendcount bytes, rank j's at recvbuf + rdispls[j]
 * (recvcounts[j] must equal rank j's sendcount). */
SHEMB_API int shemb_allgatherv(shemb_ctx *ctx, const void *sendbuf,
			       size_t sendcount, void *recvbuf,
			       const size_t *recvcounts, const size_t *rdispls,
			       shemb_request **req);

/* recvbuf[k] = sum or max over ranks of sendbuf[k], k < count, of dtype
 * (F32, F64, I64, BF16, F16; 16-bit values are combined in fp32 and
 * rounded at each step).  sendbuf may equal recvbuf.  Every rank gets the
 * same bits. */
SHEMB_API int shemb_allreduce(shemb_ctx *ctx, const void *sendbuf,
			      void *recvbuf, size_t count, int dtype, int op,
			      shemb_request **req);

/* The three calls above with a priority of their own (enum
 * shemb_priority); without it they have SHEMB_PRIO_DENSE. */
SHEMB_API int shemb_alltoallv_prio(shemb_ctx *ctx, const void *sendbuf,
				   const size_t *sendcounts,
				   const size_t *sdispls, void *recvbuf,
				   const size_t *recvcounts,
				   const size_t *rdispls, int priority,
				   shemb_request **req);
SHEMB_API int shemb_allgatherv_prio(shemb_ctx *ctx, const void *sendbuf,
				    size_t sendcount, void *recvbuf,
				    const size_t *recvcounts,
				    const size_t *rdispls, int priority,
				    shemb_request **req);
SHEMB_API int shemb_allreduce_prio(shemb_ctx *ctx, const void *sendbuf,
				   void *recvbuf, size_t count, int dtype,
				   int op, int priority, shemb_request **req);

/* Returns on every rank once every rank has entered it. */
SHEMB_API int shemb_barrier(shemb_ctx *ctx, shemb_request **req);

/* Wait for a collective: its status (0, SHEMB_EINVAL for mismatched
 * calls, SHEMB_EPEER for a rank that left (seen by the TCP rendezvous, or
 * by a transfer finding its connection gone), SHEMB_ETIMEDOUT for one
 * that stopped answering, SHEMB_EIO for a transfer the transport failed
 * otherwise).  A request reports its status
 * once: later waits give SHEMB_ESTATE. */
SHEMB_API int shemb_wait(shemb_request *req);

/* *done = 1 and the status as shemb_wait() when finished, else *done = 0
 * and 0.  Moves transfers along when the context has no progress thread. */
SHEMB_API int shemb_test(shemb_request *req, int *done);

/* Release a request (NULL is a no-op).  An unfinished collective goes on
 * to its end without it.  shemb_ctx_destroy() releases the requests left. */
SHEMB_API void shemb_request_free(shemb_request *req);

/* ------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */

struct shemb_table_stats {
	size_t size;           /* set by the caller: sizeof(the struct) */
	uint64_t lookups;      /* bag sets looked up (one per shemb_bags) */
	uint64_t backwards;    /* bag sets through backward */
	uint64_t bags;         /* bags looked up */
	uint64_t ids;          /* ids looked up */
	uint64_t unique_ids;   /* distinct ids, summed over planned lookups */
	uint64_t rows_updated; /* row updates applied by the optimizer */
	uint64_t validate_ns;  /* time checking input */
	uint64_t plan_ns;      /* time deduplicating ids (step plan) */
	uint64_t pool_ns;      /* time gathering and pooling rows */
	uint64_t update_ns;    /* time coalescing and applying updates */
	/* more than one rank: */
	uint64_t sent_bytes;     /* this table's part of the step messages
				  * to other ranks (ids, rows, gradients) */
	uint64_t received_bytes; /* ... and from them */
	uint64_t exchange_ns;    /* time in the exchanges of the steps that
				  * had this table (one exchange serves all
				  * tables of a call: each counts it) */
	uint64_t phase_ns[3];    /* of that, the time waiting for each
				  * phase's transfers, by enum shemb_phase */
	/* a device tier (cache_rows > 0): */
	uint64_t cache_hits;       /* distinct rows a call needed that were
				    * in the device tier */
	uint64_t cache_misses;     /* rows loaded into it, by any call
				    * (prefetch included) */
	uint64_t cache_evictions;  /* rows that left it for room */
	uint64_t cache_writebacks; /* changed rows written back (evicted or
				    * flushed) */
	uint64_t cache_bytes_in;   /* bytes loaded into the device tier */
	uint64_t cache_bytes_out;  /* bytes written back from it */
	uint64_t prefetch_hits;    /* hits on rows a prefetch loaded, at
				    * their first use */
	/* more than one rank, a lookup started behind a backward: */
	uint64_t relaxed_lookups;  /* bag sets looked up while the
				    * backward before them still ran */
	uint64_t early_rows;       /* rows this rank sent them before that
				    * backward's update, which did not
				    * touch them */
};

/* Cumulative counters of a table since creation or the last reset. */
SHEMB_API int shemb_table_stats(const shemb_table *table,
				struct shemb_table_stats *stats);
SHEMB_API int shemb_table_stats_reset(shemb_table *table);

/* The exchanges of a step across ranks. */
enum shemb_phase {
	SHEMB_PHASE_IDS = 0,   /* lookup: distinct ids to their owners */
	SHEMB_PHASE_ROWS = 1,  /* lookup: the owners' rows back */
	SHEMB_PHASE_GRADS = 2  /* backward: gradient rows to the owners */
};

/* Bytes of the table's part of one phase that this rank sent to and
 * received from each rank (sent[r], received[r], world_size entries each;
 * either may be NULL), since creation or the last reset.  Entry `rank`
 * counts what stayed on this rank. */
SHEMB_API int shemb_table_stats_peers(const shemb_table *table, int phase,
				      uint64_t *sent, uint64_t *received);

/* A line per table of the context: its shard plan (as chosen for
 * SHEMB_SHARD_AUTO) and what this rank holds of it, into buf (always
 * terminated when len > 0).  Returns the length the whole text needs,
 * as snprintf does, or a negative SHEMB_E* code. */
SHEMB_API int shemb_ctx_plan_describe(const shemb_ctx *ctx, char *buf,
				      size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SHEMB_H */
