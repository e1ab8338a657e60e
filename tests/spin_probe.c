/*
 * spin_probe.c - where a child's threads are, through ptrace: each thread
 * is seized, interrupted, asked for its program counter and return
 * address, and let go; addresses are placed with /proc/PID/maps.
 *
 * glibc's pthread_spin_lock() makes no stack frame (x86_64: the return
 * address is at the stack pointer; aarch64: in the link register), so a
 * thread spinning in it shows both where it spins and who called it.
 */
#define _GNU_SOURCE
#include "tests/spin_probe.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#define MAX_THREADS 64
#define SPIN_LOCK_BYTES 32 /* the function, with its spin loop */

struct where {
	uintptr_t pc, ret;
};

static int regs_of(pid_t tid, struct where *w)
{
	struct user_regs_struct regs;
	struct iovec iov = { &regs, sizeof(regs) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov) != 0)
		return -1;
#if defined(__x86_64__)
	errno = 0;
	w->pc = (uintptr_t)regs.rip;
	w->ret = (uintptr_t)ptrace(PTRACE_PEEKDATA, tid, (void *)regs.rsp, 0);
	return errno ? -1 : 0;
#elif defined(__aarch64__)
	w->pc = (uintptr_t)regs.pc;
	w->ret = (uintptr_t)regs.regs[30];
	return 0;
#else
	return -1;
#endif
}

/* Where thread tid is; -1 when it cannot be had. */
static int thread_where(pid_t tid, struct where *w)
{
	int st, rc = -1;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		return -1;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 &&
	    waitpid(tid, &st, __WALL) == tid)
		rc = regs_of(tid, w);
	ptrace(PTRACE_DETACH, tid, 0, 0);
	return rc;
}

/* The mapping of pid holding addr: its line in maps, into line. */
static int mapping_of(pid_t pid, uintptr_t addr, char *line, size_t len)
{
	char path[64];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (!found && fgets(line, (int)len, f)) {
		unsigned long lo, hi;

		found = sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo &&
			addr < hi;
	}
	fclose(f);
	return found;
}

/* The lowest address at which pid maps the file `file`, or 0. */
static uintptr_t base_of(pid_t pid, const char *file)
{
	char path[64], line[768];
	uintptr_t base = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo;
		char *p = strchr(line, '/');

		if (p && sscanf(line, "%lx-", &lo) == 1 &&
		    strncmp(p, file, strlen(file)) == 0 &&
		    p[strlen(file)] == '\n' && (!base || lo < base))
			base = lo;
	}
	fclose(f);
	return base;
}

/* pthread_spin_lock in pid: at the offset it has in this process's C
 * library, from the base of the same file there. */
static uintptr_t spin_lock_in(pid_t pid)
{
	uintptr_t mine = (uintptr_t)pthread_spin_lock, base, theirs;
	char line[768], *file, *nl;

	if (!mapping_of(getpid(), mine, line, sizeof(line)) ||
	    !(file = strchr(line, '/')))
		return 0;
	nl = strchr(file, '\n');
	if (nl)
		*nl = '\0';
	base = base_of(getpid(), file);
	theirs = base_of(pid, file);
	return base && theirs ? theirs + (mine - base) : 0;
}

static int list_threads(pid_t pid, pid_t *tids)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)) && n < MAX_THREADS)
		if (e->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

static int spins_for(pid_t pid, const struct where *w, uintptr_t lock,
		     const char *caller)
{
	char line[768];

	return w->pc >= lock && w->pc < lock + SPIN_LOCK_BYTES &&
	       mapping_of(pid, w->ret, line, sizeof(line)) &&
	       strstr(line, caller) != NULL;
}

int spin_probe_spinning(pid_t pid, const char *caller, int looks)
{
	pid_t tids[MAX_THREADS];
	int hits[MAX_THREADS] = { 0 }, n = list_threads(pid, tids), seen = 0;
	uintptr_t lock = spin_lock_in(pid);
	struct timespec nap = { 0, 100000000 };

	if (n <= 0 || !lock)
		return -1;
	for (int k = 0; k < looks; k++) {
		if (k)
			nanosleep(&nap, NULL);
		for (int i = 0; i < n; i++) {
			struct where w;

			if (thread_where(tids[i], &w) != 0)
				continue;
			seen++;
			hits[i] += spins_for(pid, &w, lock, caller);
		}
	}
	if (!seen)
		return -1;
	for (int i = 0; i < n; i++)
		if (hits[i] == looks)
			return 1;
	return 0;
}
