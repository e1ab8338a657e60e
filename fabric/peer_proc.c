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
 * ended (one poll(2) of a descriptor, no wait).  Only a death in the few
 * microseconds between that check and the send can still catch it.
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

static int pid_of_name(const char *name, size_t len)
{
	static const char tag[] = "shemb-";
	const char *s = memmem(name, len, tag, sizeof(tag) - 1);
	long pid;
	char *end;

	if (!s)
		return -1;
	pid = strtol(s + sizeof(tag) - 1, &end, 10);
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
	f->peer_pidfd = malloc((size_t)f->world * sizeof(int));
	if (!f->peer_pidfd)
		return; /* unchecked, as without pidfds */
	for (int r = 0; r < f->world; r++) {
		const char *s = (const char *)names + (size_t)r * slot;
		uint32_t len;

		memcpy(&len, s, sizeof(len));
		f->peer_pidfd[r] = r == f->rank || len > slot - 4 ? -1
				   : open_pidfd(pid_of_name(s + 4, len));
	}
}

bool shemb__peer_proc_ended(const struct fab *f, int rank)
{
	struct pollfd p;

	if (!f->peer_pidfd || f->peer_pidfd[rank] < 0)
		return false;
	p.fd = f->peer_pidfd[rank];
	p.events = POLLIN;
	p.revents = 0;
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
}

void shemb__peer_procs_close(struct fab *f)
{
	for (int r = 0; f->peer_pidfd && r < f->world; r++)
		if (f->peer_pidfd[r] >= 0)
			close(f->peer_pidfd[r]);
	free(f->peer_pidfd);
	f->peer_pidfd = NULL;
}
