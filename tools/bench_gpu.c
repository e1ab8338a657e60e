/*
 * bench_gpu.c - shemb-bench gpu: pooled SUM lookups of a table in GPU
 * memory, bags and output in device memory (SHEMB_MEM_DEVICE, inference),
 * next to a device-to-device copy of the same row bytes and, when
 * PyTorch is there, torch.nn.functional.embedding_bag on the same shapes
 * and ids, all in one run.  Then training steps (a lookup that plans on
 * the device and its backward, SGD), next to PyTorch's embedding_bag
 * forward and backward with sparse gradients and torch.optim.SGD.
 */
#include "config.h"
#include "tools/bench.h"
#include "tools/bench_comm.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char bench_gpu_usage[] =
"Options of gpu (a CUDA device; bags and output in device memory):\n"
"  --rows N            rows of the table (default 4194304)\n"
"  --dim N             values per row (default 128)\n"
"  --pooling-factor N  ids per bag (default 32)\n"
"  --batch N           bags per batch (default 65536)\n"
"  --dtype T           row storage: f32, f16 or bf16 (default f32)\n"
"  --reps N            timed repetitions (default 20)\n"
"  --device N          CUDA device (default 0)\n"
"  --python P          the interpreter for the PyTorch baseline\n"
"                      (default python3; --python none skips it)\n"
"  --csv FILE          append one line of the figures to FILE\n";

#ifndef HAVE_CUDA
/* 77 as on a host without a device: nothing to measure (2 is for bad
 * options and a refused CSV file) */
int bench_gpu(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "shemb-bench gpu: this build has no CUDA\n");
	return 77;
}
#else
#include <cuda_runtime.h>

#define BATCHES 3

struct gpu_opts {
	int64_t rows, batch;
	int dim, pooling, dtype, reps, device;
	const char *python, *csv;
};

enum { GO_ROWS = 1, GO_DIM, GO_POOLING, GO_BATCH, GO_DTYPE, GO_REPS,
       GO_DEVICE, GO_PYTHON, GO_CSV };

static const struct option gpu_long[] = {
	{ "rows", required_argument, NULL, GO_ROWS },
	{ "dim", required_argument, NULL, GO_DIM },
	{ "pooling-factor", required_argument, NULL, GO_POOLING },
	{ "batch", required_argument, NULL, GO_BATCH },
	{ "dtype", required_argument, NULL, GO_DTYPE },
	{ "reps", required_argument, NULL, GO_REPS },
	{ "device", required_argument, NULL, GO_DEVICE },
	{ "python", required_argument, NULL, GO_PYTHON },
	{ "csv", required_argument, NULL, GO_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int gpu_apply(void *p, int c, const char *arg)
{
	struct gpu_opts *o = p;

	switch (c) {
	case GO_ROWS:
		return comm_parse_count(arg, 1, SHEMB_MAX_ROWS, &o->rows);
	case GO_DIM:
		return comm_parse_int(arg, 1, SHEMB_MAX_DIM, &o->dim);
	case GO_POOLING:
		return comm_parse_int(arg, 1, 1 << 16, &o->pooling);
	case GO_BATCH:
		return comm_parse_count(arg, 1, INT32_MAX, &o->batch);
	case GO_DTYPE:
		for (int d = SHEMB_F32; d <= SHEMB_BF16; d++)
			if (!strcmp(arg, bench_dtype_name(d))) {
				o->dtype = d;
				return 0;
			}
		return -1;
	case GO_REPS:
		return comm_parse_int(arg, 1, 10000, &o->reps);
	case GO_DEVICE:
		return comm_parse_int(arg, 0, 1024, &o->device);
	case GO_PYTHON:
		o->python = strcmp(arg, "none") ? arg : NULL;
		return 0;
	case GO_CSV:
		o->csv = arg;
		return 0;
	}
	return -1;
}

static void gpu_help(void)
{
	fputs("Usage: shemb-bench gpu [options]\n\n", stdout);
	fputs(bench_gpu_usage, stdout);
}

/* Device memory holding a copy of n bytes of host memory (or zeros). */
static void *device_copy(const void *src, size_t n)
{
	void *d = NULL;

	if (cudaMalloc(&d, n ? n : 1) != cudaSuccess)
		return NULL;
	if (src && n && cudaMemcpy(d, src, n, cudaMemcpyHostToDevice))
		return NULL;
	return d;
}

struct gpu_batch {
	int64_t *offsets, *ids;        /* host */
	int64_t *d_offsets, *d_ids;    /* device */
};

static int make_batches(const struct gpu_opts *o, struct gpu_batch *b)
{
	int64_t nids = o->batch * o->pooling;
	struct bench_rng r;

	bench_rng_seed(&r, 1, 0);
	for (int k = 0; k < BATCHES; k++) {
		b[k].offsets = malloc(((size_t)o->batch + 1) * 8);
		b[k].ids = malloc((size_t)nids * 8);
		if (!b[k].offsets || !b[k].ids)
			return -1;
		for (int64_t i = 0; i <= o->batch; i++)
			b[k].offsets[i] = i * o->pooling;
		for (int64_t i = 0; i < nids; i++)
			b[k].ids[i] = (int64_t)bench_rng_below(
				&r, (uint64_t)o->rows);
		b[k].d_offsets = device_copy(b[k].offsets,
					     ((size_t)o->batch + 1) * 8);
		b[k].d_ids = device_copy(b[k].ids, (size_t)nids * 8);
		if (!b[k].d_offsets || !b[k].d_ids)
			return -1;
	}
	return 0;
}

static void free_batches(struct gpu_batch *b)
{
	for (int k = 0; k < BATCHES; k++) {
		free(b[k].offsets);
		free(b[k].ids);
		cudaFree(b[k].d_offsets);
		cudaFree(b[k].d_ids);
	}
}

static int failed(shemb_ctx *ctx, const char *what, int rc)
{
	fprintf(stderr, "shemb-bench gpu: %s: %s: %s\n", what,
		shemb_strerror(rc), shemb_ctx_last_error(ctx));
	return rc == SHEMB_ENODEV ? 77 : 1;
}

/* Batch r % BATCHES (r = -1: the untimed first call's) as device bags. */
static struct shemb_bags batch_bags(const struct gpu_opts *o, shemb_table *t,
				    const struct gpu_batch *b, int r)
{
	struct shemb_bags bg;

	shemb_bags_init(&bg);
	bg.table = t;
	bg.nbags = o->batch;
	bg.nids = o->batch * o->pooling;
	bg.offsets = b[(r + BATCHES) % BATCHES].d_offsets;
	bg.ids = b[(r + BATCHES) % BATCHES].d_ids;
	bg.mem = SHEMB_MEM_DEVICE;
	return bg;
}

/* Median seconds of one call on batch r % BATCHES, over reps: an
 * inference lookup, or with d_grad a training step (a lookup that keeps
 * its plan, made on the device, then its backward with d_grad). */
static int time_calls(const struct gpu_opts *o, shemb_ctx *ctx,
		      shemb_table *t, struct gpu_batch *b, float *d_out,
		      const float *d_grad, double *med)
{
	double *times = calloc((size_t)o->reps, sizeof(double));
	int rc = 0;

	if (!times)
		return SHEMB_ENOMEM;
	for (int r = -1; r < o->reps && !rc; r++) {
		struct shemb_bags bg = batch_bags(o, t, b, r);
		double t0 = bench_now();

		rc = shemb_lookup(ctx, 1, &bg, &d_out,
				  d_grad ? 0 : SHEMB_LOOKUP_NO_GRAD);
		if (!rc && d_grad)
			rc = shemb_backward(ctx, 1, &bg, &d_grad);
		if (r >= 0)
			times[r] = bench_now() - t0;
	}
	if (!rc)
		*med = bench_stat_of(times, o->reps).median;
	free(times);
	return rc;
}

/* A gradient of GRAD_VALUE everywhere and SGD at LR, as the PyTorch side
 * is given. */
#define GRAD_VALUE 0.001f
#define LR 0.01f

static float *make_grad(const struct gpu_opts *o)
{
	size_t n = (size_t)o->batch * (size_t)o->dim;
	float *h = malloc(n * sizeof(float)), *d;

	if (!h)
		return NULL;
	for (size_t i = 0; i < n; i++)
		h[i] = GRAD_VALUE;
	d = device_copy(h, n * sizeof(float));
	free(h);
	return d;
}

/* The first bags of the last batch against sums of rows read back. */
static int check_output(const struct gpu_opts *o, shemb_table *t,
			const struct gpu_batch *b, const float *d_out)
{
	int nb = o->batch < 8 ? (int)o->batch : 8;
	size_t n = (size_t)o->pooling * (size_t)o->dim;
	float *rows = malloc(n * sizeof(float));
	float *got = malloc((size_t)o->dim * sizeof(float));
	int bad = rows && got ? 0 : -1;
	const struct gpu_batch *last = &b[(o->reps - 1) % BATCHES];

	for (int k = 0; k < nb && !bad; k++) {
		bad = shemb_table_read_rows(t, o->pooling,
					    last->ids + (size_t)k * o->pooling,
					    rows, SHEMB_F32) ||
		      cudaMemcpy(got, d_out + (size_t)k * o->dim,
				 (size_t)o->dim * 4, cudaMemcpyDeviceToHost) ||
		      bench_check_sum(got, rows, o->pooling, o->dim, k);
	}
	free(rows);
	free(got);
	return bad;
}

/* Median seconds of a device-to-device copy of bytes.  cudaMemcpy does
 * not wait for a copy between device buffers: each is waited for, as each
 * lookup is (a call returns once its work is done). */
static double time_copy(size_t bytes, int reps)
{
	void *src = device_copy(NULL, bytes), *dst = device_copy(NULL, bytes);
	double *times = calloc((size_t)reps, sizeof(double)), med = -1.0;

	for (int r = -1; src && dst && times && r < reps; r++) {
		double t0;

		if (cudaDeviceSynchronize())
			break;
		t0 = bench_now();
		if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice) ||
		    cudaDeviceSynchronize())
			break;
		if (r >= 0)
			times[r] = bench_now() - t0;
		if (r == reps - 1)
			med = bench_stat_of(times, reps).median;
	}
	cudaFree(src);
	cudaFree(dst);
	free(times);
	return med;
}

static int write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int rc = f && fwrite(p, 1, n, f) == n ? 0 : -1;

	if (f && fclose(f))
		rc = -1;
	return rc;
}

static const char *torch_script(void)
{
	static const char *const where[] = { BENCH_TORCH_SCRIPTS };

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], R_OK) == 0)
			return where[i];
	return NULL;
}

/* Where batch k's offsets (ids false) or ids go for PyTorch, in dir. */
static void batch_file(char *p, size_t len, const char *dir, bool ids, int k)
{
	snprintf(p, len, "%s/%s%d", dir, ids ? "ids" : "offsets", k);
}

/* The batches' files for PyTorch in dir, as comma-separated lists of
 * paths (off, ids); 0, or -1 when one could not be written. */
static int write_batches(const struct gpu_opts *o, const struct gpu_batch *b,
			 const char *dir, char *off, char *ids, size_t len)
{
	int rc = 0;

	off[0] = ids[0] = '\0';
	for (int k = 0; k < BATCHES && !rc; k++) {
		char p[64], q[64];

		batch_file(p, sizeof(p), dir, false, k);
		batch_file(q, sizeof(q), dir, true, k);
		rc = write_file(p, b[k].offsets, ((size_t)o->batch + 1) * 8) ||
		     write_file(q, b[k].ids,
				(size_t)o->batch * o->pooling * 8);
		snprintf(off + strlen(off), len - strlen(off), "%s%s",
			 k ? "," : "", p);
		snprintf(ids + strlen(ids), len - strlen(ids), "%s%s",
			 k ? "," : "", q);
	}
	return rc ? -1 : 0;
}

static void remove_batches(const char *dir)
{
	for (int k = 0; k < 2 * BATCHES; k++) {
		char p[64];

		batch_file(p, sizeof(p), dir, k % 2, k / 2);
		unlink(p);
	}
	rmdir(dir);
}

/* PyTorch's median milliseconds on the same batches, taken in the same
 * turn (of a lookup, or with train of a training step), or a negative
 * value with the reason printed. */
static double time_torch(const struct gpu_opts *o, const struct gpu_batch *b,
			 bool train)
{
	char dir[] = "/tmp/shemb-bench-gpu.XXXXXX", off[256], ids[256];
	char cmd[1536], line[256];
	const char *script = torch_script();
	double ms = -1.0;
	FILE *p;

	if (!o->python || !script || !mkdtemp(dir)) {
		printf("torch: %s\n", !o->python ? "skipped (--python none)"
				      : !script ? "bench_torch.py not found"
						: "no temporary directory");
		return -1.0;
	}
	if (!write_batches(o, b, dir, off, ids, sizeof(off))) {
		snprintf(cmd, sizeof(cmd), "%s '%s' --rows %lld --dim %d "
			 "--dtype %s --offsets %s --ids %s --reps %d%s "
			 "--grad %g --lr %g 2>&1",
			 o->python, script, (long long)o->rows, o->dim,
			 bench_dtype_name(o->dtype), off, ids, o->reps,
			 train ? " --train" : "", (double)GRAD_VALUE,
			 (double)LR);
		p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p))
			if (sscanf(line, "torch_ms %lf", &ms) != 1)
				printf("torch: %s", line);
		if (p)
			pclose(p);
	} else {
		printf("torch: the batches could not be written in %s\n",
		       dir);
	}
	remove_batches(dir);
	return ms;
}

static void report_train(double step_s, double torch_ms)
{
	printf("%-28s %10.3f ms\n", "libshemb training step", step_s * 1e3);
	if (torch_ms > 0)
		printf("%-28s %10.3f ms\n", "torch training step", torch_ms);
	printf("(a step: the lookup, then the backward of a gradient and "
	       "SGD on the rows it used)\n");
	if (torch_ms > 0)
		printf("result gpu_train_vs_torch %.3f\n",
		       torch_ms * 1e-3 / step_s);
}

static void report(size_t bytes, double lookup_s, double copy_s,
		   double torch_ms)
{
	printf("%-28s %10.3f ms %9.1f GB/s\n", "libshemb lookup",
	       lookup_s * 1e3, (double)bytes / lookup_s / 1e9);
	if (copy_s > 0)
		printf("%-28s %10.3f ms %9.1f GB/s\n", "device-to-device copy",
		       copy_s * 1e3, (double)bytes / copy_s / 1e9);
	if (torch_ms > 0)
		printf("%-28s %10.3f ms %9.1f GB/s\n", "torch embedding_bag",
		       torch_ms, (double)bytes / (torch_ms * 1e-3) / 1e9);
	printf("(GB/s: the looked-up rows' bytes over the time; the copy "
	       "moves that many bytes)\n");
}

/* Last in the output, as the device check reads them. */
static void report_results(double lookup_s, double copy_s, double torch_ms)
{
	if (copy_s > 0)
		printf("result gpu_lookup_vs_copy %.3f\n", copy_s / lookup_s);
	if (torch_ms > 0)
		printf("result gpu_lookup_vs_torch %.3f\n",
		       torch_ms * 1e-3 / lookup_s);
}

static const char gpu_csv_header[] =
	"mode,device,rows,dim,dtype,pooling,batch,reps,bytes,lookup_ms,"
	"lookup_gbps,copy_ms,copy_gbps,torch_ms,torch_gbps,vs_copy,vs_torch";

/* The line of the run: seconds of the lookup and the copy, milliseconds
 * of PyTorch; a figure not measured (<= 0) is left empty. */
static void write_csv(const struct gpu_opts *o, FILE *f, size_t bytes,
		      double lookup_s, double copy_s, double torch_ms)
{
	double gb = (double)bytes / 1e9;
	double copy_ms = copy_s > 0 ? copy_s * 1e3 : NAN;
	double torch = torch_ms > 0 ? torch_ms : NAN;

	bench_csv_begin(f, "gpu");
	bench_csv_int(f, o->device);
	bench_csv_int(f, o->rows);
	bench_csv_int(f, o->dim);
	bench_csv_str(f, bench_dtype_name(o->dtype));
	bench_csv_int(f, o->pooling);
	bench_csv_int(f, o->batch);
	bench_csv_int(f, o->reps);
	bench_csv_int(f, (long long)bytes);
	bench_csv_num(f, lookup_s * 1e3);
	bench_csv_num(f, gb / lookup_s);
	bench_csv_num(f, copy_ms);
	bench_csv_num(f, gb / (copy_ms * 1e-3));
	bench_csv_num(f, torch);
	bench_csv_num(f, gb / (torch * 1e-3));
	bench_csv_num(f, copy_ms * 1e-3 / lookup_s);
	bench_csv_num(f, torch * 1e-3 / lookup_s);
	bench_csv_end(f);
}

/* 0, or failed()'s status. */
static int make_table(const struct gpu_opts *o, shemb_ctx *ctx,
		      shemb_table **t)
{
	struct shemb_table_attr ta;
	int rc;

	shemb_table_attr_init(&ta);
	ta.name = "gpu";
	ta.rows = o->rows;
	ta.dim = o->dim;
	ta.dtype = o->dtype;
	ta.optimizer = SHEMB_OPT_SGD;
	ta.lr = LR;
	rc = shemb_table_create(ctx, &ta, t);
	return rc ? failed(ctx, "table", rc) : 0;
}

static int run(const struct gpu_opts *o)
{
	struct shemb_ctx_attr ca;
	struct gpu_batch b[BATCHES] = { 0 };
	shemb_ctx *ctx = NULL;
	shemb_table *t = NULL;
	float *d_out = NULL, *d_grad = NULL;
	FILE *csv = NULL;
	size_t row_bytes = (size_t)o->dim * bench_dtype_size(o->dtype);
	size_t bytes = (size_t)o->batch * o->pooling * row_bytes;
	double lookup_s = 0, step_s = 0, copy_s, torch_ms;
	int rc;

	shemb_ctx_attr_init(&ca);
	ca.device = SHEMB_DEVICE_CUDA;
	ca.device_id = o->device;
	rc = shemb_ctx_create(&ca, &ctx);
	if (rc)
		return failed(NULL, "CUDA context", rc);
	/* opened once there is a device: a host without one gets no file */
	if (o->csv && !(csv = bench_csv_open(o->csv, gpu_csv_header,
					     "shemb-bench gpu"))) {
		rc = 2;
		goto out;
	}
	rc = make_table(o, ctx, &t);
	if (rc)
		goto out;
	d_out = device_copy(NULL, (size_t)o->batch * o->dim * sizeof(float));
	if (!d_out || make_batches(o, b)) {
		fprintf(stderr, "shemb-bench gpu: out of memory\n");
		rc = 1;
		goto out;
	}
	printf("shemb-bench gpu: libshemb %s, rows %lld, dim %d, %s, "
	       "pooling %d, batch %lld, %d reps\n", shemb_version_string(),
	       (long long)o->rows, o->dim, bench_dtype_name(o->dtype),
	       o->pooling, (long long)o->batch, o->reps);
	rc = time_calls(o, ctx, t, b, d_out, NULL, &lookup_s);
	if (rc) {
		rc = failed(ctx, "lookup", rc);
		goto out;
	}
	if (check_output(o, t, b, d_out)) {
		fprintf(stderr, "shemb-bench gpu: wrong lookup output\n");
		rc = 1;
		goto out;
	}
	copy_s = time_copy(bytes, o->reps);
	torch_ms = time_torch(o, b, false);
	report(bytes, lookup_s, copy_s, torch_ms);
	write_csv(o, csv, bytes, lookup_s, copy_s, torch_ms);
	/* the rows change from here on: after the check above */
	d_grad = make_grad(o);
	rc = d_grad ? time_calls(o, ctx, t, b, d_out, d_grad, &step_s)
		    : SHEMB_ENOMEM;
	if (rc) {
		rc = failed(ctx, "training step", rc);
		goto out;
	}
	report_train(step_s, time_torch(o, b, true));
	report_results(lookup_s, copy_s, torch_ms);
	rc = 0;
out:
	if (bench_csv_close(csv, o->csv, "shemb-bench gpu") && !rc)
		rc = 1;
	free_batches(b);
	cudaFree(d_grad);
	cudaFree(d_out);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	return rc;
}

int bench_gpu(int argc, char **argv)
{
	struct gpu_opts o = { .rows = 4194304, .batch = 65536, .dim = 128,
			      .pooling = 32, .dtype = SHEMB_F32, .reps = 20,
			      .python = "python3" };

	if (bench_parse_opts(argc, argv, gpu_long, gpu_apply, &o, gpu_help))
		return 2;
	return run(&o);
}
#endif
