/*
 * shm_regions.c - see shm_regions.h.
 */
#include "tools/shm_regions.h"

#include <glob.h>
#include <stdio.h>
#include <unistd.h>

void shemb_run_remove_shm_regions(pid_t pid)
{
	char pattern[64];
	glob_t g;

	snprintf(pattern, sizeof(pattern), "/dev/shm/shemb-%d-*", (int)pid);
	if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
}
