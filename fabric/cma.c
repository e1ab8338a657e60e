/*
 * cma.c - single-copy transfers between the ranks of one host: the
 * receiver reads the sender's buffer with process_vm_readv(2) (cross
 * memory attach), chunk after chunk, and tells the sender each chunk is
 * done with an empty message.
 *
 * Why not shm's own large messages: libfabric 1.17's shm copies a large
 * message in the receiver's progress while it holds the spin lock of its
 * shared queue, and a sender that posts its next message to that queue
 * spins until the copy ends.  In an alltoallv, where every rank both
 * sends and copies, the ranks so take turns instead of copying at once:
 * measured (shemb-bench comm, shm, 2 ranks, 64 MiB), 13% of the time in
 * pthread_spin_lock and 2.0-2.1 GB/s a rank in 4 MiB chunks, against
 * 3.2-3.7 GB/s when each piece went as one message.  Here no lock is
 * shared between processes: each rank copies its pieces at its own pace
 * and in its own order, so the chunks stay small enough for an urgent
 * collective to overtake them.
 *
 * The pids and a probe word are exchanged when the context is created;
 * every rank reads every other's probe, and the path is used only if all
 * of them could (a kernel without CMA, a ptrace policy that forbids it,
 * ranks in other pid namespaces: the transfers then stay shm's).  The
 * attr single_copy (and SHEMB_SINGLE_COPY=0) can turn it off, or require
 * it; the first exchange carries each rank's wish, so that ranks that
 * disagree still make the same exchanges and reach the same answer.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shemb.h"
#include "fabric/engine.h"

struct cma_probe {
	uint64_t addr;   /* of this rank's probe word */
	uint64_t value;  /* what it holds */
	int32_t pid;
	int32_t want;    /* the attr: 1 required, 0 if possible, -1 never */
	int32_t ok;      /* second exchange: this rank read every probe */
	int32_t pad;
};

static uint64_t probe_value(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
	       ((uint64_t)ts.tv_sec << 20) ^ 0x5348454d42434d41ull;
}

static bool read_probe(const struct cma_probe *p)
{
	uint64_t v = 0;
	struct iovec local = { &v, sizeof(v) };
	struct iovec remote = { (void *)(uintptr_t)p->addr, sizeof(v) };

	return process_vm_readv(p->pid, &local, 1, &remote, 1, 0) ==
		       (ssize_t)sizeof(v) && v == p->value;
}

/* Whether this rank reads every other's probe word. */
static bool read_all_probes(struct fab *f, const struct cma_probe *all)
{
	for (int r = 0; r < f->world; r++)
		if (r != f->rank && !read_probe(&all[r]))
			return false;
	return true;
}

/* The reason single copy was required and cannot be had; 0 if it was
 * not required (by any rank) or is in use. */
static int refuse(const struct fab *f, bool shm, const struct cma_probe *all,
		  char *err, size_t errlen)
{
	int req = -1, off = -1;

	for (int r = 0; r < f->world; r++) {
		if (all[r].want > 0 && req < 0)
			req = r;
		if (all[r].want < 0 && off < 0)
			off = r;
	}
	if (req < 0 || f->cma)
		return 0;
	if (!shm)
		snprintf(err, errlen, "rank %d requires single_copy, and the "
			 "provider is not shm", req);
	else if (off >= 0)
		snprintf(err, errlen, "rank %d requires single_copy, and rank "
			 "%d turned it off", req, off);
	else
		snprintf(err, errlen, "rank %d requires single_copy, and some "
			 "rank cannot read another's memory "
			 "(process_vm_readv)", req);
	return SHEMB_ENOTSUP;
}

int shemb__cma_setup(struct fab *f, int want, bool shm,
		     shemb__cma_allgather_fn gather, void *arg, char *err,
		     size_t errlen)
{
	struct cma_probe me = { 0 }, *all;
	bool try = shm;
	int rc;

	f->cma = false;
	all = calloc((size_t)f->world, sizeof(*all));
	f->cma_pid = calloc((size_t)f->world, sizeof(*f->cma_pid));
	if (!all || !f->cma_pid) {
		free(all);
		return SHEMB_ENOMEM;
	}
	/* the context's own: contexts made at once do not share it, and
	 * this rank waits in the second exchange until every peer read it */
	f->cma_probe = probe_value();
	me.addr = (uintptr_t)&f->cma_probe;
	me.value = f->cma_probe;
	me.pid = (int32_t)getpid();
	me.want = want;
	rc = gather(f, arg, &me, all, sizeof(me), err, errlen);
	for (int r = 0; !rc && r < f->world; r++) {
		f->cma_pid[r] = all[r].pid;
		try &= all[r].want >= 0;
	}
	/* all or none: a rank that could not read would wait for data */
	if (!rc && try) {
		me.ok = read_all_probes(f, all);
		rc = gather(f, arg, &me, all, sizeof(me), err, errlen);
		f->cma = !rc;
		for (int r = 0; !rc && r < f->world; r++)
			f->cma &= all[r].ok == 1;
	}
	if (!rc)
		rc = refuse(f, shm, all, err, errlen);
	free(all);
	return rc;
}

void shemb__cma_close(struct fab *f)
{
	free(f->cma_pid);
	f->cma_pid = NULL;
}

int shemb__cma_pull(const struct fab *f, int peer, void *buf,
		    uint64_t remote_addr, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct iovec local = { (char *)buf + done, len - done };
		struct iovec remote = {
			(void *)(uintptr_t)(remote_addr + done), len - done
		};
		ssize_t n = process_vm_readv(f->cma_pid[peer], &local, 1,
					     &remote, 1, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EFAULT;
		done += (size_t)n;
	}
	return 0;
}
