/*
 * rowinit.c - counter-based initial values.
 *
 * Each value hashes (seed, table_id, row, column) with the splitmix64
 * finaliser; no generator state is carried from value to value, so rows can
 * be made in any order, on any rank, in parallel.
 */
#include "lib/internal.h"
#include "lib/rowinit.h"

#include <math.h>

static inline uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t row_key(const struct shemb__init_spec *s, int64_t row)
{
	return mix64(mix64(mix64(s->seed) ^ (uint64_t)s->table_id) ^
		     (uint64_t)row);
}

/* 24 random bits as a float in [0, 1) */
static inline float unit(uint64_t bits)
{
	return (float)(bits >> 40) * 0x1p-24f;
}

static float normal(uint64_t h)
{
	/* Box-Muller from two 24-bit halves of one hash; u1 in (0, 1] */
	float u1 = (float)((h >> 40) + 1) * 0x1p-24f;
	float u2 = (float)((h >> 16) & 0xffffff) * 0x1p-24f;

	return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

void shemb__init_row(const struct shemb__init_spec *s, int64_t row, int dim,
		     float *out)
{
	uint64_t key = row_key(s, row);

	for (int c = 0; c < dim; c++) {
		uint64_t h = mix64(key + (uint64_t)c * 0xd1b54a32d192ed03ull);

		switch (s->kind) {
		case SHEMB_INIT_UNIFORM:
			out[c] = s->a + (s->b - s->a) * unit(h);
			break;
		case SHEMB_INIT_NORMAL:
			out[c] = s->a + s->b * normal(h);
			break;
		case SHEMB_INIT_CONSTANT:
			out[c] = s->a;
			break;
		default:
			out[c] = 0.0f;
			break;
		}
	}
}
