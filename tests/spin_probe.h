/*
 * spin_probe.h - whether a process that should have ended is stuck in a
 * spin lock taken by a given shared library (a test's way to tell a known
 * hang of a dependency from a hang of the library under test).
 */
#ifndef SHEMB_TEST_SPIN_PROBE_H
#define SHEMB_TEST_SPIN_PROBE_H

#include <sys/types.h>

/*
 * 1 when some thread of pid (a child of the caller, running the same C
 * library) is inside pthread_spin_lock(), called from a mapping whose path
 * contains `caller`, at each of `looks` looks 100 ms apart; 0 when none
 * is; -1 when this cannot be told (ptrace refused, another architecture).
 * Each thread is stopped only for the look.
 */
int spin_probe_spinning(pid_t pid, const char *caller, int looks);

#endif
