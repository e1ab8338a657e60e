/*
 * optmath.h - one column of a backward step: a position's share of its
 * bag's gradient, weight decay, and the sparse optimizers' updates.
 *
 * The CPU kernels (cpu/kernels_impl.h) and the CUDA kernels (gpu/) both
 * call these, in the same order, with fp contraction off in both builds,
 * so a table trained on either backend holds the same bits.
 */
#ifndef SHEMB_OPTMATH_H
#define SHEMB_OPTMATH_H

#include <math.h>

#include "shemb.h"
#include "lib/hd.h"
#include "lib/mem_ops.h"

/* The bag set of plan bag `bag`: the last set whose first bag is at or
 * before it. */
SHEMB_HD static inline const struct shemb__bwd_set *shemb__set_of_bag(
	const struct shemb__bwd_set *sets, int nsets, int64_t bag)
{
	int lo = 0, hi = nsets - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (sets[mid].bag_base <= bag)
			lo = mid;
		else
			hi = mid - 1;
	}
	return &sets[lo];
}

/* The factor of position p on the gradient of its bag, row lb of set s:
 * its weight, over the bag's length for MEAN. */
SHEMB_HD static inline float shemb__position_coef(
	const struct shemb__bwd_set *s, int32_t p, int64_t lb)
{
	float w = s->weights ? s->weights[p - s->pos_base] : 1.0f;

	if (s->pooling == SHEMB_POOL_MEAN)
		return w / (float)(s->offsets[lb + 1] - s->offsets[lb]);
	return w;
}

/* L2 decay adds to the gradient; decoupled decay shrinks the row. */
SHEMB_HD static inline void shemb__decay(const struct shemb__opt *o,
					float *w, float *g)
{
	if (o->weight_decay == 0.0f)
		return;
	if (o->wd_mode == SHEMB_WD_L2)
		*g += o->weight_decay * *w;
	else
		*w -= (o->lr * o->weight_decay) * *w;
}

SHEMB_HD static inline void shemb__sgd(const struct shemb__opt *o, float *w,
				      float g)
{
	*w -= o->lr * g;
}

SHEMB_HD static inline void shemb__adagrad(const struct shemb__opt *o,
					  float *w, float g, float *s)
{
	*s += g * g;
	*w -= o->lr * g / (sqrtf(*s) + o->eps);
}

/* Row-wise Adagrad: the row's one state float takes the mean of the
 * squared gradient (total over full_dim columns, or the store's dim);
 * returns the step every column of the row then takes. */
SHEMB_HD static inline float shemb__rowwise_step(const struct shemb__opt *o,
						float *s, float total,
						int dim)
{
	*s += total / (float)(o->full_dim ? o->full_dim : dim);
	return o->lr / (sqrtf(*s) + o->eps);
}

SHEMB_HD static inline void shemb__adam(const struct shemb__opt *o, float *w,
				       float g, float *m, float *v)
{
	*m = o->beta1 * *m + (1.0f - o->beta1) * g;
	*v = o->beta2 * *v + (1.0f - o->beta2) * (g * g);
	*w -= o->lr * (*m / o->bc1) / (sqrtf(*v / o->bc2) + o->eps);
}

#endif
