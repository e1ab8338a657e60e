/*
 * comm.c - the libfabric communicator behind struct shemb_comm_ops: open
 * (rendezvous, provider choice, chunking, endpoint, address exchange) and
 * free; the calls on it are in ops.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shemb.h"
#include "fabric/boot.h"
#include "fabric/engine.h"
#include "fabric/fi_load.h"
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
 * the same within the noise.  Later, 9 runs each way, taken in turn:
 * 144-228 us (median 176) in flight with 128 KiB x 4, 99-150 (median
 * 120) with 64 KiB x 4, and 142-164 alone after 20 ms idle with either
 * (right after the allreduce's wait, the ranks were still awake more
 * often with 128 KiB: 95-135 us alone, against 150-177); the allreduce
 * of 16 and 64 MiB moved 0.88-1.17 GB/s per rank with either, and
 * about a quarter less in chunks of 32 KiB.  The urgent lane keeps the
 * large chunks: in small ones, the embedding step of that benchmark took
 * 15% longer.
 * With as many CPUs as ranks (-n 2), the urgent exchange took 0.3-0.8
 * times as long as alone with the large chunks.
 */
static size_t default_chunk(const struct fab *f, bool crowded, int lane)
{
	if (!is_shm(f->provider))
		return (size_t)1 << 20;
	if (crowded && lane == LANE_BULK)
		return (size_t)64 << 10;
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

/*
 * The chunks asked for, over shm at least twice what it injects: shm
 * completes a send it injects at once, before the receiver took it, so
 * max_chunks would not bound the messages a peer has in flight to a
 * rank, which shm keeps in the entries its receives need (queue.c,
 * hold_receive()): 2 MiB in chunks of 1000 bytes failed a receive.
 * Twice, so that an allreduce's chunks, cut to whole elements, stay
 * above it.
 */
static size_t chunk_asked(const struct fab *f, size_t chunk)
{
	size_t least = is_shm(f->provider) ? 2 * f->inject_size : 0;

	return chunk && chunk < least ? least : chunk;
}

/*
 * Over shm, at most a quarter of the receives it holds per peer: each
 * peer may have that many chunks of one collective in flight to a rank,
 * which needs receives for them posted (queue.c, hold_receive()) or
 * entries to keep them in, from the same 1016 (ep.c).  With 256, the
 * largest chunks_in_flight, two collectives of small chunks on 4 ranks
 * took them all again.
 */
static int in_flight_allowed(const struct fab *f, int n)
{
	int most;

	if (!is_shm(f->provider) || f->world < 2)
		return n;
	most = f->max_recvs / (4 * (f->world - 1));
	most = most > 0 ? most : 1;
	return n < most ? n : most;
}

/* What the attrs asked for on both lanes, else each lane's default. */
static void set_chunking(struct fab *f, const struct shemb__fabric_cfg *cfg,
			 bool crowded)
{
	size_t asked = chunk_asked(f, cfg->chunk_bytes);

	f->pull_chunk = asked ? asked : PULL_CHUNK;
	f->pull_slice = crowded ? PULL_SLICE : f->pull_chunk;
	for (int lane = 0; lane < NLANES; lane++) {
		f->chunk[lane] = asked ? asked
				       : default_chunk(f, crowded, lane);
		f->max_chunks[lane] = in_flight_allowed(
			f, cfg->chunks_in_flight
				   ? cfg->chunks_in_flight
				   : default_chunks_in_flight(f, crowded, lane));
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

void shemb__fab_free(struct fab *f)
{
	shemb__ep_close(f); /* cancels whatever was still posted */
	shemb__fab_free_ctrl(f);
	for (int i = 0; i < f->nearly; i++)
		free(f->early[i].by_peer);
	free(f->unsettled_room);
	while (f->ops) {
		struct op *op = f->ops;

		f->ops = op->next;
		shemb__fab_free_op(op);
	}
	shemb__spares_drop(&f->op_spares);
	shemb__fab_give_back_reserve(f);
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
	struct fab *f;
	int rc = shemb__fi_load(err, errlen);

	if (rc)
		return rc;
	f = calloc(1, sizeof(*f));
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
		    !shemb__fab_discard_room(f) ||
		    shemb__fab_unsettled_room(f))) {
		snprintf(err, errlen, "no memory for control messages");
		rc = SHEMB_ENOMEM;
	}
	if (!rc) {
		shemb__fab_take_reserve(f);
		shemb__fab_post_ctrl_rx(f);
		if (f->progress_mode == SHEMB_PROGRESS_THREAD)
			rc = shemb__fab_start_thread(f);
	}
	if (rc) {
		shemb__fab_free(f);
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

unsigned long shemb__fabric_wrong_messages(void *comm)
{
	return atomic_load(&((struct fab *)comm)->wrong_messages);
}

unsigned long shemb__fabric_late_acks(void *comm)
{
	return atomic_load(&((struct fab *)comm)->late_acks);
}

unsigned long shemb__fabric_test_refusals(void *comm)
{
	return atomic_load(&((struct fab *)comm)->test_refusals);
}

unsigned long shemb__fabric_lane_calls(void *comm, bool urgent)
{
	struct fab *f = comm;

	return atomic_load(&f->lane_calls[urgent ? LANE_URGENT : LANE_BULK]);
}

/* count(f), progressing the transfers for up to ms until it is 0; -1 if
 * the engine's lock cannot be had. */
static int count_settled(struct fab *f, int ms,
			 int (*count)(const struct fab *))
{
	uint64_t until = shemb__fab_now_ns() + (uint64_t)ms * 1000000u;
	struct timespec nap = { .tv_nsec = 1000000 };
	int n;

	for (;;) {
		if (shemb__fab_lock(f, NULL, 0))
			return -1;
		shemb__fab_progress(f, true);
		n = count(f);
		pthread_mutex_unlock(&f->lock);
		if (n == 0 || shemb__fab_now_ns() >= until)
			return n;
		nanosleep(&nap, NULL);
	}
}

static int count_recvs(const struct fab *f)
{
	int n = 0;

	for (int l = 0; l < NLANES; l++)
		n += f->recvs_posted[l];
	return n;
}

int shemb__fabric_recvs_posted(void *comm)
{
	return count_settled(comm, 0, count_recvs);
}

int shemb__fabric_ops_held(void *comm, int ms)
{
	return count_settled(comm, ms, count_ops);
}

/* Late receives (mop.c) posted or queued: each asks for a message a
 * peer's account says it sent, which comes at once. */
static int count_late(const struct fab *f)
{
	int n = 0;

	for (const struct op *op = f->ops; op; op = op->next)
		for (const struct drain *d = op->drains; d; d = d->next)
			for (int k = 0; k < d->n; k++)
				n += d->x[k].drain_late &&
				     (d->x[k].posted || d->x[k].late);
	return n;
}

int shemb__fabric_late_receives(void *comm, int ms)
{
	return count_settled(comm, ms, count_late);
}

