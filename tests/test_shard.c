/*
 * test_shard.c - where rows live: the row-wise permutation is a
 * bijection whose inverse undoes it, every rank holds the number of rows
 * it claims, runs of ids spread over the ranks, and column slices tile a
 * row; the owner and local row found together agree.  Checked against
 * plain loops over every id.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "shemb.h"
#include "lib/shard.h"
#include "tests/check_run.h"

static struct shemb__shard row_plan(int64_t rows, int world, int rank,
				    uint64_t key)
{
	struct shemb__shard s = { .kind = SHEMB_SHARD_ROW, .world = world,
				  .rank = rank, .rows = rows, .dim = 8,
				  .ncols = 8, .key = key };

	while ((1ll << s.bits) < rows || s.bits == 0)
		s.bits++;
	s.local_rows = rows > rank ? (rows - rank + world - 1) / world : 0;
	return s;
}

/* shemb__shard_place, the permutation taken once, agrees. */
static void check_place(const struct shemb__shard *s, int64_t id, int owner,
			int64_t local)
{
	int o = -2;
	int64_t l = -2;

	shemb__shard_place(s, id, &o, &l);
	ck_assert_int_eq(o, owner);
	ck_assert_int_eq(l, local);
}

/* Every id has one owner and local row; each rank's local rows map back
 * to exactly its ids. */
START_TEST(row_plan_is_a_bijection)
{
	static const int64_t sizes[] = { 1, 2, 3, 5, 64, 97, 1000, 4097 };
	int64_t rows = sizes[_i % 8];
	int world = 2 + _i / 8;
	char *seen = calloc((size_t)rows, 1);

	for (int r = 0; r < world; r++) {
		struct shemb__shard s = row_plan(rows, world, r, 12345);

		for (int64_t l = 0; l < s.local_rows; l++) {
			int64_t id = shemb__shard_global(&s, l);

			ck_assert_int_ge(id, 0);
			ck_assert_int_lt(id, rows);
			ck_assert_int_eq(seen[id], 0);
			seen[id] = 1;
			ck_assert_int_eq(shemb__shard_owner(&s, id), r);
			ck_assert_int_eq(shemb__shard_local(&s, id), l);
			check_place(&s, id, r, l);
		}
	}
	for (int64_t id = 0; id < rows; id++)
		ck_assert_int_eq(seen[id], 1);
	free(seen);
}
END_TEST

/* The inverse of one pass undoes it over the whole power-of-two domain. */
START_TEST(perm_undo_inverts)
{
	struct shemb__shard s = row_plan(1 << 12, 3, 0, 99);

	for (uint64_t x = 0; x < (1u << 12); x++)
		ck_assert_uint_eq(
			shemb__perm_undo_once(&s, shemb__perm_once(&s, x)), x);
}
END_TEST

/* 4000 consecutive ids over 4 ranks: each rank gets 1000 +- 15%. */
START_TEST(consecutive_ids_spread)
{
	struct shemb__shard s = row_plan(1 << 20, 4, 0, 7);
	int count[4] = { 0 };

	for (int64_t id = 5000; id < 9000; id++)
		count[shemb__shard_owner(&s, id)]++;
	for (int r = 0; r < 4; r++) {
		ck_assert_int_gt(count[r], 850);
		ck_assert_int_lt(count[r], 1150);
	}
}
END_TEST

/* Column slices of all ranks tile 0 .. dim - 1 in rank order, the first
 * dim % world ranks one column wider. */
START_TEST(column_slices_tile_a_row)
{
	int dim = 5 + _i, world = 1 + _i % 5, next = 0;
	struct shemb__shard s = { .kind = SHEMB_SHARD_COLUMN, .world = world,
				  .dim = dim };

	for (int r = 0; r < world; r++) {
		int c0, n;

		shemb__shard_columns(&s, r, &c0, &n);
		ck_assert_int_eq(c0, next);
		ck_assert_int_eq(n, dim / world + (r < dim % world));
		next += n;
	}
	ck_assert_int_eq(next, dim);
}
END_TEST

/* Table-wise and column-wise keep ids as local rows; one rank is local. */
START_TEST(other_plans_keep_ids)
{
	struct shemb__shard t = { .kind = SHEMB_SHARD_TABLE, .world = 3,
				  .owner = 2, .rows = 10, .dim = 4 };
	struct shemb__shard one = row_plan(10, 1, 0, 5);

	for (int64_t id = 0; id < 10; id++) {
		ck_assert_int_eq(shemb__shard_owner(&t, id), 2);
		ck_assert_int_eq(shemb__shard_local(&t, id), id);
		ck_assert_int_eq(shemb__shard_owner(&one, id), 0);
		ck_assert_int_eq(shemb__shard_local(&one, id), id);
		ck_assert_int_eq(shemb__shard_global(&one, id), id);
		check_place(&t, id, 2, id);
		check_place(&one, id, 0, id);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shard");
	TCase *tc = tcase_create("layout");

	tcase_add_loop_test(tc, row_plan_is_a_bijection, 0, 24);
	tcase_add_test(tc, perm_undo_inverts);
	tcase_add_test(tc, consecutive_ids_spread);
	tcase_add_loop_test(tc, column_slices_tile_a_row, 0, 12);
	tcase_add_test(tc, other_plans_keep_ids);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
