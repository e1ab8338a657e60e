/*
 * ckpt.h - the checkpoint of a table (shemb-checkpoint(5)): a directory
 * with one MANIFEST and one shard file per rank that saved it, all
 * little-endian, the shard files named by the save's generation so that
 * a new save never overwrites the files the current MANIFEST names.
 */
#ifndef SHEMB_CKPT_H
#define SHEMB_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHEMB__CKPT_VERSION 2
#define SHEMB__CKPT_MAX_NAME 255
#define SHEMB__CKPT_HEADER 64      /* bytes of a shard file's header */
#define SHEMB__CKPT_MAX_FILES 65536

/* One shard file as the MANIFEST lists it: written by rank `rank` of
 * the save of `generation`.  The files of one generation are a layer;
 * the first layer holds every row, each later one (an incremental save)
 * the rows that changed since the layer before, which replace them. */
struct shemb__ckpt_file {
	uint64_t generation;
	uint32_t rank, col0, ncols, nstate;
	uint64_t nrecords, bytes;
	uint32_t crc;
};

struct shemb__ckpt_manifest {
	uint64_t generation;  /* of the save that wrote it (its last layer) */
	uint64_t rows;
	uint32_t dim, dtype, optimizer, weight_decay_mode;
	int64_t table_id;
	uint64_t seed, step;
	float lr, eps, beta1, beta2, weight_decay, initial_accumulator;
	uint32_t shard, world;
	char name[SHEMB__CKPT_MAX_NAME + 1];
	uint32_t nfiles;
	struct shemb__ckpt_file *files;
};

/* One shard file's header. */
struct shemb__ckpt_shard {
	uint32_t rank;
	uint64_t generation, nrecords, rows;
	uint32_t col0, ncols, dtype, nstate, dim;
};

/* The manifest as bytes (*out malloc'ed), or its parse: 0, or
 * SHEMB_ECORRUPT with what is wrong in why. */
int shemb__ckpt_manifest_encode(const struct shemb__ckpt_manifest *m,
				unsigned char **out, size_t *len);
int shemb__ckpt_manifest_parse(const unsigned char *p, size_t len,
			       struct shemb__ckpt_manifest *m, char *why,
			       size_t why_len);
void shemb__ckpt_manifest_free(struct shemb__ckpt_manifest *m);

void shemb__ckpt_shard_encode(const struct shemb__ckpt_shard *s,
			      unsigned char out[SHEMB__CKPT_HEADER]);
int shemb__ckpt_shard_parse(const unsigned char p[SHEMB__CKPT_HEADER],
			    struct shemb__ckpt_shard *s, char *why,
			    size_t why_len);

/* Bytes of one record: the id, ncols values of dtype, nstate floats. */
static inline size_t shemb__ckpt_record_bytes(uint32_t ncols, uint32_t dtype,
					      uint32_t nstate)
{
	return 8 + (size_t)ncols * (dtype == 0 ? 4 : 2) + 4 * (size_t)nstate;
}

/* Records per pass of a save or load: 4096, or fewer of large records,
 * so that a pass takes about 8 MiB. */
static inline int64_t shemb__ckpt_pass(size_t record_bytes)
{
	size_t n = ((size_t)8 << 20) / (record_bytes ? record_bytes : 1);

	return n < 1 ? 1 : n > 4096 ? 4096 : (int64_t)n;
}

/* dir/MANIFEST and the shard file of (generation, rank) in dir. */
void shemb__ckpt_manifest_path(const char *dir, char *out, size_t len);
void shemb__ckpt_shard_name(uint64_t generation, uint32_t rank, char *out,
			    size_t len);

/* Files: write all of len bytes; fsync a directory. 0 or an errno. */
int shemb__ckpt_write_all(int fd, const void *p, size_t len);
int shemb__ckpt_sync_dir(const char *dir);

#endif
