/*
 * table_attr.c - table attribute defaults and their checks.
 */
#include "lib/internal.h"

#include <math.h>
#include <string.h>

#include "lib/table.h"

SHEMB_API void shemb_table_attr_init_size(struct shemb_table_attr *a,
					  size_t size)
{
	struct shemb_table_attr d = {
		.size = sizeof(d),
		.dtype = SHEMB_F32,
		.table_id = -1,
		.shard_owner = -1,
		.init = SHEMB_INIT_UNIFORM,
		.init_std = 1.0f,
		.optimizer = SHEMB_OPT_SGD,
		.lr = 0.01f,
		.eps = 1e-8f,
		.beta1 = 0.9f,
		.beta2 = 0.999f,
		.weight_decay_mode = SHEMB_WD_L2,
	};

	shemb__init_sized(a, size, &d, sizeof(d));
}

int shemb__opt_state_floats(int optimizer, int dim)
{
	switch (optimizer) {
	case SHEMB_OPT_ADAGRAD:
		return dim;
	case SHEMB_OPT_ROWWISE_ADAGRAD:
		return 1;
	case SHEMB_OPT_ADAM:
		return 2 * dim;
	default:
		return 0;
	}
}

static int bad(shemb_ctx *ctx, const struct shemb_table_attr *a,
	       const char *what)
{
	return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': %s",
			   a->name ? a->name : "(unnamed)", what);
}

static int check_shape(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	if (a->rows < 1 || a->rows > SHEMB_MAX_ROWS)
		return bad(ctx, a, "rows must be in 1 .. 2^40");
	if (a->dim < 1 || a->dim > SHEMB_MAX_DIM)
		return bad(ctx, a, "dim must be in 1 .. 4096");
	if (a->dtype != SHEMB_F32 && a->dtype != SHEMB_F16 &&
	    a->dtype != SHEMB_BF16 && a->dtype != SHEMB_INT8)
		return bad(ctx, a, "dtype must be SHEMB_F32, F16, BF16 or "
				   "(read_only) INT8");
	if (a->dtype == SHEMB_INT8 && a->read_only != 1)
		return bad(ctx, a, "SHEMB_INT8 rows are for read_only tables");
	if (a->table_id < -1)
		return bad(ctx, a, "table_id must be -1 (automatic) or >= 0");
	return 0;
}

static int check_init(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	if (a->init < SHEMB_INIT_UNIFORM || a->init > SHEMB_INIT_CONSTANT)
		return bad(ctx, a, "init is not an enum shemb_init value");
	if (!isfinite(a->init_low) || !isfinite(a->init_high) ||
	    !isfinite(a->init_mean) || !isfinite(a->init_std) ||
	    !isfinite(a->init_value))
		return bad(ctx, a, "initializer parameters must be finite");
	if (a->init == SHEMB_INIT_UNIFORM && a->init_low > a->init_high)
		return bad(ctx, a, "init_low is above init_high");
	if (a->init == SHEMB_INIT_NORMAL && a->init_std < 0)
		return bad(ctx, a, "init_std is negative");
	return 0;
}

static int check_opt(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	if (a->optimizer < SHEMB_OPT_SGD || a->optimizer > SHEMB_OPT_ADAM)
		return bad(ctx, a, "optimizer is not an enum shemb_optimizer "
				   "value");
	if (!isfinite(a->lr) || a->lr < 0)
		return bad(ctx, a, "lr must be finite and >= 0");
	if (!isfinite(a->eps) || a->eps <= 0)
		return bad(ctx, a, "eps must be finite and > 0");
	if (!(a->beta1 >= 0 && a->beta1 < 1) || !(a->beta2 >= 0 && a->beta2 < 1))
		return bad(ctx, a, "beta1 and beta2 must be in [0, 1)");
	if (!isfinite(a->weight_decay) || a->weight_decay < 0)
		return bad(ctx, a, "weight_decay must be finite and >= 0");
	if (a->weight_decay_mode != SHEMB_WD_L2 &&
	    a->weight_decay_mode != SHEMB_WD_DECOUPLED)
		return bad(ctx, a, "weight_decay_mode must be SHEMB_WD_L2 or "
				   "SHEMB_WD_DECOUPLED");
	if (!isfinite(a->initial_accumulator) || a->initial_accumulator < 0)
		return bad(ctx, a, "initial_accumulator must be finite and >= 0");
	return 0;
}

static int check_tiers(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	if (a->cache_rows < 0)
		return bad(ctx, a, "cache_rows must be >= 0");
	if (a->cache_policy < SHEMB_CACHE_LRU ||
	    a->cache_policy > SHEMB_CACHE_LOOKAHEAD)
		return bad(ctx, a, "cache_policy is not an enum "
				   "shemb_cache_policy value");
	if (a->cold_path && !a->cold_path[0])
		return bad(ctx, a, "cold_path is empty");
	if (a->cold_path && a->cache_rows == 0)
		return bad(ctx, a, "a cold_path needs a device tier "
				   "(cache_rows > 0)");
	if (a->read_only != 0 && a->read_only != 1)
		return bad(ctx, a, "read_only must be 0 or 1");
	if (a->read_only && a->cache_rows)
		return bad(ctx, a, "a read_only table has no device tier "
				   "(cache_rows must be 0): its lookups take "
				   "no lock");
	return 0;
}

int shemb__table_attr_check(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	int rc = check_shape(ctx, a);

	if (!rc)
		rc = check_init(ctx, a);
	if (!rc)
		rc = check_opt(ctx, a);
	if (!rc)
		rc = check_tiers(ctx, a);
	return rc;
}
