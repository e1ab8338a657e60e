/*
 * ident.c - a context's rank and world size: from its attrs, else from the
 * variables that launchers set, so one binary runs under shemb-run,
 * mpirun and srun alike.
 */
#include "lib/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

static const struct {
	const char *rank, *size;
} launchers[] = {
	{ "SHEMB_RANK", "SHEMB_WORLD_SIZE" },
	{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
	{ "PMI_RANK", "PMI_SIZE" },
	{ "SLURM_PROCID", "SLURM_NTASKS" },
};

/* 0 and *out, or -1 when the variable holds no integer. */
static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < INT_MIN || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static int from_environment(int *rank, int *world)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		if (!getenv(launchers[i].size))
			continue;
		if (env_int(launchers[i].size, world) ||
		    env_int(launchers[i].rank, rank))
			return shemb__fail(NULL, SHEMB_EINVAL,
					   "%s and %s must both be integers",
					   launchers[i].rank,
					   launchers[i].size);
		return 1;
	}
	return 0;
}

int shemb__resolve_identity(struct shemb_ctx_attr *a)
{
	int rank = -1, world = 0, found = 0;

	if (a->world_size == 0 || a->rank == -1)
		found = from_environment(&rank, &world);
	if (found < 0)
		return found;
	if (a->world_size == 0)
		a->world_size = found ? world : 1;
	if (a->rank == -1)
		a->rank = found ? rank : (a->world_size == 1 ? 0 : -1);
	if (a->world_size < 1 || a->rank < 0 || a->rank >= a->world_size)
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "rank %d of world size %d is impossible%s",
				   a->rank, a->world_size,
				   a->rank == -1 ? " (no launcher variable "
						   "gives the rank)" : "");
	return 0;
}
