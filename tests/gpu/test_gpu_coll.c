/*
 * test_gpu_coll.c - collectives of a one-rank GPU context on device
 * buffers, through NCCL and (SHEMB_NCCL=0) through host copies:
 * alltoallv and allgatherv move the bytes to where the counts say and
 * leave the gaps between pieces alone, allreduce of every dtype and
 * both ops (in place too) gives the input back, requests complete once,
 * a buffer may be sent from and received into in parts apart, and a send
 * buffer in device memory with a receive buffer in host memory is
 * refused.  Skips (77) without a usable GPU.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/gpu/gputest.h"

#define N 4096

/* Sent from the start of a buffer and received far into it (past what
 * a copy of the pieces sent alone would hold): only what was received
 * changes. */
#define FAR 300000

static void one_buffer(shemb_ctx *ctx, const char *how)
{
	unsigned char *in = malloc(FAR + N), *out = malloc(FAR + N);
	unsigned char *d = dev_alloc(FAR + N);
	size_t n = N, sd = 0, rd = FAR;

	if (!in || !out)
		abort();
	for (int i = 0; i < FAR + N; i++)
		in[i] = (unsigned char)(i * 13 + 5);
	dev_put(d, in, FAR + N);
	CHECK(shemb_alltoallv(ctx, d, &n, &sd, d, &n, &rd, NULL) == 0,
	      "%s alltoallv through one buffer: %s", how,
	      shemb_ctx_last_error(ctx));
	dev_get(out, d, FAR + N);
	for (int i = 0; i < FAR + N; i++) {
		unsigned char want = i >= FAR ? in[i - FAR] : in[i];

		if (out[i] != want) {
			CHECK(0, "%s alltoallv through one buffer: byte %d "
			      "is %d, not %d", how, i, out[i], want);
			break;
		}
	}
	dev_free(d);
	free(in);
	free(out);
}

/* A send buffer of another device than the context's is refused (where
 * such memory can be had). */
static void other_device(shemb_ctx *ctx, void *dout, const char *how)
{
	void *o = dev_alloc_other(N);
	size_t n = 100, sd = 0, rd = 0;

	if (!o)
		return;
	CHECK(shemb_alltoallv(ctx, o, &n, &sd, dout, &n, &rd, NULL) ==
			      SHEMB_EINVAL &&
		      strstr(shemb_ctx_last_error(ctx), "another device"),
	      "%s: a buffer of another device: %s", how,
	      shemb_ctx_last_error(ctx));
	dev_free(o);
}

static void moves(shemb_ctx *ctx, const char *how)
{
	unsigned char in[N], out[N];
	unsigned char *din = dev_alloc(N), *dout = dev_alloc(N);
	size_t sc = 1000, sd = 17, rd = 300, zero = 0, cnt = 1000;
	shemb_request *req = NULL;
	int done = 0;

	for (int i = 0; i < N; i++)
		in[i] = (unsigned char)(i * 7 + 3);
	memset(out, 0xab, N);
	dev_put(din, in, N);
	dev_put(dout, out, N);
	CHECK(shemb_alltoallv(ctx, din, &sc, &sd, dout, &sc, &rd, &req) == 0,
	      "%s alltoallv: %s", how, shemb_ctx_last_error(ctx));
	CHECK(req && shemb_wait(req) == 0, "%s alltoallv wait", how);
	CHECK(shemb_test(req, &done) == SHEMB_ESTATE,
	      "%s: a request reports once", how);
	shemb_request_free(req);
	dev_get(out, dout, N);
	for (int i = 0; i < N; i++) {
		unsigned char want = i >= 300 && i < 1300 ? in[i - 300 + 17]
							  : 0xab;

		if (out[i] != want) {
			CHECK(0, "%s alltoallv: byte %d is %d, not %d", how, i,
			      out[i], want);
			break;
		}
	}
	CHECK(shemb_allgatherv(ctx, din, cnt, dout, &cnt, &zero, NULL) == 0,
	      "%s allgatherv: %s", how, shemb_ctx_last_error(ctx));
	dev_get(out, dout, N);
	CHECK(memcmp(out, in, cnt) == 0, "%s allgatherv differs", how);
	CHECK(shemb_alltoallv(ctx, din, &sc, &sd, out, &sc, &rd, NULL) ==
		      SHEMB_EINVAL,
	      "%s: device send, host receive must be refused", how);
	one_buffer(ctx, how);
	other_device(ctx, dout, how);
	dev_free(din);
	dev_free(dout);
}

static void reductions(shemb_ctx *ctx, const char *how)
{
	static const int dtypes[] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16,
				      SHEMB_F64, SHEMB_I64 };
	static const size_t sizes[] = { 4, 2, 2, 8, 8 };
	unsigned char in[N], out[N];
	void *din = dev_alloc(N), *dout = dev_alloc(N);

	for (int i = 0; i < N; i++)
		in[i] = (unsigned char)(i % 61); /* finite in every dtype */
	dev_put(din, in, N);
	for (int d = 0; d < 5; d++)
		for (int op = SHEMB_REDUCE_SUM; op <= SHEMB_REDUCE_MAX; op++) {
			size_t count = N / sizes[d];

			dev_fill(dout, 0xab, N); /* the last result gone */
			CHECK(shemb_allreduce(ctx, din, dout, count, dtypes[d],
					      op, NULL) == 0,
			      "%s allreduce: %s", how,
			      shemb_ctx_last_error(ctx));
			dev_get(out, dout, N);
			CHECK(memcmp(out, in, N) == 0,
			      "%s allreduce dtype %d op %d: one rank's sum "
			      "is not its input", how, dtypes[d], op);
		}
	CHECK(shemb_allreduce(ctx, din, din, N / 4, SHEMB_F32,
			      SHEMB_REDUCE_SUM, NULL) == 0,
	      "%s in-place allreduce", how);
	dev_get(out, din, N);
	CHECK(memcmp(out, in, N) == 0, "%s in-place allreduce differs", how);
	dev_free(din);
	dev_free(dout);
}

/* What the context said about its transport for device buffers. */
static char transport[256];

static void note_transport(void *arg, int level, const char *msg)
{
	(void)arg;
	(void)level;
	if (strstr(msg, "device buffers"))
		snprintf(transport, sizeof(transport), "%s", msg);
}

int main(void)
{
	static const char *const how[] = { "nccl", "staged" };
	struct shemb_ctx_attr a;

	gpu_test_init();
	for (int k = 0; k < 2; k++) {
		shemb_ctx *ctx;
		int rc;

		if (k == 1)
			setenv("SHEMB_NCCL", "0", 1);
		shemb_ctx_attr_init(&a);
		a.device = SHEMB_DEVICE_CUDA;
		a.log_level = SHEMB_LOG_INFO;
		a.log_fn = note_transport;
		transport[0] = '\0';
		rc = shemb_ctx_create(&a, &ctx);
		if (rc == SHEMB_ENODEV)
			return no_context();
		if (rc) {
			printf("FAIL: context: %s\n",
			       shemb_ctx_last_error(NULL));
			return 1;
		}
		printf("%s: %s\n", how[k], transport);
#ifdef SHEMB_TEST_EMU
		/* the emulated device's module has no NCCL */
		CHECK(strstr(transport, "host memory"),
		      "%s: the context said '%s'", how[k], transport);
#elif defined(HAVE_NCCL)
		/* one rank on its own device: NCCL opens unless told not */
		CHECK(strstr(transport, k == 0 ? "nccl" : "host memory"),
		      "%s: the context said '%s'", how[k], transport);
#endif
		moves(ctx, how[k]);
		reductions(ctx, how[k]);
		shemb_ctx_destroy(ctx);
	}
	check_no_device_leak();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
	return failures ? 1 : 0;
}
