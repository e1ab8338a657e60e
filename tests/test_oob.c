/*
 * test_oob.c - ranks that meet through the host's own out-of-band
 * allgather (here: shared memory between forked processes) instead of the
 * TCP rendezvous, as an MPI or PMIx host would; then an allreduce and an
 * alltoallv between them.  Each rank is a child; every child is reaped,
 * and killed if the test runs out of time.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <shemb.h>

#define WORLD 3
#define SLOT 4096

struct board {
	pthread_barrier_t bar;
	char data[WORLD][SLOT];
	int calls;
};

struct oob {
	struct board *b;
	int rank;
};

static int oob_allgather(void *arg, const void *mine, void *all, size_t len)
{
	struct oob *o = arg;

	if (len > SLOT)
		return -1;
	memcpy(o->b->data[o->rank], mine, len);
	pthread_barrier_wait(&o->b->bar);
	for (int r = 0; r < WORLD; r++)
		memcpy((char *)all + (size_t)r * len, o->b->data[r], len);
	pthread_barrier_wait(&o->b->bar); /* nobody overwrites too early */
	if (o->rank == 0)
		o->b->calls++;
	return 0;
}

static int rank_main(struct board *b, int rank, const char *provider)
{
	struct oob o = { b, rank };
	struct shemb_ctx_attr a;
	size_t sc[WORLD], sd[WORLD], rc[WORLD], rd[WORLD];
	int sb[WORLD], rb[WORLD];
	double v[1000];
	shemb_ctx *ctx;

	shemb_ctx_attr_init(&a);
	a.rank = rank;
	a.world_size = WORLD;
	a.nthreads = 1;
	a.provider = provider;
	a.oob_allgather = oob_allgather;
	a.oob_arg = &o;
	a.timeout_ms = 20000;
	if (shemb_ctx_create(&a, &ctx)) {
		printf("rank %d: %s\n", rank, shemb_ctx_last_error(NULL));
		return 1;
	}
	for (int k = 0; k < 1000; k++)
		v[k] = rank + k;
	for (int j = 0; j < WORLD; j++) {
		sc[j] = rc[j] = sizeof(int);
		sd[j] = rd[j] = (size_t)j * sizeof(int);
		sb[j] = rank * 10 + j;
	}
	if (shemb_allreduce(ctx, v, v, 1000, SHEMB_F64, SHEMB_REDUCE_SUM,
			    NULL) ||
	    shemb_alltoallv(ctx, sb, sc, sd, rb, rc, rd, NULL)) {
		printf("rank %d: %s\n", rank, shemb_ctx_last_error(ctx));
		return 1;
	}
	for (int k = 0; k < 1000; k++)
		if (v[k] != 3.0 * k + 3)
			return 1;
	for (int j = 0; j < WORLD; j++)
		if (rb[j] != j * 10 + rank)
			return 1;
	shemb_ctx_destroy(ctx);
	return 0;
}

static int run(const char *provider)
{
	struct board *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_barrierattr_t ba;
	pid_t kid[WORLD];
	int ok = 1;

	if (b == MAP_FAILED)
		return 0;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&b->bar, &ba, WORLD);
	for (int r = 0; r < WORLD; r++) {
		kid[r] = fork();
		if (kid[r] == 0)
			_exit(rank_main(b, r, provider));
	}
	for (int r = 0; r < WORLD; r++) {
		int st;

		waitpid(kid[r], &st, 0);
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	ok &= b->calls >= 2; /* the ranks did meet through it */
	printf("%s oob allgather, %s\n", ok ? "ok  " : "FAIL", provider);
	munmap(b, sizeof(*b));
	return ok;
}

static void on_alarm(int sig)
{
	kill(0, SIGKILL); /* this test's process group: the ranks and it */
}

int main(void)
{
	int ok;

	setpgid(0, 0);
	signal(SIGALRM, on_alarm);
	alarm(60);
	ok = run("shm");
	ok &= run("tcp;ofi_rxm");
	return ok ? 0 : 1;
}
