/*
 * ckpt_format.c - the bytes of a checkpoint's MANIFEST and of a shard
 * file's header (shemb-checkpoint(5)), little-endian whatever the host.
 * The parsers take any bytes: they are fuzzed.
 */
#include "lib/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/crc32c.h"
#include "shemb.h"

#define MANIFEST_MAGIC "SHEMBCKP"
#define SHARD_MAGIC "SHEMBSHD"
#define FIXED 108     /* the manifest's bytes before its name */

/* Rows, ids and optimizer state are copied as the host holds them. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints are little-endian: this host is not"
#endif
#define FILE_ENTRY 48 /* bytes of one file's entry */

/* ---- little-endian fields ---- */

struct cursor {
	unsigned char *w;       /* writing, or */
	const unsigned char *r; /* reading */
	size_t at, len;
	bool short_;            /* a read past the end */
};

static void put(struct cursor *c, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		c->w[c->at + (size_t)i] = (unsigned char)(v >> (8 * i));
	c->at += (size_t)bytes;
}

static uint64_t get(struct cursor *c, int bytes)
{
	uint64_t v = 0;

	if (c->at + (size_t)bytes > c->len) {
		c->short_ = true;
		return 0;
	}
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)c->r[c->at + (size_t)i] << (8 * i);
	c->at += (size_t)bytes;
	return v;
}

static void put_f32(struct cursor *c, float f)
{
	uint32_t v;

	memcpy(&v, &f, 4);
	put(c, v, 4);
}

static float get_f32(struct cursor *c)
{
	uint32_t v = (uint32_t)get(c, 4);
	float f;

	memcpy(&f, &v, 4);
	return f;
}

/* ---- MANIFEST ---- */

static size_t manifest_bytes(const struct shemb__ckpt_manifest *m)
{
	return FIXED + strlen(m->name) + 4 + (size_t)m->nfiles * FILE_ENTRY +
	       4;
}

int shemb__ckpt_manifest_encode(const struct shemb__ckpt_manifest *m,
				unsigned char **out, size_t *len)
{
	struct cursor c = { .len = manifest_bytes(m) };
	size_t nlen = strlen(m->name);

	c.w = malloc(c.len);
	if (!c.w)
		return SHEMB_ENOMEM;
	memcpy(c.w, MANIFEST_MAGIC, 8);
	c.at = 8;
	put(&c, SHEMB__CKPT_VERSION, 4);
	put(&c, 0, 4); /* flags */
	put(&c, m->generation, 8);
	put(&c, m->rows, 8);
	put(&c, m->dim, 4);
	put(&c, m->dtype, 4);
	put(&c, m->optimizer, 4);
	put(&c, m->weight_decay_mode, 4);
	put(&c, (uint64_t)m->table_id, 8);
	put(&c, m->seed, 8);
	put(&c, m->step, 8);
	put_f32(&c, m->lr);
	put_f32(&c, m->eps);
	put_f32(&c, m->beta1);
	put_f32(&c, m->beta2);
	put_f32(&c, m->weight_decay);
	put_f32(&c, m->initial_accumulator);
	put(&c, m->shard, 4);
	put(&c, m->world, 4);
	put(&c, nlen, 4);
	memcpy(c.w + c.at, m->name, nlen);
	c.at += nlen;
	put(&c, m->nfiles, 4);
	for (uint32_t i = 0; i < m->nfiles; i++) {
		const struct shemb__ckpt_file *f = &m->files[i];

		put(&c, f->generation, 8);
		put(&c, f->rank, 4);
		put(&c, f->col0, 4);
		put(&c, f->ncols, 4);
		put(&c, f->nstate, 4);
		put(&c, f->nrecords, 8);
		put(&c, f->bytes, 8);
		put(&c, f->crc, 4);
		put(&c, 0, 4); /* reserved */
	}
	put(&c, shemb__crc32c(0, c.w, c.at), 4);
	*out = c.w;
	*len = c.at;
	return 0;
}

static int corrupt(char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s", what);
	return SHEMB_ECORRUPT;
}

/* The fixed fields, checked for what a table can be. */
static int parse_fixed(struct cursor *c, struct shemb__ckpt_manifest *m,
		       char *why, size_t wl)
{
	uint32_t version, nlen;

	if (c->len < 8 || memcmp(c->r, MANIFEST_MAGIC, 8))
		return corrupt(why, wl, "not a libshemb checkpoint manifest");
	c->at = 8;
	version = (uint32_t)get(c, 4);
	if (version != SHEMB__CKPT_VERSION)
		return corrupt(why, wl, "unknown format version");
	if (get(c, 4)) /* flags: none yet */
		return corrupt(why, wl, "unknown manifest flags");
	m->generation = get(c, 8);
	m->rows = get(c, 8);
	m->dim = (uint32_t)get(c, 4);
	m->dtype = (uint32_t)get(c, 4);
	m->optimizer = (uint32_t)get(c, 4);
	m->weight_decay_mode = (uint32_t)get(c, 4);
	m->table_id = (int64_t)get(c, 8);
	m->seed = get(c, 8);
	m->step = get(c, 8);
	m->lr = get_f32(c);
	m->eps = get_f32(c);
	m->beta1 = get_f32(c);
	m->beta2 = get_f32(c);
	m->weight_decay = get_f32(c);
	m->initial_accumulator = get_f32(c);
	m->shard = (uint32_t)get(c, 4);
	m->world = (uint32_t)get(c, 4);
	nlen = (uint32_t)get(c, 4);
	if (c->short_ || nlen > SHEMB__CKPT_MAX_NAME ||
	    c->at + nlen > c->len)
		return corrupt(why, wl, "manifest cut short");
	if (memchr(c->r + c->at, 0, nlen))
		return corrupt(why, wl, "a NUL inside the table's name");
	memcpy(m->name, c->r + c->at, nlen);
	m->name[nlen] = 0;
	c->at += nlen;
	if (m->rows == 0 || m->rows > SHEMB_MAX_ROWS || m->dim == 0 ||
	    m->dim > SHEMB_MAX_DIM || m->dtype > SHEMB_BF16 ||
	    m->optimizer > SHEMB_OPT_ADAM || m->weight_decay_mode > 1 ||
	    m->shard < SHEMB_SHARD_ROW || m->shard > SHEMB_SHARD_REPLICATED ||
	    m->world == 0 || m->world > SHEMB__CKPT_MAX_FILES)
		return corrupt(why, wl, "impossible table attributes");
	return 0;
}

/*
 * The checks below take time linear in the files (and the row's width),
 * with sets of bits for the ranks and columns seen, and one sort of the
 * layers' generations: compared pair by pair, a MANIFEST of 65536 layers
 * took 2.8 s to check.
 */
#define WORD(i) ((i) / 64)
#define BIT(i) ((uint64_t)1 << ((i) % 64))

/* Columns [c0, c0 + n) of the row taken in seen[], false if one was. */
static bool take_columns(uint64_t *seen, uint32_t c0, uint32_t n)
{
	for (uint32_t c = c0; c < c0 + n; c++) {
		if (seen[WORD(c)] & BIT(c))
			return false;
		seen[WORD(c)] |= BIT(c);
	}
	return true;
}

/* In the layer f[0 .. n): each rank's file at most once, and the
 * files' columns either all of every row (row parts) or slices that
 * tile the row exactly once.  ranks[] is all clear, and left so. */
static bool layer_covers(const struct shemb__ckpt_file *f, uint32_t n,
			 uint32_t dim, uint64_t *ranks)
{
	uint64_t cols[SHEMB_MAX_DIM / 64] = { 0 }, ncols = 0;
	bool whole = true, once = true;
	uint32_t i;

	for (i = 0; i < n && once; i++) {
		once = !(ranks[WORD(f[i].rank)] & BIT(f[i].rank));
		ranks[WORD(f[i].rank)] |= BIT(f[i].rank);
		whole &= f[i].col0 == 0 && f[i].ncols == dim;
	}
	while (i-- > 0)
		ranks[WORD(f[i].rank)] &= ~BIT(f[i].rank);
	if (!once || whole)
		return once;
	/* slices: their widths add up to the row's, none overlapping */
	for (i = 0; i < n; i++) {
		ncols += f[i].ncols;
		if (ncols > dim || !take_columns(cols, f[i].col0, f[i].ncols))
			return false;
	}
	return ncols == dim;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* No two of gens[0 .. n) alike (sorts them). */
static bool all_differ(uint64_t *gens, uint32_t n)
{
	qsort(gens, n, sizeof(*gens), by_value);
	for (uint32_t i = 1; i < n; i++)
		if (gens[i] == gens[i - 1])
			return false;
	return true;
}

/* The entries are layers, each a run of one generation seen in no
 * layer before, each covering the table once; the last one is the
 * MANIFEST's own generation.  0, 1 where they are not, or SHEMB_ENOMEM. */
static int files_cover(const struct shemb__ckpt_manifest *m)
{
	const struct shemb__ckpt_file *f = m->files;
	uint64_t *ranks = calloc(SHEMB__CKPT_MAX_FILES / 64, sizeof(*ranks));
	uint64_t *gens = malloc(m->nfiles * sizeof(*gens));
	uint32_t layers = 0;
	int rc = 0;

	if (!ranks || !gens)
		rc = SHEMB_ENOMEM;
	for (uint32_t i = 0, n; !rc && i < m->nfiles; i += n) {
		for (n = 1; i + n < m->nfiles &&
			    f[i + n].generation == f[i].generation;
		     n++)
			;
		gens[layers++] = f[i].generation;
		if (!layer_covers(f + i, n, m->dim, ranks))
			rc = 1;
	}
	if (!rc && (!all_differ(gens, layers) ||
		    f[m->nfiles - 1].generation != m->generation))
		rc = 1;
	free(ranks);
	free(gens);
	return rc;
}

static int parse_files(struct cursor *c, struct shemb__ckpt_manifest *m,
		       char *why, size_t wl)
{
	m->nfiles = (uint32_t)get(c, 4);
	if (c->short_ || m->nfiles == 0 ||
	    m->nfiles > SHEMB__CKPT_MAX_FILES ||
	    c->len - c->at < (size_t)m->nfiles * FILE_ENTRY)
		return corrupt(why, wl, "manifest cut short");
	m->files = calloc(m->nfiles, sizeof(*m->files));
	if (!m->files)
		return SHEMB_ENOMEM;
	for (uint32_t i = 0; i < m->nfiles; i++) {
		struct shemb__ckpt_file *f = &m->files[i];
		size_t rb;

		f->generation = get(c, 8);
		f->rank = (uint32_t)get(c, 4);
		f->col0 = (uint32_t)get(c, 4);
		f->ncols = (uint32_t)get(c, 4);
		f->nstate = (uint32_t)get(c, 4);
		f->nrecords = get(c, 8);
		f->bytes = get(c, 8);
		f->crc = (uint32_t)get(c, 4);
		if (get(c, 4)) /* reserved */
			return corrupt(why, wl, "a reserved field is set");
		rb = shemb__ckpt_record_bytes(f->ncols, m->dtype, f->nstate);
		if (f->rank >= m->world || f->col0 >= m->dim ||
		    f->ncols == 0 || f->ncols > m->dim - f->col0 ||
		    f->nstate > 2 * f->ncols || f->nrecords > m->rows ||
		    f->bytes != SHEMB__CKPT_HEADER + f->nrecords * rb)
			return corrupt(why, wl, "a shard file's entry is "
					       "impossible");
	}
	switch (files_cover(m)) {
	case 0:
		return 0;
	case SHEMB_ENOMEM:
		return SHEMB_ENOMEM;
	default:
		return corrupt(why, wl, "the shard files do not cover the "
				       "table once");
	}
}

int shemb__ckpt_manifest_parse(const unsigned char *p, size_t len,
			       struct shemb__ckpt_manifest *m, char *why,
			       size_t why_len)
{
	struct cursor c = { .r = p, .len = len };
	int rc;

	memset(m, 0, sizeof(*m));
	if (len < 4 || shemb__crc32c(0, p, len - 4) !=
			       (uint32_t)(p[len - 4] | p[len - 3] << 8 |
					  p[len - 2] << 16 |
					  (uint32_t)p[len - 1] << 24))
		return corrupt(why, why_len, "the manifest's checksum does "
				"not match");
	c.len = len - 4;
	rc = parse_fixed(&c, m, why, why_len);
	if (!rc)
		rc = parse_files(&c, m, why, why_len);
	if (!rc && c.at != c.len)
		rc = corrupt(why, why_len, "bytes after the manifest's end");
	if (rc)
		shemb__ckpt_manifest_free(m);
	return rc;
}

void shemb__ckpt_manifest_free(struct shemb__ckpt_manifest *m)
{
	free(m->files);
	m->files = NULL;
	m->nfiles = 0;
}

/* ---- shard file header ---- */

void shemb__ckpt_shard_encode(const struct shemb__ckpt_shard *s,
			      unsigned char out[SHEMB__CKPT_HEADER])
{
	struct cursor c = { .w = out, .len = SHEMB__CKPT_HEADER };

	memcpy(out, SHARD_MAGIC, 8);
	c.at = 8;
	put(&c, SHEMB__CKPT_VERSION, 4);
	put(&c, s->rank, 4);
	put(&c, s->generation, 8);
	put(&c, s->nrecords, 8);
	put(&c, s->rows, 8);
	put(&c, s->col0, 4);
	put(&c, s->ncols, 4);
	put(&c, s->dtype, 4);
	put(&c, s->nstate, 4);
	put(&c, s->dim, 4);
	put(&c, 0, 4); /* reserved */
}

int shemb__ckpt_shard_parse(const unsigned char p[SHEMB__CKPT_HEADER],
			    struct shemb__ckpt_shard *s, char *why,
			    size_t why_len)
{
	struct cursor c = { .r = p, .len = SHEMB__CKPT_HEADER, .at = 8 };

	if (memcmp(p, SHARD_MAGIC, 8) ||
	    get(&c, 4) != SHEMB__CKPT_VERSION)
		return corrupt(why, why_len, "not a libshemb shard file");
	s->rank = (uint32_t)get(&c, 4);
	s->generation = get(&c, 8);
	s->nrecords = get(&c, 8);
	s->rows = get(&c, 8);
	s->col0 = (uint32_t)get(&c, 4);
	s->ncols = (uint32_t)get(&c, 4);
	s->dtype = (uint32_t)get(&c, 4);
	s->nstate = (uint32_t)get(&c, 4);
	s->dim = (uint32_t)get(&c, 4);
	if (get(&c, 4)) /* reserved */
		return corrupt(why, why_len, "a reserved field is set");
	return 0;
}

/* ---- names and files ---- */

void shemb__ckpt_manifest_path(const char *dir, char *out, size_t len)
{
	snprintf(out, len, "%s/MANIFEST", dir);
}

void shemb__ckpt_shard_name(uint64_t generation, uint32_t rank, char *out,
			    size_t len)
{
	snprintf(out, len, "shard-%016" PRIx64 "-%" PRIu32 ".bin", generation,
		 rank);
}

int shemb__ckpt_write_all(int fd, const void *p, size_t len)
{
	const char *at = p;

	while (len > 0) {
		ssize_t n = write(fd, at, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		at += n;
		len -= (size_t)n;
	}
	return 0;
}

int shemb__ckpt_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno;
	rc = fsync(fd) ? errno : 0;
	close(fd);
	return rc;
}
