/*
 * test_api.c - version, status strings, attribute defaults and sized-struct
 * rules, create/destroy, resolved table attributes, memory budget, error
 * details, logging and statistics counters.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/testutil.h"

static const int all_codes[] = {
	SHEMB_OK,     SHEMB_EINVAL,    SHEMB_ENOMEM,    SHEMB_ESTATE,
	SHEMB_ENOTSUP, SHEMB_ENODEV,   SHEMB_EIO,       SHEMB_EPEER,
	SHEMB_ETIMEDOUT, SHEMB_ECORRUPT, SHEMB_EPERM,   SHEMB_EINTERNAL,
};

static shemb_ctx *new_ctx(void)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(shemb_ctx_create(NULL, &ctx), 0);
	ck_assert_ptr_nonnull(ctx);
	return ctx;
}

/* ---- version ---- */

START_TEST(version_number_matches_header)
{
	ck_assert_uint_eq(SHEMB_VERSION_NUMBER,
			  SHEMB_VERSION_MAJOR * 10000 +
				  SHEMB_VERSION_MINOR * 100 +
				  SHEMB_VERSION_PATCH);
	ck_assert_uint_eq(shemb_version(), SHEMB_VERSION_NUMBER);
}
END_TEST

START_TEST(version_string_starts_with_numbers)
{
	const char *s = shemb_version_string();
	char want[32];
	size_t n;

	ck_assert_ptr_nonnull(s);
	n = (size_t)snprintf(want, sizeof(want), "%d.%d.%d",
			     SHEMB_VERSION_MAJOR, SHEMB_VERSION_MINOR,
			     SHEMB_VERSION_PATCH);
	ck_assert_int_eq(strncmp(s, want, n), 0);
	/* the numbers end there: features follow after a space */
	ck_assert(s[n] == '\0' || s[n] == ' ');
	ck_assert_ptr_eq(s, shemb_version_string());
}
END_TEST

/* ---- status strings ---- */

START_TEST(strerror_known_codes)
{
	for (size_t i = 0; i < TU_ARRAY_SIZE(all_codes); i++) {
		const char *s = shemb_strerror(all_codes[i]);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_gt(strlen(s), 0);
		/* each code has its own description */
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(s, shemb_strerror(all_codes[j]));
	}
	ck_assert_str_eq(shemb_strerror(SHEMB_EINVAL), "invalid argument");
}
END_TEST

START_TEST(strerror_unknown_code)
{
	static const int unknown[] = { 1, -12, -1000, INT_MIN, INT_MAX };

	for (size_t u = 0; u < TU_ARRAY_SIZE(unknown); u++) {
		const char *s = shemb_strerror(unknown[u]);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_gt(strlen(s), 0);
		for (size_t i = 0; i < TU_ARRAY_SIZE(all_codes); i++)
			ck_assert_str_ne(s, shemb_strerror(all_codes[i]));
	}
}
END_TEST

/* ---- defaults ---- */

START_TEST(ctx_attr_defaults)
{
	struct shemb_ctx_attr a;

	memset(&a, 0xa5, sizeof(a));
	shemb_ctx_attr_init(&a);
	ck_assert_uint_eq(a.size, sizeof(a));
	ck_assert_int_eq(a.nthreads, 0);
	ck_assert_int_eq(a.log_level, SHEMB_LOG_WARN);
	ck_assert_ptr_null(a.log_fn);
	ck_assert_ptr_null(a.log_arg);
	ck_assert_uint_eq(a.host_mem_bytes, 0);
	ck_assert_int_eq(a.rank, -1);      /* from the environment */
	ck_assert_int_eq(a.world_size, 0); /* from the environment */
	ck_assert_ptr_null(a.root);
	ck_assert_ptr_null(a.job_key);
	ck_assert_ptr_null(a.provider);
	ck_assert_int_eq(a.progress, SHEMB_PROGRESS_THREAD);
	ck_assert_int_eq(a.timeout_ms, 0);
	ck_assert_ptr_null(a.oob_allgather);
	ck_assert_uint_eq(a.chunk_bytes, 0);
}
END_TEST

/* The sized initialisers write exactly the caller's struct: an older
 * (smaller) struct gets what fits and nothing past it, a newer (larger)
 * one gets zeros beyond the fields this library knows. */
START_TEST(attr_init_writes_the_callers_size)
{
	unsigned char buf[sizeof(struct shemb_ctx_attr) + 64];
	size_t v1 = offsetof(struct shemb_ctx_attr, world_size) + sizeof(int);
	struct shemb_ctx_attr *a = (void *)buf;

	memset(buf, 0xa5, sizeof(buf));
	shemb_ctx_attr_init_size(a, v1);
	ck_assert_uint_eq(a->size, v1);
	ck_assert_int_eq(a->log_level, SHEMB_LOG_WARN);
	for (size_t i = v1; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], 0xa5);
	memset(buf, 0xa5, sizeof(buf));
	shemb_ctx_attr_init_size(a, sizeof(buf));
	ck_assert_uint_eq(a->size, sizeof(buf));
	for (size_t i = sizeof(*a); i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], 0);
	/* and such a struct is accepted: its unknown tail is zero */
	{
		shemb_ctx *ctx;

		ck_assert_int_eq(shemb_ctx_create(a, &ctx), 0);
		shemb_ctx_destroy(ctx);
	}
	memset(buf, 0xa5, sizeof(buf));
	shemb_bags_init_size((void *)buf, sizeof(size_t) + sizeof(void *));
	ck_assert_uint_eq(buf[sizeof(size_t) + sizeof(void *)], 0xa5);
	memset(buf, 0xa5, sizeof(buf));
	shemb_table_attr_init_size((void *)buf, 16);
	ck_assert_uint_eq(buf[16], 0xa5);
}
END_TEST

START_TEST(table_attr_defaults)
{
	struct shemb_table_attr a;

	memset(&a, 0xa5, sizeof(a));
	shemb_table_attr_init(&a);
	ck_assert_uint_eq(a.size, sizeof(a));
	ck_assert_ptr_null(a.name);
	ck_assert_int_eq(a.dtype, SHEMB_F32);
	ck_assert_int_eq(a.table_id, -1);
	ck_assert_uint_eq(a.seed, 0);
	ck_assert_int_eq(a.init, SHEMB_INIT_UNIFORM);
	ck_assert(a.init_low == 0.0f && a.init_high == 0.0f);
	ck_assert(a.init_mean == 0.0f && a.init_std == 1.0f);
	ck_assert(a.init_value == 0.0f);
	ck_assert_int_eq(a.optimizer, SHEMB_OPT_SGD);
	ck_assert(a.lr == 0.01f);
	ck_assert(a.eps == 1e-8f);
	ck_assert(a.beta1 == 0.9f && a.beta2 == 0.999f);
	ck_assert(a.weight_decay == 0.0f);
	ck_assert_int_eq(a.weight_decay_mode, SHEMB_WD_L2);
	ck_assert(a.initial_accumulator == 0.0f);
	ck_assert_int_eq(a.shard, SHEMB_SHARD_AUTO);
	ck_assert_int_eq(a.shard_owner, -1); /* the rank with most room */
	ck_assert(a.expected_skew == 0.0f);
	ck_assert_int_eq(a.wire_dtype, SHEMB_F32);
	ck_assert_int_eq(a.pool_at, SHEMB_POOL_AT_AUTO);
	ck_assert_int_eq(a.cache_rows, 0);
	ck_assert_int_eq(a.cache_policy, SHEMB_CACHE_LRU);
	ck_assert_ptr_null(a.cold_path);
	ck_assert_uint_eq(a.host_mem_bytes, 0);
	ck_assert_int_eq(a.read_only, 0);
}
END_TEST

START_TEST(bags_defaults)
{
	struct shemb_bags b;

	memset(&b, 0xa5, sizeof(b));
	shemb_bags_init(&b);
	ck_assert_uint_eq(b.size, sizeof(b));
	ck_assert_ptr_null(b.table);
	ck_assert_int_eq(b.pooling, SHEMB_POOL_SUM);
	ck_assert_int_eq(b.dim, 0);
	ck_assert_int_eq(b.nbags, 0);
	ck_assert_ptr_null(b.offsets);
	ck_assert_int_eq(b.nids, 0);
	ck_assert_ptr_null(b.ids);
	ck_assert_ptr_null(b.weights);
}
END_TEST

/* The size a man page gives for this release's struct ("this release's
 * struct has N"), or -1 if the page says none. */
static long documented_size(const char *page)
{
	const char *top = getenv("top_srcdir");
	static const char *const says[] = { "this release's struct has ",
					    "this release\\(aqs struct has " };
	char path[4096], line[1024];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/man/man3/%s", top ? top : ".",
		 page);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	while (n < 0 && fgets(line, sizeof(line), f))
		for (int i = 0; i < 2 && n < 0; i++) {
			const char *at = strstr(line, says[i]);

			if (at)
				n = strtol(at + strlen(says[i]), NULL, 10);
		}
	fclose(f);
	return n;
}

/* The pages that tell how large the structs are tell the truth (on LP64,
 * as they say). */
START_TEST(man_pages_give_struct_sizes)
{
	static const struct {
		const char *page;
		size_t size;
	} s[] = {
		{ "shemb_ctx_create.3", sizeof(struct shemb_ctx_attr) },
		{ "shemb_table_create.3", sizeof(struct shemb_table_attr) },
		{ "shemb_table_stats.3", sizeof(struct shemb_table_stats) },
		{ "shemb_lookup.3", sizeof(struct shemb_bags) },
	};

	if (sizeof(long) != 8 || sizeof(void *) != 8)
		return;
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		ck_assert_msg(documented_size(s[i].page) == (long)s[i].size,
			      "%s gives %ld bytes, the struct has %zu",
			      s[i].page, documented_size(s[i].page),
			      s[i].size);
}
END_TEST

/* ---- create and destroy ---- */

START_TEST(destroy_null_is_noop)
{
	ck_assert_int_eq(shemb_ctx_destroy(NULL), 0);
	ck_assert_int_eq(shemb_table_destroy(NULL), 0);
}
END_TEST

START_TEST(ctx_with_null_attr_and_tables)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t1 = tu_table(ctx, 10, 4, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_table *t2 = tu_table(ctx, 10, 4, SHEMB_BF16, SHEMB_OPT_ADAM);

	ck_assert_ptr_nonnull(t1);
	ck_assert_ptr_nonnull(t2);
	ck_assert_int_eq(shemb_table_destroy(t1), 0);
	/* the context takes t2 with it */
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
}
END_TEST

START_TEST(ctx_with_explicit_threads)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.nthreads = 3;
	a.log_level = SHEMB_LOG_OFF;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	ck_assert_ptr_nonnull(ctx);
	ck_assert_str_eq(shemb_ctx_last_error(ctx), "");
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- sized structs ---- */

/* A caller built against a newer header: our struct plus more fields. */
struct ctx_attr_v2 {
	struct shemb_ctx_attr v1;
	uint64_t newer[4];
};

struct table_attr_v2 {
	struct shemb_table_attr v1;
	uint64_t newer[4];
};

START_TEST(ctx_attr_smaller_than_v1)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.size = offsetof(struct shemb_ctx_attr, world_size);
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
	ck_assert_ptr_null(ctx);
	ck_assert_str_ne(shemb_ctx_last_error(NULL), "");
	a.size = sizeof(size_t);
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
}
END_TEST

START_TEST(ctx_attr_larger_zero_tail)
{
	struct ctx_attr_v2 a;
	shemb_ctx *ctx = NULL;

	memset(&a, 0, sizeof(a));
	shemb_ctx_attr_init(&a.v1);
	a.v1.size = sizeof(a);
	a.v1.nthreads = 1;
	ck_assert_int_eq(shemb_ctx_create(&a.v1, &ctx), 0);
	ck_assert_ptr_nonnull(ctx);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(ctx_attr_larger_nonzero_tail)
{
	struct ctx_attr_v2 a;
	shemb_ctx *ctx = NULL;

	for (size_t byte = 0; byte < sizeof(a.newer); byte += 7) {
		memset(&a, 0, sizeof(a));
		shemb_ctx_attr_init(&a.v1);
		a.v1.size = sizeof(a);
		((unsigned char *)a.newer)[byte] = 1;
		ck_assert_int_eq(shemb_ctx_create(&a.v1, &ctx), SHEMB_EINVAL);
		ck_assert_ptr_null(ctx);
		ck_assert_str_ne(shemb_ctx_last_error(NULL), "");
	}
}
END_TEST

static void table_attr_basic(struct shemb_table_attr *a)
{
	shemb_table_attr_init(a);
	a->rows = 16;
	a->dim = 4;
}

START_TEST(table_attr_size_rules)
{
	shemb_ctx *ctx = new_ctx();
	struct table_attr_v2 big;
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	table_attr_basic(&a);
	a.size = offsetof(struct shemb_table_attr, initial_accumulator);
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");

	memset(&big, 0, sizeof(big));
	table_attr_basic(&big.v1);
	big.v1.size = sizeof(big);
	ck_assert_int_eq(shemb_table_create(ctx, &big.v1, &t), 0);
	ck_assert_ptr_nonnull(t);

	big.newer[3] = 1;
	t = NULL;
	ck_assert_int_eq(shemb_table_create(ctx, &big.v1, &t), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Bag sets are read with the stride of bags[0].size: a larger struct with
 * zero fields past ours works, a non-zero one is refused. */
struct bags_v2 {
	struct shemb_bags v1;
	uint64_t newer[2];
};

START_TEST(bags_larger_struct_stride)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 8, 2, SHEMB_F32, SHEMB_OPT_SGD);
	float *w = tu_read_all_f32(t);
	int64_t off[2] = { 0, 2 }, ids0[2] = { 1, 3 }, ids1[2] = { 5, 5 };
	float out0[2], out1[2];
	float *outs[2] = { out0, out1 };
	struct bags_v2 b[2];

	memset(b, 0, sizeof(b));
	for (int i = 0; i < 2; i++) {
		shemb_bags_init(&b[i].v1);
		b[i].v1.size = sizeof(b[i]);
		b[i].v1.table = t;
		b[i].v1.nbags = 1;
		b[i].v1.offsets = off;
		b[i].v1.nids = 2;
	}
	b[0].v1.ids = ids0;
	b[1].v1.ids = ids1;
	ck_assert_int_eq(shemb_lookup(ctx, 2, &b[0].v1, outs,
				      SHEMB_LOOKUP_NO_GRAD), 0);
	for (int c = 0; c < 2; c++) {
		ck_assert(tu_close(out0[c], w[2 + c] + w[6 + c], 1e-6f, 0));
		ck_assert(tu_close(out1[c], w[10 + c] + w[10 + c], 1e-6f, 0));
	}
	b[1].newer[0] = 1;
	ck_assert_int_eq(shemb_lookup(ctx, 2, &b[0].v1, outs,
				      SHEMB_LOOKUP_NO_GRAD), SHEMB_EINVAL);
	free(w);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- resolved attributes ---- */

START_TEST(get_attr_resolves_defaults)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t0 = tu_table(ctx, 100, 4, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_table *t1 = tu_table(ctx, 400, 4, SHEMB_F16, SHEMB_OPT_ADAM);
	struct shemb_table_attr a;
	float r0 = (float)sqrt(1.0 / 100.0), r1 = (float)sqrt(1.0 / 400.0);

	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t0, &a), 0);
	ck_assert_int_eq(a.table_id, 0);
	ck_assert_str_eq(a.name, "table0");
	ck_assert_int_eq(a.rows, 100);
	ck_assert_int_eq(a.dim, 4);
	ck_assert(tu_close(a.init_high, r0, 1e-6f, 0));
	ck_assert(tu_close(a.init_low, -r0, 1e-6f, 0));
	ck_assert(a.lr == 0.01f);

	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t1, &a), 0);
	ck_assert_int_eq(a.table_id, 1);
	ck_assert_str_eq(a.name, "table1");
	ck_assert_int_eq(a.dtype, SHEMB_F16);
	ck_assert_int_eq(a.optimizer, SHEMB_OPT_ADAM);
	ck_assert(tu_close(a.init_high, r1, 1e-6f, 0));
	ck_assert(tu_close(a.init_low, -r1, 1e-6f, 0));
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(get_attr_name_is_copied)
{
	shemb_ctx *ctx = new_ctx();
	struct shemb_table_attr a;
	char name[16] = "user_emb";
	shemb_table *t;

	shemb_table_attr_init(&a);
	a.rows = 10;
	a.dim = 3;
	a.name = name;
	a.init_low = -0.5f;
	a.init_high = 0.25f;
	t = tu_table_attr(ctx, &a);
	strcpy(name, "changed");
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	ck_assert_str_eq(a.name, "user_emb");
	/* an explicit range is kept as given */
	ck_assert(a.init_low == -0.5f && a.init_high == 0.25f);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(get_attr_shows_lr_after_set_lr)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 10, 3, SHEMB_F32, SHEMB_OPT_ADAGRAD);
	struct shemb_table_attr a;

	ck_assert_int_eq(shemb_table_set_lr(t, 0.125f), 0);
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	ck_assert(a.lr == 0.125f);
	ck_assert_int_eq(shemb_table_set_lr(t, 0.0f), 0);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	ck_assert(a.lr == 0.0f);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(get_attr_too_small)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 10, 3, SHEMB_F32, SHEMB_OPT_SGD);
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.size = offsetof(struct shemb_table_attr, lr);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- setups this release refuses ---- */

/* Two ranks need a rendezvous (or a build with libfabric at all). */
START_TEST(world_size_two_needs_a_rendezvous)
{
	bool fabric = strstr(shemb_version_string(), "libfabric") != NULL;
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	unsetenv("SHEMB_ROOT");
	shemb_ctx_attr_init(&a);
	a.world_size = 2;
	a.rank = 1;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx),
			 fabric ? SHEMB_EINVAL : SHEMB_ENOTSUP);
	ck_assert_ptr_null(ctx);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(NULL),
				     fabric ? "SHEMB_ROOT" : "libfabric"));
}
END_TEST

/* Rank 0's inherited listener must be named by a descriptor number above
 * the standard streams; checked before any network is touched. */
START_TEST(root_fd_must_be_a_descriptor_number)
{
	static const char *const bad[] = { "abc", "-4", "1", "7x", " 5",
					   "99999999999999999999" };
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	if (!strstr(shemb_version_string(), "libfabric"))
		return;
	shemb_ctx_attr_init(&a);
	a.world_size = 2;
	a.rank = 0;
	a.root = "127.0.0.1:1";
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SHEMB_ROOT_FD", bad[i], 1);
		ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
		ck_assert_ptr_null(ctx);
		ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(NULL),
					     "SHEMB_ROOT_FD"));
	}
	unsetenv("SHEMB_ROOT_FD");
}
END_TEST

START_TEST(unknown_isa_not_supported)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(tu_ctx_create("no-such-isa", 1, &ctx),
			 SHEMB_ENOTSUP);
	ck_assert_ptr_null(ctx);
	ck_assert_str_ne(shemb_ctx_last_error(NULL), "");
}
END_TEST

static shemb_ctx *ctx_with_budget(uint64_t bytes)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.host_mem_bytes = bytes;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	return ctx;
}

START_TEST(host_budget_enomem_at_create)
{
	shemb_ctx *ctx = ctx_with_budget(64 << 10);
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	/* 100000 x 16 fp32 values need over 6 MB */
	shemb_table_attr_init(&a);
	a.rows = 100000;
	a.dim = 16;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_ENOMEM);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
	/* a table that fits is still made */
	t = tu_table(ctx, 100, 16, SHEMB_F32, SHEMB_OPT_SGD);
	ck_assert_ptr_nonnull(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(host_budget_is_shared_by_tables)
{
	shemb_ctx *ctx = ctx_with_budget(1 << 20);
	struct shemb_table_attr a;
	shemb_table *tables[64];
	int made = 0, rc = 0;

	shemb_table_attr_init(&a);
	a.rows = 1024;
	a.dim = 32; /* at least 128 KiB each */
	while (made < 64 && !(rc = shemb_table_create(ctx, &a,
						       &tables[made])))
		made++;
	ck_assert_int_eq(rc, SHEMB_ENOMEM);
	ck_assert_int_ge(made, 1);
	ck_assert_int_le(made, 8);
	/* freeing one makes room for one more */
	shemb_table_destroy(tables[0]);
	ck_assert_int_eq(shemb_table_create(ctx, &a, &tables[0]), 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Resident bytes of this process (/proc/self/statm). */
static long long resident_bytes(void)
{
	FILE *fp = fopen("/proc/self/statm", "r");
	long long size = 0, pages = -1;

	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fscanf(fp, "%lld %lld", &size, &pages), 2);
	fclose(fp);
	return pages * 4096;
}

/* The library keeps the pages its steps free, for their next turn, but
 * not those of a destroyed table: its rows go back to the kernel. */
START_TEST(destroyed_table_returns_its_pages)
{
	const long long mib = 1 << 20, rows_bytes = 64 * mib;
	shemb_ctx *ctx = new_ctx();
	struct shemb_table_attr a;
	long long before, made, gone;
	shemb_table *t;

	shemb_table_attr_init(&a);
	a.rows = rows_bytes / (64 * sizeof(float));
	a.dim = 64;
	before = resident_bytes();
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), 0);
	made = resident_bytes();
	/* the rows were written at create: the check below means something */
	ck_assert_int_ge(made - before, rows_bytes * 3 / 4);
	ck_assert_int_eq(shemb_table_destroy(t), 0);
	gone = resident_bytes();
	ck_assert_msg(made - gone >= rows_bytes * 3 / 4, "%lld MiB resident "
		      "before the destroy, %lld MiB after", made / mib,
		      gone / mib);
	shemb_ctx_destroy(ctx);
}
END_TEST

/*
 * "table_id -1 = creation order within the context (0, 1, 2...)": a create
 * that failed created nothing, so the next table is still table 0 and gets
 * the rows of table 0.
 */
START_TEST(failed_create_takes_no_table_id)
{
	shemb_ctx *ctx = ctx_with_budget(64 << 10);
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = 100000;
	a.dim = 16;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_ENOMEM);
	t = tu_table(ctx, 10, 4, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	/* the failed create gave id 0 back: this table is table0 */
	ck_assert_int_eq(a.table_id, 0);
	ck_assert_str_eq(a.name, "table0");
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Nor does a failed create with an id given ("one more than the largest
 * table_id given so far to a table"): before, the next automatic id was
 * 1001 after a failed create of table 1000, and none was left after a
 * failed create of table INT64_MAX. */
START_TEST(failed_create_with_an_id_moves_no_automatic_id)
{
	shemb_ctx *ctx = ctx_with_budget(64 << 10);
	const int64_t given[] = { 1000, INT64_MAX };
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	for (int i = 0; i < 2; i++) {
		shemb_table_attr_init(&a);
		a.rows = 100000;
		a.dim = 16;
		a.table_id = given[i];
		ck_assert_int_eq(shemb_table_create(ctx, &a, &t),
				 SHEMB_ENOMEM);
		ck_assert_ptr_null(t);
	}
	t = tu_table(ctx, 10, 4, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	ck_assert_int_eq(a.table_id, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/*
 * A table of table_id INT64_MAX leaves no automatic id: a create with -1
 * is refused (it once got INT64_MIN, an id the library then refused to
 * load from its own checkpoint), creates nothing, and given ids still
 * work.
 */
START_TEST(no_automatic_id_after_the_largest)
{
	shemb_ctx *ctx = new_ctx();
	struct shemb_table_attr a;
	shemb_table *t = NULL, *u = NULL;

	shemb_table_attr_init(&a);
	a.rows = 10;
	a.dim = 4;
	a.table_id = INT64_MAX;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), 0);
	a.table_id = -1;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &u), SHEMB_EINVAL);
	ck_assert_ptr_null(u);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "table_id",
				  "INT64_MAX", NULL));
	a.table_id = 3;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &u), 0);
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(u, &a), 0);
	ck_assert_int_eq(a.table_id, 3);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- error details ---- */

START_TEST(last_error_after_failed_ctx_create)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.nthreads = -3;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
	ck_assert_ptr_null(ctx);
	ck_assert(tu_contains_all(shemb_ctx_last_error(NULL), "-3",
				  (char *)NULL));
	ck_assert_int_eq(shemb_ctx_create(NULL, NULL), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(NULL), "");
}
END_TEST

START_TEST(last_error_belongs_to_its_context)
{
	shemb_ctx *c1 = new_ctx(), *c2 = new_ctx();
	shemb_table *t1 = tu_table(c1, 10, 2, SHEMB_F32, SHEMB_OPT_SGD);

	ck_assert_str_eq(shemb_ctx_last_error(c1), "");
	ck_assert_int_eq(shemb_table_set_lr(t1, -1.0f), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(c1), "");
	ck_assert_str_eq(shemb_ctx_last_error(c2), "");
	ck_assert_str_eq(shemb_ctx_last_error(NULL), "");
	/* a successful call keeps the detail of the last failure */
	ck_assert_int_eq(shemb_table_set_lr(t1, 1.0f), 0);
	ck_assert_str_ne(shemb_ctx_last_error(c1), "");
	shemb_ctx_destroy(c1);
	shemb_ctx_destroy(c2);
}
END_TEST

/* ---- logging ---- */

struct log_record {
	int lines;
	int bad_lines; /* empty, or ending in a newline */
	int max_level;
};

static void record_line(void *arg, int level, const char *msg)
{
	struct log_record *r = arg;
	size_t n = strlen(msg);

	r->lines++;
	if (n == 0 || msg[n - 1] == '\n')
		r->bad_lines++;
	if (level > r->max_level)
		r->max_level = level;
}

static void log_some(int level, struct log_record *rec)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;
	shemb_table *t;

	memset(rec, 0, sizeof(*rec));
	shemb_ctx_attr_init(&a);
	a.log_level = level;
	a.log_fn = record_line;
	a.log_arg = rec;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	t = tu_table(ctx, 10, 2, SHEMB_F32, SHEMB_OPT_SGD);
	/* a failure, which a debug log reports */
	ck_assert_int_eq(shemb_table_set_lr(t, -1.0f), SHEMB_EINVAL);
	shemb_ctx_destroy(ctx);
}

/* Lines about one failure, and on which threads they came. */
struct failure_lines {
	pthread_t caller;
	int about_it, elsewhere;
};

static void note_failure_line(void *arg, int level, const char *msg)
{
	struct failure_lines *f = arg;

	if (level != SHEMB_LOG_DEBUG || !strstr(msg, "id 5000"))
		return;
	f->about_it++;
	f->elsewhere += !pthread_equal(pthread_self(), f->caller);
}

/* "log_fn is called on the thread that made the libshemb call", and
 * each failed call gives one DEBUG line: a started step that fails does
 * on the caller's thread, once.  Before, the thread of started steps
 * logged it too. */
START_TEST(failed_started_step_logs_once_on_the_caller)
{
	struct failure_lines f = { .caller = pthread_self() };
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;
	shemb_table *t;
	struct shemb_bags b;
	int64_t off[2] = { 0, 1 }, id = 5000;
	float out[2], *o = out;
	shemb_request *req = NULL;

	shemb_ctx_attr_init(&a);
	a.log_level = SHEMB_LOG_DEBUG;
	a.log_fn = note_failure_line;
	a.log_arg = &f;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	t = tu_table(ctx, 1000, 2, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_bags_init(&b);
	b.table = t;
	b.nbags = 1;
	b.offsets = off;
	b.nids = 1;
	b.ids = &id;
	ck_assert_int_eq(shemb_lookup_start(ctx, 1, &b, &o, 0, &req), 0);
	ck_assert_int_eq(shemb_wait(req), SHEMB_EINVAL);
	shemb_request_free(req);
	ck_assert_int_eq(f.about_it, 1);
	ck_assert_int_eq(f.elsewhere, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(log_callback_levels)
{
	struct log_record rec;

	log_some(SHEMB_LOG_DEBUG, &rec);
	ck_assert_int_gt(rec.lines, 0);
	ck_assert_int_eq(rec.bad_lines, 0);
	ck_assert_int_le(rec.max_level, SHEMB_LOG_DEBUG);
	log_some(SHEMB_LOG_OFF, &rec);
	ck_assert_int_eq(rec.lines, 0);
	log_some(SHEMB_LOG_ERROR, &rec);
	ck_assert_int_le(rec.max_level, SHEMB_LOG_ERROR);
}
END_TEST

/* ---- statistics ---- */

static int64_t distinct_ids(const struct tu_bags *const *sets, int n,
			    int64_t rows)
{
	char *seen = tu_calloc((size_t)rows, 1);
	int64_t count = 0;

	for (int i = 0; i < n; i++)
		for (int64_t k = 0; k < sets[i]->nids; k++)
			if (!seen[sets[i]->ids[k]]++)
				count++;
	free(seen);
	return count;
}

struct expect_stats {
	uint64_t lookups, backwards, bags, ids, unique_ids, rows_updated;
};

static void expect_lookup(struct expect_stats *e,
			  const struct tu_bags *const *sets, int n,
			  int64_t rows, bool planned)
{
	for (int i = 0; i < n; i++) {
		e->lookups++;
		e->bags += (uint64_t)sets[i]->nbags;
		e->ids += (uint64_t)sets[i]->nids;
	}
	if (planned)
		e->unique_ids += (uint64_t)distinct_ids(sets, n, rows);
}

static void check_stats(shemb_table *t, const struct expect_stats *e)
{
	struct shemb_table_stats st;

	memset(&st, 0xff, sizeof(st));
	st.size = sizeof(st);
	ck_assert_int_eq(shemb_table_stats(t, &st), 0);
	ck_assert_uint_eq(st.lookups, e->lookups);
	ck_assert_uint_eq(st.backwards, e->backwards);
	ck_assert_uint_eq(st.bags, e->bags);
	ck_assert_uint_eq(st.ids, e->ids);
	ck_assert_uint_eq(st.unique_ids, e->unique_ids);
	ck_assert_uint_eq(st.rows_updated, e->rows_updated);
}

static void random_sets(struct tu_bags *b, int n, int64_t rows,
			struct tu_rng *r)
{
	struct tu_bag_spec spec = { .nbags = 20, .max_len = 6, .rows = rows,
				    .zipf = true, .repeat_pct = 20,
				    .empty_pct = 10 };

	for (int i = 0; i < n; i++)
		tu_bags_random(&b[i], r, &spec);
}

static float *zero_grad(const struct tu_bags *b, int dim)
{
	return tu_calloc((size_t)b->nbags * (size_t)dim + 1, sizeof(float));
}

START_TEST(stats_count_what_was_done)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *ta = tu_table(ctx, 50, 4, SHEMB_F32, SHEMB_OPT_SGD);
	shemb_table *tb = tu_table(ctx, 30, 4, SHEMB_F32, SHEMB_OPT_SGD);
	struct expect_stats ea = { 0 }, eb = { 0 };
	struct tu_bags b[3];
	struct tu_rng r;
	struct shemb_bags sets[3];
	float *out[3], *grad[3];

	tu_rng_seed(&r, 42);
	random_sets(b, 3, 30, &r);
	/* set 0 and 2 on table a, set 1 on table b */
	sets[0] = tu_bags_view(&b[0], ta, SHEMB_POOL_SUM);
	sets[1] = tu_bags_view(&b[1], tb, SHEMB_POOL_MEAN);
	sets[2] = tu_bags_view(&b[2], ta, SHEMB_POOL_MAX);
	for (int i = 0; i < 3; i++) {
		out[i] = zero_grad(&b[i], 4);
		grad[i] = zero_grad(&b[i], 4);
	}
	ck_assert_int_eq(shemb_lookup(ctx, 3, sets, out, 0), 0);
	expect_lookup(&ea, (const struct tu_bags *[]){ &b[0], &b[2] }, 2, 50,
		      true);
	expect_lookup(&eb, (const struct tu_bags *[]){ &b[1] }, 1, 30, true);
	check_stats(ta, &ea);
	check_stats(tb, &eb);

	ck_assert_int_eq(shemb_backward(ctx, 3, sets,
					(const float *const *)grad), 0);
	ea.backwards += 2;
	eb.backwards += 1;
	ea.rows_updated += (uint64_t)distinct_ids(
		(const struct tu_bags *[]){ &b[0], &b[2] }, 2, 50);
	eb.rows_updated += (uint64_t)distinct_ids(
		(const struct tu_bags *[]){ &b[1] }, 1, 30);
	check_stats(ta, &ea);
	check_stats(tb, &eb);

	/* a NO_GRAD lookup counts as a lookup, but plans nothing */
	ck_assert_int_eq(shemb_lookup(ctx, 1, &sets[1], &out[1],
				      SHEMB_LOOKUP_NO_GRAD), 0);
	expect_lookup(&eb, (const struct tu_bags *[]){ &b[1] }, 1, 30, false);
	check_stats(tb, &eb);
	check_stats(ta, &ea);

	ck_assert_int_eq(shemb_table_stats_reset(ta), 0);
	memset(&ea, 0, sizeof(ea));
	check_stats(ta, &ea);
	check_stats(tb, &eb);

	for (int i = 0; i < 3; i++) {
		free(out[i]);
		free(grad[i]);
		tu_bags_free(&b[i]);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(stats_reset_zeroes_timers)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 50, 4, SHEMB_F32, SHEMB_OPT_SGD);
	struct shemb_table_stats st;
	struct tu_bags b;
	struct tu_rng r;
	struct shemb_bags set;
	float *out;

	tu_rng_seed(&r, 7);
	random_sets(&b, 1, 50, &r);
	set = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	out = zero_grad(&b, 4);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &out, 0), 0);
	ck_assert_int_eq(shemb_table_stats_reset(t), 0);
	st.size = sizeof(st);
	ck_assert_int_eq(shemb_table_stats(t, &st), 0);
	ck_assert_uint_eq(st.lookups + st.backwards + st.bags + st.ids +
				  st.unique_ids + st.rows_updated,
			  0);
	ck_assert_uint_eq(st.validate_ns + st.plan_ns + st.pool_ns +
				  st.update_ns,
			  0);
	free(out);
	tu_bags_free(&b);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(stats_size_too_small)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 5, 2, SHEMB_F32, SHEMB_OPT_SGD);
	struct shemb_table_stats st;

	st.size = offsetof(struct shemb_table_stats, update_ns);
	ck_assert_int_eq(shemb_table_stats(t, &st), SHEMB_EINVAL);
	ck_assert_str_ne(shemb_ctx_last_error(ctx), "");
	st.size = 0;
	ck_assert_int_eq(shemb_table_stats(t, &st), SHEMB_EINVAL);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* "fills the fields that fit in stats->size bytes": a size that ends
 * inside a field leaves that field alone (its first bytes were written). */
START_TEST(stats_fill_whole_fields)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = tu_table(ctx, 5, 2, SHEMB_F32, SHEMB_OPT_SGD);
	const size_t cut = offsetof(struct shemb_table_stats, sent_bytes);
	unsigned char buf[sizeof(struct shemb_table_stats)];
	struct shemb_table_stats st;

	memset(buf, 0xab, sizeof(buf));
	memcpy(&st, buf, sizeof(st));
	st.size = cut + 2;
	ck_assert_int_eq(shemb_table_stats(t, &st), 0);
	ck_assert_uint_eq(st.size, cut + 2);
	ck_assert_uint_eq(st.lookups, 0);    /* fields that fit: written */
	ck_assert_uint_eq(st.update_ns, 0);
	ck_assert(!memcmp((char *)&st + cut, buf + cut, sizeof(buf) - cut));
	shemb_ctx_destroy(ctx);
}
END_TEST

static Suite *api_suite(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");
	TCase *reg = tcase_create("regressions");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, version_number_matches_header);
	tcase_add_test(tc, version_string_starts_with_numbers);
	tcase_add_test(tc, strerror_known_codes);
	tcase_add_test(tc, strerror_unknown_code);
	tcase_add_test(tc, ctx_attr_defaults);
	tcase_add_test(tc, table_attr_defaults);
	tcase_add_test(tc, bags_defaults);
	tcase_add_test(tc, man_pages_give_struct_sizes);
	tcase_add_test(tc, destroy_null_is_noop);
	tcase_add_test(tc, ctx_with_null_attr_and_tables);
	tcase_add_test(tc, ctx_with_explicit_threads);
	tcase_add_test(tc, ctx_attr_smaller_than_v1);
	tcase_add_test(tc, ctx_attr_larger_zero_tail);
	tcase_add_test(tc, ctx_attr_larger_nonzero_tail);
	tcase_add_test(tc, table_attr_size_rules);
	tcase_add_test(tc, bags_larger_struct_stride);
	tcase_add_test(tc, get_attr_resolves_defaults);
	tcase_add_test(tc, get_attr_name_is_copied);
	tcase_add_test(tc, get_attr_shows_lr_after_set_lr);
	tcase_add_test(tc, get_attr_too_small);
	tcase_add_test(tc, world_size_two_needs_a_rendezvous);
	tcase_add_test(tc, root_fd_must_be_a_descriptor_number);
	tcase_add_test(tc, attr_init_writes_the_callers_size);
	tcase_add_test(tc, unknown_isa_not_supported);
	tcase_add_test(tc, host_budget_enomem_at_create);
	tcase_add_test(tc, host_budget_is_shared_by_tables);
	tcase_add_test(tc, destroyed_table_returns_its_pages);
	tcase_add_test(tc, last_error_after_failed_ctx_create);
	tcase_add_test(tc, last_error_belongs_to_its_context);
	tcase_add_test(tc, log_callback_levels);
	tcase_add_test(tc, failed_started_step_logs_once_on_the_caller);
	tcase_add_test(tc, stats_count_what_was_done);
	tcase_add_test(tc, stats_reset_zeroes_timers);
	tcase_add_test(tc, stats_size_too_small);
	tcase_add_test(tc, stats_fill_whole_fields);
	suite_add_tcase(s, tc);
	tcase_add_test(reg, failed_create_takes_no_table_id);
	tcase_add_test(reg, failed_create_with_an_id_moves_no_automatic_id);
	tcase_add_test(reg, no_automatic_id_after_the_largest);
	suite_add_tcase(s, reg);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(api_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
