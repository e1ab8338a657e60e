/*
 * boot_listen.c - rank 0's listeners at the root address: bound here, or
 * taken from a listening socket the launcher bound before starting rank 0
 * (SHEMB_ROOT_FD), so that no other program can take the port in between.
 * One context of a process at a time holds that listener.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric/boot_int.h"
#include "shemb.h"

static int listen_one(const struct addrinfo *ai, int *fdp)
{
	int one = 1, e;
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);

	if (fd < 0)
		return errno;
	/* SO_REUSEADDR lets a new job's rank 0 bind while connections of
	 * the last one linger in TIME_WAIT; on Linux it does not let two
	 * listeners share a port (SO_REUSEPORT would: never set it). */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		e = errno;
		close(fd);
		return e;
	}
	*fdp = fd;
	return 0;
}

static int listen_error(struct shemb__boot *b, const char *where, int e,
			char *err, size_t errlen)
{
	if (e == EADDRINUSE)
		return shemb__boot_err(err, errlen, SHEMB_EIO,
			"rank 0 cannot listen at %s: the address is in use; another job (or another program) may hold this port: give each job its own root port",
			where);
	if (e == EADDRNOTAVAIL)
		return shemb__boot_err(err, errlen, SHEMB_EIO,
			"rank 0 cannot listen at %s: that address is not one of this host's (is rank 0 running on the root host?)",
			where);
	if (e == EACCES)
		return shemb__boot_err(err, errlen, SHEMB_EIO,
			"rank 0 cannot listen at %s: permission denied (ports below 1024 need privileges)",
			where);
	return shemb__boot_err(err, errlen, SHEMB_EIO,
			       "rank 0 cannot listen at %s: %s", where,
			       strerror(e));
}

static int seen_before(const struct addrinfo *res, const struct addrinfo *ai)
{
	for (const struct addrinfo *x = res; x != ai; x = x->ai_next)
		if (x->ai_addrlen == ai->ai_addrlen &&
		    memcmp(x->ai_addr, ai->ai_addr, ai->ai_addrlen) == 0)
			return 1;
	return 0;
}

static void close_listeners(struct shemb__boot *b)
{
	for (int i = 0; i < b->nlisten; i++)
		close(b->lfd[i]);
	b->nlisten = 0;
}

static int bind_resolved(struct shemb__boot *b, struct addrinfo *res,
			 char *err, size_t errlen)
{
	int first_err = 0;

	/* Every address the name has on this host: a rank that resolves
	 * the name to either one finds rank 0. */
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = -1, e;

		if (seen_before(res, ai) ||
		    b->nlisten == SHEMB__BOOT_MAX_LISTEN)
			continue;
		e = listen_one(ai, &fd);
		if (e == 0) {
			b->lfd[b->nlisten++] = fd;
			continue;
		}
		if (!first_err)
			first_err = e;
		if (e != EADDRNOTAVAIL && e != EAFNOSUPPORT) {
			close_listeners(b);
			return listen_error(b, b->root, e, err, errlen);
		}
	}
	if (b->nlisten == 0)
		return listen_error(b, b->root, first_err ? first_err : EINVAL,
				    err, errlen);
	return 0;
}

static void note_local_ip(struct shemb__boot *b)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(b->lfd[0], (struct sockaddr *)&ss, &sl) != 0 ||
	    shemb__boot_numeric_ip((struct sockaddr *)&ss, b->local_ip,
				   sizeof(b->local_ip)) != 0)
		b->local_ip[0] = '\0';
}

/* Is fd a listening TCP socket?  Its address in *ss if so. */
static int is_listener(int fd, struct sockaddr_storage *ss)
{
	int type = 0, acc = 0;
	socklen_t tl = sizeof(type), al = sizeof(acc), sl = sizeof(*ss);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
	       type == SOCK_STREAM &&
	       getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 &&
	       acc && getsockname(fd, (struct sockaddr *)ss, &sl) == 0 &&
	       (ss->ss_family == AF_INET || ss->ss_family == AF_INET6);
}

static in_port_t port_of(const void *a)
{
	const struct sockaddr_in *a4 = a;
	const struct sockaddr_in6 *a6 = a;

	return a4->sin_family == AF_INET ? a4->sin_port : a6->sin6_port;
}

/* How a listener at ss serves the root address a: SERVES when it is bound
 * to a's port and a's address (or a wildcard or mapped form that takes
 * connections to it), PORT_ONLY when to the port alone, 0 otherwise. */
enum { SERVES = 2, PORT_ONLY = 1 };

static int serves(const struct sockaddr *a, const struct sockaddr_storage *ss,
		  bool v6only)
{
	const struct sockaddr_in *a4 = (const void *)a, *l4 = (const void *)ss;
	const struct sockaddr_in6 *a6 = (const void *)a,
				  *l6 = (const void *)ss;

	if (port_of(a) != port_of(ss))
		return 0;
	if (ss->ss_family == AF_INET)
		return a->sa_family == AF_INET &&
		       (l4->sin_addr.s_addr == htonl(INADDR_ANY) ||
			l4->sin_addr.s_addr == a4->sin_addr.s_addr) ? SERVES
								    : PORT_ONLY;
	if (a->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&l6->sin6_addr) ||
		       (IN6_ARE_ADDR_EQUAL(&l6->sin6_addr, &a6->sin6_addr) &&
			l6->sin6_scope_id == a6->sin6_scope_id) ? SERVES
								 : PORT_ONLY;
	if (v6only)
		return PORT_ONLY;
	return IN6_IS_ADDR_UNSPECIFIED(&l6->sin6_addr) ||
	       (IN6_IS_ADDR_V4MAPPED(&l6->sin6_addr) &&
		memcmp(&l6->sin6_addr.s6_addr[12], &a4->sin_addr, 4) == 0)
		       ? SERVES : PORT_ONLY;
}

/* The inherited listener a live context of this process holds, or -1: two
 * contexts polling one socket would each accept the other's ranks. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static int held_fd = -1;

static bool hold(int fd)
{
	bool ok;

	pthread_mutex_lock(&held_lock);
	ok = held_fd != fd;
	if (ok)
		held_fd = fd;
	pthread_mutex_unlock(&held_lock);
	return ok;
}

void shemb__boot_listen_release(struct shemb__boot *b)
{
	if (!b->root_fd_held)
		return;
	pthread_mutex_lock(&held_lock);
	held_fd = -1;
	pthread_mutex_unlock(&held_lock);
	b->root_fd_held = false;
}

/* A duplicate of the listener, non-blocking (a flag the original shares:
 * nobody else accepts on it), into b->lfd; the original no longer passes
 * to programs this process runs. */
static int take_listener(struct shemb__boot *b, char *err, size_t errlen)
{
	int fd = fcntl(b->root_fd, F_DUPFD_CLOEXEC, 0);
	int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(b->root_fd, F_SETFD, FD_CLOEXEC) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		shemb__boot_listen_release(b);
		return shemb__boot_err(err, errlen, SHEMB_EIO,
				       "rank 0 cannot take its listener from descriptor %d: %s",
				       b->root_fd, strerror(e));
	}
	b->lfd[b->nlisten++] = fd;
	return 0;
}

/*
 * Take the listener the launcher bound (b->root_fd): 0 when taken, 1 when
 * it is bound to another port than the root's (it belongs to another job:
 * bind as usual), or an error.  The inherited descriptor stays open for a
 * later context of this process, once this one is destroyed.
 */
static int adopt_listener(struct shemb__boot *b, const struct addrinfo *res,
			  char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int v6only = 0, best = 0;
	socklen_t vl = sizeof(v6only);

	if (!is_listener(b->root_fd, &ss))
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "rank 0: descriptor %d, given for the root's listener (SHEMB_ROOT_FD), is not a listening TCP socket",
				       b->root_fd);
	if (ss.ss_family == AF_INET6)
		getsockopt(b->root_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vl);
	for (; res; res = res->ai_next) {
		int how = serves(res->ai_addr, &ss, v6only != 0);

		best = how > best ? how : best;
	}
	if (best == 0)
		return 1;
	if (best == PORT_ONLY)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "rank 0: descriptor %d, given for the root's listener (SHEMB_ROOT_FD), listens on the port of %s but not at its address",
				       b->root_fd, b->root);
	if (!hold(b->root_fd))
		return shemb__boot_err(err, errlen, SHEMB_EIO,
				       "rank 0: the root's listener, descriptor %d (SHEMB_ROOT_FD), is held by another context of this process until that one is destroyed",
				       b->root_fd);
	b->root_fd_held = true;
	return take_listener(b, err, errlen);
}

int shemb__boot_root_listen(struct shemb__boot *b, char *err, size_t errlen)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV,
	};
	struct addrinfo *res;
	char host[SHEMB__BOOT_MSG_LEN], port[8];
	int rc;

	shemb__boot_split_root(b->root, host, sizeof(host), port,
			       sizeof(port));
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		return shemb__boot_err(err, errlen, SHEMB_EIO,
				       "rank 0 cannot resolve its root address %s: %s",
				       b->root,
				       rc == EAI_SYSTEM ? strerror(errno) :
							  gai_strerror(rc));
	rc = b->root_fd > 0 ? adopt_listener(b, res, err, errlen) : 1;
	if (rc == 1)
		rc = bind_resolved(b, res, err, errlen);
	freeaddrinfo(res);
	if (rc == 0)
		note_local_ip(b);
	return rc;
}
