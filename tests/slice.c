/*
 * slice.c - see slice.h.
 */
#define _GNU_SOURCE
#include "tests/slice.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct sched_attr, first version. */
struct attr48 {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static bool comm_is(const char *tid, const char *name)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return !strcmp(comm, name);
}

int slice_thread_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int tid = -1;

	if (!d)
		return -1;
	while (tid < 0 && (e = readdir(d)))
		if (e->d_name[0] != '.' && comm_is(e->d_name, name))
			tid = atoi(e->d_name);
	closedir(d);
	return tid;
}

long long slice_of_thread(int tid)
{
	struct attr48 a = { 0 };

	if (syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof(a), 0u))
		return -1;
	return (long long)a.runtime;
}

struct probe {
	long long dflt, got;
};

/* On a fresh thread: its slice, then the one it has after asking for
 * 300 us. */
static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct attr48 a = { 0 };

	p->dflt = p->got = -1;
	if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0u))
		return NULL;
	p->dflt = (long long)a.runtime;
	a.size = sizeof(a);
	a.flags = 0;
	a.runtime = 300000;
	if (syscall(SYS_sched_setattr, 0, &a, 0u) == 0)
		p->got = slice_of_thread(0);
	return NULL;
}

bool slice_kernel_takes(long long *dflt)
{
	struct probe p = { -1, -1 };
	pthread_t t;

	if (pthread_create(&t, NULL, probe_main, &p) == 0)
		pthread_join(t, NULL);
	*dflt = p.dflt;
	return p.got == 300000 && p.dflt > 0 && p.dflt != 300000;
}
