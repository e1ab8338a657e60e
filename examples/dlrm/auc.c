/*
 * auc.c - the area under the ROC curve, computed exactly: the probability
 * that a random click scores above a random non-click, ties counting
 * half.  Through the rank-sum (Mann-Whitney) form: sort by score, give
 * each run of equal scores the average of its ranks, and
 *
 *	AUC = (sum of the positives' ranks - P (P + 1) / 2) / (P N).
 *
 * A NaN score (a model gone astray) compares false with everything, which
 * would make the sort's order inconsistent and its result undefined; NaNs
 * rank above every number here instead, tied with each other, as if they
 * were +infinity.
 */
#include <math.h>
#include <stdlib.h>

#include "examples/dlrm/dlrm.h"

struct scored {
	float score, label;
};

static int by_score(const void *a, const void *b)
{
	float x = ((const struct scored *)a)->score;
	float y = ((const struct scored *)b)->score;

	if (isnan(x) || isnan(y))
		return !!isnan(x) - !!isnan(y);
	return (x > y) - (x < y);
}

static bool same_score(float x, float y)
{
	return x == y || (isnan(x) && isnan(y));
}

/* Sum of the ranks (1-based, averaged over ties) of the positives. */
static double positive_rank_sum(const struct scored *v, int64_t n)
{
	double sum = 0;

	for (int64_t lo = 0, hi; lo < n; lo = hi) {
		int64_t pos = 0;

		for (hi = lo; hi < n && same_score(v[hi].score, v[lo].score);
		     hi++)
			pos += v[hi].label > 0.5f;
		/* ranks lo + 1 .. hi, whose mean is (lo + 1 + hi) / 2 */
		sum += (double)pos * (double)(lo + 1 + hi) / 2;
	}
	return sum;
}

double auc(const float *score, const float *label, int64_t n)
{
	struct scored *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(*v));
	double pos = 0, neg, sum;

	if (!v)
		return -1;
	for (int64_t i = 0; i < n; i++) {
		v[i] = (struct scored){ score[i], label[i] };
		pos += label[i] > 0.5f;
	}
	neg = (double)n - pos;
	qsort(v, (size_t)n, sizeof(*v), by_score);
	sum = positive_rank_sum(v, n);
	free(v);
	if (pos == 0 || neg == 0)
		return NAN;
	return (sum - pos * (pos + 1) / 2) / (pos * neg);
}
