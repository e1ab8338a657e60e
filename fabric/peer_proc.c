/*
 * peer_proc.c - whether the process of a peer on this host has ended.
 *
 * libfabric's shm provider (1.17) enqueues a send into the receiver's
 * shared region under a spin lock that lives in that region.  A rank
 * killed while it held its lock leaves it held for good, and the next
 * send to it spins forever inside fi_tsend(), holding the transport's
 * lock, so neither the rendezvous' news of the death nor the timeout
 * could end the collective.  Before each send to a local peer, the
 * transport therefore asks a pidfd of the peer's process whether it has
 * ended (one poll(2) of a descriptor, no wait), at most every
 * PEER_CHECK_EVERY_NS per peer: a poll costs about 200 ns, as much as a
 * quarter of a small message's latency.  That leaves a death after the
 * check, during the ending of the process (which takes milliseconds for a
 * large one) and in the interval; the check narrows the hazard, it does
 * not remove it.
 *
 * The pid comes from the peer's shm address, which ep.c makes
 * "shemb-<pid>-<random>".  Where a pidfd cannot be had (another pid
 * namespace, an old kernel), the peer goes unchecked, as before.
 */
#define _GNU_SOURCE
#include "config.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fabric/engine.h"

#define PEER_CHECK_EVERY_NS 50000ull

static int pid_of_name(const char *name, size_t len)
{
	static const char tag[] = "shemb-";
	const char *s = memmem(name, len, tag, sizeof(tag) - 1);
	char num[24];
	size_t n;
	long pid;
	char *end;

	if (!s)
		return -1;
	s += sizeof(tag) - 1;	/* the digits, copied: name ends at len */
	n = (size_t)(name + len - s) < sizeof(num) - 1 ?
		    (size_t)(name + len - s) : sizeof(num) - 1;
	memcpy(num, s, n);
	num[n] = '\0';
	pid = strtol(num, &end, 10);
	return *end == '-' && pid > 0 && pid < (1L << 30) ? (int)pid : -1;
}

static int open_pidfd(int pid)
{
#ifdef SYS_pidfd_open
	return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
	(void)pid;
	return -1;
#endif
}

/* names: world slots of slot bytes, each a 4-byte length then the name */
void shemb__peer_procs_open(struct fab *f, const void *names, size_t slot)
{
	f->peer_proc = calloc((size_t)f->world, sizeof(*f->peer_proc));
	if (!f->peer_proc)
		return; /* unchecked, as without pidfds */
	for (int r = 0; r < f->world; r++) {
		const char *s = (const char *)names + (size_t)r * slot;
		uint32_t len;

		memcpy(&len, s, sizeof(len));
		f->peer_proc[r].pidfd = r == f->rank || len > slot - 4 ? -1
					: open_pidfd(pid_of_name(s + 4, len));
	}
}

bool shemb__peer_proc_ended(struct fab *f, int rank)
{
	struct peer_proc *p = f->peer_proc ? &f->peer_proc[rank] : NULL;
	struct pollfd pfd;
	uint64_t now;

	if (!p || p->pidfd < 0 || p->ended)
		return p && p->ended;
	now = shemb__fab_now_ns();
	if (now < p->next_check_ns)
		return false;
	p->next_check_ns = now + PEER_CHECK_EVERY_NS;
	pfd.fd = p->pidfd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	p->ended = poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP));
	return p->ended;
}

void shemb__peer_procs_close(struct fab *f)
{
	for (int r = 0; f->peer_proc && r < f->world; r++)
		if (f->peer_proc[r].pidfd >= 0)
			close(f->peer_proc[r].pidfd);
	free(f->peer_proc);
	f->peer_proc = NULL;
}
