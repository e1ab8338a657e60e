/*
 * fi_load.c - libfabric is loaded when the first context of more than
 * one rank opens its transport, not with libshemb: a program of one rank
 * never loads it.  Loading it runs the constructors of what it depends
 * on, and Debian's libfabric1 depends on libinfinipath (its psm
 * provider), whose constructor sets handlers of SIGSEGV, SIGBUS,
 * SIGILL, SIGABRT, SIGINT and SIGTERM that print a backtrace and exit
 * with status 1: linked in, it did so in every program that linked
 * libshemb, before main(), and over the handlers of a host that loads
 * libshemb with dlopen(3).  The dispositions of every signal are put
 * back as they were once it is loaded.  libfabric stays loaded until the
 * process ends (its providers keep state that outlives any context).
 */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "shemb.h"
#include "fabric/fi_load.h"

#define FABRIC_SONAME "libfabric.so.1"

static struct {
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
		       const struct fi_info *, struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	const char *(*strerror)(int);
} fi;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static bool same_disposition(const struct sigaction *a,
			     const struct sigaction *b)
{
	return a->sa_handler == b->sa_handler &&
	       (a->sa_flags & SA_SIGINFO) == (b->sa_flags & SA_SIGINFO);
}

/* What the loading changed of the signals' dispositions goes back. */
static void *open_keeping_signals(void)
{
	static struct sigaction before[NSIG];
	void *handle;

	for (int s = 1; s < NSIG; s++)
		if (sigaction(s, NULL, &before[s]))
			before[s].sa_handler = SIG_ERR; /* none to keep */
	handle = dlopen(FABRIC_SONAME, RTLD_NOW | RTLD_LOCAL);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction now;

		if (before[s].sa_handler == SIG_ERR ||
		    sigaction(s, NULL, &now) ||
		    same_disposition(&now, &before[s]))
			continue;
		sigaction(s, &before[s], NULL);
	}
	return handle;
}

static void *symbol(void *handle, const char *name)
{
	void *p = dlsym(handle, name);

	if (!p && !load_error[0])
		snprintf(load_error, sizeof(load_error), "%s has no %s",
			 FABRIC_SONAME, name);
	return p;
}

static void load(void)
{
	void *h = open_keeping_signals();

	if (!h) {
		snprintf(load_error, sizeof(load_error), "%s cannot be "
			 "loaded: %s", FABRIC_SONAME, dlerror());
		return;
	}
	*(void **)&fi.getinfo = symbol(h, "fi_getinfo");
	*(void **)&fi.freeinfo = symbol(h, "fi_freeinfo");
	*(void **)&fi.dupinfo = symbol(h, "fi_dupinfo");
	*(void **)&fi.fabric = symbol(h, "fi_fabric");
	*(void **)&fi.strerror = symbol(h, "fi_strerror");
}

int shemb__fi_load(char *err, size_t errlen)
{
	pthread_once(&load_once, load);
	if (!load_error[0])
		return 0;
	snprintf(err, errlen, "%s (libfabric carries the messages between "
		 "ranks)", load_error);
	return SHEMB_ENOTSUP;
}

int shemb__fi_getinfo(uint32_t version, const char *node,
		      const char *service, uint64_t flags,
		      const struct fi_info *hints, struct fi_info **info)
{
	return fi.getinfo(version, node, service, flags, hints, info);
}

void shemb__fi_freeinfo(struct fi_info *info)
{
	fi.freeinfo(info);
}

struct fi_info *shemb__fi_dupinfo(const struct fi_info *info)
{
	return fi.dupinfo(info);
}

int shemb__fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		     void *context)
{
	return fi.fabric(attr, fabric, context);
}

const char *shemb__fi_strerror(int errnum)
{
	return fi.strerror(errnum);
}
