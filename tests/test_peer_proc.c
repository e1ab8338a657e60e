/*
 * test_peer_proc.c - the transport's check of whether a local peer's
 * process has ended (fabric/peer_proc.c), against processes this test
 * starts and kills.
 */
#define _GNU_SOURCE
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric/engine.h"
#include "tests/check_run.h"

#define WORLD 6
#define SLOT 64
#define WAIT_MS 5000

/* Slot r of the address table: a 4-byte length, then the name. */
static void put_name(char *names, int r, const char *name)
{
	uint32_t len = (uint32_t)strlen(name);

	memcpy(names + (size_t)r * SLOT, &len, sizeof(len));
	memcpy(names + (size_t)r * SLOT + 4, name, len);
}

/* A child that lives until it is killed; -1 on failure. */
static pid_t start_sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		alarm(60); /* never outlives a broken test for long */
		for (;;)
			pause();
	}
	return pid;
}

static int ended_within(struct fab *f, int rank, int ms)
{
	struct timespec nap = { 0, 1000000 };

	for (int i = 0; i < ms; i++) {
		if (shemb__peer_proc_ended(f, rank))
			return 1;
		nanosleep(&nap, NULL);
	}
	return 0;
}

START_TEST(ended_process_is_seen)
{
	char names[WORLD * SLOT] = { 0 }, name[SLOT];
	struct fab f = { .rank = 0, .world = WORLD };
	pid_t live = start_sleeper(), victim = start_sleeper();
	pid_t reaped = start_sleeper();
	int st;

	ck_assert_int_gt(live, 0);
	ck_assert_int_gt(victim, 0);
	ck_assert_int_gt(reaped, 0);
	put_name(names, 0, "fi_shm://shemb-1-0"); /* this rank: never checked */
	snprintf(name, sizeof(name), "fi_shm://shemb-%d-00ff00ff", (int)live);
	put_name(names, 1, name);
	snprintf(name, sizeof(name), "fi_shm://shemb-%d-1234", (int)victim);
	put_name(names, 2, name);
	put_name(names, 3, "fi_shm://someone-else-7");	/* no pid in it */
	put_name(names, 4, "fi_shm://shemb-12x-1");	/* not a pid */
	snprintf(name, sizeof(name), "fi_shm://shemb-%d-77", (int)reaped);
	put_name(names, 5, name);
	shemb__peer_procs_open(&f, names, SLOT);
	ck_assert_ptr_nonnull(f.peer_proc);
	ck_assert_int_lt(f.peer_proc[0].pidfd, 0);
	ck_assert_int_ge(f.peer_proc[1].pidfd, 0);
	ck_assert_int_ge(f.peer_proc[2].pidfd, 0);
	ck_assert_int_lt(f.peer_proc[3].pidfd, 0);
	ck_assert_int_lt(f.peer_proc[4].pidfd, 0);
	ck_assert_int_ge(f.peer_proc[5].pidfd, 0);
	for (int r = 0; r < 5; r++)
		ck_assert(!shemb__peer_proc_ended(&f, r));

	/* ended and reaped before the first question */
	ck_assert_int_eq(kill(reaped, SIGKILL), 0);
	ck_assert_int_eq(waitpid(reaped, &st, 0), reaped);
	ck_assert(shemb__peer_proc_ended(&f, 5));

	/* killed and not yet reaped (a zombie) counts as ended */
	ck_assert_int_eq(kill(victim, SIGKILL), 0);
	ck_assert_msg(ended_within(&f, 2, WAIT_MS),
		      "the killed process was not seen to end in %d ms",
		      WAIT_MS);
	ck_assert(!shemb__peer_proc_ended(&f, 1));
	ck_assert_int_eq(waitpid(victim, &st, 0), victim);
	ck_assert(shemb__peer_proc_ended(&f, 2));	/* and stays so */

	/* checks come at most every 50 us: within a few ms of the end */
	kill(live, SIGKILL);
	ck_assert_int_eq(waitpid(live, &st, 0), live);
	ck_assert(ended_within(&f, 1, WAIT_MS));
	shemb__peer_procs_close(&f);
	ck_assert_ptr_null(f.peer_proc);
}
END_TEST

/* A table too short for its names leaves those peers unchecked. */
START_TEST(bad_lengths_are_unchecked)
{
	char names[2 * SLOT] = { 0 };
	struct fab f = { .rank = 1, .world = 2 };
	uint32_t len = SLOT;	/* more than the slot holds */

	memcpy(names, &len, sizeof(len));
	shemb__peer_procs_open(&f, names, SLOT);
	ck_assert_ptr_nonnull(f.peer_proc);
	ck_assert_int_lt(f.peer_proc[0].pidfd, 0);
	ck_assert(!shemb__peer_proc_ended(&f, 0));
	shemb__peer_procs_close(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("peer_proc");
	TCase *tc = tcase_create("pidfd");
	int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);

	if (probe < 0) {
		printf("SKIP: this kernel gives no pidfds\n");
		return 77;
	}
	close(probe);
	tcase_add_test(tc, ended_process_is_seen);
	tcase_add_test(tc, bad_lengths_are_unchecked);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
