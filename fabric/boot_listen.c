/*
 * boot_listen.c - rank 0's listeners at the root address: bound here, or
 * taken from a listening socket the launcher bound before starting rank 0
 * (SHEMB_ROOT_FD), so that no other program can take the port in between.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

static int same_address(const struct sockaddr *a,
			const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *x4 = (const void *)a, *y4 = (const void *)ss;
	const struct sockaddr_in6 *x6 = (const void *)a,
				  *y6 = (const void *)ss;

	if (a->sa_family != ss->ss_family)
		return 0;
	if (a->sa_family == AF_INET)
		return x4->sin_port == y4->sin_port &&
		       x4->sin_addr.s_addr == y4->sin_addr.s_addr;
	return x6->sin6_port == y6->sin6_port &&
	       memcmp(&x6->sin6_addr, &y6->sin6_addr,
		      sizeof(x6->sin6_addr)) == 0;
}

/*
 * Take the listener the launcher bound (b->root_fd): 0 when taken, 1 when
 * it is bound to another address than the root's (it belongs to another
 * job: bind as usual), or an error.  A duplicate is taken, so that the
 * inherited descriptor serves a later context of this process too.
 */
static int adopt_listener(struct shemb__boot *b, const struct addrinfo *res,
			  char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int fd, fl;

	if (!is_listener(b->root_fd, &ss))
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "rank 0: descriptor %d, given for the root's listener (SHEMB_ROOT_FD), is not a listening TCP socket",
				       b->root_fd);
	for (; res && !same_address(res->ai_addr, &ss); res = res->ai_next)
		;
	if (!res)
		return 1;
	fd = fcntl(b->root_fd, F_DUPFD_CLOEXEC, 0);
	fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return shemb__boot_err(err, errlen, SHEMB_EIO,
				       "rank 0 cannot take its listener from descriptor %d: %s",
				       b->root_fd, strerror(e));
	}
	b->lfd[b->nlisten++] = fd;
	return 0;
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
