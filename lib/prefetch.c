/*
 * prefetch.c - shemb_prefetch and shemb_announce: the rows of a coming
 * step into the device tiers, or into what LOOKAHEAD tiers know of the
 * coming steps, through the lookup's checks, plans and (across ranks) its
 * ids exchange.
 */
#include "lib/internal.h"

#include "lib/step.h"
#include "lib/stepq.h"

static int ahead(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
		 bool announce)
{
	struct shemb__step st;
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	rc = shemb__stepq_drain(ctx); /* keeps its place among started steps */
	if (rc)
		return rc;
	rc = shemb__step_begin(&st, ctx, n, bags);
	if (rc && !shemb__distributed(ctx))
		return rc;
	rc = shemb__lookup_for_prefetch(&st, rc, announce);
	shemb__step_end(&st);
	return rc;
}

SHEMB_API int shemb_prefetch(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags)
{
	return ahead(ctx, n, bags, false);
}

SHEMB_API int shemb_announce(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags)
{
	return ahead(ctx, n, bags, true);
}
