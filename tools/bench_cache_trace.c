/*
 * bench_cache_trace.c - shemb-bench cache: trace files, traces cut into
 * batches, and Belady's offline optimum on them.
 *
 * Belady: every distinct id of the current batch must be resident; the
 * ones that are count as hits; each miss, when the slots are full, evicts
 * the resident id outside the current batch whose next use is farthest
 * (or never).  Next uses are precomputed per (batch, distinct id); a
 * max-heap of (next use, id) with lazy deletion gives the victim.
 */
#define _GNU_SOURCE
#include "tools/bench_cache.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"

/* ---- trace files ---- */

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap + 1), *p;

	if (!f || !buf)
		goto fail;
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n < cap)
			continue;
		p = realloc(buf, 2 * cap + 1);
		if (!p)
			goto fail;
		buf = p;
		cap *= 2;
	}
	if (ferror(f))
		goto fail;
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
fail:
	fprintf(stderr, "shemb-bench: %s: %s\n", path, strerror(errno));
	if (f)
		fclose(f);
	free(buf);
	return NULL;
}

/* Printable ASCII: text, so that a stray word gets a message on its line
 * (ids below 2^40 have zero bytes in int64). */
static bool is_text(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isprint((unsigned char)s[i]) &&
		    !isspace((unsigned char)s[i]))
			return false;
	return true;
}

static long line_of(const char *s, const char *at)
{
	long line = 1;

	for (; s < at; s++)
		line += *s == '\n';
	return line;
}

/* Ids of a text trace; a count, or -1 after a message. */
static int64_t parse_text(const char *path, char *s, int64_t *ids)
{
	int64_t n = 0;
	char *p = s, *end;
	long long v;

	for (;;) {
		while (*p && strchr(" \t\r\n", *p))
			p++;
		if (!*p)
			return n;
		errno = 0;
		v = strtoll(p, &end, 10);
		if (end == p || errno || (*end && !strchr(" \t\r\n", *end))) {
			fprintf(stderr, "shemb-bench: %s: line %ld: '%.*s' is "
				"not an id\n", path, line_of(s, p),
				(int)strcspn(p, " \t\r\n"), p);
			return -1;
		}
		if (v < 0) {
			fprintf(stderr, "shemb-bench: %s: line %ld: negative "
				"id %lld\n", path, line_of(s, p), v);
			return -1;
		}
		ids[n++] = v;
		p = end;
	}
}

static int64_t parse_binary(const char *path, const char *s, size_t len,
			    int64_t *ids)
{
	const unsigned char *u = (const unsigned char *)s;

	if (len % 8) {
		fprintf(stderr, "shemb-bench: %s: not text, and its %zu bytes "
			"are not a whole number of int64 ids\n", path, len);
		return -1;
	}
	for (size_t i = 0; i < len / 8; i++) {
		uint64_t x = 0;

		for (int k = 7; k >= 0; k--)
			x = x << 8 | u[8 * i + (size_t)k];
		if ((int64_t)x < 0) {
			fprintf(stderr, "shemb-bench: %s: id %zu (byte %zu) is "
				"negative: %lld\n", path, i, 8 * i,
				(long long)x);
			return -1;
		}
		ids[i] = (int64_t)x;
	}
	return (int64_t)(len / 8);
}

/* Largest id + 1, or -1 after a message. */
static int64_t rows_of(const char *path, const int64_t *ids, int64_t n)
{
	int64_t rows = 0;

	if (n < 1 || n > INT32_MAX) {
		fprintf(stderr, "shemb-bench: %s: %s\n", path,
			n < 1 ? "no ids" : "over 2^31 ids");
		return -1;
	}
	for (int64_t i = 0; i < n; i++) {
		if (ids[i] >= SHEMB_MAX_ROWS) {
			fprintf(stderr, "shemb-bench: %s: id %lld is over the "
				"largest table (2^40 rows)\n", path,
				(long long)ids[i]);
			return -1;
		}
		if (ids[i] >= rows)
			rows = ids[i] + 1;
	}
	return rows;
}

int64_t *cache_load_trace(const char *path, int64_t *n, int64_t *rows)
{
	size_t len;
	char *s = read_all(path, &len);
	int64_t *ids = s ? malloc((len / 2 + 2) * sizeof(*ids)) : NULL;
	bool text = s && is_text(s, len);

	*n = -1;
	if (ids)
		*n = text ? parse_text(path, s, ids)
			  : parse_binary(path, s, len, ids);
	else if (s)
		fprintf(stderr, "shemb-bench: no memory for %s\n", path);
	free(s);
	if (*n < 0 || (*rows = rows_of(path, ids, *n)) < 0) {
		free(ids);
		return NULL;
	}
	printf("  trace    %s: %lld ids (%s), largest %lld\n", path,
	       (long long)*n, text ? "text" : "int64 little-endian",
	       (long long)(*rows - 1));
	return ids;
}

int cache_cut_trace(struct cache_trace *tr, const int64_t *ids, int64_t n,
		    int64_t batch, int pooling)
{
	tr->nb = (int)((n + batch - 1) / batch);
	tr->b = calloc((size_t)tr->nb, sizeof(*tr->b));
	if (!tr->b)
		return -1;
	for (int t = 0; t < tr->nb; t++) {
		struct bench_batch *b = &tr->b[t];
		int64_t lo = t * batch, len = n - lo < batch ? n - lo : batch;

		b->nids = len;
		b->nbags = (len + pooling - 1) / pooling;
		b->offsets = malloc((size_t)(b->nbags + 1) * sizeof(int64_t));
		b->ids = malloc((size_t)len * sizeof(int64_t));
		if (!b->offsets || !b->ids)
			return -1;
		memcpy(b->ids, ids + lo, (size_t)len * sizeof(int64_t));
		for (int64_t i = 0; i <= b->nbags; i++)
			b->offsets[i] = i * pooling < len ? i * pooling : len;
	}
	return 0;
}

/* ---- what Belady needs: distinct ids per batch and their next use ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t sort_unique(int64_t *v, int64_t n)
{
	int64_t k = 0;

	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	for (int64_t i = 0; i < n; i++)
		if (k == 0 || v[k - 1] != v[i])
			v[k++] = v[i];
	return k;
}

static int64_t lower_bound(const int64_t *v, int64_t n, int64_t x)
{
	int64_t lo = 0, hi = n;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The sorted distinct ids of each batch, one after the other. */
static int64_t *distinct_ids(struct cache_trace *tr)
{
	int64_t total = 0, *u;

	for (int t = 0; t < tr->nb; t++)
		total += tr->b[t].nids;
	u = malloc(((size_t)total + 1) * sizeof(*u));
	tr->doff = malloc(((size_t)tr->nb + 1) * sizeof(*tr->doff));
	if (!u || !tr->doff) {
		free(u);
		return NULL;
	}
	tr->doff[0] = 0;
	for (int t = 0; t < tr->nb; t++) {
		int64_t *d = u + tr->doff[t], n;

		memcpy(d, tr->b[t].ids, (size_t)tr->b[t].nids * sizeof(*d));
		n = sort_unique(d, tr->b[t].nids);
		tr->doff[t + 1] = tr->doff[t] + n;
		if (n > tr->maxd)
			tr->maxd = n;
	}
	tr->requests = tr->doff[tr->nb];
	return u;
}

static void next_uses(struct cache_trace *tr, int32_t *last)
{
	for (int64_t k = 0; k < tr->nuniq; k++)
		last[k] = tr->nb;
	for (int t = tr->nb - 1; t >= 0; t--) {
		for (int64_t i = tr->doff[t]; i < tr->doff[t + 1]; i++) {
			tr->next[i] = last[tr->did[i]];
			last[tr->did[i]] = t;
		}
	}
}

/* Ids renumbered 0 .. nuniq - 1, so Belady's state is arrays. */
int cache_index_trace(struct cache_trace *tr)
{
	int64_t *u = distinct_ids(tr), *all = NULL, r = tr->requests;
	int32_t *last = NULL;
	int rc = -1;

	if (!u)
		return -1;
	all = malloc(((size_t)r + 1) * sizeof(*all));
	tr->did = malloc(((size_t)r + 1) * sizeof(*tr->did));
	tr->next = malloc(((size_t)r + 1) * sizeof(*tr->next));
	if (!all || !tr->did || !tr->next)
		goto out;
	memcpy(all, u, (size_t)r * sizeof(*all));
	tr->nuniq = sort_unique(all, r);
	for (int64_t i = 0; i < r; i++)
		tr->did[i] = (uint32_t)lower_bound(all, tr->nuniq, u[i]);
	last = malloc(((size_t)tr->nuniq + 1) * sizeof(*last));
	if (!last)
		goto out;
	next_uses(tr, last);
	rc = 0;
out:
	free(u);
	free(all);
	free(last);
	return rc;
}

void cache_free_trace(struct cache_trace *tr)
{
	bench_free_batches(tr->b, tr->nb);
	free(tr->doff);
	free(tr->did);
	free(tr->next);
	memset(tr, 0, sizeof(*tr));
}

/* ---- Belady's optimum ---- */

/* A max-heap of (next use, id), stale entries dropped when popped. */
struct belady {
	uint64_t *heap, *aside;
	int64_t n, naside, resident;
	int32_t *cur;           /* per id: its next use while resident, or
				 * -1 */
	int32_t *mark;          /* per id: the last batch that needed it */
};

#define ENTRY(next, id) ((uint64_t)(uint32_t)(next) << 32 | (id))

static void heap_push(struct belady *s, uint64_t e)
{
	int64_t i = s->n++;

	while (i > 0 && s->heap[(i - 1) / 2] < e) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = e;
}

static uint64_t heap_pop(struct belady *s)
{
	uint64_t top = s->heap[0], e = s->heap[--s->n];
	int64_t i = 0, c;

	while ((c = 2 * i + 1) < s->n) {
		if (c + 1 < s->n && s->heap[c + 1] > s->heap[c])
			c++;
		if (s->heap[c] <= e)
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	s->heap[i] = e;
	return top;
}

/* Evict the resident id, not of batch t, used again last (or never);
 * ids of batch t met on the way wait aside. */
static void belady_evict(struct belady *s, int t)
{
	while (s->n > 0) {
		uint64_t e = heap_pop(s);
		uint32_t id = (uint32_t)e;

		if (s->cur[id] != (int32_t)(e >> 32))
			continue;
		if (s->mark[id] == t) {
			s->aside[s->naside++] = e;
			continue;
		}
		s->cur[id] = -1;
		s->resident--;
		return;
	}
}

static void belady_batch(struct belady *s, const struct cache_trace *tr,
			 int t, int64_t cap, int64_t *misses)
{
	int64_t lo = tr->doff[t], hi = tr->doff[t + 1];

	for (int64_t i = lo; i < hi; i++)
		s->mark[tr->did[i]] = t;
	for (int64_t i = lo; i < hi; i++) {
		uint32_t id = tr->did[i];

		if (s->cur[id] < 0) {
			++*misses;
			if (s->resident == cap)
				belady_evict(s, t);
			s->resident++;
		}
		s->cur[id] = tr->next[i];
		heap_push(s, ENTRY(tr->next[i], id));
	}
	while (s->naside > 0)
		heap_push(s, s->aside[--s->naside]);
}

int64_t cache_belady_misses(const struct cache_trace *tr, int64_t cap)
{
	struct belady s = { 0 };
	int64_t misses = -1;

	s.heap = malloc(((size_t)tr->requests + 1) * sizeof(*s.heap));
	s.aside = malloc(((size_t)tr->maxd + 1) * sizeof(*s.aside));
	s.cur = malloc(((size_t)tr->nuniq + 1) * sizeof(*s.cur));
	s.mark = malloc(((size_t)tr->nuniq + 1) * sizeof(*s.mark));
	if (s.heap && s.aside && s.cur && s.mark) {
		memset(s.cur, 0xff, (size_t)tr->nuniq * sizeof(*s.cur));
		memset(s.mark, 0xff, (size_t)tr->nuniq * sizeof(*s.mark));
		misses = 0;
		for (int t = 0; t < tr->nb; t++)
			belady_batch(&s, tr, t, cap, &misses);
	}
	free(s.heap);
	free(s.aside);
	free(s.cur);
	free(s.mark);
	return misses;
}
