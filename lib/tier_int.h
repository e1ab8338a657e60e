/*
 * tier_int.h - the inside of a device tier, shared by lib/tier*.c only.
 */
#ifndef SHEMB_TIER_INT_H
#define SHEMB_TIER_INT_H

#include "lib/tier.h"

#include <sys/types.h>

#include "lib/rowmap.h"

/* Steps a LOOKAHEAD tier may know ahead (announced, not looked up). */
#define SHEMB__AHEAD_MAX 256

/*
 * Evictable slots in doubly linked lists, least recent first in each: one
 * list per class of value, so that every move is O(1).  LRU uses list 0;
 * LFU and LOOKAHEAD list floor(log2(uses)), so that counts within a
 * factor of two tie and go by recency.  Under LOOKAHEAD, a row that an
 * announced step needs is in the list of the first such step (a ring of
 * SHEMB__AHEAD_MAX lists); last, the rows of the planned lookup whose
 * backward is to come.  Pinned and free slots are in no list.
 */
#define SHEMB__LIST_PLAN 32
#define SHEMB__LIST_AHEAD 33
#define SHEMB__NLISTS (SHEMB__LIST_AHEAD + SHEMB__AHEAD_MAX)

/* What the tier knows of one slot, in one 40-byte record: a row a call
 * handles touches one or two cache lines of it, not one per field. */
struct shemb__slot {
	int64_t row;            /* -1: free */
	int64_t next_use;       /* LOOKAHEAD: first announced step that
				 * needs it, -1: none */
	uint64_t plan;          /* the planned lookup that last used it */
	int32_t prev, next;     /* its eviction list's neighbours */
	int32_t pins;
	int16_t list;           /* its eviction list, -1: none */
	uint8_t dirty;
	uint8_t by_prefetch;    /* loaded by a prefetch, not yet used */
};

struct shemb__evict_lists {
	struct shemb__slot *slot;
	int32_t head[SHEMB__NLISTS], tail[SHEMB__NLISTS];
	uint64_t nonempty;      /* a bit per plain list */
	int32_t n;              /* slots in lists */
};

/* One announced step: its distinct rows, and for each the next announced
 * step that needs it (-1: none) and its place there. */
struct shemb__ahead_step {
	int64_t n;
	int64_t *rows;
	int64_t *next_seq;
	int32_t *next_idx;
};

/* A row's first and last occurrences in the announced steps. */
struct shemb__ahead_entry {
	int64_t row;            /* -1: empty */
	int64_t first_seq, last_seq;
	int32_t first_idx, last_idx;
};

/* The announced steps of a LOOKAHEAD tier, oldest first. */
struct shemb__ahead {
	struct shemb__ahead_step ring[SHEMB__AHEAD_MAX];
	uint64_t head, tail;    /* queued: steps head .. tail - 1 */
	bool used;              /* shemb_announce() was called */
	struct shemb__rowmap map; /* row -> struct shemb__ahead_entry */
};

struct shemb__cold {
	int fd;
	bool owner;             /* locked: the file is this table's */
	char *path;
	dev_t dev;              /* which file, to remove only it */
	ino_t ino;
};

struct shemb__tier {
	int policy;
	int32_t nslots;
	struct shemb__store dev;        /* nslots records */
	struct shemb__slot *slot;       /* [nslots] */
	uint64_t plan;                  /* the current planned lookup */
	bool plan_open;                 /* ... and its backward is to come */
	int32_t *free_slots;
	int32_t nfree;
	int64_t npinned;                /* pins held, all calls */
	uint64_t next_turn, serving;    /* calls waiting for room, in */
	int64_t waiting;                /* order (tier_acquire.c) */
	struct shemb__rowmap index;     /* row -> struct shemb__index_rec */
	struct shemb__evict_lists order;
	uint32_t *freq;                 /* per local row: LFU, LOOKAHEAD */
	struct shemb__ahead ahead;
	struct shemb__cold cold;        /* fd -1: rows in host memory */
	uint64_t reserved_host, reserved_device;
	atomic_int_fast64_t loads_queued; /* prefetch loads not yet done */
	pthread_mutex_t lock;
	pthread_cond_t unpinned;
};

/* The row-to-slot index: a row map of these. */
struct shemb__index_rec {
	int64_t row;
	int32_t slot;
};

static inline int32_t shemb__index_find(const struct shemb__rowmap *ix,
					int64_t row)
{
	const struct shemb__index_rec *e = shemb__rowmap_find(ix, row);

	return e ? e->slot : -1;
}

/* row is not in the index */
static inline void shemb__index_put(struct shemb__rowmap *ix, int64_t row,
				    int32_t slot)
{
	((struct shemb__index_rec *)shemb__rowmap_add(ix, row))->slot = slot;
}

/* row is in the index */
static inline void shemb__index_del(struct shemb__rowmap *ix, int64_t row)
{
	shemb__rowmap_del(ix, shemb__rowmap_find(ix, row));
}

/* tier_order.c */
void shemb__lists_init(struct shemb__evict_lists *l, struct shemb__slot *slot);
/* Put slot last in the list the tier's policy gives it now (first:
 * back where it was taken from, as the next to go). */
void shemb__lists_add(struct shemb__tier *tr, int32_t slot, bool first);
void shemb__lists_remove(struct shemb__evict_lists *l, int32_t slot);
/* The slot to evict, -1 when none; `unprotected`: only from the lists
 * of rows no prefetch or plan protects. */
int32_t shemb__lists_victim(struct shemb__tier *tr, bool unprotected);

/* The list a slot belongs in under the tier's policy. */
int shemb__tier_list(const struct shemb__tier *tr, int32_t slot);
/* Move a slot that is in a list to the one it belongs in now. */
void shemb__lists_refile(struct shemb__tier *tr, int32_t slot);

/* tier_ahead.c: the announced steps (with the tier's lock held) */
void shemb__ahead_free(struct shemb__ahead *a);
int shemb__ahead_push(struct shemb__tier *tr, int64_t n,
		      const int64_t *rows);
void shemb__ahead_pop(struct shemb__tier *tr);
int64_t shemb__ahead_first(const struct shemb__ahead *a, int64_t row);

/* tier_dedupe.c: the distinct values of rows[0 .. n) (n < 2^31), in
 * first-seen order, into d (room for n); of each position, its value's
 * index in d into at (NULL: not wanted).  How many, or -1 without
 * memory. */
int64_t shemb__dedupe(int64_t n, const int64_t *rows, int64_t *d,
		      int32_t *at);

/* tier_move.c: records between the device tier and the tier below */
int shemb__tier_load(shemb_table *t, int64_t n, const int64_t *slots,
		     const int64_t *rows);
int shemb__tier_write_back(shemb_table *t, int64_t n, const int64_t *slots,
			   const int64_t *rows);

/* tier_cold.c: the file below the device tier */
int shemb__cold_create(shemb_table *t, struct shemb__cold *c,
		       const struct shemb__init_spec *spec);
void shemb__cold_close(struct shemb__cold *c);
int shemb__cold_read(shemb_table *t, const struct shemb__cold *c,
		     int64_t row, void *record);
int shemb__cold_write(shemb_table *t, const struct shemb__cold *c,
		      int64_t row, const void *record);

#endif
