/*
 * shard.c - a table's shard plan: the kind (chosen when the attrs leave
 * it to the library), the owner of a table-wise table, and what this rank
 * stores.
 */
#include "lib/internal.h"

#include <stdio.h>

#include "lib/shard.h"
#include "lib/table.h"

/* Tables up to this size are copied to every rank under SHARD_AUTO (when
 * every rank has room): their gradient exchange is small, and their
 * lookups need no exchange. */
#define REPLICATE_BYTES (1u << 20)
/*
 * Under SHARD_AUTO, a skew at least this high (Zipf exponent) spreads the
 * columns of each row rather than the rows, so that hot rows do not load
 * one rank (EmbRace), and only for rows wide enough that sending every
 * distinct id to every rank adds little.  Since each rank deduplicates
 * its ids first, row-wise is balanced well beyond that: shemb-bench
 * train measured max/mean bytes per rank of 1.009 row-wise (1.002
 * column-wise, with 9% more bytes) for Zipf 1.2 over 4 ranks.
 */
#define COLUMN_SKEW 1.5f
#define COLUMN_MIN_DIM_PER_RANK 16
/* Fewer rows than this per rank are not worth spreading. */
#define MIN_ROWS_PER_RANK 64

/* B of shemb_table_create(3): the size class of the table. */
static uint64_t table_bytes(const struct shemb_table_attr *a)
{
	uint64_t row = (uint64_t)a->dim * (a->dtype == SHEMB_F32 ? 4 : 2) +
		       4ull * (uint64_t)shemb__opt_state_floats(a->optimizer,
								 a->dim);

	return row * (uint64_t)a->rows;
}

/* What the whole table takes in memory, its records padded: what a rank
 * that holds it claims of its budget, hence what room is counted in. */
static uint64_t stored_bytes(const struct shemb_table_attr *a)
{
	return (uint64_t)shemb__record_bytes(a, a->dim) * (uint64_t)a->rows;
}

/* Bytes of host budget rank r has left for tables (as accounted). */
static uint64_t room_on(const shemb_ctx *ctx, int r)
{
	uint64_t budget = ctx->rank_budget[r], used = ctx->rank_bytes[r];

	return budget > used ? budget - used : 0;
}

/* The rank with the most room left (lowest on ties): every rank creates
 * the same tables in the same order and knows every budget, so all
 * agree. */
static int roomiest(const shemb_ctx *ctx)
{
	int best = 0;

	for (int r = 1; r < ctx->attr.world_size; r++)
		if (room_on(ctx, r) > room_on(ctx, best))
			best = r;
	return best;
}

static uint64_t least_room(const shemb_ctx *ctx)
{
	uint64_t least = UINT64_MAX;

	for (int r = 0; r < ctx->attr.world_size; r++)
		least = room_on(ctx, r) < least ? room_on(ctx, r) : least;
	return least;
}

/*
 * SHARD_AUTO: replicate small tables that every rank has ample room for
 * (an eighth of the tightest rank's room left), spread the columns of
 * very skewed wide tables, put tiny tables whole on the rank with the
 * most room when they fit there, and spread the rows of the rest.
 */
static int choose_kind(const shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	int world = ctx->attr.world_size;
	uint64_t bytes = table_bytes(a);

	if (world == 1)
		return SHEMB_SHARD_ROW;
	if (bytes <= REPLICATE_BYTES && stored_bytes(a) <= least_room(ctx) / 8)
		return SHEMB_SHARD_REPLICATED;
	if (a->expected_skew >= COLUMN_SKEW &&
	    a->dim >= COLUMN_MIN_DIM_PER_RANK * world)
		return SHEMB_SHARD_COLUMN;
	if (a->rows < (int64_t)MIN_ROWS_PER_RANK * world &&
	    stored_bytes(a) <= room_on(ctx, roomiest(ctx)))
		return SHEMB_SHARD_TABLE;
	return SHEMB_SHARD_ROW;
}

static int check_kind(shemb_ctx *ctx, const struct shemb_table_attr *a,
		      int world)
{
	const char *name = a->name ? a->name : "(unnamed)";

	if (a->shard < SHEMB_SHARD_AUTO || a->shard > SHEMB_SHARD_REPLICATED)
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': shard %d is "
				   "not an enum shemb_shard value", name,
				   a->shard);
	if (a->shard_owner < -1 || a->shard_owner >= world)
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': shard_owner "
				   "%d is not -1 or a rank below %d", name,
				   a->shard_owner, world);
	if (!(a->expected_skew >= 0.0f && a->expected_skew <= 100.0f))
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': "
				   "expected_skew must be in 0 .. 100", name);
	if (a->wire_dtype != SHEMB_F32 && a->wire_dtype != SHEMB_F16 &&
	    a->wire_dtype != SHEMB_BF16)
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': wire_dtype "
				   "must be SHEMB_F32, F16 or BF16", name);
	if (a->pool_at < SHEMB_POOL_AT_AUTO || a->pool_at > SHEMB_POOL_AT_OWNER)
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': pool_at %d "
				   "is not an enum shemb_pool_at value", name,
				   a->pool_at);
	if (a->shard == SHEMB_SHARD_COLUMN && world > 1 && a->dim < world)
		return shemb__fail(ctx, SHEMB_EINVAL, "table '%s': column-wise "
				   "over %d ranks needs dim >= %d, not %d",
				   name, world, world, a->dim);
	return 0;
}

int shemb__shard_plan(shemb_ctx *ctx, const struct shemb_table_attr *a,
		      struct shemb__shard *s)
{
	int world = ctx->attr.world_size, rc = check_kind(ctx, a, world);
	int kind, owner = 0;

	if (rc)
		return rc;
	pthread_mutex_lock(&ctx->lock); /* rank_bytes */
	kind = a->shard == SHEMB_SHARD_AUTO ? choose_kind(ctx, a) : a->shard;
	if (world > 1 && kind == SHEMB_SHARD_TABLE)
		owner = a->shard_owner >= 0 ? a->shard_owner : roomiest(ctx);
	pthread_mutex_unlock(&ctx->lock);
	*s = (struct shemb__shard){
		.kind = kind,
		.world = world,
		.rank = ctx->attr.rank,
		.owner = owner,
		.rows = a->rows,
		.dim = a->dim,
		.local_rows = a->rows,
	};
	if (world == 1) {
		s->ncols = a->dim;
		return 0;
	}
	shemb__shard_columns(s, s->rank, &s->col0, &s->ncols);
	if (s->kind == SHEMB_SHARD_TABLE) {
		s->local_rows = s->owner == s->rank ? a->rows : 0;
	} else if (s->kind == SHEMB_SHARD_ROW) {
		while ((1ll << s->bits) < a->rows || s->bits == 0)
			s->bits++;
		s->key = (uint64_t)a->table_id * 0x2545f4914f6cdd1dull;
		s->local_rows = shemb__shard_row_count(a->rows, world,
						       s->rank);
	}
	return 0;
}

/* The bytes of table a that rank r stores under plan s: its rows of a
 * row-wise table, every row of its columns of a column-wise one. */
static uint64_t share_of(const struct shemb_table_attr *a,
			 const struct shemb__shard *s, int r)
{
	int col0, ncols;

	switch (s->kind) {
	case SHEMB_SHARD_TABLE:
		return r == s->owner ? stored_bytes(a) : 0;
	case SHEMB_SHARD_ROW:
		return (uint64_t)shemb__shard_row_count(a->rows, s->world, r) *
		       shemb__record_bytes(a, a->dim);
	case SHEMB_SHARD_COLUMN:
		shemb__shard_columns(s, r, &col0, &ncols);
		return (uint64_t)a->rows * shemb__record_bytes(a, ncols);
	default:
		return stored_bytes(a);
	}
}

/* Account the bytes each rank holds, for the owners of later tables.
 * Every rank counts alike, from the attributes the ranks compared (not
 * from cold_path, which may differ between them). */
void shemb__shard_account(shemb_ctx *ctx, const struct shemb_table_attr *a,
			  const struct shemb__shard *s, bool add)
{
	if (s->world == 1)
		return;
	pthread_mutex_lock(&ctx->lock);
	for (int r = 0; r < s->world; r++) {
		uint64_t v = share_of(a, s, r);

		ctx->rank_bytes[r] += add ? v : -v;
	}
	pthread_mutex_unlock(&ctx->lock);
}

const char *shemb__shard_name(int kind)
{
	static const char *const names[] = { "auto", "row-wise",
					     "column-wise", "table-wise",
					     "replicated" };

	return kind >= 0 && kind <= 4 ? names[kind] : "?";
}

int shemb__shard_describe(const struct shemb__shard *s, char *buf,
			  size_t len)
{
	if (s->world == 1)
		return snprintf(buf, len, "local");
	switch (s->kind) {
	case SHEMB_SHARD_TABLE:
		return snprintf(buf, len, "table-wise on rank %d", s->owner);
	case SHEMB_SHARD_COLUMN:
		return snprintf(buf, len, "column-wise, %d columns of %d here",
				s->ncols, s->dim);
	case SHEMB_SHARD_ROW:
		return snprintf(buf, len, "row-wise, %lld of %lld rows here",
				(long long)s->local_rows, (long long)s->rows);
	default:
		return snprintf(buf, len, "replicated");
	}
}
