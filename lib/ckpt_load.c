/*
 * ckpt_load.c - shemb_table_load: a table made from a checkpoint written
 * with any world size and shard plan, held as this context's ranks and
 * the caller's attributes say.  Every rank reads the MANIFEST and every
 * shard file, checking each checksum, and takes the records (and the
 * columns of them) it holds into its part of the new table (through an
 * image when the rows are behind a device tier); the table is handed
 * over only when every rank has read all of it without fault, and on
 * any failure it is destroyed.
 */
#include "lib/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu/half.h"
#include "lib/ckpt_io.h"
#include "lib/crc32c.h"
#include "lib/dist.h"
#include "lib/shard.h"
#include "lib/stepq.h"
#include "lib/table.h"
#include "lib/tier.h"


/* This rank's part, as it fills from the files: into records in host
 * memory (the table's own store, or a copy written in at the end), or
 * for a table behind a device tier, read, merged and written back
 * through the tier a batch at a time (no copy of the whole part). */
struct image {
	shemb_table *t;
	char *recs;           /* local_rows records, the table's layout */
	bool direct;          /* recs is the table's store */
	bool tiered;          /* no recs: through the tier */
	/* the layout of recs: the table's, or for SHEMB_INT8 rows fp32
	 * rows without state, quantised at the end */
	size_t stride, state_off;
	int dtype;
	bool state;
	uint16_t *covered;    /* per local row: its columns filled */
	const struct shemb__ckpt_manifest *m;
	const char *path;     /* the file being read, for messages */
	/* tiered: the batch's local rows, their records, where each comes
	 * from and which columns */
	int64_t *rows;
	char *stage;
	const unsigned char **src;
	int *lo, *hi;
};

static int corrupt(shemb_ctx *ctx, const char *path, const char *what)
{
	return shemb__fail(ctx, SHEMB_ECORRUPT, "checkpoint file %s: %s",
			   path, what);
}

/* ---- reading ---- */

static int read_all(int fd, void *p, size_t len)
{
	char *at = p;

	while (len > 0) {
		ssize_t n = read(fd, at, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return -1; /* shorter than it should be */
		at += n;
		len -= (size_t)n;
	}
	return 0;
}

int shemb__ckpt_read_manifest(shemb_ctx *ctx, const char *dir,
			      struct shemb__ckpt_manifest *m)
{
	char path[PATH_MAX], why[128];
	unsigned char *bytes;
	struct stat st;
	int fd, err, rc;

	shemb__ckpt_manifest_path(dir, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return shemb__fail(ctx,
				   err == ENOENT ? SHEMB_EINVAL : SHEMB_EIO,
				   "checkpoint: cannot read %s: %s", path,
				   strerror(err));
	}
	if (st.st_size > (1 << 24) || st.st_size < 8) {
		close(fd);
		return corrupt(ctx, path, "not a manifest's size");
	}
	bytes = malloc((size_t)st.st_size);
	if (!bytes) {
		close(fd);
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	}
	err = read_all(fd, bytes, (size_t)st.st_size);
	close(fd);
	if (err) {
		free(bytes);
		return err < 0 ? corrupt(ctx, path, "cut short")
			       : shemb__fail(ctx, SHEMB_EIO, "checkpoint: "
					     "cannot read %s: %s", path,
					     strerror(err));
	}
	rc = shemb__ckpt_manifest_parse(bytes, (size_t)st.st_size, m, why,
					sizeof(why));
	free(bytes);
	return rc == SHEMB_ECORRUPT ? corrupt(ctx, path, why)
	       : rc		    ? shemb__fail(ctx, rc, "no memory")
				    : 0;
}

/* ---- the attributes of the new table ---- */

static void saved_attr(const struct shemb__ckpt_manifest *m,
		       struct shemb_table_attr *a)
{
	shemb_table_attr_init(a);
	a->name = m->name[0] ? m->name : NULL;
	a->rows = (int64_t)m->rows;
	a->dim = (int)m->dim;
	a->dtype = (int)m->dtype;
	a->table_id = m->table_id;
	a->seed = m->seed;
	a->optimizer = (int)m->optimizer;
	a->lr = m->lr;
	a->eps = m->eps;
	a->beta1 = m->beta1;
	a->beta2 = m->beta2;
	a->weight_decay = m->weight_decay;
	a->weight_decay_mode = (int)m->weight_decay_mode;
	a->initial_accumulator = m->initial_accumulator;
}

static int same_shape(shemb_ctx *ctx, const struct shemb_table_attr *a,
		      const struct shemb__ckpt_manifest *m, const char *who)
{
	/* a serving table may store its rows narrower (or wider) */
	if ((uint64_t)a->rows == m->rows && (uint32_t)a->dim == m->dim &&
	    ((uint32_t)a->dtype == m->dtype || a->read_only) &&
	    (uint32_t)a->optimizer == m->optimizer)
		return 0;
	return shemb__fail(ctx, SHEMB_EINVAL, "checkpoint: %s has %lld x %d "
			   "rows of dtype %d and optimizer %d; the checkpoint "
			   "holds %llu x %u of dtype %u and optimizer %u", who,
			   (long long)a->rows, a->dim, a->dtype, a->optimizer,
			   (unsigned long long)m->rows, m->dim, m->dtype,
			   m->optimizer);
}

int shemb__ckpt_same_table(const shemb_table *t,
			   const struct shemb__ckpt_manifest *m)
{
	char who[300];

	snprintf(who, sizeof(who), "table '%s'", t->name);
	return same_shape(t->ctx, &t->attr, m, who);
}

/* The caller's attributes, which must describe the saved table. */
static int given_attr(shemb_ctx *ctx, const struct shemb__ckpt_manifest *m,
		      const struct shemb_table_attr *in,
		      struct shemb_table_attr *a)
{
	shemb_table_attr_init(a);
	if (shemb__copy_sized(a, sizeof(*a), in, SHEMB__TABLE_ATTR_V1_SIZE))
		return shemb__fail(ctx, SHEMB_EINVAL, "attr->size %zu is not "
				   "a struct shemb_table_attr this library "
				   "knows", in->size);
	return same_shape(ctx, a, m, "attr");
}

/* ---- one record into the image ---- */

static size_t esize(uint32_t dtype)
{
	return dtype == SHEMB_F32 ? 4 : 2;
}

/* n values of dtype `from` into dtype `to`: copied, or converted
 * exactly (to a narrower type: rounded to nearest even), for a serving
 * table stored narrower than it was trained. */
static void take_values(uint32_t from, const unsigned char *src, int to,
			char *dst, int n)
{
	if ((int)from == to) {
		memcpy(dst, src, (size_t)n * esize(from));
		return;
	}
	for (int i = 0; i < n; i++) {
		float f;
		uint16_t h;

		if (from == SHEMB_F32) {
			memcpy(&f, src + 4 * i, 4);
		} else {
			memcpy(&h, src + 2 * i, 2);
			f = from == SHEMB_F16 ? shemb__f16_to_f32(h)
					      : shemb__bf16_to_f32(h);
		}
		if (to == SHEMB_F32) {
			memcpy(dst + 4 * i, &f, 4);
			continue;
		}
		h = to == SHEMB_F16 ? shemb__f32_to_f16(f)
				    : shemb__f32_to_bf16(f);
		memcpy(dst + 2 * i, &h, 2);
	}
}

/* The state of columns [lo, hi) of a record whose state (fp32 values,
 * little-endian) covers ncols columns from c0, into one covering mc
 * columns from m0: Adagrad keeps one value per column, Adam two runs of
 * them (first moments, then second), row-wise Adagrad one per row. */
static void take_state(int opt, const unsigned char *from, int c0,
		       int ncols, char *to, int m0, int mc, int lo, int hi)
{
	size_t n = (size_t)(hi - lo) * 4;

	switch (opt) {
	case SHEMB_OPT_ADAGRAD:
		memcpy(to + 4 * (lo - m0), from + 4 * (lo - c0), n);
		break;
	case SHEMB_OPT_ADAM:
		memcpy(to + 4 * (lo - m0), from + 4 * (lo - c0), n);
		memcpy(to + 4 * (mc + lo - m0), from + 4 * (ncols + lo - c0),
		       n);
		break;
	case SHEMB_OPT_ROWWISE_ADAGRAD:
		memcpy(to, from, 4);
		break;
	default:
		break;
	}
}

/* The local row record rec of file f goes to on this rank, with its
 * columns [*lo, *hi) there, counted as filled; *l -1: none of it. */
static int place_record(struct image *im, const struct shemb__ckpt_file *f,
			const unsigned char *rec, int64_t *l, int *lo,
			int *hi)
{
	shemb_table *t = im->t;
	const struct shemb__shard *sh = &t->shard;
	int64_t id;
	int owner;

	*l = -1;
	memcpy(&id, rec, 8); /* little-endian host */
	if (id < 0 || id >= t->attr.rows)
		return corrupt(t->ctx, im->path, "a record's id is out of "
			       "range");
	owner = shemb__shard_owner(sh, id);
	*lo = sh->col0 > (int)f->col0 ? sh->col0 : (int)f->col0;
	*hi = sh->col0 + sh->ncols < (int)(f->col0 + f->ncols)
		      ? sh->col0 + sh->ncols
		      : (int)(f->col0 + f->ncols);
	if ((owner >= 0 && owner != sh->rank) || *lo >= *hi)
		return 0;
	*l = shemb__shard_local(sh, id);
	if (f->generation != im->m->files[0].generation)
		return 0; /* a later layer: replaces what the first gave */
	if (im->covered[*l] + (*hi - *lo) > sh->ncols)
		return corrupt(t->ctx, im->path, "a row is saved twice");
	im->covered[*l] += (uint16_t)(*hi - *lo);
	return 0;
}

/* Columns [lo, hi) of record rec of file f (values and state) into the
 * table's record at `to`. */
static void apply_record(const struct image *im,
			 const struct shemb__ckpt_file *f,
			 const unsigned char *rec, char *to, int lo, int hi)
{
	const shemb_table *t = im->t;
	const struct shemb__shard *sh = &t->shard;
	size_t es = esize(im->m->dtype), ts = esize((uint32_t)im->dtype);

	take_values(im->m->dtype, rec + 8 + (size_t)(lo - (int)f->col0) * es,
		    im->dtype, to + (size_t)(lo - sh->col0) * ts, hi - lo);
	if (im->state)
		take_state(t->attr.optimizer, rec + 8 + (size_t)f->ncols * es,
			   (int)f->col0, (int)f->ncols, to + im->state_off,
			   sh->col0, sh->ncols, lo, hi);
}

/* n records of file f at buf, into the image or through the tier: the
 * batch's rows read, merged, written back (a row a column-wise file
 * fills partly keeps what other files gave it). */
static int take_records(struct image *im, const struct shemb__ckpt_file *f,
			const unsigned char *buf, size_t rb, int64_t n)
{
	shemb_table *t = im->t;
	int64_t k = 0, l;
	int rc = 0, lo, hi;

	for (int64_t i = 0; !rc && i < n; i++) {
		const unsigned char *rec = buf + (size_t)i * rb;

		rc = place_record(im, f, rec, &l, &lo, &hi);
		if (rc || l < 0)
			continue;
		if (!im->tiered) {
			apply_record(im, f, rec,
				     im->recs + (size_t)l * im->stride, lo,
				     hi);
			continue;
		}
		im->rows[k] = l;
		im->src[k] = rec;
		im->lo[k] = lo;
		im->hi[k++] = hi;
	}
	if (rc || !im->tiered || k == 0)
		return rc;
	rc = shemb__tier_records(t, k, im->rows, im->stage, false, false);
	for (int64_t i = 0; !rc && i < k; i++)
		apply_record(im, f, im->src[i],
			     im->stage + (size_t)i * t->store.stride,
			     im->lo[i], im->hi[i]);
	if (!rc)
		rc = shemb__tier_records(t, k, im->rows, im->stage, true,
					 false);
	return rc ? shemb__fail(t->ctx, rc, "checkpoint: writing the rows of "
				"table '%s' through its tier failed: %s",
				t->name, shemb_strerror(rc))
		  : 0;
}

/* ---- one shard file ---- */

static int check_header(struct image *im, int i, const unsigned char *head)
{
	const struct shemb__ckpt_file *f = &im->m->files[i];
	struct shemb__ckpt_shard s;
	char why[96];

	if (shemb__ckpt_shard_parse(head, &s, why, sizeof(why)))
		return corrupt(im->t->ctx, im->path, why);
	if (s.rank != f->rank || s.generation != f->generation ||
	    s.nrecords != f->nrecords || s.rows != im->m->rows ||
	    s.col0 != f->col0 || s.ncols != f->ncols ||
	    s.dtype != im->m->dtype || s.nstate != f->nstate ||
	    s.dim != im->m->dim ||
	    f->nstate != (uint32_t)shemb__opt_state_floats(
				 (int)im->m->optimizer, (int)f->ncols))
		return corrupt(im->t->ctx, im->path, "its header does not "
			       "match the MANIFEST");
	return 0;
}

static int read_records(struct image *im, int i, int fd, uint32_t *crc)
{
	const struct shemb__ckpt_file *f = &im->m->files[i];
	size_t rb = shemb__ckpt_record_bytes(f->ncols, im->m->dtype,
					     f->nstate);
	uint64_t pass = (uint64_t)shemb__ckpt_pass(rb + im->t->store.stride);
	unsigned char *buf = malloc((size_t)pass * rb);
	int rc = buf ? 0 : shemb__fail(im->t->ctx, SHEMB_ENOMEM, "no memory");

	for (uint64_t r0 = 0; !rc && r0 < f->nrecords; r0 += pass) {
		uint64_t n = f->nrecords - r0 < pass ? f->nrecords - r0 : pass;
		int err = read_all(fd, buf, (size_t)n * rb);

		if (err)
			rc = err < 0 ? corrupt(im->t->ctx, im->path,
					       "cut short")
				     : shemb__fail(im->t->ctx, SHEMB_EIO,
						   "checkpoint: cannot read "
						   "%s: %s", im->path,
						   strerror(err));
		if (!rc)
			*crc = shemb__crc32c(*crc, buf, (size_t)n * rb);
		if (!rc)
			rc = take_records(im, f, buf, rb, (int64_t)n);
	}
	free(buf);
	return rc;
}

static int read_shard(struct image *im, const char *dir, int i)
{
	const struct shemb__ckpt_file *f = &im->m->files[i];
	unsigned char head[SHEMB__CKPT_HEADER];
	char name[64], path[PATH_MAX];
	struct stat st;
	uint32_t crc;
	int fd, rc, err;

	shemb__ckpt_shard_name(f->generation, f->rank, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	im->path = path;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return corrupt(im->t->ctx, path, "missing (the MANIFEST names "
			       "it)");
	if (fd < 0 || fstat(fd, &st)) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return shemb__fail(im->t->ctx, SHEMB_EIO, "checkpoint: cannot "
				   "read %s: %s", path, strerror(err));
	}
	if ((uint64_t)st.st_size != f->bytes) {
		close(fd);
		return corrupt(im->t->ctx, path, "not the size the MANIFEST "
			       "gives");
	}
	err = read_all(fd, head, sizeof(head));
	rc = err < 0   ? corrupt(im->t->ctx, path, "cut short")
	     : err > 0 ? shemb__fail(im->t->ctx, SHEMB_EIO, "checkpoint: "
				     "cannot read %s: %s", path,
				     strerror(err))
		       : check_header(im, i, head);
	crc = shemb__crc32c(0, head, sizeof(head));
	if (!rc)
		rc = read_records(im, i, fd, &crc);
	close(fd);
	if (!rc && crc != f->crc)
		rc = corrupt(im->t->ctx, path, "its checksum does not match");
	return rc;
}

/* ---- this rank's part ---- */

/* Whether file f holds columns this rank holds (a file no rank reads
 * gives none to any: the files tile the columns). */
static bool gives_columns(const struct shemb__ckpt_file *f,
			  const struct shemb__shard *sh)
{
	return (int)f->col0 < sh->col0 + sh->ncols &&
	       sh->col0 < (int)(f->col0 + f->ncols);
}

static int make_batch(struct image *im)
{
	/* no fewer than a pass of any file (read_records) */
	size_t n = (size_t)shemb__ckpt_pass(im->t->store.stride);

	im->rows = malloc(n * sizeof(*im->rows));
	im->stage = malloc(n * im->t->store.stride);
	im->src = malloc(n * sizeof(*im->src));
	im->lo = malloc(n * sizeof(int));
	im->hi = malloc(n * sizeof(int));
	return im->rows && im->stage && im->src && im->lo && im->hi ? 0 : -1;
}

static void image_free(struct image *im)
{
	if (!im->direct)
		free(im->recs);
	free(im->covered);
	free(im->rows);
	free(im->stage);
	free(im->src);
	free(im->lo);
	free(im->hi);
}

/* Into im->recs when set (host memory of the table's layout), through
 * the tier when im->tiered, else into a new image. */
static int fill_image(struct image *im, const char *dir)
{
	shemb_table *t = im->t;
	int64_t n = t->shard.local_rows;
	int rc = 0;

	im->direct = im->recs != NULL;
	if (im->tiered)
		rc = make_batch(im);
	else if (!im->direct)
		im->recs = calloc((size_t)n + 1, im->stride);
	im->covered = calloc((size_t)n + 1, sizeof(*im->covered));
	if (rc || (!im->tiered && !im->recs) || !im->covered)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "checkpoint: no "
				   "memory for this rank's part of table '%s'",
				   t->name);
	for (uint32_t i = 0; !rc && i < im->m->nfiles; i++)
		if (n > 0 && gives_columns(&im->m->files[i], &t->shard))
			rc = read_shard(im, dir, (int)i);
	for (int64_t l = 0; !rc && l < n; l++)
		if (im->covered[l] != t->shard.ncols)
			rc = shemb__fail(t->ctx, SHEMB_ECORRUPT, "checkpoint "
					 "%s: row %lld of table '%s' (or some "
					 "of its columns) is in no shard file",
					 dir,
					 (long long)shemb__shard_global(
						 &t->shard, l),
					 t->name);
	return rc;
}

/* Records of t's layout, or fp32 rows for SHEMB_INT8. */
static struct image image_of(shemb_table *t,
			     const struct shemb__ckpt_manifest *m)
{
	bool int8 = t->attr.dtype == SHEMB_INT8;

	return (struct image){
		.t = t, .m = m,
		.stride = int8 ? (size_t)t->shard.ncols * 4 : t->store.stride,
		.state_off = t->store.state_off,
		.dtype = int8 ? SHEMB_F32 : t->attr.dtype,
		.state = !int8,
	};
}

/* An SHEMB_INT8 store gets the fp32 rows quantised. */
static int quantize_into(struct image *im, struct shemb__store *store)
{
	shemb_table *t = im->t;
	int64_t n = t->shard.local_rows;
	int64_t *ids = malloc(((size_t)n + 1) * sizeof(*ids));
	int rc;

	if (!ids)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	for (int64_t l = 0; l < n; l++)
		ids[l] = l;
	rc = t->ctx->mem->write_rows(t->ctx->be, store, n, ids, im->recs,
				     SHEMB_F32, NULL);
	free(ids);
	return rc ? shemb__fail(t->ctx, rc, "checkpoint: quantising the rows "
				"of table '%s' failed", t->name)
		  : 0;
}

/* A store of host memory is filled in place; one in device memory
 * gets the records from a host image, an SHEMB_INT8 one its rows
 * quantised from an fp32 image. */
int shemb__ckpt_read_into(shemb_table *t, const char *dir,
			  const struct shemb__ckpt_manifest *m,
			  struct shemb__store *store)
{
	struct image im = image_of(t, m);
	int rc;

	if (!store->on_device && im.state)
		im.recs = store->base;
	rc = fill_image(&im, dir);
	if (!rc && !im.state) {
		rc = quantize_into(&im, store);
	} else if (!rc && !im.direct) {
		struct shemb__store h = *store;

		h.base = im.recs;
		h.on_device = 0;
		rc = t->ctx->mem->copy_records(t->ctx->be, store, NULL, &h,
					       NULL, t->shard.local_rows);
		if (rc)
			rc = shemb__fail(t->ctx, rc, "checkpoint: copying the "
					 "rows of table '%s' failed", t->name);
	}
	image_free(&im);
	return rc;
}

/* Behind a device tier, through it; else straight into the store. */
static int load_rows(shemb_table *t, const char *dir,
		     const struct shemb__ckpt_manifest *m)
{
	struct image im = image_of(t, m);
	int rc;

	im.tiered = true;

	if (!shemb__tiered(t)) {
		rc = shemb__ckpt_read_into(t, dir, m, &t->store);
	} else {
		rc = fill_image(&im, dir);
		image_free(&im);
	}
	if (!rc)
		t->step = m->step;
	return rc;
}

/* ---- the collective ---- */

static int all_ok(shemb_ctx *ctx, int rc, const char *what)
{
	return shemb__distributed(ctx) ? shemb__dist_all_ok(ctx, rc, what)
				       : rc;
}

/* Every rank read the same MANIFEST: not one before a save and one
 * after. */
static int same_generation(shemb_ctx *ctx, uint64_t gen)
{
	int world = ctx->attr.world_size, rc;
	uint64_t *all;

	if (!shemb__distributed(ctx))
		return 0;
	all = calloc((size_t)world, 8);
	rc = shemb__allgather_word(ctx, gen, all);
	for (int r = 0; !rc && r < world; r++)
		if (all[r] != gen)
			rc = shemb__fail(ctx, SHEMB_EIO, "checkpoint: the "
					 "ranks read different MANIFESTs (a "
					 "save replaced it meanwhile); try "
					 "again");
	free(all);
	return rc;
}

static int prepare(shemb_ctx *ctx, const char *dir,
		   const struct shemb_table_attr *attr, shemb_table **table,
		   struct shemb__ckpt_manifest *m, struct shemb_table_attr *a)
{
	int rc;

	if (table)
		*table = NULL;
	if (!dir || !table)
		return shemb__fail(ctx, SHEMB_EINVAL, "dir or table is NULL");
	if (strlen(dir) > PATH_MAX - 64)
		return shemb__fail(ctx, SHEMB_EINVAL, "dir is too long");
	rc = shemb__ckpt_read_manifest(ctx, dir, m);
	if (!rc && attr)
		rc = given_attr(ctx, m, attr, a);
	else if (!rc)
		saved_attr(m, a);
	/* every row comes from the checkpoint: zeros are the cheapest
	 * start (hashing initial values took as long as the load) */
	a->init = SHEMB_INIT_ZEROS;
	return rc;
}

SHEMB_API int shemb_table_load(shemb_ctx *ctx, const char *dir,
			       const struct shemb_table_attr *attr,
			       shemb_table **table)
{
	struct shemb__ckpt_manifest m = { 0 };
	struct shemb_table_attr a;
	shemb_table *t = NULL;
	int rc;

	if (!ctx) {
		if (table)
			*table = NULL;
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	}
	rc = shemb__stepq_drain(ctx); /* collective: keeps its place */
	if (rc)
		return rc;
	rc = prepare(ctx, dir, attr, table, &m, &a);
	rc = all_ok(ctx, rc, "reading the checkpoint's MANIFEST");
	if (!rc)
		rc = same_generation(ctx, m.generation);
	if (!rc)
		rc = shemb_table_create(ctx, &a, &t);
	if (!rc)
		rc = all_ok(ctx, load_rows(t, dir, &m),
			    "loading its part of the checkpoint");
	if (rc)
		shemb_table_destroy(t);
	else
		*table = t;
	shemb__ckpt_manifest_free(&m);
	return rc;
}
