/*
 * test_async.c - steps started without waiting (shemb_lookup_start,
 * shemb_backward_start): a pipelined run (every step of a run started
 * before any is waited) gives the bits of the same run made with the
 * blocking calls on a twin table; many lookups in flight each complete
 * once; a request reports once; blocking calls queue behind started
 * steps; bad input fails at the wait with its detail and changes
 * nothing; requests never waited or freed early are reclaimed; each
 * output of a started lookup is final once shemb_wait_part() returns.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "testutil.h"

#define ROWS 500
#define DIM 12
#define STEPS 12

static const int poolings[] = { SHEMB_POOL_SUM, SHEMB_POOL_MEAN,
				SHEMB_POOL_MAX, SHEMB_POOL_NONE };

struct run {
	struct tu_bags b[STEPS];
	float *grad[STEPS];
	float *out[STEPS];
	struct shemb_bags set[STEPS];
};

static void make_run(struct run *r, shemb_table *t, uint64_t seed)
{
	struct tu_rng g;

	tu_rng_seed(&g, seed);
	for (int s = 0; s < STEPS; s++) {
		struct tu_bag_spec spec = {
			.nbags = 30, .max_len = 6, .rows = ROWS,
			.weighted = s % 2, .zipf = true, .repeat_pct = 20,
			.empty_pct = 10,
		};
		size_t n;

		tu_bags_random(&r->b[s], &g, &spec);
		r->set[s] = tu_bags_view(&r->b[s], t, poolings[s % 4]);
		n = (size_t)tu_out_rows(&r->b[s], poolings[s % 4]) * DIM;
		r->grad[s] = tu_malloc((n + 1) * sizeof(float));
		r->out[s] = tu_calloc(n + 1, sizeof(float));
		tu_rng_fill(&g, r->grad[s], n, -1.0f, 1.0f);
	}
}

static void free_run(struct run *r)
{
	for (int s = 0; s < STEPS; s++) {
		tu_bags_free(&r->b[s]);
		free(r->grad[s]);
		free(r->out[s]);
	}
}

static shemb_table *twin(shemb_ctx *ctx)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAM;
	a.seed = 3;
	return tu_table_attr(ctx, &a);
}

START_TEST(pipelined_equals_blocking)
{
	shemb_ctx *ca, *cb;
	shemb_table *ta, *tb;
	struct run ra, rb;
	shemb_request *req[2 * STEPS];
	struct tu_snapshot sa, sb;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ca), 0);
	ck_assert_int_eq(tu_ctx_create(NULL, 2, &cb), 0);
	ta = twin(ca);
	tb = twin(cb);
	make_run(&ra, ta, 9);
	make_run(&rb, tb, 9);
	for (int s = 0; s < STEPS; s++) {
		ck_assert_int_eq(shemb_lookup(cb, 1, &rb.set[s], &rb.out[s], 0),
				 0);
		ck_assert_int_eq(shemb_backward(cb, 1, &rb.set[s],
						(const float *const *)
							&rb.grad[s]),
				 0);
	}
	for (int s = 0; s < STEPS; s++) {
		ck_assert_int_eq(shemb_lookup_start(ca, 1, &ra.set[s],
						    &ra.out[s], 0,
						    &req[2 * s]),
				 0);
		ck_assert_int_eq(shemb_backward_start(ca, 1, &ra.set[s],
						      (const float *const *)
							      &ra.grad[s],
						      &req[2 * s + 1]),
				 0);
	}
	for (int k = 2 * STEPS - 1; k >= 0; k--) { /* any order */
		ck_assert_int_eq(shemb_wait(req[k]), 0);
		shemb_request_free(req[k]);
	}
	for (int s = 0; s < STEPS; s++)
		ck_assert_int_eq(tu_bits_differ("lookup", ra.out[s], rb.out[s],
						(size_t)tu_out_rows(
							&ra.b[s],
							poolings[s % 4]) *
							DIM * sizeof(float)),
				 0);
	tu_snapshot_take(&sa, ta);
	tu_snapshot_take(&sb, tb);
	ck_assert(tu_snapshot_equal(&sa, &sb));
	tu_snapshot_free(&sa);
	tu_snapshot_free(&sb);
	free_run(&ra);
	free_run(&rb);
	shemb_ctx_destroy(ca);
	shemb_ctx_destroy(cb);
}
END_TEST

START_TEST(many_in_flight_complete_once)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct run r;
	shemb_request *req[STEPS];
	int done[STEPS] = { 0 }, left = STEPS, d;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	t = twin(ctx);
	make_run(&r, t, 4);
	for (int s = 0; s < STEPS; s++)
		ck_assert_int_eq(shemb_lookup_start(ctx, 1, &r.set[s],
						    &r.out[s],
						    SHEMB_LOOKUP_NO_GRAD,
						    &req[s]),
				 0);
	for (int spin = 0; left > 0 && spin < 100000000; spin++) {
		int s = spin % STEPS;

		if (done[s])
			continue;
		ck_assert_int_eq(shemb_test(req[s], &d), 0);
		if (d) {
			done[s] = 1;
			left--;
			ck_assert_int_eq(shemb_test(req[s], &d), SHEMB_ESTATE);
			ck_assert_int_eq(shemb_wait(req[s]), SHEMB_ESTATE);
		}
	}
	ck_assert_int_eq(left, 0);
	for (int s = 0; s < STEPS; s++) {
		float *want = tu_calloc((size_t)tu_out_rows(&r.b[s],
							    poolings[s % 4]) *
						DIM + 1,
					sizeof(float));

		ck_assert_int_eq(shemb_lookup(ctx, 1, &r.set[s], &want,
					      SHEMB_LOOKUP_NO_GRAD),
				 0);
		ck_assert_int_eq(tu_bits_differ("lookup", r.out[s], want,
						(size_t)tu_out_rows(
							&r.b[s],
							poolings[s % 4]) *
							DIM * sizeof(float)),
				 0);
		free(want);
		shemb_request_free(req[s]);
	}
	free_run(&r);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A blocking lookup made while a backward is queued sees its update. */
START_TEST(blocking_calls_queue_behind)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct run r;
	shemb_request *lk, *bw;
	struct tu_snapshot before, mid;
	float *again;
	size_t n;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	t = twin(ctx);
	make_run(&r, t, 5);
	n = (size_t)tu_out_rows(&r.b[0], poolings[0]) * DIM;
	again = tu_calloc(n + 1, sizeof(float));
	tu_snapshot_take(&before, t);
	ck_assert_int_eq(shemb_lookup_start(ctx, 1, &r.set[0], &r.out[0], 0,
					    &lk),
			 0);
	ck_assert_int_eq(shemb_backward_start(ctx, 1, &r.set[0],
					      (const float *const *)&r.grad[0],
					      &bw),
			 0);
	/* runs after both: the rows it reads are the updated ones */
	ck_assert_int_eq(shemb_lookup(ctx, 1, &r.set[0], &again,
				      SHEMB_LOOKUP_NO_GRAD),
			 0);
	ck_assert_int_eq(shemb_wait(lk), 0);
	ck_assert_int_eq(shemb_wait(bw), 0);
	tu_snapshot_take(&mid, t);
	ck_assert(!tu_snapshot_equal(&before, &mid));
	ck_assert(r.b[0].nids > 0); /* else nothing could differ */
	ck_assert(memcmp(again, r.out[0], n * sizeof(float)) != 0);
	shemb_request_free(lk);
	shemb_request_free(bw);
	tu_snapshot_free(&before);
	tu_snapshot_free(&mid);
	free(again);
	free_run(&r);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_input_fails_at_wait)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct run r;
	shemb_request *req;
	struct tu_snapshot before;
	int64_t keep;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	t = twin(ctx);
	make_run(&r, t, 6);
	tu_snapshot_take(&before, t);
	ck_assert(r.b[1].nids > 0);
	keep = r.b[1].ids[0];
	r.b[1].ids[0] = ROWS + 7;
	ck_assert_int_eq(shemb_lookup_start(ctx, 1, &r.set[1], &r.out[1], 0,
					    &req),
			 0);
	ck_assert_int_eq(shemb_wait(req), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "507", NULL));
	shemb_request_free(req);
	/* no plan was kept: the backward has nothing to follow */
	r.b[1].ids[0] = keep;
	ck_assert_int_eq(shemb_backward_start(ctx, 1, &r.set[1],
					      (const float *const *)&r.grad[1],
					      &req),
			 0);
	ck_assert_int_eq(shemb_wait(req), SHEMB_ESTATE);
	shemb_request_free(req);
	ck_assert(tu_unchanged_since(&before, t));
	ck_assert_int_eq(shemb_lookup_start(ctx, 1, &r.set[1], &r.out[1], 0,
					    NULL),
			 SHEMB_EINVAL);
	tu_snapshot_free(&before);
	free_run(&r);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* shemb_wait_part(): each output is final when it returns (a copy taken
 * then equals the blocking lookup of that set alone), before or after
 * the whole request; bad arguments and failed lookups are reported. */
enum { PARTS = 4 };

static void lookup_alone(shemb_ctx *ctx, const struct shemb_bags *set,
			 float *out)
{
	ck_assert_int_eq(shemb_lookup(ctx, 1, set, &out, SHEMB_LOOKUP_NO_GRAD),
			 0);
}

START_TEST(parts_are_final_when_waited)
{
	static const int order[PARTS] = { 2, 0, 3, 1 };
	shemb_ctx *ctx;
	shemb_table *t[3];
	struct run r;
	struct shemb_bags set[PARTS];
	float *ref[PARTS], *snap[PARTS], *out[PARTS];
	size_t len[PARTS];
	shemb_request *req, *other;
	int done;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	for (int k = 0; k < 3; k++)
		t[k] = twin(ctx);
	make_run(&r, t[0], 8);
	for (int i = 0; i < PARTS; i++) { /* table 0 twice: sets 0 and 3 */
		set[i] = tu_bags_view(&r.b[i], t[i % 3], poolings[i]);
		len[i] = (size_t)tu_out_rows(&r.b[i], poolings[i]) * DIM *
			 sizeof(float);
		ref[i] = tu_calloc(len[i] + 4, 1);
		snap[i] = tu_calloc(len[i] + 4, 1);
		out[i] = tu_calloc(len[i] + 4, 1);
		lookup_alone(ctx, &set[i], ref[i]);
	}
	ck_assert_int_eq(shemb_lookup_start(ctx, PARTS, set, out,
					    SHEMB_LOOKUP_NO_GRAD, &req),
			 0);
	for (int k = 0; k < PARTS; k++) {
		int i = order[k];

		ck_assert_int_eq(shemb_wait_part(req, i), 0);
		memcpy(snap[i], out[i], len[i]);
		ck_assert_int_eq(shemb_test_part(req, i, &done), 0);
		ck_assert_int_eq(done, 1);
	}
	ck_assert_int_eq(shemb_wait(req), 0);
	for (int i = 0; i < PARTS; i++) {
		ck_assert_mem_eq(snap[i], ref[i], len[i]);
		ck_assert_mem_eq(out[i], ref[i], len[i]);
	}
	ck_assert_int_eq(shemb_wait_part(req, 1), 0); /* after: still 0 */

	/* bad arguments */
	ck_assert_int_eq(shemb_wait_part(req, PARTS), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "4", NULL));
	ck_assert_int_eq(shemb_wait_part(req, -1), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_test_part(req, 0, NULL), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_wait_part(NULL, 0), SHEMB_EINVAL);
	shemb_request_free(req);
	ck_assert_int_eq(shemb_barrier(ctx, &other), 0);
	ck_assert_int_eq(shemb_wait_part(other, 0), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx),
				  "shemb_lookup_start", NULL));
	shemb_request_free(other);

	/* a lookup that fails: every part gives its error */
	r.b[1].ids[0] = ROWS + 9;
	ck_assert_int_eq(shemb_lookup_start(ctx, PARTS, set, out,
					    SHEMB_LOOKUP_NO_GRAD, &req),
			 0);
	ck_assert_int_eq(shemb_wait_part(req, 1), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "509", NULL));
	ck_assert_int_eq(shemb_wait(req), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_wait(req), SHEMB_ESTATE);
	ck_assert_int_eq(shemb_test_part(req, 0, &done), SHEMB_EINVAL);
	ck_assert_int_eq(done, 1);
	shemb_request_free(req);
	for (int i = 0; i < PARTS; i++) {
		free(ref[i]);
		free(snap[i]);
		free(out[i]);
	}
	free_run(&r);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Freed before it ran, or never waited nor freed: the context reclaims
 * them (the leak checkers of the sanitizer and valgrind runs watch). */
START_TEST(unwaited_requests_are_reclaimed)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct run r;
	shemb_request *req;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	t = twin(ctx);
	make_run(&r, t, 7);
	for (int s = 0; s < STEPS; s++) {
		ck_assert_int_eq(shemb_lookup_start(ctx, 1, &r.set[s],
						    &r.out[s], 0, &req),
				 0);
		if (s % 2)
			shemb_request_free(req);
	}
	shemb_ctx_destroy(ctx); /* runs what is queued first */
	free_run(&r);
}
END_TEST

static Suite *async_suite(void)
{
	Suite *s = suite_create("async");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pipelined_equals_blocking);
	tcase_add_test(tc, many_in_flight_complete_once);
	tcase_add_test(tc, blocking_calls_queue_behind);
	tcase_add_test(tc, bad_input_fails_at_wait);
	tcase_add_test(tc, unwaited_requests_are_reclaimed);
	tcase_add_test(tc, parts_are_final_when_waited);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(async_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
