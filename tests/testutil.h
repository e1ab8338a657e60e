/*
 * testutil.h - shared pieces of the unit tests: a deterministic generator,
 * random CSR bags, plain reference loops for lookup and backward, the
 * reference rounding to fp16 / bf16, tolerant comparisons and snapshots of
 * whole tables.
 *
 * The references are written from SEMANTICS (pooling formulas, expansion,
 * coalescing in position order, each optimizer), never from the library's
 * code; they only borrow a table's starting rows and attributes from it.
 */
#ifndef SHEMB_TESTUTIL_H
#define SHEMB_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shemb.h"

#define TU_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- memory ---- */

/* malloc / calloc that abort the test program when out of memory */
void *tu_malloc(size_t bytes);
void *tu_calloc(size_t n, size_t size);

/* A new directory /tmp/PREFIX.XXXXXX (to free with tu_remove_dir, which
 * removes it and what it holds). */
char *tu_temp_dir(const char *prefix);
void tu_remove_dir(char *dir);

/* ---- deterministic random numbers (splitmix64) ---- */

struct tu_rng {
	uint64_t state;
};

void tu_rng_seed(struct tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(struct tu_rng *r);
/* uniform in [0, 1) with 53 random bits */
double tu_rng_unit(struct tu_rng *r);
/* uniform integer in [0, n), n > 0 */
int64_t tu_rng_below(struct tu_rng *r, int64_t n);
/* uniform float in [lo, hi) */
float tu_rng_float(struct tu_rng *r, float lo, float hi);
/* n floats uniform in [lo, hi) */
void tu_rng_fill(struct tu_rng *r, float *v, size_t n, float lo, float hi);

/* ---- random CSR bags ---- */

struct tu_bag_spec {
	int64_t nbags;
	int max_len;       /* lengths uniform in 0 .. max_len */
	int64_t rows;      /* ids in [0, rows) */
	bool weighted;     /* one weight per id in [-1.5, 1.5) */
	bool zipf;         /* skew the ids towards small rows */
	int repeat_pct;    /* chance that an id repeats the bag's last one */
	int empty_pct;     /* extra chance that a bag is empty */
};

struct tu_bags {
	int64_t nbags;
	int64_t nids;
	int64_t *offsets;  /* nbags + 1 */
	int64_t *ids;
	float *weights;    /* NULL when unweighted */
};

void tu_bags_random(struct tu_bags *b, struct tu_rng *r,
		    const struct tu_bag_spec *spec);
/* Bags given by their lengths and ids (weights may be NULL). */
void tu_bags_from(struct tu_bags *b, int64_t nbags, const int64_t *lengths,
		  const int64_t *ids, const float *weights);
void tu_bags_copy(struct tu_bags *dst, const struct tu_bags *src);
void tu_bags_free(struct tu_bags *b);

/* The library's view of b as one bag set of table t. */
struct shemb_bags tu_bags_view(const struct tu_bags *b, shemb_table *t,
			       int pooling);
/* Output rows of a set: nbags, or nids without pooling. */
int64_t tu_out_rows(const struct tu_bags *b, int pooling);

/* ---- dtypes and the reference rounding ---- */

size_t tu_dtype_size(int dtype);
/* a float's bit pattern, and back */
uint32_t tu_bits_of(float f);
float tu_float_of(uint32_t u);
/* fp16 through the compiler's _Float16 */
uint16_t tu_f32_to_f16(float x);
float tu_f16_to_f32(uint16_t h);
/* bf16: round to nearest even by comparing the dropped half word */
uint16_t tu_f32_to_bf16(float x);
float tu_bf16_to_f32(uint16_t h);
/* x rounded to dtype and back to fp32 */
float tu_round(float x, int dtype);
/* n fp32 values into dtype (rounded), and back */
void tu_store(int dtype, void *dst, const float *src, size_t n);
void tu_load(int dtype, const void *src, float *dst, size_t n);

/* ---- the reference table ---- */

struct tu_ref {
	int64_t rows;
	int dim;
	int dtype;
	struct shemb_table_attr attr; /* optimizer settings, lr */
	float *w;          /* rows x dim, the stored values as fp32 */
	float *state;      /* rows x nstate */
	int nstate;
	int64_t step;      /* backward calls applied (Adam's t) */
};

/* Start from table t's current rows and attributes, fresh optimizer
 * state (valid for a table that has seen no backward). */
void tu_ref_init(struct tu_ref *ref, shemb_table *t);
void tu_ref_free(struct tu_ref *ref);
/* A row's optimizer state back to its initial value. */
void tu_ref_reset_state(struct tu_ref *ref, int64_t row);
/* Overwrite n rows from fp32 values (rounded to the storage dtype). */
void tu_ref_write(struct tu_ref *ref, int64_t n, const int64_t *ids,
		  const float *in);

void tu_ref_lookup(const struct tu_ref *ref, const struct tu_bags *b,
		   int pooling, float *out);

struct tu_ref_set {
	const struct tu_bags *bags;
	int pooling;
	const float *grad;
};

/* One backward call: the sets of this table, in call order. */
void tu_ref_backward(struct tu_ref *ref, int nsets,
		     const struct tu_ref_set *sets);

/* ---- comparisons ---- */

/* |got - want| <= rel * |want| + abs_floor (and both NaN counts as equal) */
bool tu_close(float got, float want, float rel, float abs_floor);
/* Mismatching values; the first few are printed under the name what. */
int64_t tu_mismatches(const char *what, const float *got, const float *want,
		      int64_t n, float rel, float abs_floor);
/* Values of a whose bits differ from b's. */
int64_t tu_bits_differ(const char *what, const void *a, const void *b,
		       size_t bytes);

/* ---- snapshots: every row in the storage dtype ---- */

struct tu_snapshot {
	int dtype;
	int64_t rows;
	int dim;
	void *data;
	size_t bytes;
};

void tu_snapshot_take(struct tu_snapshot *s, shemb_table *t);
bool tu_snapshot_equal(const struct tu_snapshot *a,
		       const struct tu_snapshot *b);
/* Whether row r is the same in both. */
bool tu_snapshot_row_equal(const struct tu_snapshot *a,
			   const struct tu_snapshot *b, int64_t r);
void tu_snapshot_free(struct tu_snapshot *s);
/* Whether t still holds what before holds (before is kept). */
bool tu_unchanged_since(const struct tu_snapshot *before, shemb_table *t);
/* Read all rows of t as fp32 into a new buffer. */
float *tu_read_all_f32(shemb_table *t);

/* ---- contexts and tables ---- */

/* The kernel variants SHEMB_ISA can force. */
extern const char *const tu_isas[3];

/* Create a context with nthreads, forcing kernel variant isa (NULL: the
 * library's choice); SHEMB_ISA is restored afterwards. */
int tu_ctx_create(const char *isa, int nthreads, shemb_ctx **ctx);
/* A table with rows x dim of dtype and the given optimizer (defaults for
 * everything else); aborts on failure. */
shemb_table *tu_table(shemb_ctx *ctx, int64_t rows, int dim, int dtype,
		      int optimizer);
shemb_table *tu_table_attr(shemb_ctx *ctx,
			   const struct shemb_table_attr *attr);

/* ---- threads ---- */

/* Threads of this process now (/proc/self/task). */
int tu_thread_count(void);
/* The count once it settles at want (a joined thread can stay listed in
 * /proc for a moment after its join returns), or whatever it is after
 * 5 s. */
int tu_thread_count_settled(int want);
/* The count to compare a test's threads with: after a thread of its own
 * came and went (a runtime that starts a thread of its own with the
 * process's first others, as a sanitizer's, has then started it), once
 * it holds still. */
int tu_thread_baseline(void);

/* Whether the message contains every one of the NULL-terminated words. */
bool tu_contains_all(const char *msg, ...);

#endif
