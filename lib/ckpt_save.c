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

/* ---- the rows changed since the last save ---- */

static size_t bitmap_bytes(const shemb_table *t)
{
	return ((size_t)t->shard.local_rows + 7) / 8 + 1;
}

static bool changed(const uint8_t *bits, int64_t l)
{
	return (bits[l >> 3] >> (l & 7)) & 1;
}

void shemb__ckpt_touch(shemb_table *t, int64_t n, const int64_t *rows)
{
	for (int64_t i = 0; t->ckpt_dirty && i < n; i++)
		t->ckpt_dirty[rows[i] >> 3] |= (uint8_t)(1u << (rows[i] & 7));
}

void shemb__ckpt_forget(shemb_table *t)
{
	free(t->ckpt_dirty);
	t->ckpt_dirty = NULL;
	t->ckpt_gen = 0;
}

/* Under the table's lock, as a save writes its rows: the rows changed
 * since the last save (NULL when none were followed), and from now on
 * the changes after this one. */
static uint8_t *take_changes(shemb_table *t)
{
	uint8_t *was = t->ckpt_dirty;

	t->ckpt_dirty = calloc(bitmap_bytes(t), 1);
	return was;
}

/* A save that failed: its changes are still to save. */
static void give_back_changes(shemb_table *t, uint8_t *was)
{
	pthread_rwlock_wrlock(&t->rows_lock);
	/* without a set (none could be made) the changes since are lost:
	 * then none are followed, and the next save is whole */
	for (size_t i = 0; t->ckpt_dirty && i < bitmap_bytes(t); i++)
		t->ckpt_dirty[i] |= was[i];
	pthread_rwlock_unlock(&t->rows_lock);
	free(was);
}

/* ---- the shard file ---- */

/* The local rows this rank saves, pass by pass: from *next on, the
 * changed ones (only) or all; how many into rows[0 .. max). */
static int64_t next_rows(const shemb_table *t, const uint8_t *only,
			 int64_t *next, int64_t *rows, int64_t max)
{
	int64_t n = 0, total = rows_saved(t);

	for (; *next < total && n < max; (*next)++)
		if (!only || changed(only, *next))
			rows[n++] = *next;
	return n;
}

static int64_t count_rows(const shemb_table *t, const uint8_t *only)
{
	int64_t n = 0, total = rows_saved(t);

	for (int64_t l = 0; l < total; l++)
		n += !only || changed(only, l);
	return n;
}

/* Records as the file holds them: id, values, state. */
static void encode_records(const shemb_table *t, const int64_t *rows,
			   int64_t n, const char *recs, unsigned char *out)
{
	size_t vb = shemb__row_bytes(t->attr.dtype, t->shard.ncols);
	size_t sb = (size_t)t->store.nstate * 4;

	for (int64_t i = 0; i < n; i++) {
		const char *rec = recs + (size_t)i * t->store.stride;
		uint64_t id = (uint64_t)shemb__shard_global(&t->shard, rows[i]);

		for (int k = 0; k < 8; k++)
			out[k] = (unsigned char)(id >> (8 * k));
		memcpy(out + 8, rec, vb); /* little-endian host */
		memcpy(out + 8 + vb, rec + t->store.state_off, sb);
		out += 8 + vb + sb;
	}
}

/* Every record this rank saves (only: the changed ones), after the
 * header; 0, a failure of the tier (its detail recorded), or SHEMB_EIO
 * with the errno in *err. */
static int write_records(shemb_table *t, int fd, const uint8_t *only,
			 struct written *w, int *err)
{
	int64_t total = 0, next = 0, n;
	size_t rb = shemb__ckpt_record_bytes((uint32_t)t->shard.ncols,
					     (uint32_t)t->attr.dtype,
					     (uint32_t)t->store.nstate);
	int64_t pass = shemb__ckpt_pass(t->store.stride + rb);
	int64_t *rows = malloc((size_t)pass * sizeof(*rows));
	char *recs = malloc((size_t)pass * t->store.stride);
	unsigned char *out = malloc((size_t)pass * rb);
	int rc = rows && recs && out ? 0 : SHEMB_ENOMEM;

	while (!rc && (n = next_rows(t, only, &next, rows, pass)) > 0) {
		total += n;
		rc = shemb__tier_records(t, n, rows, recs, false, true);
		if (rc)
			break;
		encode_records(t, rows, n, recs, out);
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
			 int64_t nrecords,
			 unsigned char head[SHEMB__CKPT_HEADER])
{
	struct shemb__ckpt_shard h = {
		.rank = (uint32_t)t->shard.rank, .generation = gen,
		.nrecords = (uint64_t)nrecords,
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

/* What a save writes and keeps: its generation, whether it writes the
 * changed rows only, the changes it took (given back on failure), and
 * on rank 0 the MANIFEST it replaces. */
struct save {
	uint64_t gen;
	bool incremental;
	uint8_t *changes;
	struct shemb__ckpt_manifest before;
};

/*
 * Header and records under the table's lock (shared: lookups go on), with
 * the attributes and step count of the rows written (*m) and the changes
 * since the last save taken; then, without it, fsync and close.  0, or
 * SHEMB_EIO with *err, or another failure.
 */
static int fill_shard(shemb_table *t, int fd, struct save *sv,
		      struct written *w, struct shemb__ckpt_manifest *m,
		      int *err)
{
	unsigned char head[SHEMB__CKPT_HEADER];
	const uint8_t *only;
	int rc;

	pthread_rwlock_rdlock(&t->rows_lock);
	sv->changes = take_changes(t);
	only = sv->incremental ? sv->changes : NULL;
	shard_header(t, sv->gen, count_rows(t, only), head);
	w->crc = shemb__crc32c(0, head, sizeof(head));
	describe(t, sv->gen, m);
	*err = shemb__ckpt_write_all(fd, head, sizeof(head));
	rc = *err ? SHEMB_EIO : write_records(t, fd, only, w, err);
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
static int write_shard(shemb_table *t, const char *dir, struct save *sv,
		       struct written *w, struct shemb__ckpt_manifest *m)
{
	char name[64], path[PATH_MAX], tmp[PATH_MAX + 8];
	int fd, rc, err = 0;

	shemb__ckpt_shard_name(sv->gen, (uint32_t)t->shard.rank, name,
			       sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return io_fail(t->ctx, errno, "cannot create", tmp);
	rc = fill_shard(t, fd, sv, w, m, &err);
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
/* This save's files, after the m->nfiles listed already. */
static void list_files(const shemb_table *t, const struct written *all,
		       struct shemb__ckpt_manifest *m)
{
	for (int r = 0; r < t->shard.world; r++) {
		struct shemb__ckpt_file *f = &m->files[m->nfiles];
		int c0, nc;

		shemb__shard_columns(&t->shard, r, &c0, &nc);
		if (nc == 0)
			continue;
		m->nfiles++;
		*f = (struct shemb__ckpt_file){
			.generation = m->generation,
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

		shemb__ckpt_shard_name(f->generation, f->rank, name,
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
/* An incremental save's MANIFEST lists the layers of the one it
 * replaces, then its own. */
static int write_manifest(shemb_table *t, const char *dir,
			  struct shemb__ckpt_manifest m,
			  const struct written *all, const struct save *sv)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	unsigned char *bytes = NULL;
	size_t len = 0, had = sv->incremental ? sv->before.nfiles : 0;
	int fd, rc, err = 0;

	m.files = calloc(had + (size_t)t->shard.world, sizeof(*m.files));
	if (!m.files)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	if (had)
		memcpy(m.files, sv->before.files, had * sizeof(*m.files));
	m.nfiles = (uint32_t)had;
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

static bool named_by(const struct shemb__ckpt_manifest *m, uint64_t g)
{
	for (uint32_t i = 0; i < m->nfiles; i++)
		if (m->files[i].generation == g)
			return true;
	return false;
}

/*
 * After a save: the shard files that neither this save's MANIFEST nor
 * the one it replaced (a load that read it may still be reading them)
 * names, and every temporary.  This save's names its own generation and,
 * when incremental, the replaced one's layers.
 */
static void remove_others(const char *dir, uint64_t gen,
			  const struct shemb__ckpt_manifest *before)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	while (d && (e = readdir(d))) {
		uint64_t g;
		bool tmp = false;

		if (strcmp(e->d_name, "MANIFEST.tmp") &&
		    (!shard_generation(e->d_name, &g, &tmp) ||
		     (!tmp && (g == gen || named_by(before, g)))))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

/* The checkpoint in dir now, if a readable one is there (else *m is
 * empty, generation 0). */
static void read_before(const char *dir, struct shemb__ckpt_manifest *m)
{
	char path[PATH_MAX], why[128];
	unsigned char *buf = NULL;
	struct stat st;
	int fd;

	memset(m, 0, sizeof(*m));
	shemb__ckpt_manifest_path(dir, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0 &&
	    st.st_size <= (1 << 24))
		buf = malloc((size_t)st.st_size);
	if (buf && read(fd, buf, (size_t)st.st_size) == st.st_size &&
	    shemb__ckpt_manifest_parse(buf, (size_t)st.st_size, m, why,
				       sizeof(why)))
		memset(m, 0, sizeof(*m));
	if (fd >= 0)
		close(fd);
	free(buf);
}

/* ---- the collective ---- */

static int check_args(shemb_table *t, const char *dir, unsigned flags)
{
	struct stat st;

	if (!dir)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "dir is NULL");
	if (flags & ~SHEMB_SAVE_INCREMENTAL)
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

/* Rank 0's generation (never `avoid`, the one in place) and *prev, for
 * every rank; every rank saves the same table (a rank whose status is
 * set sends 0). */
static int agree_generation(shemb_table *t, int status, uint64_t avoid,
			    uint64_t *prev, uint64_t *gen)
{
	shemb_ctx *ctx = t->ctx;
	int world = ctx->attr.world_size, rc;
	uint64_t mine = shemb__mix64(shemb__now_ns() ^
				     (uint64_t)getpid() << 32), *all;

	if (mine == avoid || mine == 0)
		mine = avoid + 1;
	*gen = mine;
	if (!shemb__distributed(ctx))
		return status;
	all = calloc(3 * (size_t)world, 8);
	/* without memory, the first refused: every rank stops there */
	rc = shemb__allgather_word(ctx, mine, all);
	if (!rc)
		rc = shemb__allgather_word(ctx, status ? 0 : table_word(t),
					   all + world);
	if (!rc)
		rc = shemb__allgather_word(ctx, *prev, all + 2 * world);
	*gen = all ? all[0] : 0; /* as the others' after a failure */
	*prev = all ? all[2 * world] : 0;
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

static int save_parts(shemb_table *t, const char *dir, struct save *sv,
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
			rc = write_shard(t, dir, sv, &mine, &m);
	}
	rc = all_ok(ctx, rc, "writing its part of the checkpoint");
	if (!rc)
		rc = gather_written(ctx, &mine, all);
	if (!rc && t->shard.rank == 0)
		rc = write_manifest(t, dir, m, all, sv);
	rc = all_ok(ctx, rc, "writing the checkpoint's MANIFEST");
	free(all);
	return rc;
}

/* Incremental when asked, and when the checkpoint in place is this
 * table's last save, whose changes since are followed: every rank must
 * say so (an earlier save may have lost them on one). */
static int incremental(shemb_table *t, unsigned flags, uint64_t prev,
		       bool *yes)
{
	int world = t->ctx->attr.world_size, rc;
	uint64_t *all;

	*yes = (flags & SHEMB_SAVE_INCREMENTAL) && prev && t->ckpt_dirty &&
	       prev == t->ckpt_gen;
	if (!shemb__distributed(t->ctx))
		return 0;
	all = calloc((size_t)world, 8);
	rc = shemb__allgather_word(t->ctx, *yes, all);
	for (int r = 0; !rc && r < world; r++)
		*yes &= all[r] != 0;
	free(all);
	return rc;
}

/* Rank 0: whether a new layer can go over the checkpoint in place: its
 * files all there, and room in the MANIFEST for one more layer. */
static bool can_build_on(const char *dir,
			 const struct shemb__ckpt_manifest *m, int world)
{
	if (!m->nfiles ||
	    (uint64_t)m->nfiles + (uint64_t)world > SHEMB__CKPT_MAX_FILES)
		return false;
	for (uint32_t i = 0; i < m->nfiles; i++) {
		char name[64], path[PATH_MAX];
		struct stat st;

		shemb__ckpt_shard_name(m->files[i].generation,
				       m->files[i].rank, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (stat(path, &st) ||
		    (uint64_t)st.st_size != m->files[i].bytes)
			return false;
	}
	return true;
}

static int save_table(shemb_table *table, const char *dir, unsigned flags)
{
	struct save sv = { 0 };
	uint64_t prev = 0;
	int rc = shemb__stepq_drain(table->ctx); /* collective: keeps its
						 * place */

	if (!rc)
		rc = check_args(table, dir, flags);
	if (!rc && table->shard.rank == 0)
		read_before(dir, &sv.before);
	/* a checkpoint that cannot take a layer is replaced whole */
	prev = can_build_on(dir, &sv.before, table->shard.world)
		       ? sv.before.generation
		       : 0;
	rc = agree_generation(table, rc, sv.before.generation, &prev,
			      &sv.gen);
	if (!rc || shemb__distributed(table->ctx)) {
		int irc = incremental(table, flags, prev, &sv.incremental);

		rc = rc ? rc : irc;
	}
	if (rc && !shemb__distributed(table->ctx)) {
		shemb__ckpt_manifest_free(&sv.before);
		return rc;
	}
	/* After a failure the files of this save stay, named by no
	 * MANIFEST (the MANIFEST may even be in place when the failure
	 * came after it), until the next save removes them; the changes
	 * it took are still to save. */
	rc = save_parts(table, dir, &sv, rc);
	if (rc && sv.changes)
		give_back_changes(table, sv.changes);
	else
		free(sv.changes);
	if (!rc) {
		pthread_rwlock_wrlock(&table->rows_lock);
		table->ckpt_gen = sv.gen;
		pthread_rwlock_unlock(&table->rows_lock);
	}
	if (!rc && table->shard.rank == 0)
		remove_others(dir, sv.gen, &sv.before);
	shemb__ckpt_manifest_free(&sv.before);
	return rc;
}

/* Saves of one table take turns: each takes the set of rows changed
 * since the one before and, done, becomes the one the next builds on.
 * Two at once could take the one set both (one freeing it twice, the
 * other's changes lost for the next incremental save). */
SHEMB_API int shemb_table_save(shemb_table *table, const char *dir,
			       unsigned flags)
{
	int rc;

	if (!table)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	pthread_mutex_lock(&table->save_lock);
	rc = save_table(table, dir, flags);
	pthread_mutex_unlock(&table->save_lock);
	return rc;
}
