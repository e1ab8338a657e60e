/*
 * dist_meta.c - the record every step opens with, and the alltoallv
 * buffers the steps use.
 */
#include "lib/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/held.h"
#include "lib/rowinit.h"

/* One rank's word to another at the start of a step. */
struct meta {
	int32_t status;
	uint32_t kind;
	uint64_t sig;
	uint64_t bytes;     /* of the next message to the receiver */
	uint32_t offers;    /* SHEMB__OFFER_* bits */
	char why[228];      /* the failure's detail, when status is set
			     * (the record: 256 bytes) */
};

int shemb__xchg_init(struct shemb__xchg *x, int world)
{
	memset(x, 0, sizeof(*x));
	x->world = world;
	x->scount = calloc((size_t)world * 4, sizeof(size_t));
	if (!x->scount)
		return SHEMB_ENOMEM;
	x->sdispl = x->scount + world;
	x->rcount = x->scount + 2 * world;
	x->rdispl = x->scount + 3 * world;
	return 0;
}

static size_t displace(const size_t *count, size_t *displ, int n)
{
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		displ[i] = at;
		at += count[i];
	}
	return at;
}

int shemb__xchg_alloc(struct shemb__xchg *x)
{
	x->sbytes = displace(x->scount, x->sdispl, x->world);
	x->rbytes = displace(x->rcount, x->rdispl, x->world);
	x->sbuf = malloc(x->sbytes + 8);
	x->rbuf = malloc(x->rbytes + 8);
	return x->sbuf && x->rbuf ? 0 : SHEMB_ENOMEM;
}

static struct shemb__coll xchg_coll(const struct shemb__xchg *x)
{
	return (struct shemb__coll){
		.kind = SHEMB__ALLTOALLV,
		.sendbuf = x->sbuf,
		.recvbuf = x->rbuf,
		.sendcounts = x->scount,
		.sdispls = x->sdispl,
		.recvcounts = x->rcount,
		.rdispls = x->rdispl,
	};
}

int shemb__xchg_run(shemb_ctx *ctx, struct shemb__xchg *x)
{
	struct shemb__coll c = xchg_coll(x);

	return shemb__coll_run(ctx, &c);
}

int shemb__xchg_start(shemb_ctx *ctx, struct shemb__xchg *x,
		      shemb_request **req)
{
	struct shemb__coll c = xchg_coll(x);

	return shemb__coll_start(ctx, &c, req);
}

int shemb__xchg_start_part(shemb_ctx *ctx, const struct shemb__xchg *x,
			   const size_t *scount, const size_t *soff,
			   const size_t *rcount, const size_t *roff,
			   size_t *displ, shemb_request **req)
{
	size_t w = (size_t)x->world;
	struct shemb__coll c = xchg_coll(x);

	for (size_t p = 0; p < w; p++) {
		displ[p] = x->sdispl[p] + soff[p];
		displ[w + p] = x->rdispl[p] + roff[p];
	}
	c.sendcounts = scount;
	c.sdispls = displ;
	c.recvcounts = rcount;
	c.rdispls = displ + w;
	return shemb__coll_start(ctx, &c, req); /* copies the counts */
}

int shemb__xchg_refuse(shemb_ctx *ctx, int status, const char *why)
{
	struct shemb__coll c = { .kind = SHEMB__ALLTOALLV, .refuse = status,
				 .why = why };

	return shemb__coll_run(ctx, &c);
}

void shemb__phase_time(const struct shemb__step *st, int phase, uint64_t ns)
{
	for (int g = 0; g < st->ngroups; g++)
		SHEMB__STAT_ADD(st->groups[g].table, phase_ns[phase], ns);
}

void shemb__xchg_free(shemb_ctx *ctx, struct shemb__xchg *x)
{
	free(x->scount);
	shemb__coll_buf_free(ctx, x->sbuf);
	shemb__coll_buf_free(ctx, x->rbuf);
	memset(x, 0, sizeof(*x));
}

/* This rank's part in a gather it has no memory for: the others learn
 * it from the refusal.  SHEMB_ENOMEM. */
static int refuse_gather(shemb_ctx *ctx)
{
	struct shemb__coll c = { .kind = SHEMB__ALLGATHERV,
				 .refuse = SHEMB_ENOMEM,
				 .why = "no memory to gather" };

	return shemb__coll_run(ctx, &c);
}

/* The collective moves copies in a buffer of its own, which a failure
 * may leave to the transport (held.c): the callers' are often on their
 * stacks. */
int shemb__allgather_bytes(shemb_ctx *ctx, const void *mine, size_t len,
			   void *all)
{
	int world = ctx->attr.world_size, rc;
	size_t *cnt = calloc((size_t)world, sizeof(size_t));
	size_t *dsp = calloc((size_t)world, sizeof(size_t));
	char *buf = malloc(((size_t)world + 1) * len);
	struct shemb__coll c = { .kind = SHEMB__ALLGATHERV, .sendcount = len,
				 .recvcounts = cnt, .rdispls = dsp };

	if (!cnt || !dsp || !buf || !all) {
		rc = refuse_gather(ctx);
		goto out;
	}
	for (int r = 0; r < world; r++) {
		cnt[r] = len;
		dsp[r] = (size_t)r * len;
	}
	memcpy(buf, mine, len);
	c.sendbuf = buf;
	c.recvbuf = buf + len;
	rc = shemb__coll_run(ctx, &c);
	if (!rc)
		memcpy(all, buf + len, (size_t)world * len);
out:
	free(cnt);
	free(dsp);
	shemb__coll_buf_free(ctx, buf);
	return rc;
}

int shemb__allgather_word(shemb_ctx *ctx, uint64_t mine, uint64_t *all)
{
	return shemb__allgather_bytes(ctx, &mine, sizeof(mine), all);
}

/* A rank's word in shemb__dist_all_ok(): its status, and the beginning
 * of its detail when it failed. */
struct verdict {
	int64_t status;
	char why[248];
};

int shemb__dist_all_ok(shemb_ctx *ctx, int status, const char *what)
{
	int world = ctx->attr.world_size, rc;
	struct verdict mine = { .status = status };
	struct verdict *all = calloc((size_t)world, sizeof(*all));

	if (status)
		snprintf(mine.why, sizeof(mine.why), "%s",
			 shemb_ctx_last_error(ctx));
	rc = shemb__allgather_bytes(ctx, &mine, sizeof(mine), all);
	if (!rc && status)
		rc = status; /* this rank's own detail stays */
	for (int r = 0; !rc && r < world; r++) {
		int s = (int)all[r].status;

		if (!s)
			continue;
		all[r].why[sizeof(all[r].why) - 1] = 0;
		rc = shemb__fail(ctx, s, "rank %d failed %s (%s)%s%s", r, what,
				 shemb_strerror(s), all[r].why[0] ? ": " : "",
				 all[r].why);
	}
	free(all);
	return rc;
}

/* table_id may repeat: the same table is the one created in the same
 * place on every rank. */
uint64_t shemb__dist_mix_table(uint64_t h, const shemb_table *t)
{
	h = shemb__mix64(h ^ t->created);
	return shemb__mix64(h ^ (uint64_t)t->attr.table_id);
}

uint64_t shemb__dist_signature(int kind, const struct shemb__step *st)
{
	uint64_t h = shemb__mix64((uint64_t)kind << 32 |
				  (uint32_t)st->ngroups);

	/* the ranks must agree on these too: they change what is sent */
	h = shemb__mix64(h ^ (uint64_t)(st->ctx->attr.deterministic != 0) ^
			 (uint64_t)st->planned << 1);

	for (int g = 0; g < st->ngroups; g++) {
		const shemb_table *t = st->groups[g].table;

		h = shemb__dist_mix_table(h, t);
		h = shemb__mix64(h ^ (uint64_t)t->shard.kind);
	}
	return h | 1; /* never 0, the signature of a failed call */
}

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case SHEMB__DIST_LOOKUP:
		return "a lookup";
	case SHEMB__DIST_BACKWARD:
		return "a backward";
	case SHEMB__DIST_READ:
		return "read_rows";
	case SHEMB__DIST_WRITE:
		return "write_rows";
	case SHEMB__DIST_PREFETCH:
		return "a prefetch";
	case SHEMB__DIST_ANNOUNCE:
		return "an announcement";
	case SHEMB__DIST_EARLY:
		return "the early rows of a lookup";
	default:
		return "an unknown call";
	}
}

static int judge(shemb_ctx *ctx, int kind, uint64_t sig,
		 const struct meta *in, int world)
{
	for (int r = 0; r < world; r++) {
		if (in[r].status) {
			char why[sizeof(in[r].why) + 1];

			memcpy(why, in[r].why, sizeof(in[r].why));
			why[sizeof(in[r].why)] = 0;
			return shemb__fail(ctx, in[r].status, "rank %d failed "
					   "its part of this step: %s", r,
					   why);
		}
	}
	for (int r = 0; r < world; r++) {
		if (in[r].kind != (uint32_t)kind)
			return shemb__fail(ctx, SHEMB_EINVAL, "rank %d is in "
					   "%s while this rank is in %s", r,
					   kind_name(in[r].kind),
					   kind_name((uint32_t)kind));
		if (in[r].sig != sig)
			return shemb__fail(ctx, SHEMB_EINVAL, "rank %d passes "
					   "other tables (or in another order, "
					   "other flags or another "
					   "deterministic mode) than this rank "
					   "to %s", r,
					   kind_name((uint32_t)kind));
	}
	return 0;
}

int shemb__dist_agree(shemb_ctx *ctx, int kind, uint64_t sig, int status,
		      struct shemb__xchg *x)
{
	return shemb__dist_agree_offers(ctx, kind, sig, status, x, NULL);
}

int shemb__dist_agree_offers(shemb_ctx *ctx, int kind, uint64_t sig,
			     int status, struct shemb__xchg *x,
			     unsigned *offers)
{
	int world = ctx->attr.world_size, rc;
	struct shemb__xchg m;
	struct meta *out, *in;

	rc = shemb__xchg_init(&m, world);
	for (int r = 0; !rc && r < world; r++)
		m.scount[r] = m.rcount[r] = sizeof(struct meta);
	if (!rc)
		rc = shemb__xchg_alloc(&m);
	if (rc) { /* the others learn it from the exchange's refusal */
		shemb__xchg_free(ctx, &m);
		return shemb__xchg_refuse(ctx, SHEMB_ENOMEM, "no memory for "
					  "the records that open a step");
	}
	out = (struct meta *)m.sbuf;
	in = (struct meta *)m.rbuf;
	for (int r = 0; r < world; r++) {
		memset(&out[r], 0, sizeof(out[r]));
		out[r].status = status;
		out[r].kind = (uint32_t)kind;
		out[r].sig = status ? 0 : sig;
		out[r].bytes = status ? 0 : x->scount[r];
		out[r].offers = offers && !status ? *offers : 0;
		if (status)
			snprintf(out[r].why, sizeof(out[r].why), "%s",
				 shemb_ctx_last_error(ctx));
	}
	rc = shemb__xchg_run(ctx, &m);
	if (!rc && status)
		rc = status; /* this rank's own detail stays recorded */
	if (!rc)
		rc = judge(ctx, kind, sig, in, world);
	for (int r = 0; !rc && r < world; r++) {
		x->rcount[r] = in[r].bytes;
		if (offers)
			*offers &= in[r].offers;
	}
	if (rc && offers)
		*offers = 0;
	shemb__xchg_free(ctx, &m);
	return rc;
}
