/*
 * tier_int.h - the inside of a device tier, shared by lib/tier*.c only.
 */
#ifndef SHEMB_TIER_INT_H
#define SHEMB_TIER_INT_H

#include "lib/tier.h"

/* Row -> slot: open addressing, linear probing, backward-shift delete. */
struct shemb__slot_index {
	int64_t *rows;          /* -1: empty */
	int32_t *slots;
	uint64_t mask;
};

/* Evictable slots, least valuable first: an indexed binary min-heap. */
struct shemb__evict_heap {
	int32_t *heap;          /* slots */
	int32_t *pos;           /* slot -> place in heap, -1: not in it */
	uint64_t *key;          /* slot -> its key */
	int32_t n;
};

struct shemb__cold {
	int fd;
	char *path;
	uint64_t bytes;
};

struct shemb__tier {
	int policy;
	int32_t nslots;
	struct shemb__store dev;        /* nslots records */
	int64_t *slot_row;              /* -1: free */
	int32_t *pins;
	uint8_t *dirty;
	uint8_t *by_prefetch;           /* loaded by a prefetch, not yet used */
	uint16_t *pending;              /* prefetches not yet looked up */
	uint64_t *announced;            /* the last prefetch that wanted it */
	uint64_t *plan_of;              /* the planned lookup that last used
					 * it */
	uint64_t plan;                  /* the current planned lookup */
	bool plan_open;                 /* ... and its backward is to come */
	int32_t *free_slots;
	int32_t nfree;
	int64_t npinned;                /* pins held, all calls */
	struct shemb__slot_index index;
	struct shemb__evict_heap order;
	uint32_t *freq;                 /* per local row: LFU, LOOKAHEAD */
	uint64_t tick, calls, prefetches;
	struct shemb__cold cold;        /* fd -1: rows in host memory */
	uint64_t reserved_host, reserved_device;
	pthread_mutex_t lock;
	pthread_cond_t unpinned;
};

/* tier_order.c */
int shemb__index_init(struct shemb__slot_index *ix, int32_t nslots);
void shemb__index_free(struct shemb__slot_index *ix);
int32_t shemb__index_find(const struct shemb__slot_index *ix, int64_t row);
void shemb__index_put(struct shemb__slot_index *ix, int64_t row, int32_t s);
void shemb__index_del(struct shemb__slot_index *ix, int64_t row);

int shemb__heap_init(struct shemb__evict_heap *h, int32_t nslots);
void shemb__heap_free(struct shemb__evict_heap *h);
void shemb__heap_push(struct shemb__evict_heap *h, int32_t slot,
		      uint64_t key);
void shemb__heap_remove(struct shemb__evict_heap *h, int32_t slot);
int32_t shemb__heap_pop(struct shemb__evict_heap *h);

/* The eviction key of a slot under the tier's policy (lowest goes);
 * protected rows are at or above these levels. */
#define SHEMB__KEY_PENDING (UINT64_C(2) << 62)
#define SHEMB__KEY_PLAN (UINT64_C(3) << 62)
uint64_t shemb__tier_key(const struct shemb__tier *tr, int32_t slot);

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
