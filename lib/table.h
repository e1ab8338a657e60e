/*
 * table.h - what the core's other files need of tables and contexts.
 */
#ifndef SHEMB_TABLE_H
#define SHEMB_TABLE_H

#include "lib/internal.h"

#include <stddef.h>

/* The size of the first released struct shemb_table_attr. */
#define SHEMB__TABLE_ATTR_V1_SIZE                                            \
	(offsetof(struct shemb_table_attr, initial_accumulator) + sizeof(float))

/* Take bytes of a budget whose use is *used; -1 (and nothing taken)
 * when that would go over. */
int shemb__budget_take(uint64_t budget, atomic_uint_fast64_t *used,
		       uint64_t bytes);

/* Take bytes of the context's device or host budget for what of table;
 * SHEMB_ENOMEM with the detail when that would go over.  And give them
 * back. */
int shemb__budget_claim(shemb_ctx *ctx, const char *table, const char *what,
			uint64_t bytes, bool device);
void shemb__budget_release(shemb_ctx *ctx, uint64_t bytes, bool device);

/* Check table attributes; 0 or SHEMB_EINVAL with the detail recorded. */
int shemb__table_attr_check(shemb_ctx *ctx, const struct shemb_table_attr *a);

/* fp32 values of optimizer state per row */
int shemb__opt_state_floats(int optimizer, int dim);

/* Bytes of a record of table a holding ncols of its columns: the row,
 * its optimizer state, the padding (shemb_table_create(3), MEMORY). */
size_t shemb__record_bytes(const struct shemb_table_attr *a, int ncols);

#endif
