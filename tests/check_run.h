/*
 * check_run.h - run a Check suite and turn its result into the exit
 * status of a test program.
 */
#ifndef SHEMB_TEST_CHECK_RUN_H
#define SHEMB_TEST_CHECK_RUN_H

#include <check.h>

/* 0 when every test of s passed, else 1 (s is freed). */
static inline int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
