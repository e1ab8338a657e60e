/*
 * bench_ckpt.c - shemb-bench checkpoint: shemb_table_save and
 * shemb_table_load of one trained-shape table, in GB/s of checkpoint
 * bytes, against dd writing (conv=fsync) and reading a file of the same
 * size in the same directory, side by side in one run.  Before every
 * read, the files' pages are dropped from the page cache
 * (posix_fadvise DONTNEED after fsync), so both reads come from the disk.
 * Then serving: the checkpoint loaded as a read_only table with fp32,
 * bf16 and int8 rows, looked up by 1, 2, 4 and 8 threads at once.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench.h"
#include "tools/bench_comm.h"

const char bench_ckpt_usage[] =
	"Usage: shemb-bench checkpoint [options]\n"
	"\n"
	"Options of checkpoint (one rank):\n"
	"  --rows N            table rows (default 1048576)\n"
	"  --dim N             columns (default 64)\n"
	"  --optimizer NAME    sgd, adagrad (default), rowwise_adagrad, adam\n"
	"  --dir DIR           where the checkpoint and dd's file go\n"
	"                      (default: a new directory under $TMPDIR)\n"
	"  --reps N            repetitions of each measure (default 3)\n"
	"  --csv FILE          append a line per measure to FILE\n";

static const char *const opt_names[] = { "sgd", "adagrad", "rowwise_adagrad",
					 "adam" };

struct ckpt_opts {
	int64_t rows;
	int dim, optimizer, reps;
	const char *dir, *csv;
	FILE *csv_file;
};

enum { CO_ROWS = 1, CO_DIM, CO_OPT, CO_DIR, CO_REPS, CO_CSV };

static const struct option ckpt_long[] = {
	{ "rows", required_argument, NULL, CO_ROWS },
	{ "dim", required_argument, NULL, CO_DIM },
	{ "optimizer", required_argument, NULL, CO_OPT },
	{ "dir", required_argument, NULL, CO_DIR },
	{ "reps", required_argument, NULL, CO_REPS },
	{ "csv", required_argument, NULL, CO_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* Counts take a k, M or G suffix, as in the other modes. */
static int ckpt_apply(void *p, int c, const char *arg)
{
	struct ckpt_opts *o = p;

	switch (c) {
	case CO_ROWS:
		return comm_parse_count(arg, 1, SHEMB_MAX_ROWS, &o->rows);
	case CO_DIM:
		return comm_parse_int(arg, 1, SHEMB_MAX_DIM, &o->dim);
	case CO_REPS:
		return comm_parse_int(arg, 1, 1000, &o->reps);
	case CO_DIR:
		o->dir = arg;
		return 0;
	case CO_CSV:
		o->csv = arg;
		return 0;
	case CO_OPT:
		for (int i = 0; i < 4; i++)
			if (!strcmp(arg, opt_names[i]))
				o->optimizer = i;
		return strcmp(arg, opt_names[o->optimizer]) ? -1 : 0;
	}
	return -1;
}

static void ckpt_help(void)
{
	fputs(bench_ckpt_usage, stdout);
}

/* fsync'ed already: drop the file's pages so the next read is the
 * disk's. */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* fn on each file of dir (not its dot entries). */
static void each_file(const char *dir, void (*fn)(const char *path,
						  void *arg),
		      void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096 + 260];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fn(path, arg);
	}
	if (d)
		closedir(d);
}

static void drop_one(const char *path, void *arg)
{
	(void)arg;
	drop_cache(path);
}

static void unlink_one(const char *path, void *arg)
{
	(void)arg;
	unlink(path);
}

static void add_size(const char *path, void *arg)
{
	struct stat st;

	if (!stat(path, &st) && S_ISREG(st.st_mode))
		*(uint64_t *)arg += (uint64_t)st.st_size;
}

static uint64_t dir_bytes(const char *dir)
{
	uint64_t n = 0;

	each_file(dir, add_size, &n);
	return n;
}

/* dd's seconds to write (then read) bytes at path. */
static double dd_time(const char *path, uint64_t bytes, bool write)
{
	char cmd[4400];
	double t0;
	int rc;

	if (write)
		snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s' bs=1M "
			 "count=%llu conv=fsync status=none", path,
			 (unsigned long long)((bytes + (1 << 20) - 1) >> 20));
	else
		snprintf(cmd, sizeof(cmd), "dd if='%s' of=/dev/null bs=1M "
			 "status=none", path);
	if (!write)
		drop_cache(path);
	t0 = bench_now();
	rc = system(cmd);
	return rc ? -1.0 : bench_now() - t0;
}

static int make_table(shemb_ctx *ctx, const struct ckpt_opts *o,
		      shemb_table **t)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.name = "bench";
	a.rows = o->rows;
	a.dim = o->dim;
	a.optimizer = o->optimizer;
	return shemb_table_create(ctx, &a, t);
}

struct ckpt_times {
	double save, load, dd_write, dd_read; /* best of the reps, seconds */
	uint64_t bytes;
};

/* ---- CSV: a line per measure ---- */

static const char ckpt_csv_header[] =
	"mode,measure,rows,dim,optimizer,reps,dtype,threads,bytes,ms,gbps,"
	"lookups_per_s,baseline,baseline_ms,baseline_gbps,"
	"baseline_lookups_per_s,vs_baseline";

static void csv_head(const struct ckpt_opts *o, const char *measure,
		     const char *dtype)
{
	bench_csv_begin(o->csv_file, "checkpoint");
	bench_csv_str(o->csv_file, measure);
	bench_csv_int(o->csv_file, o->rows);
	bench_csv_int(o->csv_file, o->dim);
	bench_csv_str(o->csv_file, opt_names[o->optimizer]);
	bench_csv_int(o->csv_file, o->reps);
	bench_csv_str(o->csv_file, dtype);
}

/* A save or a load against dd: best seconds of each. */
static void csv_io(const struct ckpt_opts *o, const char *measure,
		   uint64_t bytes, double s, const char *base, double bs)
{
	FILE *f = o->csv_file;
	double gb = (double)bytes / 1e9;

	csv_head(o, measure, "f32");
	bench_csv_str(f, NULL);
	bench_csv_int(f, (long long)bytes);
	bench_csv_num(f, s * 1e3);
	bench_csv_num(f, gb / s);
	bench_csv_str(f, NULL);
	bench_csv_str(f, base);
	bench_csv_num(f, bs * 1e3);
	bench_csv_num(f, gb / bs);
	bench_csv_str(f, NULL);
	bench_csv_num(f, bs / s);
	bench_csv_end(f);
}

/* Serving with rows of dtype by n threads against fp32 rows. */
static void csv_serve(const struct ckpt_opts *o, const char *dtype, int n,
		      double rate, double fp32)
{
	FILE *f = o->csv_file;

	csv_head(o, "serve", dtype);
	bench_csv_int(f, n);
	for (int k = 0; k < 3; k++)
		bench_csv_str(f, NULL);
	bench_csv_num(f, rate);
	bench_csv_str(f, "f32");
	bench_csv_str(f, NULL);
	bench_csv_str(f, NULL);
	bench_csv_num(f, fp32);
	bench_csv_num(f, rate / fp32);
	bench_csv_end(f);
}

/* A failure outside the library, said here: -2 (the library's own are
 * -1, said by the caller from its detail). */
static int not_library(const char *what, const char *path)
{
	fprintf(stderr, "shemb-bench checkpoint: %s %s: %s\n", what, path,
		strerror(errno));
	return -2;
}

static int measure(shemb_ctx *ctx, shemb_table *t, const char *dir,
		   const struct ckpt_opts *o, struct ckpt_times *m)
{
	char ckpt[4096], ddfile[4096];
	shemb_table *u;

	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
	snprintf(ddfile, sizeof(ddfile), "%s/dd.bin", dir);
	if (mkdir(ckpt, 0755) && errno != EEXIST)
		return not_library("cannot make the directory", ckpt);
	bench_progress_next();
	for (int r = 0; r < o->reps; r++) {
		double t0, s, l, w, rd;

		bench_progress("checkpoint: save, load and dd, repetition %d "
			       "of %d", r + 1, o->reps);
		/* each save into an empty directory, so that its files are
		 * all the bytes there (a save keeps the previous one's) */
		each_file(ckpt, unlink_one, NULL);
		t0 = bench_now();
		if (shemb_table_save(t, ckpt, 0))
			return -1;
		s = bench_now() - t0;
		m->bytes = dir_bytes(ckpt);
		each_file(ckpt, drop_one, NULL);
		t0 = bench_now();
		if (shemb_table_load(ctx, ckpt, NULL, &u))
			return -1;
		l = bench_now() - t0;
		shemb_table_destroy(u);
		w = dd_time(ddfile, m->bytes, true);
		rd = dd_time(ddfile, m->bytes, false);
		unlink(ddfile);
		if (w < 0 || rd < 0) {
			errno = EIO;
			return not_library("dd failed on", ddfile);
		}
		m->save = r == 0 || s < m->save ? s : m->save;
		m->load = r == 0 || l < m->load ? l : m->load;
		m->dd_write = r == 0 || w < m->dd_write ? w : m->dd_write;
		m->dd_read = r == 0 || rd < m->dd_read ? rd : m->dd_read;
	}
	bench_progress_done();
	return 0;
}

static void report(const struct ckpt_opts *o, const struct ckpt_times *m)
{
	double gb = (double)m->bytes / 1e9;

	csv_io(o, "save", m->bytes, m->save, "dd write", m->dd_write);
	csv_io(o, "load", m->bytes, m->load, "dd read", m->dd_read);
	printf("checkpoint of %.3f GB (best of the repetitions):\n", gb);
	printf("  save %.2f GB/s, dd write (conv=fsync) %.2f GB/s\n",
	       gb / m->save, gb / m->dd_write);
	printf("  load %.2f GB/s, dd read (page cache dropped) %.2f GB/s\n",
	       gb / m->load, gb / m->dd_read);
	printf("result save_vs_disk %.3f\n", m->dd_write / m->save);
	printf("result load_vs_disk %.3f\n", m->dd_read / m->load);
}

/* ---- serving ---- */

#define SERVE_BAGS 512
#define SERVE_POOL 32
#define SERVE_SECONDS 0.5

struct server {
	pthread_t thread;
	shemb_ctx *ctx;
	shemb_table *t;
	int dim;
	uint64_t seed;
	double until;
	long lookups;
	int rc;
};

static void *serve_loop(void *arg)
{
	struct server *s = arg;
	int64_t *offsets = malloc((SERVE_BAGS + 1) * sizeof(int64_t));
	int64_t *ids = malloc(SERVE_BAGS * SERVE_POOL * sizeof(int64_t));
	float *out = malloc((size_t)SERVE_BAGS * (size_t)s->dim * 4);
	struct shemb_table_attr a = { .size = sizeof(a) };
	struct bench_rng r;
	struct shemb_bags b;

	if (!offsets || !ids || !out || shemb_table_get_attr(s->t, &a)) {
		s->rc = -1;
		goto out;
	}
	bench_rng_seed(&r, s->seed, 1);
	for (int i = 0; i <= SERVE_BAGS; i++)
		offsets[i] = (int64_t)i * SERVE_POOL;
	shemb_bags_init(&b);
	b.table = s->t;
	b.nbags = SERVE_BAGS;
	b.offsets = offsets;
	b.nids = SERVE_BAGS * SERVE_POOL;
	b.ids = ids;
	while (bench_now() < s->until && !s->rc) {
		for (int i = 0; i < SERVE_BAGS * SERVE_POOL; i++)
			ids[i] = (int64_t)bench_rng_below(&r,
							  (uint64_t)a.rows);
		s->rc = shemb_lookup(s->ctx, 1, &b, &out,
				     SHEMB_LOOKUP_NO_GRAD);
		s->lookups++;
	}
out:
	free(offsets);
	free(ids);
	free(out);
	return NULL;
}

/* Lookups (of SERVE_BAGS bags) per second with n threads at once. */
static double serve_rate(shemb_ctx *ctx, shemb_table *t, int dim, int n)
{
	struct server s[8];
	double t0 = bench_now();
	long total = 0;

	for (int i = 0; i < n; i++) {
		s[i] = (struct server){ .ctx = ctx, .t = t, .dim = dim,
					.seed = 7 + (uint64_t)i,
					.until = t0 + SERVE_SECONDS };
		if (pthread_create(&s[i].thread, NULL, serve_loop, &s[i]))
			return -1;
	}
	for (int i = 0; i < n; i++) {
		pthread_join(s[i].thread, NULL);
		if (s[i].rc)
			return -1;
		total += s[i].lookups;
	}
	return (double)total / (bench_now() - t0);
}

static shemb_table *serving_table(shemb_ctx *ctx, const struct ckpt_opts *o,
				  const char *ckpt, int dtype)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = o->rows;
	a.dim = o->dim;
	a.optimizer = o->optimizer;
	a.dtype = dtype;
	a.read_only = 1;
	return shemb_table_load(ctx, ckpt, &a, &t) ? NULL : t;
}

/* The largest difference between the rows of a and b, relative to the
 * largest value of a. */
static double max_error(shemb_table *a, shemb_table *b,
			const struct ckpt_opts *o)
{
	size_t n = (size_t)o->rows * (size_t)o->dim;
	int64_t *ids = malloc((size_t)o->rows * sizeof(*ids));
	float *x = malloc(n * 4), *y = malloc(n * 4);
	double err = -1, top = 0;

	for (int64_t i = 0; ids && i < o->rows; i++)
		ids[i] = i;
	if (ids && x && y &&
	    !shemb_table_read_rows(a, o->rows, ids, x, SHEMB_F32) &&
	    !shemb_table_read_rows(b, o->rows, ids, y, SHEMB_F32)) {
		err = 0;
		for (size_t i = 0; i < n; i++) {
			err = fmax(err, fabs((double)x[i] - (double)y[i]));
			top = fmax(top, fabs((double)x[i]));
		}
		err = top > 0 ? err / top : err;
	}
	free(ids);
	free(x);
	free(y);
	return err;
}

static int serving(shemb_ctx *ctx, const struct ckpt_opts *o,
		   const char *dir)
{
	static const int threads[] = { 1, 2, 4, 8 };
	static const int dtypes[] = { SHEMB_F32, SHEMB_BF16, SHEMB_INT8 };
	static const char *const names[] = { "fp32", "bf16", "int8" };
	static const char *const csv_names[] = { "f32", "bf16", "int8" };
	char ckpt[4096];
	shemb_table *t[3];
	double rate[3][4];
	int rc = 0;

	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
	for (int d = 0; d < 3; d++)
		t[d] = serving_table(ctx, o, ckpt, dtypes[d]);
	if (!t[0] || !t[1] || !t[2])
		rc = -1;
	if (!rc)
		printf("serving: read_only tables, lookups of %d bags x %d ids "
		       "(lookups/s):\n", SERVE_BAGS, SERVE_POOL);
	for (int k = 0; !rc && k < 4; k++) {
		for (int d = 0; !rc && d < 3; d++) {
			bench_progress_next();
			bench_progress("checkpoint: serving %s rows, %d "
				       "threads", names[d], threads[k]);
			rc = (rate[d][k] = serve_rate(ctx, t[d], o->dim,
						      threads[k])) < 0;
		}
		bench_progress_done();
		for (int d = 0; !rc && d < 3; d++)
			csv_serve(o, csv_names[d], threads[k], rate[d][k],
				  rate[0][k]);
		if (!rc)
			printf("  %d thread%s: fp32 %.0f, bf16 %.0f (%.2fx), "
			       "int8 %.0f (%.2fx)\n", threads[k],
			       threads[k] > 1 ? "s" : "", rate[0][k],
			       rate[1][k], rate[1][k] / rate[0][k], rate[2][k],
			       rate[2][k] / rate[0][k]);
	}
	for (int d = 1; !rc && d < 3; d++)
		printf("  %s rows: %d bytes each against fp32's %d; largest "
		       "difference %.3g of the largest value\n", names[d],
		       d == 1 ? 2 * o->dim : ((o->dim + 3) & ~3) + 8,
		       4 * o->dim, max_error(t[0], t[d], o));
	if (!rc) {
		printf("result serving_bf16_vs_fp32 %.3f\n",
		       rate[1][3] / rate[0][3]);
		printf("result serving_int8_vs_fp32 %.3f\n",
		       rate[2][3] / rate[0][3]);
	}
	for (int d = 0; d < 3; d++)
		shemb_table_destroy(t[d]);
	return rc ? -1 : 0;
}

static int run(const struct ckpt_opts *o, const char *dir)
{
	struct shemb_ctx_attr ca;
	struct ckpt_times m = { 0 };
	shemb_ctx *ctx;
	shemb_table *t;
	int rc;

	shemb_ctx_attr_init(&ca);
	if (shemb_ctx_create(&ca, &ctx))
		return 1;
	rc = make_table(ctx, o, &t);
	bench_progress_plan(1 + 4 * 3); /* save and load, then serving */
	if (!rc) {
		printf("shemb-bench checkpoint: libshemb %s, table %lld x %d, "
		       "optimizer %d, in %s\n", shemb_version_string(),
		       (long long)o->rows, o->dim, o->optimizer, dir);
		rc = measure(ctx, t, dir, o, &m);
	}
	if (!rc)
		report(o, &m);
	if (!rc)
		rc = serving(ctx, o, dir);
	if (rc == -1)
		fprintf(stderr, "shemb-bench checkpoint: %s\n",
			shemb_ctx_last_error(ctx));
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	return rc ? 1 : 0;
}

int bench_ckpt(int argc, char **argv)
{
	struct ckpt_opts o = { .rows = 1 << 20, .dim = 64,
			       .optimizer = SHEMB_OPT_ADAGRAD, .reps = 3 };
	char made[4096] = "", cmd[4200];
	const char *dir;
	int rc;

	if (bench_parse_opts(argc, argv, ckpt_long, ckpt_apply, &o,
			     ckpt_help))
		return 2;
	if (o.csv && !(o.csv_file = bench_csv_open(o.csv, ckpt_csv_header,
						   "shemb-bench checkpoint")))
		return 2;
	dir = o.dir;
	if (!dir) {
		snprintf(made, sizeof(made), "%s/shemb-bench-ckpt.XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(made)) {
			perror(made);
			return 1;
		}
		dir = made;
	}
	rc = run(&o, dir);
	if (bench_csv_close(o.csv_file, o.csv, "shemb-bench checkpoint"))
		rc = 1;
	if (made[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", made);
		if (system(cmd))
			fprintf(stderr, "shemb-bench: could not remove %s\n",
				made);
	}
	return rc;
}
