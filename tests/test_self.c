/*
 * test_self.c - the collectives and requests of a one-rank context, the
 * rank and world size read from launcher variables, and the argument
 * checks that every world size shares.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shemb.h>

static shemb_ctx *ctx;

static void setup(void)
{
	ck_assert_int_eq(shemb_ctx_create(NULL, &ctx), 0);
}

static void teardown(void)
{
	shemb_ctx_destroy(ctx);
	ctx = NULL;
}

static void refused(int rc)
{
	ck_assert_int_eq(rc, SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
}

/* ---- one rank: copies ---- */

START_TEST(alltoallv_copies)
{
	char sb[16] = "abcdefghijklmno", rb[16];
	size_t sc = 5, sd = 3, rc = 5, rd = 8;

	memset(rb, '.', sizeof(rb));
	ck_assert_int_eq(shemb_alltoallv(ctx, sb, &sc, &sd, rb, &rc, &rd,
					 NULL), 0);
	ck_assert(!memcmp(rb + 8, "defgh", 5));
	ck_assert(!memcmp(rb, "........", 8)); /* nothing else written */
}
END_TEST

START_TEST(alltoallv_counts_disagree)
{
	char sb[8] = { 0 }, rb[8];
	size_t sc = 5, sd = 0, rc = 4, rd = 0;

	refused(shemb_alltoallv(ctx, sb, &sc, &sd, rb, &rc, &rd, NULL));
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx), "5"));
}
END_TEST

START_TEST(allgatherv_copies)
{
	int v = 42, out[3] = { 0 };
	size_t rc = sizeof(int), rd = sizeof(int);

	ck_assert_int_eq(shemb_allgatherv(ctx, &v, sizeof(v), out, &rc, &rd,
					  NULL), 0);
	ck_assert_int_eq(out[1], 42);
	ck_assert_int_eq(out[0], 0);
	rc = 2;
	refused(shemb_allgatherv(ctx, &v, sizeof(v), out, &rc, &rd, NULL));
}
END_TEST

START_TEST(allreduce_is_identity)
{
	static const int dtypes[] = { SHEMB_F32, SHEMB_F64, SHEMB_I64,
				      SHEMB_F16, SHEMB_BF16 };
	static const size_t sizes[] = { 4, 8, 8, 2, 2 };

	for (size_t d = 0; d < 5; d++) {
		uint8_t in[64], out[64], copy[64];

		for (int i = 0; i < 64; i++)
			in[i] = (uint8_t)(i * 7 + (int)d);
		memset(out, 0, sizeof(out));
		ck_assert_int_eq(shemb_allreduce(ctx, in, out, 8, dtypes[d],
						 SHEMB_REDUCE_MAX, NULL), 0);
		ck_assert(!memcmp(in, out, 8 * sizes[d]));
		/* in place: the buffer, past the values too, is unchanged */
		memcpy(copy, in, sizeof(in));
		ck_assert_int_eq(shemb_allreduce(ctx, in, in, 8, dtypes[d],
						 SHEMB_REDUCE_SUM, NULL), 0);
		ck_assert(!memcmp(in, copy, sizeof(in)));
	}
}
END_TEST

/* ---- requests ---- */

START_TEST(request_reports_once)
{
	shemb_request *r = NULL;
	int done = 0;

	ck_assert_int_eq(shemb_barrier(ctx, &r), 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(shemb_test(r, &done), 0);
	ck_assert_int_eq(done, 1);
	ck_assert_int_eq(shemb_wait(r), SHEMB_ESTATE);
	ck_assert_int_eq(shemb_test(r, &done), SHEMB_ESTATE);
	shemb_request_free(r);
	shemb_request_free(NULL);
}
END_TEST

START_TEST(request_wait_then_free)
{
	shemb_request *r;
	float v = 2;

	ck_assert_int_eq(shemb_allreduce(ctx, &v, &v, 1, SHEMB_F32,
					 SHEMB_REDUCE_SUM, &r), 0);
	ck_assert_int_eq(shemb_wait(r), 0);
	shemb_request_free(r);
	ck_assert_int_eq(shemb_wait(NULL), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_test(NULL, NULL), SHEMB_EINVAL);
}
END_TEST

/* Requests never freed are released by shemb_ctx_destroy (the leak check
 * of the sanitizer and valgrind runs is what this test is for). */
START_TEST(requests_left_to_destroy)
{
	shemb_request *r[10];

	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(shemb_barrier(ctx, &r[i]), 0);
	ck_assert_int_eq(shemb_wait(r[3]), 0);
}
END_TEST

/* ---- argument checks (the same for every world size) ---- */

START_TEST(alltoallv_bad_arguments)
{
	char buf[64] = { 0 };
	size_t c = 8, d = 0, big = SIZE_MAX - 4;

	refused(shemb_alltoallv(ctx, buf, NULL, &d, buf + 32, &c, &d, NULL));
	refused(shemb_alltoallv(ctx, buf, &c, &d, buf + 32, &c, NULL, NULL));
	refused(shemb_alltoallv(ctx, NULL, &c, &d, buf + 32, &c, &d, NULL));
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "alltoallv send: 8 bytes at offset 0 "
				     "for rank 0"));
	refused(shemb_alltoallv(ctx, buf, &c, &d, NULL, &c, &d, NULL));
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "alltoallv receive: 8 bytes"));
	refused(shemb_alltoallv(ctx, buf, &c, &big, buf + 32, &c, &d, NULL));
	/* overlapping send and receive regions */
	refused(shemb_alltoallv(ctx, buf, &c, &d, buf + 4, &c, &d, NULL));
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx), "overlap"));
	ck_assert_int_eq(shemb_alltoallv(NULL, buf, &c, &d, buf, &c, &d, NULL),
			 SHEMB_EINVAL);
	/* zero counts need no buffers */
	c = 0;
	ck_assert_int_eq(shemb_alltoallv(ctx, NULL, &c, &d, NULL, &c, &d,
					 NULL), 0);
}
END_TEST

START_TEST(allreduce_bad_arguments)
{
	float v[4] = { 0 };

	refused(shemb_allreduce(ctx, v, v, 4, 99, SHEMB_REDUCE_SUM, NULL));
	refused(shemb_allreduce(ctx, v, v, 4, SHEMB_F32, 5, NULL));
	refused(shemb_allreduce(ctx, NULL, v, 4, SHEMB_F32, SHEMB_REDUCE_SUM,
				NULL));
	refused(shemb_allreduce(ctx, v, v + 1, 2, SHEMB_F32, SHEMB_REDUCE_SUM,
				NULL));
	refused(shemb_allreduce(ctx, v, v, SIZE_MAX / 2, SHEMB_F64,
				SHEMB_REDUCE_SUM, NULL));
}
END_TEST

START_TEST(allgatherv_bad_arguments)
{
	char buf[16] = { 0 };
	size_t c = 4, d = 0;

	refused(shemb_allgatherv(ctx, buf, 4, buf + 8, NULL, &d, NULL));
	refused(shemb_allgatherv(ctx, buf, 4, buf + 2, &c, &d, NULL));
	refused(shemb_allgatherv(ctx, NULL, 4, buf, &c, &d, NULL));
}
END_TEST

/* ---- identity from the environment ---- */

static void rank_world_of(shemb_ctx *c, int *rank, int *world)
{
	struct shemb_ctx_attr a;

	a.size = sizeof(a);
	ck_assert_int_eq(shemb_ctx_get_attr(c, &a), 0);
	*rank = a.rank;
	*world = a.world_size;
	ck_assert_str_eq(a.provider, "self");
	ck_assert_ptr_null(a.job_key);
}

START_TEST(identity_from_launcher_variables)
{
	static const char *const pairs[][2] = {
		{ "SHEMB_RANK", "SHEMB_WORLD_SIZE" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};

	for (size_t i = 0; i < 4; i++) {
		shemb_ctx *c;
		int rank, world;

		setenv(pairs[i][0], "0", 1);
		setenv(pairs[i][1], "1", 1);
		ck_assert_int_eq(shemb_ctx_create(NULL, &c), 0);
		rank_world_of(c, &rank, &world);
		ck_assert_int_eq(rank, 0);
		ck_assert_int_eq(world, 1);
		shemb_ctx_destroy(c);
		unsetenv(pairs[i][0]);
		unsetenv(pairs[i][1]);
	}
}
END_TEST

/* SHEMB_* first: a one-rank SHEMB_WORLD_SIZE wins over an mpirun's. */
START_TEST(identity_shemb_variables_first)
{
	shemb_ctx *c;
	int rank, world;

	setenv("SHEMB_RANK", "0", 1);
	setenv("SHEMB_WORLD_SIZE", "1", 1);
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	ck_assert_int_eq(shemb_ctx_create(NULL, &c), 0);
	rank_world_of(c, &rank, &world);
	ck_assert_int_eq(world, 1);
	shemb_ctx_destroy(c);
	unsetenv("SHEMB_RANK");
	unsetenv("SHEMB_WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("OMPI_COMM_WORLD_SIZE");
}
END_TEST

START_TEST(identity_attrs_win)
{
	struct shemb_ctx_attr a;
	shemb_ctx *c;
	int rank, world;

	setenv("SHEMB_WORLD_SIZE", "7", 1);
	setenv("SHEMB_RANK", "3", 1);
	shemb_ctx_attr_init(&a);
	a.rank = 0;
	a.world_size = 1;
	ck_assert_int_eq(shemb_ctx_create(&a, &c), 0);
	rank_world_of(c, &rank, &world);
	ck_assert_int_eq(world, 1);
	shemb_ctx_destroy(c);
	unsetenv("SHEMB_WORLD_SIZE");
	unsetenv("SHEMB_RANK");
}
END_TEST

static Suite *self_suite(void)
{
	Suite *s = suite_create("self");
	TCase *tc = tcase_create("collectives");
	TCase *ti = tcase_create("identity");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, alltoallv_copies);
	tcase_add_test(tc, alltoallv_counts_disagree);
	tcase_add_test(tc, allgatherv_copies);
	tcase_add_test(tc, allreduce_is_identity);
	tcase_add_test(tc, request_reports_once);
	tcase_add_test(tc, request_wait_then_free);
	tcase_add_test(tc, requests_left_to_destroy);
	tcase_add_test(tc, alltoallv_bad_arguments);
	tcase_add_test(tc, allreduce_bad_arguments);
	tcase_add_test(tc, allgatherv_bad_arguments);
	suite_add_tcase(s, tc);
	tcase_add_test(ti, identity_from_launcher_variables);
	tcase_add_test(ti, identity_shemb_variables_first);
	tcase_add_test(ti, identity_attrs_win);
	suite_add_tcase(s, ti);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(self_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
