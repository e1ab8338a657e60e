/*
 * test_ckpt.c - checkpoints on one rank: save and load give back every
 * row, the optimizer state and the step count (the next training step of
 * the loaded table equals the original's, bit for bit), for every
 * optimizer and storage dtype and with a device tier; every single-byte
 * change and every truncation of a small checkpoint's files fails the
 * load with SHEMB_ECORRUPT and no table; a writer killed at each of its
 * file operations (fsync, rename) leaves the old or the new checkpoint,
 * whole; bad arguments are refused.  The crash points come from rename()
 * and fsync() interposed here.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/ckpt.h"
#include "lib/crc32c.h"
#include "tests/testutil.h"
#include "tests/check_run.h"

/* ---- crash points: the countdown runs out at the Nth fsync or
 * rename, and the process dies there, before the call ---- */

static int countdown = -1;

static void maybe_die(void)
{
	if (countdown > 0 && --countdown == 0)
		_exit(42);
}

int fsync(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

	maybe_die();
	return real(fd);
}

int rename(const char *from, const char *to)
{
	int (*real)(const char *, const char *) =
		(int (*)(const char *, const char *))dlsym(RTLD_NEXT,
							   "rename");

	maybe_die();
	return real(from, to);
}

/* ---- helpers ---- */

/* One training step of t on bags made from seed (lookup, backward with
 * gradients made from seed too). */
static void train(shemb_ctx *ctx, shemb_table *t, uint64_t seed)
{
	struct shemb_table_attr a = { .size = sizeof(a) };
	struct tu_rng r;
	struct tu_bags b;
	struct tu_bag_spec spec = { .nbags = 24, .max_len = 5 };
	struct shemb_bags v;
	float *out, *grad;

	ck_assert_int_eq(shemb_table_get_attr(t, &a), 0);
	spec.rows = a.rows;
	tu_rng_seed(&r, seed);
	tu_bags_random(&b, &r, &spec);
	out = tu_malloc((size_t)b.nbags * (size_t)a.dim * 4 + 4);
	grad = tu_malloc((size_t)b.nbags * (size_t)a.dim * 4 + 4);
	tu_rng_fill(&r, grad, (size_t)b.nbags * (size_t)a.dim, -1, 1);
	v = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &v, &out, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, &v,
					(const float *const *)&grad), 0);
	free(out);
	free(grad);
	tu_bags_free(&b);
}

static void same_rows(shemb_table *a, shemb_table *b, int64_t rows, int dim)
{
	float *x = tu_read_all_f32(a), *y = tu_read_all_f32(b);

	ck_assert_int_eq(tu_bits_differ("rows", x, y,
					(size_t)rows * (size_t)dim * 4), 0);
	free(x);
	free(y);
}

/* u (loaded) holds t's rows, and its optimizer state and step count:
 * the same next step leaves both alike. */
static void same_table(shemb_ctx *ctx, shemb_table *t, shemb_table *u,
		       int64_t rows, int dim, uint64_t seed)
{
	same_rows(t, u, rows, dim);
	train(ctx, t, seed);
	train(ctx, u, seed);
	same_rows(t, u, rows, dim);
}

static shemb_table *table(shemb_ctx *ctx, int64_t rows, int dim, int dtype,
			  int opt, int64_t cache_rows)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.name = "ckpt";
	a.rows = rows;
	a.dim = dim;
	a.dtype = dtype;
	a.optimizer = opt;
	a.cache_rows = cache_rows;
	return tu_table_attr(ctx, &a);
}

static const int optimizers[] = { SHEMB_OPT_SGD, SHEMB_OPT_ADAGRAD,
				  SHEMB_OPT_ROWWISE_ADAGRAD, SHEMB_OPT_ADAM };

/* ---- round trips ---- */

static void round_trip(int opt, int dtype, int64_t cache_rows,
		       bool load_with_attr)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	struct shemb_table_attr a;
	char *dir = tu_temp_dir("test_ckpt");

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	t = table(ctx, 300, 5, dtype, opt, cache_rows);
	for (int s = 0; s < 3; s++)
		train(ctx, t, 100 + (uint64_t)s);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shemb_table_attr_init(&a);
	a.rows = 300;
	a.dim = 5;
	a.dtype = dtype;
	a.optimizer = opt;
	a.cache_rows = cache_rows ? 0 : 160; /* the other way round */
	ck_assert_int_eq(shemb_table_load(ctx, dir,
					  load_with_attr ? &a : NULL, &u),
			 0);
	ck_assert_ptr_nonnull(u);
	same_table(ctx, t, u, 300, 5, 7);
	shemb_table_destroy(u);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}

START_TEST(round_trip_every_optimizer)
{
	int dtypes[] = { SHEMB_F32, SHEMB_BF16, SHEMB_F16 };

	round_trip(optimizers[_i % 4], dtypes[_i / 4], 0, false);
}
END_TEST

START_TEST(round_trip_through_tiers)
{
	/* saved from a table with a device tier, loaded into one without,
	 * and the other way */
	round_trip(optimizers[_i % 4], SHEMB_F32, _i / 4 ? 0 : 128, true);
}
END_TEST

/* Into a table whose rows live in a file, through a small tier: the
 * load goes through the tier a batch at a time. */
START_TEST(load_into_a_cold_table)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	struct shemb_table_attr a;
	char *dir = tu_temp_dir("test_ckpt"), cold[300];

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 3000, 6, SHEMB_F32, SHEMB_OPT_ADAM, 0);
	for (int s = 0; s < 2; s++)
		train(ctx, t, 40 + (uint64_t)s);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shemb_table_attr_init(&a);
	a.rows = 3000;
	a.dim = 6;
	a.optimizer = SHEMB_OPT_ADAM;
	a.cache_rows = 200;
	snprintf(cold, sizeof(cold), "%s/cold", dir);
	a.cold_path = cold;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), 0);
	same_table(ctx, t, u, 3000, 6, 9);
	shemb_table_destroy(u);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

START_TEST(saved_attributes_come_back)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	struct shemb_table_attr a = { .size = sizeof(a) };
	struct shemb_table_attr b = { .size = sizeof(b) };
	char *dir = tu_temp_dir("test_ckpt");

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	shemb_table_attr_init(&a);
	a.name = "saved";
	a.rows = 50;
	a.dim = 4;
	a.optimizer = SHEMB_OPT_ADAM;
	a.lr = 0.125f;
	a.beta1 = 0.5f;
	a.table_id = 77;
	t = tu_table_attr(ctx, &a);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
	ck_assert_int_eq(shemb_table_get_attr(u, &b), 0);
	ck_assert_str_eq(b.name, "saved");
	ck_assert_int_eq(b.rows, 50);
	ck_assert_int_eq(b.dim, 4);
	ck_assert_int_eq(b.optimizer, SHEMB_OPT_ADAM);
	ck_assert_float_eq(b.lr, 0.125f);
	ck_assert_float_eq(b.beta1, 0.5f);
	ck_assert_int_eq(b.table_id, 77);
	shemb_table_destroy(u);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

static int files_in(const char *dir)
{
	char cmd[256], line[256];
	FILE *ls;
	int files = 0;

	snprintf(cmd, sizeof(cmd), "ls '%s'", dir);
	ls = popen(cmd, "r");
	while (fgets(line, sizeof(line), ls))
		files++;
	pclose(ls);
	return files;
}

static unsigned char *slurp(const char *path, size_t *len);
static void spill(const char *path, const unsigned char *p, size_t len);

/* A save replaces the checkpoint and keeps the files of the one before,
 * which a load that read the old MANIFEST may still read, and no older
 * ones. */
START_TEST(second_save_replaces_the_first)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	char *dir = tu_temp_dir("test_ckpt"), path[300];
	unsigned char *old;
	float *rows2;
	size_t len;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 40, 3, SHEMB_F32, SHEMB_OPT_ADAGRAD, 0);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	ck_assert_int_eq(files_in(dir), 2); /* MANIFEST, one shard file */
	train(ctx, t, 5);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
	same_rows(t, u, 40, 3);
	shemb_table_destroy(u);
	ck_assert_int_eq(files_in(dir), 3);
	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	old = slurp(path, &len);
	rows2 = tu_read_all_f32(t);
	train(ctx, t, 6);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	ck_assert_int_eq(files_in(dir), 3);
	/* a reader with the MANIFEST of the save before still finds its
	 * files */
	spill(path, old, len);
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
	free(old);
	old = (unsigned char *)tu_read_all_f32(u);
	ck_assert(!memcmp(old, rows2, 40 * 3 * 4));
	free(old);
	free(rows2);
	shemb_table_destroy(u);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* The layers of the MANIFEST in dir, and the records of its last. */
static int layers(const char *dir, uint64_t *last_records)
{
	struct shemb__ckpt_manifest m;
	char path[300], why[128];
	unsigned char *p;
	size_t len;
	int n = 0;

	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	p = slurp(path, &len);
	ck_assert_int_eq(shemb__ckpt_manifest_parse(p, len, &m, why,
						    sizeof(why)), 0);
	*last_records = 0;
	for (uint32_t i = 0; i < m.nfiles; i++) {
		n += !i || m.files[i].generation != m.files[i - 1].generation;
		if (m.files[i].generation == m.generation)
			*last_records += m.files[i].nrecords;
	}
	shemb__ckpt_manifest_free(&m);
	free(p);
	return n;
}

/* The shard files of the first layer of the MANIFEST in dir, removed. */
static void remove_first_layer(const char *dir)
{
	struct shemb__ckpt_manifest m;
	char path[300], name[64], why[128];
	unsigned char *p;
	size_t len;

	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	p = slurp(path, &len);
	ck_assert_int_eq(shemb__ckpt_manifest_parse(p, len, &m, why,
						    sizeof(why)), 0);
	for (uint32_t i = 0; i < m.nfiles; i++) {
		if (m.files[i].generation != m.files[0].generation)
			continue;
		shemb__ckpt_shard_name(m.files[i].generation, m.files[i].rank,
				       name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		ck_assert_int_eq(unlink(path), 0);
	}
	shemb__ckpt_manifest_free(&m);
	free(p);
}

/* An incremental save writes the rows changed since the last save (a
 * layer over the checkpoint in place), a load applies the layers in
 * order; a save that cannot build on the checkpoint in place (the first,
 * or the first of a loaded table) writes every row. */
START_TEST(incremental_saves)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	char *dir = tu_temp_dir("test_ckpt");
	uint64_t recs;
	int64_t id = 7;
	float row[4] = { 1, 2, 3, 4 };

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 500, 4, SHEMB_F32, SHEMB_OPT_ADAM, 0);
	ck_assert_int_eq(shemb_table_save(t, dir, SHEMB_SAVE_INCREMENTAL), 0);
	ck_assert_int_eq(layers(dir, &recs), 1);
	ck_assert_uint_eq(recs, 500);
	for (int s = 0; s < 3; s++) {
		train(ctx, t, 60 + (uint64_t)s);
		if (s == 1) /* a row write counts as a change too */
			ck_assert_int_eq(shemb_table_write_rows(
						 t, 1, &id, row, SHEMB_F32, 0),
					 0);
		ck_assert_int_eq(shemb_table_save(t, dir,
						  SHEMB_SAVE_INCREMENTAL),
				 0);
		ck_assert_int_eq(layers(dir, &recs), s + 2);
		ck_assert(recs > 0 && recs < 200); /* a step's rows */
		ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
		same_table(ctx, t, u, 500, 4, 90);
		if (s < 2) {
			shemb_table_destroy(u);
			continue;
		}
		/* the loaded table's first save is whole */
		ck_assert_int_eq(shemb_table_save(u, dir,
						  SHEMB_SAVE_INCREMENTAL), 0);
		ck_assert_int_eq(layers(dir, &recs), 1);
		ck_assert_uint_eq(recs, 500);
		shemb_table_destroy(u);
	}
	/* a layer below gone: the next save is whole, and loads */
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	train(ctx, t, 70);
	ck_assert_int_eq(shemb_table_save(t, dir, SHEMB_SAVE_INCREMENTAL), 0);
	ck_assert_int_eq(layers(dir, &recs), 2);
	remove_first_layer(dir);
	train(ctx, t, 71);
	ck_assert_int_eq(shemb_table_save(t, dir, SHEMB_SAVE_INCREMENTAL), 0);
	ck_assert_int_eq(layers(dir, &recs), 1);
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
	same_rows(t, u, 500, 4);
	shemb_table_destroy(u);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* ---- bad input ---- */

START_TEST(bad_arguments_are_refused)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = (shemb_table *)&u;
	struct shemb_table_attr a;
	struct tu_snapshot before;
	char *dir = tu_temp_dir("test_ckpt"), file[300];
	int fd;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 20, 3, SHEMB_F32, SHEMB_OPT_SGD, 0);
	tu_snapshot_take(&before, t);
	ck_assert_int_eq(shemb_table_save(NULL, dir, 0), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_table_save(t, NULL, 0), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_table_save(t, dir, 2), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_table_save(t, "/nonexistent/dir", 0),
			 SHEMB_EINVAL);
	snprintf(file, sizeof(file), "%s/plain", dir);
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	close(fd);
	ck_assert_int_eq(shemb_table_save(t, file, 0), SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "not a directory"));
	/* no checkpoint there */
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), SHEMB_EINVAL);
	ck_assert_ptr_null(u);
	ck_assert_int_eq(shemb_table_load(NULL, dir, NULL, &u), SHEMB_EINVAL);
	u = (shemb_table *)&u;
	ck_assert_int_eq(shemb_table_load(ctx, NULL, NULL, &u), SHEMB_EINVAL);
	ck_assert_ptr_null(u);
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, NULL),
			 SHEMB_EINVAL);
	/* attributes of another table */
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shemb_table_attr_init(&a);
	a.rows = 21;
	a.dim = 3;
	u = (shemb_table *)&u;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), SHEMB_EINVAL);
	ck_assert_ptr_null(u);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "checkpoint holds 20 x 3"));
	a.rows = 20;
	a.optimizer = SHEMB_OPT_ADAM;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), SHEMB_EINVAL);
	ck_assert(tu_unchanged_since(&before, t));
	tu_snapshot_free(&before);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* ---- corruption ---- */

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	p = tu_malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static void spill(const char *path, const unsigned char *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	fclose(f);
}

static void load_fails(shemb_ctx *ctx, const char *dir, const char *name,
		       size_t at)
{
	shemb_table *u = (shemb_table *)&u;
	int rc = shemb_table_load(ctx, dir, NULL, &u);

	if (rc != SHEMB_ECORRUPT)
		ck_abort_msg("%s changed at %zu: load gave %d (%s)", name, at,
			     rc, shemb_ctx_last_error(ctx));
	ck_assert_ptr_null(u);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx), name));
}

/* Every byte of the file changed in turn, then every shorter length. */
static void corrupt_each(shemb_ctx *ctx, const char *dir, const char *name)
{
	char path[300];
	size_t len;
	unsigned char *orig;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	orig = slurp(path, &len);
	for (size_t i = 0; i < len; i++) {
		orig[i] ^= (unsigned char)(1 + i % 255);
		spill(path, orig, len);
		load_fails(ctx, dir, name, i);
		orig[i] ^= (unsigned char)(1 + i % 255);
	}
	for (size_t n = 0; n < len; n++) {
		spill(path, orig, n);
		load_fails(ctx, dir, name, n);
	}
	spill(path, orig, len);
	free(orig);
}

static char *shard_file(const char *dir)
{
	char cmd[300], *line = tu_malloc(256);
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls '%s' | grep '^shard-'", dir);
	ls = popen(cmd, "r");
	ck_assert_ptr_nonnull(fgets(line, 256, ls));
	pclose(ls);
	line[strcspn(line, "\n")] = 0;
	return line;
}

START_TEST(every_corruption_is_found)
{
	shemb_ctx *ctx;
	shemb_table *t, *u = NULL;
	char *dir = tu_temp_dir("test_ckpt"), *shard;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 6, 3, SHEMB_BF16, SHEMB_OPT_ADAM, 0);
	train(ctx, t, 3);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shard = shard_file(dir);
	corrupt_each(ctx, dir, "MANIFEST");
	corrupt_each(ctx, dir, shard);
	/* restored: it loads */
	ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
	same_rows(t, u, 6, 3);
	shemb_table_destroy(u);
	free(shard);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* ---- crashes ---- */

/* Save t into dir in a child that dies at its n-th fsync or rename:
 * true if it died, false if the save ran to its end. */
static bool save_dying_at(shemb_table *t, const char *dir, int n,
			  unsigned flags)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		countdown = n;
		_exit(shemb_table_save(t, dir, flags) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_ne(WEXITSTATUS(st), 1);
	return WEXITSTATUS(st) == 42;
}

static bool rows_equal(shemb_table *u, const float *want, size_t n)
{
	float *got = tu_read_all_f32(u);
	bool eq = !memcmp(got, want, n * 4);

	free(got);
	return eq;
}

/* Whole saves (_i 0) and incremental ones (_i 1) alike. */
START_TEST(a_crash_leaves_old_or_new)
{
	shemb_ctx *ctx;
	shemb_table *t;
	char *dir = tu_temp_dir("test_ckpt");
	float *old_rows, *new_rows;
	int points = 0, saw_new = 0;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	t = table(ctx, 64, 4, SHEMB_F32, SHEMB_OPT_ADAGRAD, 0);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	old_rows = tu_read_all_f32(t);
	train(ctx, t, 11);
	new_rows = tu_read_all_f32(t);
	for (int n = 1; n < 64; n++) {
		bool died = save_dying_at(t, dir, n,
					  _i ? SHEMB_SAVE_INCREMENTAL : 0);
		shemb_table *u = NULL;
		bool is_old, is_new;

		ck_assert_int_eq(shemb_table_load(ctx, dir, NULL, &u), 0);
		is_old = rows_equal(u, old_rows, 64 * 4);
		is_new = rows_equal(u, new_rows, 64 * 4);
		ck_assert(is_old || is_new);
		saw_new |= is_new;
		shemb_table_destroy(u);
		if (!died)
			break;
		points++;
	}
	/* fsync and rename of the shard file, of the MANIFEST, and the
	 * directory's fsyncs: each was a crash point */
	ck_assert_int_ge(points, 6);
	ck_assert(saw_new);
	free(old_rows);
	free(new_rows);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* ---- the checksum ---- */

START_TEST(crc32c_known_values)
{
	unsigned char buf[1000];
	struct tu_rng r;

	ck_assert_uint_eq(shemb__crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(shemb__crc32c(0, "", 0), 0);
	tu_rng_seed(&r, 9);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)tu_rng_next(&r);
	for (size_t n = 0; n < sizeof(buf); n += 37) {
		uint32_t whole = shemb__crc32c(0, buf, n);

		ck_assert_uint_eq(whole, shemb__crc32c_portable(0, buf, n));
		ck_assert_uint_eq(whole,
				  shemb__crc32c(shemb__crc32c(0, buf, n / 3),
						buf + n / 3, n - n / 3));
	}
}
END_TEST

/* ---- the MANIFEST's layers ---- */

/* A file entry of no records: rank r's, of generation g, columns
 * [c0, c0 + n). */
static struct shemb__ckpt_file entry(uint64_t g, uint32_t r, uint32_t c0,
				     uint32_t n)
{
	return (struct shemb__ckpt_file){ .generation = g, .rank = r,
					  .col0 = c0, .ncols = n,
					  .bytes = SHEMB__CKPT_HEADER };
}

/* The parse of a MANIFEST of generation `gen` listing files[0 .. n) of a
 * table of dim 8 saved by `world` ranks. */
static int parse_layers(struct shemb__ckpt_file *files, uint32_t n,
			uint32_t world, uint64_t gen)
{
	struct shemb__ckpt_manifest m = { .generation = gen, .rows = 10,
					  .dim = 8, .shard = SHEMB_SHARD_ROW,
					  .world = world, .nfiles = n,
					  .files = files };
	struct shemb__ckpt_manifest back;
	unsigned char *p;
	char why[128];
	size_t len;
	int rc;

	strcpy(m.name, "t");
	ck_assert_int_eq(shemb__ckpt_manifest_encode(&m, &p, &len), 0);
	rc = shemb__ckpt_manifest_parse(p, len, &back, why, sizeof(why));
	if (!rc)
		shemb__ckpt_manifest_free(&back);
	else
		ck_assert_ptr_nonnull(strstr(why, "cover the table once"));
	free(p);
	return rc;
}

/* Layers of whole rows or of column slices that tile the row; each
 * layer a generation of its own, the last the MANIFEST's; each rank
 * once in a layer. */
START_TEST(manifest_layers_cover_the_table_once)
{
	struct shemb__ckpt_file f[4];
	enum { MANY = SHEMB__CKPT_MAX_FILES };
	struct shemb__ckpt_file *many = tu_malloc(MANY * sizeof(*many));

	f[0] = entry(5, 0, 0, 8);
	f[1] = entry(5, 1, 0, 8);
	f[2] = entry(9, 1, 0, 8);
	ck_assert_int_eq(parse_layers(f, 3, 2, 9), 0);
	ck_assert_int_eq(parse_layers(f, 3, 2, 5), SHEMB_ECORRUPT);
	f[1].rank = 0; /* rank 0 twice in a layer */
	ck_assert_int_eq(parse_layers(f, 3, 2, 9), SHEMB_ECORRUPT);
	/* column slices: tiling, overlapping, short of the row */
	f[0] = entry(5, 0, 0, 3);
	f[1] = entry(5, 1, 3, 5);
	ck_assert_int_eq(parse_layers(f, 2, 2, 5), 0);
	f[1] = entry(5, 1, 2, 6);
	ck_assert_int_eq(parse_layers(f, 2, 2, 5), SHEMB_ECORRUPT);
	f[1] = entry(5, 1, 4, 4);
	ck_assert_int_eq(parse_layers(f, 2, 2, 5), SHEMB_ECORRUPT);
	/* a generation that comes back in a later layer */
	f[0] = entry(5, 0, 0, 8);
	f[1] = entry(9, 0, 0, 8);
	f[2] = entry(5, 0, 0, 8);
	f[3] = entry(7, 0, 0, 8);
	ck_assert_int_eq(parse_layers(f, 4, 1, 7), SHEMB_ECORRUPT);
	f[2].generation = 6;
	ck_assert_int_eq(parse_layers(f, 4, 1, 7), 0);
	/* as many layers as a MANIFEST lists files, of generations in no
	 * order; then the first one's again, last */
	for (uint32_t i = 0; i < MANY; i++)
		many[i] = entry((uint64_t)i * 2654435761u % 1000003u + 1, 0, 0,
				8);
	ck_assert_int_eq(parse_layers(many, MANY, 1,
				      many[MANY - 1].generation), 0);
	many[MANY - 1].generation = many[0].generation;
	ck_assert_int_eq(parse_layers(many, MANY, 1, many[0].generation),
			 SHEMB_ECORRUPT);
	free(many);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checkpoint");
	TCase *tc = tcase_create("checkpoint");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, round_trip_every_optimizer, 0, 12);
	tcase_add_loop_test(tc, round_trip_through_tiers, 0, 8);
	tcase_add_test(tc, load_into_a_cold_table);
	tcase_add_test(tc, incremental_saves);
	tcase_add_test(tc, saved_attributes_come_back);
	tcase_add_test(tc, second_save_replaces_the_first);
	tcase_add_test(tc, bad_arguments_are_refused);
	tcase_add_test(tc, every_corruption_is_found);
	tcase_add_loop_test(tc, a_crash_leaves_old_or_new, 0, 2);
	tcase_add_test(tc, crc32c_known_values);
	tcase_add_test(tc, manifest_layers_cover_the_table_once);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
