/*
 * test_tier_turns.c - calls that wait for room in a device tier take
 * turns: with most slots pinned by one call, a call that must wait
 * queues, a later call that would fit queues behind it instead of
 * overtaking, a prefetch meanwhile loads nothing, and when the pins go
 * the two run in the order they came.  The tier's acquire is internal,
 * so it comes from the static core; the table from the public API.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "shemb.h"
#include "lib/tier_int.h"
#include "tests/check_run.h"

struct call {
	shemb_table *t;
	int64_t first, n;
	int64_t other_row;      /* a row of the call that came first */
	int rc;
	bool other_resident;    /* other_row was in the tier when this call
				 * had its rows */
};

/* Whether the other call had its rows is read from the tier itself while
 * this one holds its own: a flag the other thread set after its acquire
 * returned could lag behind. */
static void *acquire_rows(void *arg)
{
	struct call *c = arg;
	struct shemb__rows_view v;
	int64_t rows[16];

	for (int64_t k = 0; k < c->n; k++)
		rows[k] = c->first + k;
	c->rc = shemb__rows_acquire(c->t, c->n, rows, true, SHEMB__ROWS_READ,
				    &v);
	if (c->other_row >= 0) {
		pthread_mutex_lock(&c->t->tier->lock);
		c->other_resident = shemb__index_find(&c->t->tier->index,
						      c->other_row) >= 0;
		pthread_mutex_unlock(&c->t->tier->lock);
	}
	shemb__rows_release(c->t, &v);
	return NULL;
}

/* Until `waiting` calls wait in t's tier (10 s at most). */
static void await_waiting(shemb_table *t, int64_t waiting)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 10000; i++) {
		int64_t w;

		pthread_mutex_lock(&t->tier->lock);
		w = t->tier->waiting;
		pthread_mutex_unlock(&t->tier->lock);
		if (w == waiting)
			return;
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("%lld calls never waited in the tier",
		     (long long)waiting);
}

START_TEST(waiting_calls_take_turns)
{
	struct shemb_ctx_attr ca;
	struct shemb_table_attr a;
	struct shemb_table_stats st = { .size = sizeof(st) };
	struct shemb_bags b;
	struct shemb__rows_view held;
	int64_t rows[14], off[2] = { 0, 1 }, fifty = 50;
	struct call big = { .first = 20, .n = 10, .other_row = -1 };
	struct call small = { .first = 40, .n = 1, .other_row = 29 };
	pthread_t tb, ts;
	shemb_ctx *ctx;
	uint64_t misses;

	shemb_ctx_attr_init(&ca);
	ca.nthreads = 1;
	ck_assert_int_eq(shemb_ctx_create(&ca, &ctx), 0);
	shemb_table_attr_init(&a);
	a.rows = 64;
	a.dim = 4;
	a.cache_rows = 16;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &big.t), 0);
	small.t = big.t;
	for (int k = 0; k < 14; k++)
		rows[k] = k;
	ck_assert_int_eq(shemb__rows_acquire(big.t, 14, rows, true,
					     SHEMB__ROWS_READ, &held), 0);
	pthread_create(&tb, NULL, acquire_rows, &big); /* 10 rows, room 2 */
	await_waiting(big.t, 1);
	pthread_create(&ts, NULL, acquire_rows, &small); /* would fit */
	await_waiting(big.t, 2);

	ck_assert_int_eq(shemb_table_stats(big.t, &st), 0);
	misses = st.cache_misses;
	shemb_bags_init(&b);
	b.table = big.t;
	b.nbags = 1;
	b.offsets = off;
	b.nids = 1;
	b.ids = &fifty;
	ck_assert_int_eq(shemb_prefetch(ctx, 1, &b), 0);
	ck_assert_int_eq(shemb_table_stats(big.t, &st), 0);
	ck_assert_uint_eq(st.cache_misses, misses); /* it loaded nothing */

	shemb__rows_release(big.t, &held);
	pthread_join(tb, NULL);
	pthread_join(ts, NULL);
	ck_assert_int_eq(big.rc, 0);
	ck_assert_int_eq(small.rc, 0);
	ck_assert(small.other_resident); /* big was served first */
	shemb_table_destroy(big.t);
	shemb_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tier turns");
	TCase *tc = tcase_create("turns");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, waiting_calls_take_turns);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
