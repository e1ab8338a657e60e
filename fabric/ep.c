/*
 * ep.c - the libfabric objects of a communicator: two RDM endpoints (the
 * lanes: bulk and urgent traffic, see engine.h) with tagged messages and
 * directed receives, a completion queue and an address vector each (shm
 * takes at most 256 addresses in one), and memory registrations for
 * providers that want registered buffers (FI_MR_LOCAL: verbs, efa).
 *
 * A registration is shared by the transfers in flight on the same pages
 * (the chunks of one message) and closed when the last one completes.  It
 * is not kept across calls on purpose: the caller may free a buffer and
 * get other pages at the same address, and only libfabric's own
 * registration cache, which watches for that (FI_MR_CACHE_MONITOR), can
 * keep registrations safely; it makes registering again cheap.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "fabric/fi_load.h"

#define MR_SLOTS 64

struct mr_slot {
	char *base;
	size_t len;
	struct fid_mr *mr;
	int users;
	bool spare;   /* allocated because every slot was taken */
};

/*
 * shm names its shared-memory region after the process id by default, and
 * a process that is killed leaves its region in /dev/shm: a later process
 * with the same (recycled) pid then cannot open its endpoint (EBUSY).  So
 * the name carries random bits too: "shemb-<pid>-<random>".  shemb-run
 * removes the regions of ranks it saw killed.  The string is libfabric's
 * to free, so it comes from the C library's strdup.
 */
static int name_shm_region(struct fi_info *info)
{
	char name[64];
	uint64_t rnd;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = shemb__fab_now_ns();
	snprintf(name, sizeof(name), "fi_shm://shemb-%d-%016llx", (int)getpid(),
		 (unsigned long long)rnd);
	info->src_addr = strdup(name);
	if (!info->src_addr)
		return SHEMB_ENOMEM;
	info->src_addrlen = strlen(name) + 1;
	info->addr_format = FI_ADDR_STR;
	return 0;
}

static struct fi_info *make_hints(const char *provider, const char *node,
				  size_t inject)
{
	struct fi_info *h = shemb__fi_dupinfo(NULL);

	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	/* what we can honour: registration where the provider asks */
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	/* the bulk lane's completions are read without the engine's lock
	 * (engine.c, read_cq) */
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->tx_attr->inject_size = inject;
	if (node)
		h->addr_format = FI_SOCKADDR_IN;
	if (provider && *provider)
		h->fabric_attr->prov_name = strdup(provider);
	if (provider && !strncmp(provider, "shm", 3) && name_shm_region(h)) {
		shemb__fi_freeinfo(h);
		return NULL;
	}
	return h;
}

static int query(struct fi_info **info, const char *provider,
		 const char *node, size_t inject)
{
	struct fi_info *hints = make_hints(provider, node, inject);
	int rc;

	if (!hints)
		return -FI_ENOMEM;
	rc = shemb__fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
			       node, NULL, node ? FI_SOURCE : 0, hints, info);
	shemb__fi_freeinfo(hints);
	return rc;
}

/*
 * A control message (ctrl.c) is injected where the provider can: a rank
 * without memory then still tells its peers that it failed a call.
 * rxm injects 64 bytes unless asked for more; asking shm for a size
 * would lower its 4 KiB, so the size is asked for only where the
 * provider's own is too small.
 */
static bool same_domain(const struct fi_info *a, const struct fi_info *b)
{
	return !strcmp(a->fabric_attr->prov_name, b->fabric_attr->prov_name) &&
	       a->domain_attr->name && b->domain_attr->name &&
	       !strcmp(a->domain_attr->name, b->domain_attr->name);
}

static void ask_inject(struct fab *f, const char *provider, const char *node)
{
	struct fi_info *more = NULL;

	if (f->info->tx_attr->inject_size >= sizeof(struct shemb__ctrl) ||
	    query(&more, provider, node, sizeof(struct shemb__ctrl)))
		return;
	/* the question must not change the provider or the domain: those
	 * that inject less are left out of the second answer */
	if (!same_domain(f->info, more)) {
		shemb__fi_freeinfo(more);
		return;
	}
	shemb__fi_freeinfo(f->info);
	f->info = more;
}

/* SHEMB_FABRIC_EAGAIN=N: about one post of a transfer in N is refused
 * (engine.c), as the provider refuses one while its queue is full, so
 * that tests reach the paths that post it again. */
static unsigned refusals_asked(uint64_t *state)
{
	const char *s = getenv("SHEMB_FABRIC_EAGAIN");
	unsigned long n = s ? strtoul(s, NULL, 10) : 0;

	*state = ((uint64_t)getpid() << 32 | 1) * 0x9e3779b97f4a7c15ull;
	return n >= 2 && n <= 1000000 ? (unsigned)n : 0;
}

static int getinfo(struct fab *f, const char *provider, const char *node,
		   char *err, size_t errlen)
{
	int rc = query(&f->info, provider, node, 0);

	if (rc == -FI_ENOMEM)
		return SHEMB_ENOMEM;
	if (rc) {
		snprintf(err, errlen, "libfabric provider '%s' gives no "
			 "endpoint for tagged messages%s%s: %s", provider,
			 node ? " on " : "", node ? node : "",
			 shemb__fi_strerror(-rc));
		return SHEMB_ENOTSUP;
	}
	ask_inject(f, provider, node);
	f->mr_local = (f->info->domain_attr->mr_mode & FI_MR_LOCAL) ||
		      getenv("SHEMB_FABRIC_REGISTER");
	f->ctrl_records = getenv("SHEMB_FABRIC_CTRL_RECORDS") != NULL;
	f->no_ghosts = getenv("SHEMB_FABRIC_NO_SPARE_OPS") != NULL;
	f->refuse_one_in = refusals_asked(&f->refuse_state);
	f->inject_size = f->info->tx_attr->inject_size;
	snprintf(f->provider, sizeof(f->provider), "%s",
		 f->info->fabric_attr->prov_name);
	return 0;
}

static bool is_shm_info(const struct fi_info *info)
{
	return !strncmp(info->fabric_attr->prov_name, "shm", 3);
}

/* The fi_info of a lane's endpoint: shm names each endpoint's region
 * after its source address, so the second one needs a name of its own,
 * which new hints give it (the first one's info is libfabric's to free,
 * with its allocator). */
static int lane_info(struct fab *f, int lane, struct fi_info **info)
{
	int rc;

	*info = f->info;
	if (lane == 0 || !is_shm_info(f->info))
		return 0;
	rc = query(info, f->provider, NULL, f->inject_size);
	if (rc)
		*info = NULL;
	return rc;
}

static int open_lane(struct fab *f, int lane)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED,
				  .wait_obj = FI_WAIT_NONE,
				  .size = 8192 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE,
				  .count = (size_t)f->world };
	struct fi_info *info;
	int rc = lane_info(f, lane, &info);

	if (!rc)
		rc = fi_av_open(f->domain, &ava, &f->av[lane], NULL);
	if (!rc)
		rc = fi_cq_open(f->domain, &cqa, &f->cq[lane], NULL);
	if (!rc)
		rc = fi_endpoint(f->domain, info, &f->ep[lane], NULL);
	if (!rc)
		rc = fi_ep_bind(f->ep[lane], &f->av[lane]->fid, 0);
	if (!rc)
		rc = fi_ep_bind(f->ep[lane], &f->cq[lane]->fid,
				FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_enable(f->ep[lane]);
	if (info && info != f->info)
		shemb__fi_freeinfo(info);
	return rc;
}

static int open_objects(struct fab *f)
{
	int rc = shemb__fi_fabric(f->info->fabric_attr, &f->fabric, NULL);

	if (!rc)
		rc = fi_domain(f->fabric, f->info, &f->domain, NULL);
	for (int lane = 0; !rc && lane < NLANES; lane++)
		rc = open_lane(f, lane);
	return rc;
}

/* Receives the engine may post on a lane at once: what the provider's
 * receive queue holds (shm: 1024, refused beyond with FI_ENOMEM), less the
 * control receives (the urgent lane's) and as many again for slack, at
 * most MAX_RECVS. */
static int recv_room(const struct fi_info *info)
{
	size_t size = info->rx_attr ? info->rx_attr->size : 0;
	size_t room = size > 2 * CTRL_RX ? size - 2 * CTRL_RX : CTRL_RX;

	if (size == 0) /* not said */
		return MAX_RECVS;
	return room < MAX_RECVS ? (int)room : MAX_RECVS;
}

int shemb__ep_open(struct fab *f, const char *provider, const char *node,
		   char *err, size_t errlen)
{
	int rc = getinfo(f, provider, node, err, errlen);

	if (rc)
		return rc;
	f->mrs = calloc(MR_SLOTS, sizeof(*f->mrs));
	f->peers = calloc((size_t)f->world * NLANES, sizeof(*f->peers));
	if (!f->mrs || !f->peers)
		return SHEMB_ENOMEM;
	rc = open_objects(f);
	if (rc) {
		snprintf(err, errlen, "opening a '%s' endpoint failed: %s",
			 f->provider, shemb__fi_strerror(-rc));
		return SHEMB_EIO;
	}
	f->max_recvs = recv_room(f->info);
	snprintf(f->desc, sizeof(f->desc), "libfabric %s (%s), rank %d of %d",
		 f->provider, f->info->domain_attr->name, f->rank, f->world);
	return 0;
}

int shemb__ep_name(struct fab *f, int lane, void *name, size_t *len)
{
	return fi_getname(&f->ep[lane]->fid, name, len) ? SHEMB_EIO : 0;
}

/* names: world slots of slot bytes, each a 4-byte length then the name */
int shemb__ep_insert_peers(struct fab *f, int lane, const void *names,
			   size_t slot, char *err, size_t errlen)
{
	for (int r = 0; r < f->world; r++) {
		const char *s = (const char *)names + (size_t)r * slot;

		if (fi_av_insert(f->av[lane], s + 4, 1,
				 shemb__fab_peer(f, lane, r),
				 0, NULL) != 1) {
			snprintf(err, errlen, "rank %d's %s address cannot be "
				 "used here", r, f->provider);
			return SHEMB_EIO;
		}
	}
	if (lane == 0 && is_shm_info(f->info))
		shemb__peer_procs_open(f, names, slot);
	return 0;
}

static void close_fid(struct fid *fid)
{
	if (fid)
		fi_close(fid);
}

void shemb__ep_close(struct fab *f)
{
	shemb__peer_procs_close(f);
	for (int i = 0; f->mrs && i < MR_SLOTS; i++)
		if (f->mrs[i].mr)
			fi_close(&f->mrs[i].mr->fid);
	free(f->mrs);
	f->mrs = NULL;
	for (int lane = 0; lane < NLANES; lane++) {
		close_fid(f->ep[lane] ? &f->ep[lane]->fid : NULL);
		f->ep[lane] = NULL;
	}
	for (int lane = 0; lane < NLANES; lane++) {
		close_fid(f->av[lane] ? &f->av[lane]->fid : NULL);
		close_fid(f->cq[lane] ? &f->cq[lane]->fid : NULL);
		f->av[lane] = NULL;
		f->cq[lane] = NULL;
	}
	close_fid(f->domain ? &f->domain->fid : NULL);
	close_fid(f->fabric ? &f->fabric->fid : NULL);
	shemb__fi_freeinfo(f->info);
	free(f->peers);
	f->info = NULL;
	f->peers = NULL;
}

/* ---- registrations ---- */

static struct mr_slot *cached(struct fab *f, const char *p, size_t len)
{
	for (int i = 0; i < MR_SLOTS; i++) {
		struct mr_slot *m = &f->mrs[i];

		if (m->mr && p >= m->base && p + len <= m->base + m->len)
			return m;
	}
	return NULL;
}

/* A free slot, NULL if every slot holds a registration in use. */
static struct mr_slot *victim(struct fab *f)
{
	for (int i = 0; i < MR_SLOTS; i++)
		if (!f->mrs[i].mr)
			return &f->mrs[i];
	return NULL;
}

/* Whole pages around the buffer, so that neighbouring chunks of one
 * message and later calls on the same buffer hit the cache. */
static int register_slot(struct fab *f, struct mr_slot *m, char *p,
			 size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + len + page - 1) & ~(page - 1);

	m->base = (char *)lo;
	m->len = hi - lo;
	/* keys must be unique unless the provider picks them (PROV_KEY) */
	return fi_mr_reg(f->domain, m->base, m->len, FI_SEND | FI_RECV, 0,
			 ++f->mr_key, 0, &m->mr, NULL);
}

void *shemb__ep_desc(struct fab *f, struct xfer *x)
{
	struct mr_slot *m;

	x->mr = NULL;
	if (!f->mr_local || x->len == 0)
		return NULL;
	m = cached(f, x->buf, x->len);
	if (!m) {
		m = victim(f);
		if (!m) { /* more regions in flight than slots */
			m = calloc(1, sizeof(*m));
			if (!m)
				return NULL;
			m->spare = true;
		}
		if (register_slot(f, m, x->buf, x->len)) {
			m->mr = NULL;
			if (m->spare)
				free(m);
			return NULL; /* the post then fails and says so */
		}
	}
	m->users++;
	x->mr = m;
	return fi_mr_desc(m->mr);
}

void shemb__ep_undesc(struct fab *f, struct xfer *x)
{
	struct mr_slot *m = x->mr;

	x->mr = NULL;
	if (m && --m->users == 0) {
		fi_close(&m->mr->fid);
		m->mr = NULL;
		if (m->spare)
			free(m);
	}
}
