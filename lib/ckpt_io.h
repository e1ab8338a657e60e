/*
 * ckpt_io.h - reading a checkpoint into a table's rows, shared by
 * shemb_table_load (ckpt_load.c) and shemb_table_reload (serve.c).
 */
#ifndef SHEMB_CKPT_IO_H
#define SHEMB_CKPT_IO_H

#include "lib/ckpt.h"
#include "lib/internal.h"

/* ckpt_save.c: local rows of t changed (under the table's exclusive
 * lock), for the next incremental save; and at destroy. */
void shemb__ckpt_touch(shemb_table *t, int64_t n, const int64_t *rows);
void shemb__ckpt_forget(shemb_table *t);

/* dir/MANIFEST read and checked (detail recorded on failure). */
int shemb__ckpt_read_manifest(shemb_ctx *ctx, const char *dir,
			      struct shemb__ckpt_manifest *m);
/* SHEMB_EINVAL unless the checkpoint holds t's rows, dim, dtype and
 * optimizer. */
int shemb__ckpt_same_table(const shemb_table *t,
			   const struct shemb__ckpt_manifest *m);
/* This rank's part of the checkpoint, every file verified, into store:
 * a store of t's layout (t's own, or a new one of the same shape), not
 * behind a device tier. */
int shemb__ckpt_read_into(shemb_table *t, const char *dir,
			  const struct shemb__ckpt_manifest *m,
			  struct shemb__store *store);

#endif
