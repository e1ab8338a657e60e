/*
 * tier_cold.c - the cold tier: a table's rows in a file on local disk.
 *
 * Record r of the shard is at offset r * stride, as in host memory.  The
 * file is read and written with pread/pwrite, not through a mapping: a
 * read past the end of a truncated mapping raises SIGBUS, which a library
 * cannot turn into an error without taking the host's signal handlers;
 * pread and pwrite report a short transfer or EIO, which fail the call
 * with SHEMB_EIO.  The page cache keeps the hot part of the file in host
 * memory.
 */
#define _GNU_SOURCE
#include "lib/tier_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/rowinit.h"

#define INIT_CHUNK_ROWS 4096

/* err 0: the file ended before the record */
static int io_fail(shemb_table *t, const struct shemb__cold *c,
		   const char *what, int64_t row, int err)
{
	if (err == 0)
		return shemb__fail(t->ctx, SHEMB_EIO, "table '%s': %s row %lld "
				   "of '%s': the file ends early (truncated?)",
				   t->name, what, (long long)row, c->path);
	return shemb__fail(t->ctx, SHEMB_EIO, "table '%s': %s row %lld of "
			   "'%s': %s", t->name, what, (long long)row, c->path,
			   strerror(err));
}

/* The records of rows [row, row + n) between memory and the file, whole
 * or failed (naming the row where it failed). */
static int transfer(shemb_table *t, const struct shemb__cold *c,
		    int64_t row, int64_t n, char *records, bool write)
{
	size_t stride = t->store.stride, len = (size_t)n * stride, done = 0;
	off_t off = (off_t)row * (off_t)stride;

	while (done < len) {
		ssize_t got = write ? pwrite(c->fd, records + done, len - done,
					     off + (off_t)done)
				    : pread(c->fd, records + done, len - done,
					    off + (off_t)done);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return io_fail(t, c, write ? "writing" : "reading",
				       row + (int64_t)(done / stride),
				       got < 0 ? errno
					       : write ? ENOSPC : 0);
		done += (size_t)got;
	}
	return 0;
}

int shemb__cold_read(shemb_table *t, const struct shemb__cold *c,
		     int64_t row, void *record)
{
	return transfer(t, c, row, 1, record, false);
}

int shemb__cold_write(shemb_table *t, const struct shemb__cold *c,
		      int64_t row, const void *record)
{
	return transfer(t, c, row, 1, (char *)record, true);
}

static char *file_name(const shemb_table *t)
{
	const char *base = t->attr.cold_path;
	size_t len = strlen(base) + 16;
	char *p = malloc(len);

	if (!p)
		return NULL;
	if (shemb__distributed(t->ctx))
		snprintf(p, len, "%s.%d", base, t->ctx->attr.rank);
	else
		snprintf(p, len, "%s", base);
	return p;
}

/* Initial records, a chunk at a time, as init_rows makes them in memory,
 * each chunk in one write: a write per record took 0.49 s for a table of
 * a million rows of 16 floats. */
static int write_initial(shemb_table *t, struct shemb__cold *c,
			 const struct shemb__init_spec *spec)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__store s = t->store;
	int64_t chunk = t->store.rows < INIT_CHUNK_ROWS ? t->store.rows
							: INIT_CHUNK_ROWS;
	int rc = 0;

	s.bytes = (size_t)chunk * s.stride;
	s.base = ctx->mem->scratch_alloc(ctx->be, s.bytes);
	if (!s.base)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	for (int64_t r0 = 0; !rc && r0 < t->store.rows; r0 += chunk) {
		struct shemb__init_spec sp = *spec;

		s.rows = t->store.rows - r0 < chunk ? t->store.rows - r0
						    : chunk;
		sp.row_base = r0;
		rc = ctx->mem->init_rows(ctx->be, &s, &sp);
		if (!rc)
			rc = transfer(t, c, r0, s.rows, s.base, true);
	}
	ctx->mem->scratch_free(ctx->be, s.base,
			       (size_t)chunk * t->store.stride);
	return rc;
}

/*
 * Open the file for this table alone: not through a symbolic link, and
 * locked, so that a second table (of this process or another) given the
 * same path is refused instead of sharing, and truncating, the file.
 */
static int open_own(shemb_table *t, struct shemb__cold *c)
{
	struct stat st;

	c->fd = open(c->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		     0600);
	if (c->fd < 0)
		return shemb__fail(t->ctx, SHEMB_EIO, "table '%s': cannot "
				   "create its cold tier file '%s': %s",
				   t->name, c->path, strerror(errno));
	if (flock(c->fd, LOCK_EX | LOCK_NB))
		return shemb__fail(t->ctx, SHEMB_EINVAL, "table '%s': its "
				   "cold tier file '%s' is in use (by another "
				   "table or process)", t->name, c->path);
	c->owner = true;
	if (fstat(c->fd, &st) || ftruncate(c->fd, 0))
		return shemb__fail(t->ctx, SHEMB_EIO, "table '%s': cannot "
				   "empty its cold tier file '%s': %s",
				   t->name, c->path, strerror(errno));
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return 0;
}

/* Create the file with room for every record (so a full disk fails
 * here, not in a step) and the initial rows in it. */
int shemb__cold_create(shemb_table *t, struct shemb__cold *c,
		       const struct shemb__init_spec *spec)
{
	uint64_t bytes = (uint64_t)t->store.rows * t->store.stride;
	int err;

	c->path = file_name(t);
	if (!c->path)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	err = open_own(t, c);
	if (err)
		return err;
	err = posix_fallocate(c->fd, 0, (off_t)bytes);
	if (err && err != EOPNOTSUPP && err != EINVAL)
		return shemb__fail(t->ctx, SHEMB_EIO, "table '%s': cannot "
				   "reserve %llu bytes for '%s': %s", t->name,
				   (unsigned long long)bytes, c->path,
				   strerror(err));
	return write_initial(t, c, spec);
}

/* The file goes with the table, unless the path names another file by
 * now. */
void shemb__cold_close(struct shemb__cold *c)
{
	struct stat st;

	if (c->fd >= 0) {
		if (c->owner && !lstat(c->path, &st) && st.st_dev == c->dev &&
		    st.st_ino == c->ino)
			unlink(c->path);
		close(c->fd);
	}
	c->fd = -1;
	free(c->path);
	c->path = NULL;
}
