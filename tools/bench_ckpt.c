/*
 * bench_ckpt.c - shemb-bench checkpoint: shemb_table_save and
 * shemb_table_load of one trained-shape table, in GB/s of checkpoint
 * bytes, against dd writing (conv=fsync) and reading a file of the same
 * size in the same directory, side by side in one run.  Before every
 * read, the files' pages are dropped from the page cache
 * (posix_fadvise DONTNEED after fsync), so both reads come from the disk.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench.h"

const char bench_ckpt_usage[] =
	"Usage: shemb-bench checkpoint [options]\n"
	"\n"
	"Options of checkpoint (one rank):\n"
	"  --rows N            table rows (default 1048576)\n"
	"  --dim N             columns (default 64)\n"
	"  --optimizer NAME    sgd, adagrad (default), rowwise_adagrad, adam\n"
	"  --dir DIR           where the checkpoint and dd's file go\n"
	"                      (default: a new directory under $TMPDIR)\n"
	"  --reps N            repetitions of each measure (default 3)\n";

struct ckpt_opts {
	int64_t rows;
	int dim, optimizer, reps;
	const char *dir;
};

enum { CO_ROWS = 1, CO_DIM, CO_OPT, CO_DIR, CO_REPS };

static const struct option ckpt_long[] = {
	{ "rows", required_argument, NULL, CO_ROWS },
	{ "dim", required_argument, NULL, CO_DIM },
	{ "optimizer", required_argument, NULL, CO_OPT },
	{ "dir", required_argument, NULL, CO_DIR },
	{ "reps", required_argument, NULL, CO_REPS },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int ckpt_apply(void *p, int c, const char *arg)
{
	static const char *const opts[] = { "sgd", "adagrad",
					    "rowwise_adagrad", "adam" };
	struct ckpt_opts *o = p;
	char *end;
	long long v = strtoll(arg, &end, 10);
	bool num = *arg && !*end && v > 0;

	switch (c) {
	case CO_ROWS:
		o->rows = v;
		return num && v <= SHEMB_MAX_ROWS ? 0 : -1;
	case CO_DIM:
		o->dim = (int)v;
		return num && v <= SHEMB_MAX_DIM ? 0 : -1;
	case CO_REPS:
		o->reps = (int)v;
		return num && v <= 1000 ? 0 : -1;
	case CO_DIR:
		o->dir = arg;
		return 0;
	case CO_OPT:
		for (int i = 0; i < 4; i++)
			if (!strcmp(arg, opts[i]))
				o->optimizer = i;
		return strcmp(arg, opts[o->optimizer]) ? -1 : 0;
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

static void drop_dir_cache(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096 + 260];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		drop_cache(path);
	}
	if (d)
		closedir(d);
}

static uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	char path[4096 + 260];
	uint64_t n = 0;

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] != '.' && !stat(path, &st) &&
		    S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
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

static int measure(shemb_ctx *ctx, shemb_table *t, const char *dir,
		   const struct ckpt_opts *o, struct ckpt_times *m)
{
	char ckpt[4096], ddfile[4096];
	shemb_table *u;

	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
	snprintf(ddfile, sizeof(ddfile), "%s/dd.bin", dir);
	if (mkdir(ckpt, 0755) && errno != EEXIST)
		return -1;
	for (int r = 0; r < o->reps; r++) {
		double t0 = bench_now(), s, l, w, rd;

		if (shemb_table_save(t, ckpt, 0))
			return -1;
		s = bench_now() - t0;
		m->bytes = dir_bytes(ckpt);
		drop_dir_cache(ckpt);
		t0 = bench_now();
		if (shemb_table_load(ctx, ckpt, NULL, &u))
			return -1;
		l = bench_now() - t0;
		shemb_table_destroy(u);
		w = dd_time(ddfile, m->bytes, true);
		rd = dd_time(ddfile, m->bytes, false);
		unlink(ddfile);
		if (w < 0 || rd < 0)
			return -1;
		m->save = r == 0 || s < m->save ? s : m->save;
		m->load = r == 0 || l < m->load ? l : m->load;
		m->dd_write = r == 0 || w < m->dd_write ? w : m->dd_write;
		m->dd_read = r == 0 || rd < m->dd_read ? rd : m->dd_read;
	}
	return 0;
}

static void report(const struct ckpt_times *m)
{
	double gb = (double)m->bytes / 1e9;

	printf("checkpoint of %.3f GB (best of the repetitions):\n", gb);
	printf("  save %.2f GB/s, dd write (conv=fsync) %.2f GB/s\n",
	       gb / m->save, gb / m->dd_write);
	printf("  load %.2f GB/s, dd read (page cache dropped) %.2f GB/s\n",
	       gb / m->load, gb / m->dd_read);
	printf("result save_vs_disk %.3f\n", m->dd_write / m->save);
	printf("result load_vs_disk %.3f\n", m->dd_read / m->load);
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
	if (!rc) {
		printf("shemb-bench checkpoint: libshemb %s, table %lld x %d, "
		       "optimizer %d, in %s\n", shemb_version_string(),
		       (long long)o->rows, o->dim, o->optimizer, dir);
		rc = measure(ctx, t, dir, o, &m);
	}
	if (rc)
		fprintf(stderr, "shemb-bench checkpoint: %s\n",
			shemb_ctx_last_error(ctx));
	else
		report(&m);
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
	if (made[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", made);
		if (system(cmd))
			fprintf(stderr, "shemb-bench: could not remove %s\n",
				made);
	}
	return rc;
}
