/*
 * test_threads.c - concurrent callers: lookups of one table from eight
 * threads, a writer (backward, write_rows, set_lr) among readers, training
 * of separate tables side by side, per-thread error details, the
 * threads a context runs (its workers, and no others: oneDNN's OpenMP
 * must start none), and the scheduling slice its thread of started steps
 * asks for.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/slice.h"
#include "tests/testutil.h"

#define NREADERS 8

static const int poolings[] = { SHEMB_POOL_SUM, SHEMB_POOL_MEAN,
				SHEMB_POOL_MAX, SHEMB_POOL_NONE };

static shemb_ctx *ctx_threads(int nthreads)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(tu_ctx_create(NULL, nthreads, &ctx), 0);
	return ctx;
}

static void start_threads(pthread_t *th, int n, void *(*fn)(void *),
			  void *args, size_t arg_size)
{
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, fn,
						(char *)args + i * arg_size),
				 0);
}

static void join_threads(pthread_t *th, int n)
{
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
}

static void random_bags(struct tu_bags *b, struct tu_rng *r, int64_t rows,
			int64_t nbags, bool weighted)
{
	struct tu_bag_spec spec = {
		.nbags = nbags, .max_len = 8, .rows = rows,
		.weighted = weighted, .zipf = true, .repeat_pct = 20,
		.empty_pct = 10,
	};

	tu_bags_random(b, r, &spec);
}

/* ---- eight readers of one table ---- */

struct reader {
	shemb_ctx *ctx;
	shemb_table *t;
	int dim;
	struct tu_bags bags;
	int pooling;
	float *want;        /* the single-thread result */
	size_t bytes;
	int rounds;
	int failures;       /* calls that failed or gave other bits */
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	struct shemb_bags set = tu_bags_view(&rd->bags, rd->t, rd->pooling);
	float *out = tu_malloc(rd->bytes + sizeof(float));

	for (int i = 0; i < rd->rounds; i++) {
		unsigned flags = i % 2 ? SHEMB_LOOKUP_NO_GRAD : 0;

		memset(out, 0xff, rd->bytes);
		if (shemb_lookup(rd->ctx, 1, &set, &out, flags) ||
		    memcmp(out, rd->want, rd->bytes))
			rd->failures++;
	}
	free(out);
	return NULL;
}

/* Each reader's expected output: a lookup made alone, checked against the
 * reference loops. */
static void prepare_reader(struct reader *rd, const struct tu_ref *ref,
			   struct tu_rng *r, int i)
{
	struct shemb_bags set;
	float *check;
	int64_t n;

	rd->pooling = poolings[i % 4];
	random_bags(&rd->bags, r, ref->rows, 200, i % 3 == 0);
	n = tu_out_rows(&rd->bags, rd->pooling) * rd->dim;
	rd->bytes = (size_t)n * sizeof(float);
	rd->want = tu_malloc(rd->bytes + sizeof(float));
	check = tu_malloc(rd->bytes + sizeof(float));
	set = tu_bags_view(&rd->bags, rd->t, rd->pooling);
	ck_assert_int_eq(shemb_lookup(rd->ctx, 1, &set, &rd->want,
				      SHEMB_LOOKUP_NO_GRAD), 0);
	tu_ref_lookup(ref, &rd->bags, rd->pooling, check);
	ck_assert_int_eq(tu_mismatches("alone", rd->want, check, n, 1e-6f,
				       1e-7f), 0);
	free(check);
}

START_TEST(concurrent_lookups_of_one_table)
{
	shemb_ctx *ctx = ctx_threads(3);
	shemb_table *t = tu_table(ctx, 3000, 32, SHEMB_BF16, SHEMB_OPT_SGD);
	struct reader rd[NREADERS];
	pthread_t th[NREADERS];
	struct tu_ref ref;
	struct tu_rng r;

	tu_ref_init(&ref, t);
	tu_rng_seed(&r, 1);
	for (int i = 0; i < NREADERS; i++) {
		rd[i] = (struct reader){ .ctx = ctx, .t = t, .dim = 32,
					 .rounds = 40 };
		prepare_reader(&rd[i], &ref, &r, i);
	}
	start_threads(th, NREADERS, reader_main, rd, sizeof(rd[0]));
	join_threads(th, NREADERS);
	for (int i = 0; i < NREADERS; i++) {
		ck_assert_int_eq(rd[i].failures, 0);
		free(rd[i].want);
		tu_bags_free(&rd[i].bags);
	}
	tu_ref_free(&ref);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- one writer among readers ---- */

struct mixed {
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_ref ref;      /* follows the writer's operations */
	atomic_int writer_done;
	int writer_bad;         /* failed calls or mismatching outputs */
	int reader_bad[4];      /* failed calls or non-finite outputs */
};

struct mixed_reader {
	struct mixed *m;
	int index;
};

#define MIXED_ROWS 500
#define MIXED_DIM 16

static void *mixed_reader_main(void *arg)
{
	struct mixed_reader *mr = arg;
	struct mixed *m = mr->m;
	struct tu_rng r;
	float *out = tu_calloc(64 * MIXED_DIM, sizeof(float));

	tu_rng_seed(&r, 100 + (uint64_t)mr->index);
	while (!atomic_load(&m->writer_done)) {
		struct tu_bags b;
		int pooling = poolings[tu_rng_below(&r, 3)];
		struct shemb_bags set;

		random_bags(&b, &r, MIXED_ROWS, 64, false);
		set = tu_bags_view(&b, m->t, pooling);
		if (shemb_lookup(m->ctx, 1, &set, &out, SHEMB_LOOKUP_NO_GRAD))
			m->reader_bad[mr->index]++;
		for (int64_t i = 0; i < b.nbags * MIXED_DIM; i++)
			m->reader_bad[mr->index] += !isfinite(out[i]);
		tu_bags_free(&b);
	}
	free(out);
	return NULL;
}

/* A planned lookup (checked) and a backward of t, mirrored in its
 * reference; returns the number of failed calls and wrong outputs. */
static int train_step(shemb_ctx *ctx, shemb_table *t, struct tu_ref *ref,
		      struct tu_rng *r, int pooling)
{
	struct tu_bags b;
	struct shemb_bags set;
	float *out, *want, *grad;
	int64_t n;
	int bad = 0;

	random_bags(&b, r, ref->rows, 40, true);
	n = tu_out_rows(&b, pooling) * ref->dim;
	out = tu_malloc(((size_t)n + 1) * sizeof(float));
	want = tu_malloc(((size_t)n + 1) * sizeof(float));
	grad = tu_malloc(((size_t)n + 1) * sizeof(float));
	tu_rng_fill(r, grad, (size_t)n, -1.0f, 1.0f);
	set = tu_bags_view(&b, t, pooling);
	bad += shemb_lookup(ctx, 1, &set, &out, 0) != 0;
	tu_ref_lookup(ref, &b, pooling, want);
	bad += tu_mismatches("step", out, want, n, 1e-6f, 1e-7f) != 0;
	bad += shemb_backward(ctx, 1, &set, (const float *const *)&grad) != 0;
	tu_ref_backward(ref, 1, &(struct tu_ref_set){ &b, pooling, grad });
	free(grad);
	free(want);
	free(out);
	tu_bags_free(&b);
	return bad;
}

static void writer_write(struct mixed *m, struct tu_rng *r)
{
	int64_t ids[10];
	float in[10 * MIXED_DIM];

	for (int i = 0; i < 10; i++)
		ids[i] = tu_rng_below(r, MIXED_ROWS);
	tu_rng_fill(r, in, 10 * MIXED_DIM, -0.3f, 0.3f);
	m->writer_bad += shemb_table_write_rows(m->t, 10, ids, in, SHEMB_F32,
						0) != 0;
	tu_ref_write(&m->ref, 10, ids, in);
}

START_TEST(writer_among_readers)
{
	struct mixed m = { 0 };
	struct mixed_reader mr[4];
	pthread_t th[4];
	struct tu_rng r;
	float *got;

	m.ctx = ctx_threads(2);
	m.t = tu_table(m.ctx, MIXED_ROWS, MIXED_DIM, SHEMB_F32,
		       SHEMB_OPT_ADAGRAD);
	tu_ref_init(&m.ref, m.t);
	for (int i = 0; i < 4; i++)
		mr[i] = (struct mixed_reader){ &m, i };
	start_threads(th, 4, mixed_reader_main, mr, sizeof(mr[0]));
	tu_rng_seed(&r, 7);
	for (int step = 0; step < 30; step++) {
		m.writer_bad += train_step(m.ctx, m.t, &m.ref, &r,
					   poolings[step % 4]);
		if (step % 5 == 4) {
			writer_write(&m, &r);
			m.ref.attr.lr *= 0.5f;
			m.writer_bad += shemb_table_set_lr(m.t,
							   m.ref.attr.lr) != 0;
		}
	}
	atomic_store(&m.writer_done, 1);
	join_threads(th, 4);
	ck_assert_int_eq(m.writer_bad, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(m.reader_bad[i], 0);
	got = tu_read_all_f32(m.t);
	ck_assert_int_eq(tu_mismatches("final", got, m.ref.w,
				       MIXED_ROWS * MIXED_DIM, 1e-6f, 1e-7f),
			 0);
	free(got);
	tu_ref_free(&m.ref);
	shemb_ctx_destroy(m.ctx);
}
END_TEST

/* ---- separate tables trained side by side ---- */

struct trainer {
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_ref ref;
	uint64_t seed;
	int bad;
};

static void *trainer_main(void *arg)
{
	struct trainer *tr = arg;
	struct tu_rng r;

	tu_rng_seed(&r, tr->seed);
	for (int step = 0; step < 12; step++)
		tr->bad += train_step(tr->ctx, tr->t, &tr->ref, &r,
				      poolings[step % 4]);
	return NULL;
}

START_TEST(separate_tables_in_parallel)
{
	static const int opts[4] = { SHEMB_OPT_SGD, SHEMB_OPT_ADAGRAD,
				     SHEMB_OPT_ROWWISE_ADAGRAD,
				     SHEMB_OPT_ADAM };
	shemb_ctx *ctx = ctx_threads(3);
	struct trainer tr[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		tr[i] = (struct trainer){ .ctx = ctx };
		tr[i].seed = 50 + (uint64_t)i;
		tr[i].t = tu_table(ctx, MIXED_ROWS, MIXED_DIM,
				   i % 2 ? SHEMB_F16 : SHEMB_F32, opts[i]);
		tu_ref_init(&tr[i].ref, tr[i].t);
	}
	start_threads(th, 4, trainer_main, tr, sizeof(tr[0]));
	join_threads(th, 4);
	for (int i = 0; i < 4; i++) {
		float *got = tu_read_all_f32(tr[i].t);

		ck_assert_int_eq(tr[i].bad, 0);
		ck_assert_int_eq(tu_mismatches("parallel", got, tr[i].ref.w,
					       MIXED_ROWS * MIXED_DIM, 1e-6f,
					       1e-7f),
				 0);
		free(got);
		tu_ref_free(&tr[i].ref);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- error details are per thread ---- */

struct failer {
	shemb_ctx *ctx;
	shemb_table *t;
	char seen[128];
};

static void *failer_main(void *arg)
{
	struct failer *f = arg;

	if (shemb_table_set_lr(f->t, -2.0f) == SHEMB_EINVAL)
		snprintf(f->seen, sizeof(f->seen), "%s",
			 shemb_ctx_last_error(f->ctx));
	return NULL;
}

START_TEST(last_error_is_per_thread)
{
	shemb_ctx *ctx = ctx_threads(1);
	shemb_table *t = tu_table(ctx, 10, 2, SHEMB_F32, SHEMB_OPT_SGD);
	struct failer f = { ctx, t, "" };
	pthread_t th;

	ck_assert_int_eq(pthread_create(&th, NULL, failer_main, &f), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_str_ne(f.seen, "");
	/* the other thread's failure is not this thread's */
	ck_assert_str_eq(shemb_ctx_last_error(ctx), "");
	ck_assert_int_eq(shemb_table_set_lr(t, NAN), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- the threads a context runs ---- */

/* Work that converts between dtypes in large blocks (where oneDNN is used
 * when the library has it), looks up and trains. */
static void convert_and_train(shemb_ctx *ctx, int start)
{
	const int64_t rows = 8192;
	shemb_table *b16 = tu_table(ctx, rows, 16, SHEMB_BF16, SHEMB_OPT_ADAM);
	shemb_table *f16 = tu_table(ctx, rows, 16, SHEMB_F16, SHEMB_OPT_SGD);
	float *in = tu_malloc((size_t)rows * 16 * sizeof(float));
	int64_t *ids = tu_malloc((size_t)rows * sizeof(int64_t));
	struct tu_rng r;

	ck_assert_int_eq(tu_thread_count(), start + 2);
	tu_rng_seed(&r, 9);
	tu_rng_fill(&r, in, (size_t)rows * 16, -1.0f, 1.0f);
	for (int64_t i = 0; i < rows; i++)
		ids[i] = i;
	/* 131072 values each way */
	ck_assert_int_eq(shemb_table_write_rows(b16, rows, ids, in, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_write_rows(f16, rows, ids, in, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_read_rows(f16, rows, ids, in, SHEMB_F32),
			 0);
	ck_assert_int_eq(tu_thread_count(), start + 2);
	free(ids);
	free(in);
}

/* Lookups and backward calls of a bf16 table. */
static void train_once(shemb_ctx *ctx)
{
	shemb_table *t = tu_table(ctx, MIXED_ROWS, MIXED_DIM, SHEMB_BF16,
				  SHEMB_OPT_ROWWISE_ADAGRAD);
	struct tu_ref ref;
	struct tu_rng r;

	tu_ref_init(&ref, t);
	tu_rng_seed(&r, 11);
	for (int p = 0; p < 4; p++)
		ck_assert_int_eq(train_step(ctx, t, &ref, &r, poolings[p]), 0);
	tu_ref_free(&ref);
}

START_TEST(context_runs_only_its_workers)
{
	int start = tu_thread_baseline();
	shemb_ctx *ctx = ctx_threads(3);

	/* nthreads counts the caller: two workers */
	ck_assert_int_eq(tu_thread_count(), start + 2);
	convert_and_train(ctx, start);
	train_once(ctx);
	ck_assert_int_eq(tu_thread_count(), start + 2);
	shemb_ctx_destroy(ctx);
	ck_assert_int_eq(tu_thread_count_settled(start), start);
}
END_TEST

/* A lookup started without waiting, which starts the thread of started
 * steps, and its output against the rows it sums. */
static void started_lookup(shemb_ctx *ctx)
{
	shemb_table *t = tu_table(ctx, 16, 4, SHEMB_F32, SHEMB_OPT_SGD);
	int64_t offsets[2] = { 0, 2 }, ids[2] = { 3, 9 }, two[2] = { 3, 9 };
	float rows[2][4], out[4], *o = out;
	struct shemb_bags b;
	shemb_request *req;

	ck_assert_int_eq(shemb_table_read_rows(t, 2, two, &rows[0][0],
					       SHEMB_F32), 0);
	shemb_bags_init(&b);
	b.table = t;
	b.nbags = 1;
	b.offsets = offsets;
	b.nids = 2;
	b.ids = ids;
	ck_assert_int_eq(shemb_lookup_start(ctx, 1, &b, &o,
					    SHEMB_LOOKUP_NO_GRAD, &req), 0);
	ck_assert_int_eq(shemb_wait(req), 0);
	shemb_request_free(req);
	for (int d = 0; d < 4; d++)
		ck_assert_float_eq(out[d], rows[0][d] + rows[1][d]);
	ck_assert_int_eq(shemb_table_destroy(t), 0);
}

/*
 * comm_slice_us: 0 gives 100 us, a value its own, -1 the slice a thread
 * has without asking, as the kernel reports the thread of started steps'
 * (shemb-steps) against a thread of the test's.  Skipped where the kernel
 * takes no slices (before Linux 6.12).
 */
START_TEST(steps_thread_asks_for_its_slice)
{
	static const int asked[] = { 0, 2000, -1, 100000 };
	long long dflt, mine = slice_of_thread(0);

	if (!slice_kernel_takes(&dflt)) {
		printf("the kernel takes no slice a thread asks for: not "
		       "checked\n");
		return;
	}
	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		struct shemb_ctx_attr a;
		shemb_ctx *ctx = NULL;
		long long want = asked[i] == -1 ? dflt
				 : asked[i] ? asked[i] * 1000LL : 100000;
		int tid;

		shemb_ctx_attr_init(&a);
		a.nthreads = 1;
		a.comm_slice_us = asked[i];
		ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
		ck_assert_int_eq(shemb_ctx_get_attr(ctx, &a), 0);
		ck_assert_int_eq(a.comm_slice_us, asked[i] ? asked[i] : 100);
		started_lookup(ctx);
		tid = slice_thread_named("shemb-steps");
		ck_assert_int_gt(tid, 0);
		ck_assert_int_eq(slice_of_thread(tid), want);
		/* the caller's own thread is left as it was */
		ck_assert_int_eq(slice_of_thread(0), mine);
		shemb_ctx_destroy(ctx);
	}
}
END_TEST

static Suite *threads_suite(void)
{
	Suite *s = suite_create("threads");
	TCase *tc = tcase_create("threads");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, concurrent_lookups_of_one_table);
	tcase_add_test(tc, writer_among_readers);
	tcase_add_test(tc, separate_tables_in_parallel);
	tcase_add_test(tc, last_error_is_per_thread);
	tcase_add_test(tc, context_runs_only_its_workers);
	tcase_add_test(tc, steps_thread_asks_for_its_slice);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(threads_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
