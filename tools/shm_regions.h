/*
 * shm_regions.h - removing what libfabric's shm provider left of a rank
 * that was killed: libshemb names its region /dev/shm/shemb-<pid>-<random>
 * (fabric/ep.c), so whoever knows the pid removes it once the rank is gone.
 * Shared by shemb-run and the tests that kill ranks themselves.
 */
#ifndef SHEMB_SHM_REGIONS_H
#define SHEMB_SHM_REGIONS_H

#include <sys/types.h>

void shemb_run_remove_shm_regions(pid_t pid);

#endif
