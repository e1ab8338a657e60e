/*
 * plan.c - gpu/plan.cu on the emulated device: the plan of ids in device
 * memory by a plain sort of (id, position) pairs, written apart from
 * lib/plan.c's radix sort, and the backward's two device checks.
 */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "gpu/cuda.h"
#include "tests/emu/emu.h"

static atomic_ulong plans, checks;

unsigned long shemb__emu_plans(void)
{
	return atomic_load(&plans);
}

unsigned long shemb__emu_checks(void)
{
	return atomic_load(&checks);
}

struct id_pos {
	int64_t id;
	int32_t pos;
};

/* Equal ids keep their positions ascending, as a stable sort would. */
static int by_id_then_pos(const void *a, const void *b)
{
	const struct id_pos *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

static void runs(const struct shemb__dplan_job *job, const struct id_pos *v,
		 int64_t *nunique)
{
	int64_t u = 0;

	for (int64_t k = 0; k < job->nids; k++) {
		if (k == 0 || v[k].id != v[k - 1].id) {
			job->unique[u] = v[k].id;
			job->seg[u++] = (int32_t)k;
		}
		job->pos[k] = v[k].pos;
	}
	job->seg[u] = (int32_t)job->nids;
	*nunique = u;
}

static void bags(const struct shemb__dplan_job *job)
{
	for (int i = 0; i < job->nsets; i++) {
		const struct shemb__bwd_set *s = &job->sets[i];

		for (int64_t b = 0; b < s->nbags; b++) {
			int64_t lo = s->pooling == SHEMB_POOL_NONE
					     ? b
					     : s->offsets[b];
			int64_t hi = s->pooling == SHEMB_POOL_NONE
					     ? b + 1
					     : s->offsets[b + 1];

			for (int64_t k = lo; k < hi; k++)
				job->bag_of[s->pos_base + k] =
					(int32_t)(s->bag_base + b);
		}
	}
}

int shemb__cuda_plan(struct shemb__cuda *c, const struct shemb__dplan_job *job,
		     int64_t *nunique)
{
	struct id_pos *v = malloc(((size_t)job->nids + 1) * sizeof(*v));

	(void)c;
	atomic_fetch_add(&plans, 1);
	if (!v)
		return SHEMB_ENOMEM;
	shemb__emu_enter();
	for (int64_t k = 0; k < job->nids; k++)
		v[k] = (struct id_pos){ job->ids[k], (int32_t)k };
	qsort(v, (size_t)job->nids, sizeof(*v), by_id_then_pos);
	runs(job, v, nunique);
	bags(job);
	shemb__emu_leave();
	free(v);
	return 0;
}

int shemb__cuda_differ(struct shemb__cuda *c, const void *a, const void *b,
		       size_t n, int *differ)
{
	(void)c;
	atomic_fetch_add(&checks, 1);
	shemb__emu_enter();
	*differ = n && memcmp(a, b, n) != 0;
	shemb__emu_leave();
	return 0;
}

int shemb__cuda_finite(struct shemb__cuda *c, const float *p, int64_t n,
		       int64_t *bad)
{
	(void)c;
	atomic_fetch_add(&checks, 1);
	*bad = -1;
	shemb__emu_enter();
	for (int64_t i = 0; i < n && *bad < 0; i++)
		if (!isfinite(p[i]))
			*bad = i;
	shemb__emu_leave();
	return 0;
}
