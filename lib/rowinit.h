/*
 * rowinit.h - initial row values, a pure function of (seed, table, row,
 * column): any shard plan, world size or backend makes the same table.
 *
 * Each value hashes (seed, table_id, row, column) with the splitmix64
 * finaliser; no generator state is carried from value to value, so rows can
 * be made in any order, on any rank, in parallel.  Header-only, so each
 * kernel variant (and a device compiler) vectorises it its own way.
 */
#ifndef SHEMB_ROWINIT_H
#define SHEMB_ROWINIT_H

#include <math.h>
#include <stdint.h>

#include "shemb.h"
#include "lib/mem_ops.h"

static inline uint64_t shemb__mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t shemb__row_key(const struct shemb__init_spec *s,
				      int64_t row)
{
	return shemb__mix64(shemb__mix64(shemb__mix64(s->seed) ^
					 (uint64_t)s->table_id) ^
			    (uint64_t)row);
}

static inline uint64_t shemb__value_hash(uint64_t row_key, int col)
{
	return shemb__mix64(row_key + (uint64_t)col * 0xd1b54a32d192ed03ull);
}

/* 24 random bits as a float in [0, 1) */
static inline float shemb__unit(uint64_t h)
{
	return (float)(h >> 40) * 0x1p-24f;
}

/* Box-Muller from two 24-bit fields of one hash; u1 in (0, 1] */
static inline float shemb__normal(uint64_t h)
{
	float u1 = (float)((h >> 40) + 1) * 0x1p-24f;
	float u2 = (float)((h >> 16) & 0xffffff) * 0x1p-24f;

	return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

/* The initial fp32 values of row `row`, columns 0 .. dim - 1. */
static inline void shemb__init_row(const struct shemb__init_spec *s,
				   int64_t row, int dim, float *restrict out)
{
	uint64_t key = shemb__row_key(s, row);
	float a = s->a, span = s->b - s->a;

	switch (s->kind) {
	case SHEMB_INIT_UNIFORM:
		if (!isfinite(span)) { /* a range wider than a float holds */
			for (int c = 0; c < dim; c++) {
				float u = shemb__unit(shemb__value_hash(key,
									c));

				out[c] = a * (1.0f - u) + s->b * u;
			}
			break;
		}
		for (int c = 0; c < dim; c++)
			out[c] = a + span * shemb__unit(
						    shemb__value_hash(key, c));
		break;
	case SHEMB_INIT_NORMAL:
		for (int c = 0; c < dim; c++)
			out[c] = a + s->b * shemb__normal(
						 shemb__value_hash(key, c));
		break;
	case SHEMB_INIT_CONSTANT:
		for (int c = 0; c < dim; c++)
			out[c] = a;
		break;
	default:
		for (int c = 0; c < dim; c++)
			out[c] = 0.0f;
		break;
	}
}

#endif
