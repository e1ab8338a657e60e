/*
 * comm.c - the libfabric communicator behind struct shemb_comm_ops: open
 * (rendezvous, provider choice, endpoint, address exchange), start, test,
 * wait, release, close.
 */
#define _GNU_SOURCE
#include "config.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shemb.h"
#include "fabric/boot.h"
#include "fabric/engine.h"
#include "fabric/fabric.h"

#define NAME_SLOT 256

/* What decides the provider: ranks on one host can use shared memory. */
struct host_id {
	char host[128];
	char boot_id[48];
	char provider[64]; /* the one this rank asks for, "" = by host */
	cpu_set_t cpus;    /* the processors this rank may run on */
};

static int allgather(struct fab *f, const struct shemb__fabric_cfg *cfg,
		     const void *mine, void *all, size_t len, char *err,
		     size_t errlen)
{
	if (cfg->oob_allgather) {
		if (cfg->oob_allgather(cfg->oob_arg, mine, all, len)) {
			snprintf(err, errlen, "the host's oob_allgather "
				 "failed");
			return SHEMB_EPEER;
		}
		return 0;
	}
	return shemb__boot_allgather(f->boot, mine, all, len, err, errlen);
}

static void read_boot_id(char *out, size_t len)
{
	FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");

	out[0] = 0;
	if (fp) {
		if (!fgets(out, (int)len, fp))
			out[0] = 0;
		fclose(fp);
	}
}

static const char *asked_provider(const struct shemb__fabric_cfg *cfg)
{
	const char *p = cfg->provider;

	if (!p || !*p)
		p = getenv("SHEMB_PROVIDER");
	if (!p || !*p)
		p = getenv("FI_PROVIDER"); /* "" would break fi_getinfo */
	return p && *p ? p : "";
}

static void usable_cpus(cpu_set_t *set)
{
	long n;

	if (sched_getaffinity(0, sizeof(*set), set) == 0 && CPU_COUNT(set))
		return;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	CPU_ZERO(set);
	for (long c = 0; c < (n > 0 ? n : 1) && c < CPU_SETSIZE; c++)
		CPU_SET((int)c, set);
}

static int by_host(const void *a, const void *b)
{
	const struct host_id *x = a, *y = b;
	int c = strcmp(x->host, y->host);

	return c ? c : strcmp(x->boot_id, y->boot_id);
}

static bool same_host(const struct host_id *a, const struct host_id *b)
{
	return by_host(a, b) == 0;
}

/*
 * Whether some host runs more ranks than the processors they may use
 * between them (ranks pinned to a processor each are not crowded).
 * Every rank reaches the same answer from the same table, which this
 * sorts by host.
 */
static bool some_host_crowded(struct host_id *all, int world)
{
	cpu_set_t cpus;
	int run = 0;

	qsort(all, (size_t)world, sizeof(*all), by_host);
	for (int r = 0; r < world; r++) {
		if (run && same_host(&all[r], &all[r - 1])) {
			run++;
			CPU_OR(&cpus, &cpus, &all[r].cpus);
		} else {
			run = 1;
			cpus = all[r].cpus;
		}
		if ((r + 1 == world || !same_host(&all[r + 1], &all[r])) &&
		    run > CPU_COUNT(&cpus))
			return true;
	}
	return false;
}

/* Every rank must end with the same provider, and know whether some
 * host is crowded. */
static int choose_provider(struct fab *f, const struct shemb__fabric_cfg *cfg,
			   char *out, size_t outlen, bool *crowded, char *err,
			   size_t errlen)
{
	struct host_id me = { 0 }, *all = calloc((size_t)f->world,
						  sizeof(*all));
	bool one_host = true;
	int rc;

	if (!all)
		return SHEMB_ENOMEM;
	gethostname(me.host, sizeof(me.host) - 1);
	read_boot_id(me.boot_id, sizeof(me.boot_id));
	snprintf(me.provider, sizeof(me.provider), "%s", asked_provider(cfg));
	usable_cpus(&me.cpus);
	rc = allgather(f, cfg, &me, all, sizeof(me), err, errlen);
	for (int r = 0; !rc && r < f->world; r++) {
		one_host &= same_host(&all[r], &me);
		if (strcmp(all[r].provider, me.provider)) {
			snprintf(err, errlen, "rank %d asks for provider '%s', "
				 "this rank for '%s'", r, all[r].provider,
				 me.provider);
			rc = SHEMB_EINVAL;
		}
	}
	if (!rc)
		*crowded = some_host_crowded(all, f->world);
	free(all);
	if (!rc)
		snprintf(out, outlen, "%s", *me.provider ? me.provider
				      : one_host ? "shm" : "tcp;ofi_rxm");
	return rc;
}

/* Every rank's address on each lane, through the rendezvous (or the
 * host's allgather), one lane after the other. */
static int exchange_names(struct fab *f, const struct shemb__fabric_cfg *cfg,
			  char *err, size_t errlen)
{
	char *all = calloc((size_t)f->world, NAME_SLOT);
	int rc = all ? 0 : SHEMB_ENOMEM;

	for (int lane = 0; !rc && lane < NLANES; lane++) {
		char mine[NAME_SLOT] = { 0 };
		size_t len = NAME_SLOT - 4;
		uint32_t len32;

		rc = shemb__ep_name(f, lane, mine + 4, &len);
		if (rc) {
			snprintf(err, errlen, "the endpoint has no address");
			break;
		}
		len32 = (uint32_t)len;
		memcpy(mine, &len32, 4);
		rc = allgather(f, cfg, mine, all, NAME_SLOT, err, errlen);
		if (!rc)
			rc = shemb__ep_insert_peers(f, lane, all, NAME_SLOT,
						    err, errlen);
	}
	free(all);
	return rc;
}

static bool is_shm(const char *provider)
{
	return !strncmp(provider, "shm", 3);
}

/*
 * Measured (shemb-bench comm, 2 and 4 ranks, 1 to 64 MiB): on shm, where a
 * large message is one copy between processes, 4 MiB chunks beat 1 MiB by
 * 20-30%; over tcp;ofi_rxm, 1 MiB chunks beat 4 MiB by about 20%.
 *
 * Unless ranks outnumber the processors of their host: a rank's progress
 * then copies every bulk chunk handed over and arrived in one go, on a
 * processor that the ranks an urgent collective waits for need.
 * Measured (shemb-bench sched -n 4, 2 CPUs): a 4 KiB alltoallv behind a
 * 64 MiB allreduce took 7.5-11 times as long as alone with 4 MiB x 16,
 * 7.8 with 1 MiB x 4, 2.9-5.9 with 512 KiB x 4, 4.3-4.5 with 256 KiB x 8
 * and 1.2-1.5 with 128 KiB x 4, while four ranks' bulk throughput was
 * the same within the noise.  The urgent lane keeps the large chunks:
 * in small ones, the embedding step of that benchmark took 15% longer.
 * With as many CPUs as ranks (-n 2), the urgent exchange took 0.3-0.8
 * times as long as alone with the large chunks.
 */
static size_t default_chunk(const struct fab *f, bool crowded, int lane)
{
	if (!is_shm(f->provider))
		return (size_t)1 << 20;
	if (crowded && lane == LANE_BULK)
		return (size_t)128 << 10;
	return (size_t)4 << 20;
}

/*
 * Measured (shemb-bench comm, 64 MiB alltoallv): on shm, 2 ranks move
 * about 3.9 GB/s each with 16 or 32 chunks in flight, 2.1-2.9 with 4 and
 * 3.0 with 8 (4 ranks: no difference); over tcp;ofi_rxm, 32 beat 8 and
 * 16 by about 20% at 2 ranks.  On crowded hosts, see default_chunk().
 */
static int default_chunks_in_flight(const struct fab *f, bool crowded,
				    int lane)
{
	if (!is_shm(f->provider))
		return 32;
	return crowded && lane == LANE_BULK ? 4 : 16;
}

/*
 * Single copies (cma.c) hold no lock that another rank waits for, so
 * their chunks only set how long a copy keeps its thread.  Measured
 * (shemb-bench comm, shm, 64 MiB): 2 ranks moved 3.0-3.5 GB/s each in
 * 4 MiB chunks, 3.2-3.4 in 1 MiB, 3.0-3.3 in 128 KiB; 4 ranks on 2 CPUs
 * 1.3-1.7 in 1 MiB and 4 MiB, 1.2-1.4 in 128 KiB.
 */
#define PULL_CHUNK ((size_t)1 << 20)
/* On a crowded host, a copy leaves its CPU to an urgent wait after this
 * much (engine.c, copy_slices); elsewhere, each syscall copying less
 * costs: 1 MiB alltoallvs of 2 ranks took 136-141 us in one, 146-148 in
 * 512 KiB slices, 153-168 in 128 KiB. */
#define PULL_SLICE ((size_t)128 << 10)

/* What the attrs asked for on both lanes, else each lane's default. */
static void set_chunking(struct fab *f, const struct shemb__fabric_cfg *cfg,
			 bool crowded)
{
	f->pull_chunk = cfg->chunk_bytes ? cfg->chunk_bytes : PULL_CHUNK;
	f->pull_slice = crowded ? PULL_SLICE : f->pull_chunk;
	for (int lane = 0; lane < NLANES; lane++) {
		f->chunk[lane] = cfg->chunk_bytes
				 ? cfg->chunk_bytes
				 : default_chunk(f, crowded, lane);
		f->max_chunks[lane] = cfg->chunks_in_flight
				      ? cfg->chunks_in_flight
				      : default_chunks_in_flight(f, crowded,
								 lane);
	}
}

static int gather_for_cma(struct fab *f, void *cfg, const void *mine,
			  void *all, size_t len, char *err, size_t errlen)
{
	return allgather(f, cfg, mine, all, len, err, errlen);
}

static void describe_cma(struct fab *f)
{
	size_t n = strlen(f->desc);

	snprintf(f->desc + n, sizeof(f->desc) - n, ", bulk data by single "
		 "copy (process_vm_readv)");
}

/* Every rank reaches the same answer (cma.c), so a rank that requires
 * single copy fails with all the others. */
static int setup_single_copy(struct fab *f,
			     const struct shemb__fabric_cfg *cfg, char *err,
			     size_t errlen)
{
	int rc = shemb__cma_setup(f, cfg->single_copy, is_shm(f->provider),
				  gather_for_cma, (void *)cfg, err, errlen);

	if (!rc && f->cma)
		describe_cma(f);
	return rc;
}

static int connect_ranks(struct fab *f, const struct shemb__fabric_cfg *cfg,
			 char *err, size_t errlen)
{
	char provider[64], ip[64];
	bool crowded = false;
	const char *node = NULL;
	int rc = 0;

	if (!cfg->oob_allgather) {
		struct shemb__boot_cfg bc = {
			.rank = f->rank,
			.world_size = f->world,
			.root = cfg->root,
			.root_fd = cfg->root_fd,
			.job_key = cfg->job_key,
			.timeout_ms = f->timeout_ms,
		};

		rc = shemb__boot_open(&bc, &f->boot, err, errlen);
	}
	if (!rc)
		rc = choose_provider(f, cfg, provider, sizeof(provider),
				     &crowded, err, errlen);
	/* IP providers bind to the interface that reaches rank 0 */
	if (!rc && !is_shm(provider) && f->boot &&
	    !shemb__boot_local_ip(f->boot, ip, sizeof(ip)))
		node = ip;
	if (!rc)
		rc = shemb__ep_open(f, provider, node, err, errlen);
	if (!rc)
		set_chunking(f, cfg, crowded);
	if (!rc) {
		f->sends_in_order = is_shm(f->provider);
		f->settles = !is_shm(f->provider); /* settle.c */
		f->inline_max = shemb__coll_inline_limit(f);
	}
	if (!rc)
		rc = exchange_names(f, cfg, err, errlen);
	if (!rc)
		rc = setup_single_copy(f, cfg, err, errlen);
	/* rounds of pairs were against shm's lock (coll.c, pairwise_round):
	 * single copies take none, and in one round they went 15-25%
	 * faster at 1 MiB, the same within the noise at 16 and 64 MiB
	 * (shemb-bench comm, 4 ranks on 2 CPUs) */
	if (!rc)
		f->pairwise = is_shm(f->provider) && !f->cma;
	return rc;
}

/*
 * A start that finds no memory would fail the op on every rank, and a
 * collective that cannot run as a refusal (an allreduce) is then told by
 * control message, which leaves receives posted on the others (and, over
 * shm, a piece sent to this rank that holds back their later sends).  So
 * the first allocation of a start that fails gives back the reserve (and
 * the spare scratch) and the start tries again; the reserve is taken
 * again by a later start.  Allocations fail where address space runs
 * out (RLIMIT_AS, ulimit -v): the reserve is address space only, a
 * mapping without access that no page ever backs, and given back to the
 * kernel, not to an allocator.
 */
#define RESERVE_BYTES ((size_t)4 << 20)

static bool give_back_reserve(struct fab *f)
{
	bool had = f->reserve || f->spare;

	if (f->reserve)
		munmap(f->reserve, RESERVE_BYTES);
	free(f->spare);
	f->reserve = f->spare = NULL;
	f->spare_len = 0;
	return had;
}

static void take_reserve(struct fab *f)
{
	void *p;

	if (f->reserve)
		return;
	p = mmap(NULL, RESERVE_BYTES, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	f->reserve = p == MAP_FAILED ? NULL : p;
}

static void fab_free(struct fab *f)
{
	shemb__ep_close(f); /* cancels whatever was still posted */
	shemb__fab_free_ctrl(f);
	while (f->ops) {
		struct op *op = f->ops;

		f->ops = op->next;
		shemb__fab_free_op(op);
	}
	shemb__spares_drop(&f->op_spares);
	give_back_reserve(f);
	free(f->discard);
	shemb__boot_close(f->boot);
	shemb__cma_close(f);
	pthread_cond_destroy(&f->done_cond);
	pthread_mutex_destroy(&f->done_lock);
	pthread_cond_destroy(&f->nap);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static void init_sync(struct fab *f)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&f->done_lock, NULL);
	pthread_cond_init(&f->done_cond, &ca);
	pthread_cond_init(&f->nap, &ca);
	pthread_condattr_destroy(&ca);
}

int shemb__fabric_open(const struct shemb__fabric_cfg *cfg, void **comm,
		       char *err, size_t errlen)
{
	struct fab *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return SHEMB_ENOMEM;
	if (cfg->world_size > MAX_WORLD) {
		free(f);
		snprintf(err, errlen, "world size %d is above %d",
			 cfg->world_size, MAX_WORLD);
		return SHEMB_EINVAL;
	}
	f->rank = cfg->rank;
	f->world = cfg->world_size;
	f->timeout_ms = cfg->timeout_ms;
	f->progress_mode = cfg->progress;
	f->slice_us = cfg->slice_us;
	init_sync(f);
	rc = connect_ranks(f, cfg, err, errlen);
	/* what a failed op needs to settle without memory (settle.c) */
	if (!rc && (shemb__fab_ctrl_spares(f) || shemb__fab_ghost_spares(f) ||
		    !shemb__fab_discard_room(f))) {
		snprintf(err, errlen, "no memory for control messages");
		rc = SHEMB_ENOMEM;
	}
	if (!rc) {
		take_reserve(f);
		shemb__fab_post_ctrl_rx(f);
		if (f->progress_mode == SHEMB_PROGRESS_THREAD)
			rc = shemb__fab_start_thread(f);
	}
	if (rc) {
		fab_free(f);
		return rc;
	}
	*comm = f;
	return 0;
}

const char *shemb__fabric_provider(void *comm)
{
	return ((struct fab *)comm)->provider;
}

size_t shemb__fabric_chunk(void *comm)
{
	return ((struct fab *)comm)->chunk[LANE_BULK];
}

bool shemb__fabric_single_copy(void *comm)
{
	return ((struct fab *)comm)->cma;
}

bool shemb__fabric_settles(void *comm)
{
	return ((struct fab *)comm)->settles;
}

int shemb__fabric_chunks_in_flight(void *comm)
{
	return ((struct fab *)comm)->max_chunks[LANE_BULK];
}

static int count_ops(const struct fab *f)
{
	int n = 0;

	for (const struct op *op = f->ops; op; op = op->next)
		n++;
	return n;
}

int shemb__fabric_ops_held(void *comm, int ms)
{
	struct fab *f = comm;
	uint64_t until = shemb__fab_now_ns() + (uint64_t)ms * 1000000u;
	struct timespec nap = { .tv_nsec = 1000000 };
	int n;

	for (;;) {
		if (shemb__fab_lock(f, NULL, 0))
			return -1;
		shemb__fab_progress(f, true);
		n = count_ops(f);
		pthread_mutex_unlock(&f->lock);
		if (n == 0 || shemb__fab_now_ns() >= until)
			return n;
		nanosleep(&nap, NULL);
	}
}

/* ---- ops ---- */

static int copy_args(struct op *op, const struct shemb__coll *c)
{
	size_t w = (size_t)op->f->world;

	op->c = *c;
	op->counts = calloc(4 * w, sizeof(size_t));
	if (!op->counts)
		return SHEMB_ENOMEM;
	if (c->sendcounts) {
		memcpy(op->counts, c->sendcounts, w * sizeof(size_t));
		memcpy(op->counts + w, c->sdispls, w * sizeof(size_t));
	}
	if (c->recvcounts) {
		memcpy(op->counts + 2 * w, c->recvcounts, w * sizeof(size_t));
		memcpy(op->counts + 3 * w, c->rdispls, w * sizeof(size_t));
	}
	op->c.sendcounts = op->c.sdispls = NULL;
	op->c.recvcounts = op->c.rdispls = NULL;
	return 0;
}

/* The op could not start here, after it took its number: the other ranks
 * are told, so that they fail it too (with status) and every rank stays
 * in step, and it settles (settle.c). */
static int refuse_op(struct fab *f, struct op *op, int status, char *why,
		     size_t len)
{
	snprintf(why, len, "%s", op->why);
	shemb__fab_settle_unstarted(f, op, status);
	return status;
}

/* The kinds that can run as a refusal: one header each way per peer
 * round, and data that waits for it or is taken all the same. */
static bool refusable(int kind)
{
	return kind == SHEMB__ALLTOALLV || kind == SHEMB__ALLGATHERV;
}

/* op as c asks: 0, or SHEMB_ENOMEM or SHEMB_EINVAL with the detail in
 * op->why. */
static int build_call(struct op *op, const struct shemb__coll *c)
{
	int rc = copy_args(op, c);

	if (!rc)
		rc = shemb__coll_build(op->f, op);
	return rc == SHEMB_ENOMEM ? rc : rc ? SHEMB_EINVAL : 0;
}

/*
 * This rank failed op before it could take part (the caller's refusal,
 * c->refuse, or its own arguments failing the build, such as a piece for
 * itself of another size than it expects): op is built again as a
 * refusal (fabric/README.md).  Its headers carry status and op->why, no
 * data moves to or from this rank, and it takes what the peers sent
 * before they knew, so nothing is left behind on either side.
 */
int shemb__fab_build_refusal(struct op *op, int status)
{
	static char nothing; /* buffers of no bytes */
	struct shemb__coll no_data = { .kind = op->kind,
				       .sendbuf = &nothing,
				       .recvbuf = &nothing };

	shemb__fab_clear_op(op);
	op->refusing = true;
	op->refused = status;
	return build_call(op, &no_data);
}

/* No memory for the op: its number is taken all the same (and the
 * aborts peers sent for it), and the others are told, so that they fail
 * it too and every rank stays in step.  A spare op settles it; without
 * one (ghosts not settled yet, as when the caller moves the transfers),
 * the others are only told, and what they send here stays. */
static int start_without_memory(struct fab *f, char *why, size_t len)
{
	struct op none = { .f = f }, *ghost = NULL;

	if (f->settles) {
		ghost = shemb__fab_ghost(f);
		if (!ghost) { /* earlier ghosts may settle meanwhile (before
			       * the number is taken: an account for it
			       * read now would find no op) */
			shemb__fab_progress(f, true);
			ghost = shemb__fab_ghost(f);
		}
	}
	none.seq = f->next_seq++;
	/* the others name this rank themselves */
	snprintf(why, len, "no memory for collective call %u", none.seq);
	if (!ghost) { /* the others do not wait for it to settle */
		shemb__fab_note_unsettled(f, none.seq);
		shemb__fab_early_abort(f, &none);
		none.status = SHEMB_ENOMEM;
		none.relayed = false;
		none.unsettled = true;
		snprintf(none.why, sizeof(none.why), "%s", why);
		shemb__fab_tell_all(f, &none);
		return SHEMB_ENOMEM;
	}
	ghost->seq = none.seq;
	shemb__fab_early_abort(f, ghost);
	ghost->relayed = false;
	snprintf(ghost->why, sizeof(ghost->why), "%s", why);
	shemb__fab_settle_unstarted(f, ghost, SHEMB_ENOMEM);
	return SHEMB_ENOMEM;
}

/* A barrier (the application's, the library's, the close's) moves no
 * data: nothing is gained by letting it wait behind any. */
static int prio_of(const struct shemb__coll *c)
{
	return c->kind == SHEMB__BARRIER || c->kind == SHEMB__CLOSE ? INT_MAX
								      : c->prio;
}

static int fab_start(void *comm, const struct shemb__coll *c,
		     struct shemb__op **out, char *why, size_t len)
{
	struct fab *f = comm;
	struct op *op = NULL;
	int early;
	int rc = shemb__fab_lock(f, why, len);

	if (rc)
		return rc;
	if (f->failed) {
		snprintf(why, len, "%s", f->fail_why);
		rc = f->failed;
		goto out;
	}
	/* a start that fails tells the others; where that takes records,
	 * the ones in flight come back first (before the call's number is
	 * taken: an account for it read now would find no op) */
	shemb__fab_ctrl_reap(f);
	op = calloc(1, sizeof(*op));
	if (!op && give_back_reserve(f))
		op = calloc(1, sizeof(*op));
	if (!op) {
		rc = start_without_memory(f, why, len);
		goto out;
	}
	op->f = f;
	op->kind = c->kind;
	op->prio = prio_of(c);
	op->lane = op->prio > SHEMB_PRIO_DENSE ? LANE_URGENT : LANE_BULK;
	op->seq = f->next_seq++;
	/* taken on every path: a record left would stay for good */
	early = shemb__fab_early_abort(f, op);
	if (early && !c->refuse) { /* the rank that failed it told all */
		rc = early;
		snprintf(why, len, "%s", op->why);
		shemb__fab_settle_unstarted(f, op, rc);
		goto out;
	}
	if (c->refuse) {
		snprintf(op->why, sizeof(op->why), "%s",
			 c->why && c->why[0] ? c->why
					     : shemb_strerror(c->refuse));
		op->relayed = false;
	}
	rc = c->refuse ? c->refuse : build_call(op, c);
	if (rc == SHEMB_ENOMEM && !c->refuse && give_back_reserve(f)) {
		shemb__fab_clear_op(op);
		rc = build_call(op, c);
	}
	if (rc && !op->why[0])
		snprintf(op->why, sizeof(op->why), "no memory for "
			 "collective call %u", op->seq);
	/* Run as a refusal where the kind allows and no peer failed it
	 * already (its headers may never come); else only tell the others
	 * (refuse_op). */
	if (rc && refusable(op->kind) && !early &&
	    !shemb__fab_build_refusal(op, rc))
		rc = 0;
	if (rc) {
		rc = refuse_op(f, op, rc, why, len);
		goto out;
	}
	op->next = f->ops;
	f->ops = op;
	f->active++;
	f->active_bulk += op->lane == LANE_BULK;
	op->last_ns = shemb__fab_now_ns();
	shemb__fab_enqueue_round(f, op);
	/* Post the first transfers now, from the caller: the data starts
	 * moving at once without waking the progress thread, which would
	 * only compete for the CPU with a caller about to wait (it looks
	 * for work every millisecond anyway).  Completions are left to the
	 * waits and the thread: reading them here could keep the caller
	 * moving the other collectives in flight for as long as they run. */
	shemb__fab_post(f);
	*out = (struct shemb__op *)op;
	take_reserve(f);
out:
	pthread_mutex_unlock(&f->lock);
	/* The caller holds the only handle of op and waits for it only
	 * after this returns, so the piece is in place before anyone can
	 * see op done; the transfers of the other pieces run meanwhile. */
	if (!rc && op->self_len)
		memmove(op->self_dst, op->self_src, op->self_len);
	return rc;
}

/* Done, and, failed, settled (or given up): its caller may go. */
static bool op_over(const struct op *op)
{
	return op->done && !shemb__fab_settle_pending(op);
}

static int op_result(struct op *op, char *why, size_t len)
{
	if (op->status)
		snprintf(why, len, "%s", op->why);
	return op->status;
}

static int fab_test(void *comm, struct shemb__op *h, int *done, char *why,
		    size_t len)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;
	int rc = shemb__fab_lock(f, why, len);

	*done = rc != 0;
	if (rc)
		return rc;
	if (f->progress_mode == SHEMB_PROGRESS_CALLER)
		shemb__fab_progress(f, true);
	*done = op_over(op);
	if (*done)
		rc = op_result(op, why, len);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/*
 * A caller that waits moves the transfers itself, as long as they move:
 * a waiter would only spin anyway, and handing each completion over from
 * the progress thread costs a wake-up, which dominates collectives of a
 * megabyte.  After IDLE_NS without a completion (several chunk times on
 * tcp) it sleeps, and the progress thread takes over again.
 */
#define IDLE_NS 10000000ull

/* Called with the lock; returns with it, or with SHEMB_EPEER (and why)
 * without it once the engine wedged. */
static int progress_while_moving(struct fab *f, struct op *op, char *why,
				 size_t len)
{
	uint64_t last = shemb__fab_now_ns();
	/* with a progress thread, a waiter of the urgent lane leaves the
	 * bulk lane (and its long reads) to the thread */
	bool bulk = !f->have_thread || op->lane == LANE_BULK;
	int rc = 0;

	f->waiters_progressing += bulk;
	if (!bulk)
		shemb__fab_urgent_wait_begin(f);
	while (!op_over(op)) {
		uint64_t now;

		/* a failed op settles on both lanes */
		if (shemb__fab_progress(f, bulk || op->done) > 0) {
			last = shemb__fab_now_ns();
			if (!shemb__fab_callers_waiting(f))
				continue;
		}
		now = shemb__fab_now_ns();
		if (f->have_thread && now - last > IDLE_NS)
			break;
		pthread_mutex_unlock(&f->lock);
		sched_yield();
		rc = shemb__fab_lock(f, why, len);
		if (rc) /* wedged: its counts no longer matter */
			return rc;
	}
	f->waiters_progressing -= bulk;
	if (!bulk)
		shemb__fab_urgent_wait_end(f);
	return 0;
}

/* Once the waiter stops moving the transfers, it sleeps without the
 * lock (which a thread stuck in libfabric may hold), waking when an op
 * finishes, and gives up when the engine wedges. */
static int fab_wait(void *comm, struct shemb__op *h, char *why, size_t len)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;
	int rc = shemb__fab_lock(f, why, len);

	if (!rc)
		rc = progress_while_moving(f, op, why, len);
	while (!rc && !op_over(op)) {
		uint64_t gen = atomic_load(&f->finished);

		pthread_mutex_unlock(&f->lock);
		rc = shemb__fab_sleep_done(f, gen, why, len);
	}
	if (rc)
		return rc;
	rc = op_result(op, why, len);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void fab_release(void *comm, struct shemb__op *h)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;

	if (shemb__fab_lock(f, NULL, 0))
		return; /* the wedged engine keeps it */
	op->released = true;
	shemb__fab_maybe_free(f, op);
	pthread_mutex_unlock(&f->lock);
}

static int fab_async_error(void *comm, char *msg, size_t len)
{
	struct fab *f = comm;
	int rc = shemb__fab_lock(f, msg, len);

	if (rc)
		return rc;
	rc = f->failed;
	if (rc)
		snprintf(msg, len, "%s", f->fail_why);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static const char *fab_describe(void *comm)
{
	return ((struct fab *)comm)->desc;
}

/* The ranks leave together: a last barrier, so that no rank closes while
 * another still waits for its messages.  A failed job skips it. */
static bool fab_destroy(void *comm)
{
	struct fab *f = comm;
	struct shemb__coll c = { .kind = SHEMB__CLOSE };
	struct shemb__op *op = NULL;
	char why[256];

	if (!f)
		return true;
	if (!fab_start(f, &c, &op, why, sizeof(why))) {
		fab_wait(f, op, why, sizeof(why));
		fab_release(f, op);
	}
	if (!shemb__fab_stop_thread(f) || shemb__fab_wedged(f, NULL, 0)) {
		shemb__fab_leave_wedged(f);
		return false;
	}
	fab_free(f);
	return true;
}

static int fab_stuck(void *comm, char *why, size_t len)
{
	return shemb__fab_probe(comm, why, len);
}

/* A wedged engine may still move anything: it holds everything. */
static bool fab_holds(void *comm, struct shemb__op *h)
{
	struct fab *f = comm;
	bool held;

	if (shemb__fab_lock(f, NULL, 0))
		return true;
	held = shemb__fab_op_holds((struct op *)h);
	pthread_mutex_unlock(&f->lock);
	return held;
}

const struct shemb_comm_ops shemb__fabric_ops = {
	.size = sizeof(struct shemb_comm_ops),
	.name = "libfabric",
	.start = fab_start,
	.test = fab_test,
	.wait = fab_wait,
	.release = fab_release,
	.async_error = fab_async_error,
	.describe = fab_describe,
	.destroy = fab_destroy,
	.stuck = fab_stuck,
	.holds = fab_holds,
};
