/*
 * free_port.c - a free port on 127.0.0.1 outside the ephemeral range, or
 * a listener bound to one.
 */
#define _GNU_SOURCE
#include "tools/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The first port the kernel hands out for outgoing connections. */
static unsigned ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	unsigned lo = 32768, hi;

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

/* Bind 127.0.0.1:port (0: any); the port bound, or 0.  With fdp, the
 * socket listens and stays open in *fdp. */
static unsigned try_port(unsigned port, int *fdp)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		.sin_port = htons((uint16_t)port),
	};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned got = 0;

	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    (!fdp || listen(fd, SOMAXCONN) == 0) &&
	    getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
		got = ntohs(a.sin_port);
	if (got && fdp)
		*fdp = fd;
	else
		(void)close(fd);
	return got;
}

static unsigned pick_port(int *fdp)
{
	unsigned lo = ephemeral_low(), port = 0;
	uint32_t rnd;

	for (int i = 0; lo > 11024 && i < 64 && !port; i++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			rnd = (uint32_t)time(NULL) + (uint32_t)i;
		port = try_port(10000 + rnd % (lo - 10000), fdp);
	}
	return port ? port : try_port(0, fdp);
}

unsigned shemb_tool_free_port(void)
{
	return pick_port(NULL);
}

int shemb_tool_listen_free_port(unsigned *port)
{
	int fd = -1;

	*port = pick_port(&fd);
	return *port ? fd : -1;
}
