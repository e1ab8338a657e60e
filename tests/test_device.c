/*
 * test_device.c - asking for a device: the attrs, SHEMB_ENODEV where the
 * build or host has no usable GPU (or the GPU module cannot be loaded),
 * and bag sets that name device memory on a context without one, which
 * are refused before anything is read or changed.
 */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "shemb.h"
#include "testutil.h"

/* A CUDA context, if this build and host have a device (then the GPU
 * tests in tests/gpu/ cover it and the ENODEV checks do not apply). */
static int cuda_ctx(shemb_ctx **ctx)
{
	struct shemb_ctx_attr a;

	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.device = SHEMB_DEVICE_CUDA;
	return shemb_ctx_create(&a, ctx);
}

START_TEST(attr_defaults)
{
	struct shemb_ctx_attr a;
	struct shemb_bags b;
	shemb_ctx *ctx;

	shemb_ctx_attr_init(&a);
	ck_assert_int_eq(a.device, SHEMB_DEVICE_CPU);
	ck_assert_int_eq(a.device_id, -1);
	ck_assert_ptr_null(a.stream);
	shemb_bags_init(&b);
	ck_assert_int_eq(b.mem, SHEMB_MEM_HOST);
	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	ck_assert_int_eq(shemb_ctx_get_attr(ctx, &a), 0);
	ck_assert_int_eq(a.device, SHEMB_DEVICE_CPU);
	ck_assert_int_eq(a.device_id, -1);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_device_attrs)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = (shemb_ctx *)&a;

	shemb_ctx_attr_init(&a);
	a.device = 2;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
	ck_assert_ptr_null(ctx);
	ck_assert(tu_contains_all(shemb_ctx_last_error(NULL), "device 2",
				  NULL));
	shemb_ctx_attr_init(&a);
	a.device = SHEMB_DEVICE_CUDA;
	a.device_id = -2;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(NULL), "device_id -2",
				  NULL));
}
END_TEST

#ifdef HAVE_CUDA
/* What is missing, then the reason in CUDA's or the loader's words: no
 * device (what a host without a driver gives), a device that cannot be
 * used, or a module that cannot be loaded. */
static bool says_why_no_cuda(const char *why)
{
	static const char *const head[] = {
		"no usable CUDA device: cudaGetDeviceCount: ",
		"no usable CUDA device: no CUDA device",
		"CUDA device ",
		"cannot load the GPU backend ",
	};

	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++) {
		size_t n = strlen(head[i]);

		if (!strncmp(why, head[i], n) && (i == 1 ? !why[n]
							 : strlen(why) > n + 5))
			return true;
	}
	return false;
}
#endif

START_TEST(no_gpu_is_enodev)
{
	shemb_ctx *ctx = NULL;
	int rc = cuda_ctx(&ctx);

	if (rc == 0) {
		/* a GPU host: tests/gpu/ checks the backend */
		shemb_ctx_destroy(ctx);
		return;
	}
	ck_assert_int_eq(rc, SHEMB_ENODEV);
	ck_assert_ptr_null(ctx);
	ck_assert(strlen(shemb_ctx_last_error(NULL)) > 10);
#ifdef HAVE_CUDA
	ck_assert_msg(says_why_no_cuda(shemb_ctx_last_error(NULL)), "%s",
		      shemb_ctx_last_error(NULL));
#else
	ck_assert(tu_contains_all(shemb_ctx_last_error(NULL), "without CUDA",
				  NULL));
#endif
	/* the CPU still works after the refusal */
	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Each test runs in its own process (Check's fork mode), so the module is
 * not loaded yet when this one starts. */
START_TEST(missing_module_is_enodev)
{
	shemb_ctx *ctx = NULL;

#ifndef HAVE_CUDA
	return;
#endif
	setenv("SHEMB_CUDA_PLUGIN", "/nonexistent/shemb_cuda.so", 1);
	ck_assert_int_eq(cuda_ctx(&ctx), SHEMB_ENODEV);
	ck_assert_ptr_null(ctx);
	ck_assert(tu_contains_all(shemb_ctx_last_error(NULL),
				  "/nonexistent/shemb_cuda.so", NULL));
}
END_TEST

/* The pointers are never dereferenced: the refusal comes first. */
static const int64_t *bogus_i64 = (const int64_t *)16;

static void device_bags(struct shemb_bags *b, shemb_table *t, int mem)
{
	shemb_bags_init(b);
	b->table = t;
	b->nbags = 2;
	b->nids = 3;
	b->offsets = bogus_i64;
	b->ids = bogus_i64;
	b->mem = mem;
}

START_TEST(device_mem_on_cpu_context)
{
	static const int mems[] = { SHEMB_MEM_DEVICE, 7 };
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_snapshot before;
	float *out = (float *)32;
	const float *grad = (const float *)32;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = tu_table(ctx, 50, 8, SHEMB_F32, SHEMB_OPT_ADAGRAD);
	tu_snapshot_take(&before, t);
	for (size_t m = 0; m < TU_ARRAY_SIZE(mems); m++) {
		struct shemb_bags b;

		device_bags(&b, t, mems[m]);
		ck_assert_int_eq(shemb_lookup(ctx, 1, &b, &out, 0),
				 SHEMB_EINVAL);
		ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "bags[0]",
					  "mem", NULL));
		ck_assert_int_eq(shemb_backward(ctx, 1, &b, &grad),
				 SHEMB_EINVAL);
		ck_assert_int_eq(shemb_prefetch(ctx, 1, &b), SHEMB_EINVAL);
		ck_assert_int_eq(shemb_announce(ctx, 1, &b), SHEMB_EINVAL);
	}
	ck_assert(tu_unchanged_since(&before, t));
	tu_snapshot_free(&before);
	shemb_ctx_destroy(ctx);
}
END_TEST

static Suite *device_suite(void)
{
	Suite *s = suite_create("device");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, attr_defaults);
	tcase_add_test(tc, bad_device_attrs);
	tcase_add_test(tc, no_gpu_is_enodev);
	tcase_add_test(tc, missing_module_is_enodev);
	tcase_add_test(tc, device_mem_on_cpu_context);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(device_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
