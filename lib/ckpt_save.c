/*
 * ckpt_save.c - shemb_table_save: every rank writes its part of a table
 * (rows, optimizer state) to a shard file of the save's generation, then
 * rank 0 writes the MANIFEST that names them.  Each file goes to a
 * temporary name, is fsync'ed and renamed, and the directory fsync'ed;
 * the MANIFEST's rename is the moment the new checkpoint replaces the
 * old one, whose files stay until then.  A crash at any point leaves one
 * whole checkpoint, the old or the new.
 */
#include "lib/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/ckpt.h"
#include "lib/crc32c.h"
#include "lib/dist.h"
#include "lib/rowinit.h"
#include "lib/shard.h"
#include "lib/stepq.h"
#include "lib/table.h"
#include "lib/tier.h"


/* What one rank wrote. */
struct written {
	uint64_t nrecords, bytes;
	uint32_t crc;
};

static int io_fail(shemb_ctx *ctx, int err, const char *what,
		   const char *path)
{
	return shemb__fail(ctx, SHEMB_EIO, "checkpoint: %s %s: %s", what, path,
			   strerror(err));
}

/* Rows this rank saves: its local rows (a replicated table: rank 0's). */
static int64_t rows_saved(const shemb_table *t)
{
	if (t->shard.kind == SHEMB_SHARD_REPLICATED && t->shard.rank != 0)
		return 0;
	return t->shard.local_rows;
}

static size_t value_bytes(const shemb_table *t)
{
	return (size_t)t->shard.ncols * (t->attr.dtype == SHEMB_F32 ? 4 : 2);
}

/* Records as the file holds them: id, values, state. */
static void encode_records(const shemb_table *t, int64_t l0, int64_t n,
			   const char *recs, unsigned char *out)
{
	size_t vb = value_bytes(t), sb = (size_t)t->store.nstate * 4;

	for (int64_t i = 0; i < n; i++) {
		const char *rec = recs + (size_t)i * t->store.stride;
		uint64_t id = (uint64_t)shemb__shard_global(&t->shard, l0 + i);

		for (int k = 0; k < 8; k++)
			out[k] = (unsigned char)(id >> (8 * k));
		memcpy(out + 8, rec, vb); /* little-endian host */
		memcpy(out + 8 + vb, rec + t->store.state_off, sb);
		out += 8 + vb + sb;
	}
}

/* Every record this rank saves, after the header; 0, a failure of the
 * tier (its detail recorded), or SHEMB_EIO with the errno in *err. */
static int write_records(shemb_table *t, int fd, struct written *w, int *err)
{
	int64_t total = rows_saved(t);
	size_t rb = shemb__ckpt_record_bytes((uint32_t)t->shard.ncols,
					     (uint32_t)t->attr.dtype,
					     (uint32_t)t->store.nstate);
	int64_t pass = shemb__ckpt_pass(t->store.stride + rb);
	int64_t *rows = malloc((size_t)pass * sizeof(*rows));
	char *recs = malloc((size_t)pass * t->store.stride);
	unsigned char *out = malloc((size_t)pass * rb);
	int rc = rows && recs && out ? 0 : SHEMB_ENOMEM;

	for (int64_t l0 = 0; !rc && l0 < total; l0 += pass) {
		int64_t n = total - l0 < pass ? total - l0 : pass;

		for (int64_t i = 0; i < n; i++)
			rows[i] = l0 + i;
		rc = shemb__tier_records(t, n, rows, recs, false, true);
		if (rc)
			break;
		encode_records(t, l0, n, recs, out);
		w->crc = shemb__crc32c(w->crc, out, (size_t)n * rb);
		*err = shemb__ckpt_write_all(fd, out, (size_t)n * rb);
		rc = *err ? SHEMB_EIO : 0;
	}
	free(rows);
	free(recs);
	free(out);
	w->nrecords = (uint64_t)total;
	w->bytes = SHEMB__CKPT_HEADER + (uint64_t)total * rb;
	return rc;
}

static void shard_header(const shemb_table *t, uint64_t gen,
			 unsigned char head[SHEMB__CKPT_HEADER])
{
	struct shemb__ckpt_shard h = {
		.rank = (uint32_t)t->shard.rank, .generation = gen,
		.nrecords = (uint64_t)rows_saved(t),
		.rows = (uint64_t)t->attr.rows,
		.col0 = (uint32_t)t->shard.col0,
		.ncols = (uint32_t)t->shard.ncols,
		.dtype = (uint32_t)t->attr.dtype,
		.nstate = (uint32_t)t->store.nstate,
		.dim = (uint32_t)t->attr.dim,
	};

	shemb__ckpt_shard_encode(&h, head);
}

static void describe(const shemb_table *t, uint64_t gen,
		     struct shemb__ckpt_manifest *m);

/*
 * Header and records under the table's lock (shared: lookups go on), with
 * the attributes and step count of the rows written (*m); then, without
 * it, fsync and close.  0, or SHEMB_EIO with *err, or another failure.
 */
static int fill_shard(shemb_table *t, int fd, uint64_t gen,
		      struct written *w, struct shemb__ckpt_manifest *m,
		      int *err)
{
	unsigned char head[SHEMB__CKPT_HEADER];
	int rc;

	shard_header(t, gen, head);
	w->crc = shemb__crc32c(0, head, sizeof(head));
	pthread_rwlock_rdlock(&t->rows_lock);
	describe(t, gen, m);
	*err = shemb__ckpt_write_all(fd, head, sizeof(head));
	rc = *err ? SHEMB_EIO : write_records(t, fd, w, err);
	pthread_rwlock_unlock(&t->rows_lock);
	if (!rc && fsync(fd)) {
		*err = errno;
		rc = SHEMB_EIO;
	}
	if (close(fd) && !rc) {
		*err = errno;
		rc = SHEMB_EIO;
	}
	return rc;
}

/* Written to a temporary name, renamed, the directory synced. */
static int write_shard(shemb_table *t, const char *dir, uint64_t gen,
		       struct written *w, struct shemb__ckpt_manifest *m)
{
	char name[64], path[PATH_MAX], tmp[PATH_MAX + 8];
	int fd, rc, err = 0;

	shemb__ckpt_shard_name(gen, (uint32_t)t->shard.rank, name,
			       sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return io_fail(t->ctx, errno, "cannot create", tmp);
	rc = fill_shard(t, fd, gen, w, m, &err);
	if (!rc && rename(tmp, path)) {
		err = errno;
		rc = SHEMB_EIO;
	}
	if (!rc && (err = shemb__ckpt_sync_dir(dir)))
		rc = SHEMB_EIO;
	if (rc)
		unlink(tmp);
	if (rc == SHEMB_EIO && err)
		return io_fail(t->ctx, err, "cannot write", tmp);
	return rc ? shemb__fail(t->ctx, rc, "checkpoint: reading the rows of "
				"table '%s' failed: %s", t->name,
				shemb_strerror(rc))
		  : 0;
}

/* ---- the MANIFEST, on rank 0 ---- */

static void describe(const shemb_table *t, uint64_t gen,
		     struct shemb__ckpt_manifest *m)
{
	const struct shemb_table_attr *a = &t->attr;

	memset(m, 0, sizeof(*m));
	m->generation = gen;
	m->rows = (uint64_t)a->rows;
	m->dim = (uint32_t)a->dim;
	m->dtype = (uint32_t)a->dtype;
	m->optimizer = (uint32_t)a->optimizer;
	m->weight_decay_mode = (uint32_t)a->weight_decay_mode;
	m->table_id = a->table_id;
	m->seed = a->seed;
	m->step = t->step;
	m->lr = a->lr;
	m->eps = a->eps;
	m->beta1 = a->beta1;
	m->beta2 = a->beta2;
	m->weight_decay = a->weight_decay;
	m->initial_accumulator = a->initial_accumulator;
	m->shard = (uint32_t)t->shard.kind;
	m->world = (uint32_t)t->shard.world;
	snprintf(m->name, sizeof(m->name), "%s", t->name ? t->name : "");
}

/* A rank with no columns writes no file (shard.c gives every rank of a
 * column-wise table some, but the format does not need it). */
static void list_files(const shemb_table *t, const struct written *all,
		       struct shemb__ckpt_manifest *m)
{
	m->nfiles = 0;
	for (int r = 0; r < t->shard.world; r++) {
		struct shemb__ckpt_file *f = &m->files[m->nfiles];
		int c0, nc;

		shemb__shard_columns(&t->shard, r, &c0, &nc);
		if (nc == 0)
			continue;
		m->nfiles++;
		*f = (struct shemb__ckpt_file){
			.rank = (uint32_t)r, .col0 = (uint32_t)c0,
			.ncols = (uint32_t)nc,
			.nstate = (uint32_t)shemb__opt_state_floats(
				t->attr.optimizer, nc),
			.nrecords = all[r].nrecords, .bytes = all[r].bytes,
			.crc = all[r].crc,
		};
	}
}

/* Rank 0 sees every shard file the MANIFEST will name, whole: the ranks
 * share the directory. */
static int files_in_place(shemb_table *t, const char *dir,
			  const struct shemb__ckpt_manifest *m)
{
	for (uint32_t i = 0; i < m->nfiles; i++) {
		const struct shemb__ckpt_file *f = &m->files[i];
		char name[64], path[PATH_MAX];
		struct stat st;

		shemb__ckpt_shard_name(m->generation, f->rank, name,
				       sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (stat(path, &st) || (uint64_t)st.st_size != f->bytes)
			return shemb__fail(t->ctx, SHEMB_EIO, "checkpoint: "
					   "rank %u's shard file %s is not "
					   "there as rank 0 sees the directory "
					   "(do all ranks see one shared "
					   "directory?)", f->rank, path);
	}
	return 0;
}

/* m: the table as it was saved (describe()). */
static int write_manifest(shemb_table *t, const char *dir,
			  struct shemb__ckpt_manifest m,
			  const struct written *all)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	unsigned char *bytes = NULL;
	size_t len = 0;
	int fd, rc, err = 0;

	m.files = calloc((size_t)t->shard.world, sizeof(*m.files));
	if (!m.files)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	list_files(t, all, &m);
	rc = files_in_place(t, dir, &m);
	if (rc) {
		free(m.files);
		return rc;
	}
	rc = shemb__ckpt_manifest_encode(&m, &bytes, &len);
	free(m.files);
	if (rc)
		return shemb__fail(t->ctx, rc, "no memory");
	shemb__ckpt_manifest_path(dir, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		err = errno;
	if (fd >= 0) {
		err = shemb__ckpt_write_all(fd, bytes, len);
		if (!err && fsync(fd))
			err = errno;
		if (close(fd) && !err)
			err = errno;
	}
	if (!err && rename(tmp, path))
		err = errno;
	if (!err)
		err = shemb__ckpt_sync_dir(dir);
	free(bytes);
	if (err)
		unlink(tmp);
	return err ? io_fail(t->ctx, err, "cannot write", tmp) : 0;
}

/* The generation of a shard file's name, or of its temporary's. */
static bool shard_generation(const char *name, uint64_t *gen, bool *tmp)
{
	unsigned rank;
	int end = 0;

	if (sscanf(name, "shard-%16" SCNx64 "-%u.bin%n", gen, &rank, &end) !=
		    2 ||
	    !end)
		return false;
	*tmp = !strcmp(name + end, ".tmp");
	return !name[end] || *tmp;
}

/*
 * After a save: the shard files of generations other than this one and
 * the one before (a load that read the old MANIFEST may still be reading
 * them), and every temporary.
 */
static void remove_others(const char *dir, uint64_t gen, uint64_t prev)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	while (d && (e = readdir(d))) {
		uint64_t g;
		bool tmp = false;

		if (strcmp(e->d_name, "MANIFEST.tmp") &&
		    (!shard_generation(e->d_name, &g, &tmp) ||
		     (!tmp && (g == gen || g == prev))))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

/* The generation of the checkpoint in dir now (0: none readable). */
static uint64_t current_generation(const char *dir)
{
	struct shemb__ckpt_manifest m;
	unsigned char buf[1 << 16];
	char path[PATH_MAX], why[128];
	int fd;
	ssize_t n;

	shemb__ckpt_manifest_path(dir, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0 || shemb__ckpt_manifest_parse(buf, (size_t)n, &m, why,
						 sizeof(why)))
		return 0;
	shemb__ckpt_manifest_free(&m);
	return m.generation;
}

/* ---- the collective ---- */

static int check_args(shemb_table *t, const char *dir, unsigned flags)
{
	struct stat st;

	if (!dir)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "dir is NULL");
	if (flags)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "unknown save flags "
				   "0x%x", flags);
	if (strlen(dir) > PATH_MAX - 64)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "dir is too long");
	if (t->attr.dtype == SHEMB_INT8)
		return shemb__fail(t->ctx, SHEMB_ENOTSUP, "checkpoint: table "
				   "'%s' has SHEMB_INT8 rows, which serve and "
				   "are not saved", t->name);
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return shemb__fail(t->ctx, SHEMB_EINVAL, "checkpoint: %s is "
				   "not a directory", dir);
	return 0;
}

/* What the ranks must agree on: the table. */
static uint64_t table_word(const shemb_table *t)
{
	return shemb__mix64((uint64_t)t->attr.table_id ^
			    shemb__mix64((uint64_t)t->attr.rows << 20 ^
					 (uint64_t)t->attr.dim));
}

/* Rank 0's generation, for every rank; every rank saves the same table
 * (a rank whose status is set sends 0). */
static int agree_generation(shemb_table *t, int status, uint64_t prev,
			    uint64_t *gen)
{
	shemb_ctx *ctx = t->ctx;
	int world = ctx->attr.world_size, rc;
	uint64_t mine = shemb__mix64(shemb__now_ns() ^
				     (uint64_t)getpid() << 32), *all;

	if (mine == prev || mine == 0) /* never the files in place */
		mine = prev + 1;
	*gen = mine;
	if (!shemb__distributed(ctx))
		return status;
	all = calloc(2 * (size_t)world, 8);
	if (!all)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	rc = shemb__allgather_word(ctx, mine, all);
	if (!rc)
		rc = shemb__allgather_word(ctx, status ? 0 : table_word(t),
					   all + world);
	*gen = all[0];
	/* a rank that failed sends 0, and says why in save_parts */
	for (int r = 0; !rc && !status && r < world; r++)
		if (all[world + r] && all[world + r] != table_word(t))
			rc = shemb__fail(ctx, SHEMB_EINVAL, "checkpoint: rank "
					 "%d saves another table than this "
					 "rank's '%s'", r, t->name);
	free(all);
	return status ? status : rc;
}

/* What each rank wrote, on every rank. */
static int gather_written(shemb_ctx *ctx, const struct written *mine,
			  struct written *all)
{
	int world = ctx->attr.world_size, rc = 0;
	uint64_t *w = calloc((size_t)world * 3, 8);

	if (!shemb__distributed(ctx)) {
		all[0] = *mine;
		free(w);
		return 0;
	}
	if (!w)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	rc = shemb__allgather_word(ctx, mine->nrecords, w);
	if (!rc)
		rc = shemb__allgather_word(ctx, mine->bytes, w + world);
	if (!rc)
		rc = shemb__allgather_word(ctx, mine->crc, w + 2 * world);
	for (int r = 0; !rc && r < world; r++)
		all[r] = (struct written){ w[r], w[world + r],
					   (uint32_t)w[2 * world + r] };
	free(w);
	return rc;
}

static int all_ok(shemb_ctx *ctx, int rc, const char *what)
{
	return shemb__distributed(ctx) ? shemb__dist_all_ok(ctx, rc, what)
				       : rc;
}

static int save_parts(shemb_table *t, const char *dir, uint64_t gen,
		      int status)
{
	shemb_ctx *ctx = t->ctx;
	struct written mine = { 0 };
	struct written *all = calloc((size_t)t->shard.world + 1,
				     sizeof(*all));
	struct shemb__ckpt_manifest m = { 0 };
	int rc = status;

	if (!rc && !all)
		rc = shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	if (!rc) {
		/* m: rank 0's, which holds columns in any plan */
		if (t->shard.ncols > 0)
			rc = write_shard(t, dir, gen, &mine, &m);
	}
	rc = all_ok(ctx, rc, "writing its part of the checkpoint");
	if (!rc)
		rc = gather_written(ctx, &mine, all);
	if (!rc && t->shard.rank == 0)
		rc = write_manifest(t, dir, m, all);
	rc = all_ok(ctx, rc, "writing the checkpoint's MANIFEST");
	free(all);
	return rc;
}

SHEMB_API int shemb_table_save(shemb_table *table, const char *dir,
			       unsigned flags)
{
	uint64_t gen = 0, prev = 0;
	int rc;

	if (!table)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	shemb__stepq_drain(table->ctx); /* collective: keeps its place */
	rc = check_args(table, dir, flags);
	if (!rc && table->shard.rank == 0)
		prev = current_generation(dir);
	rc = agree_generation(table, rc, prev, &gen);
	if (rc && !shemb__distributed(table->ctx))
		return rc;
	/* After a failure the files of this save stay, named by no
	 * MANIFEST (the MANIFEST may even be in place when the failure
	 * came after it), until the next save removes them. */
	rc = save_parts(table, dir, gen, rc);
	if (!rc && table->shard.rank == 0)
		remove_others(dir, gen, prev);
	return rc;
}
