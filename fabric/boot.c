/*
 * boot.c - the rendezvous' entry points (fabric/boot.h): the checks of the
 * configuration and of the arguments, the handle, and the lock that lets
 * poll_left run from a progress thread next to an allgather.
 *
 * The wire protocol is described in boot_proto.h; rank 0's side is in
 * boot_root.c (rendezvous) and boot_relay.c (allgather, liveness), the
 * other ranks' in boot_client.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/boot_int.h"
#include "shemb.h"

static int check_root(const char *root, char *err, size_t errlen)
{
	char host[SHEMB__BOOT_MSG_LEN], port[8];
	int rc;

	if (!root || !*root)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "no root address: rank 0's host:port is needed");
	if (strlen(root) >= SHEMB__BOOT_MSG_LEN)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "root address longer than %d characters",
				       SHEMB__BOOT_MSG_LEN - 1);
	rc = shemb__boot_split_root(root, host, sizeof(host), port,
				    sizeof(port));
	if (rc == -2)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "root address '%s': write an IPv6 address in brackets, as [addr]:port",
				       root);
	if (rc != 0)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "root address '%s' is not host:port with a port from 1 to 65535",
				       root);
	return 0;
}

static int check_cfg(const struct shemb__boot_cfg *cfg, char *err,
		     size_t errlen)
{
	if (!cfg)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "no rendezvous configuration");
	if (cfg->world_size < 2 || cfg->world_size > SHEMB__BOOT_MAX_WORLD)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "world size %d: the rendezvous takes 2 to %d ranks",
				       cfg->world_size, SHEMB__BOOT_MAX_WORLD);
	if (cfg->rank < 0 || cfg->rank >= cfg->world_size)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "rank %d is outside the world of %d ranks (0..%d)",
				       cfg->rank, cfg->world_size,
				       cfg->world_size - 1);
	if (cfg->timeout_ms <= 0)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "rendezvous timeout of %d ms: it must be positive",
				       cfg->timeout_ms);
	return check_root(cfg->root, err, errlen);
}

static void boot_free(struct shemb__boot *b)
{
	int npeer = b->rank == 0 ? b->world_size : 1;

	for (int i = 0; b->peer && i < npeer; i++)
		shemb__boot_peer_close(&b->peer[i]);
	for (int i = 0; i < b->nlisten; i++)
		close(b->lfd[i]);
	shemb__boot_listen_release(b);
	explicit_bzero(b->key, sizeof(b->key));
	pthread_mutex_destroy(&b->lock);
	free(b->peer);
	free(b->pfd);
	free(b);
}

static struct shemb__boot *boot_new(const struct shemb__boot_cfg *cfg)
{
	struct shemb__boot *b = calloc(1, sizeof(*b));
	size_t npeer = cfg->rank == 0 ? (size_t)cfg->world_size : 1;

	if (!b)
		return NULL;
	b->rank = cfg->rank;
	b->world_size = cfg->world_size;
	b->timeout_ms = cfg->timeout_ms;
	b->root_fd = cfg->rank == 0 ? cfg->root_fd : 0;
	strcpy(b->root, cfg->root);
	shemb__boot_derive_key(cfg->job_key, b->key);
	atomic_init(&b->left, -1);
	pthread_mutex_init(&b->lock, NULL);
	b->peer = calloc(npeer, sizeof(*b->peer));
	b->pfd = calloc(SHEMB__BOOT_MAX_LISTEN + SHEMB__BOOT_MAX_PENDING +
				(size_t)cfg->world_size,
			sizeof(*b->pfd));
	for (size_t i = 0; b->peer && i < npeer; i++)
		shemb__boot_peer_init(&b->peer[i], -1);
	if (!b->peer || !b->pfd) {
		boot_free(b);
		return NULL;
	}
	return b;
}

int shemb__boot_open(const struct shemb__boot_cfg *cfg,
		     struct shemb__boot **boot, char *err, size_t errlen)
{
	struct shemb__boot *b;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!boot)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "no place for the rendezvous handle");
	*boot = NULL;
	rc = check_cfg(cfg, err, errlen);
	if (rc)
		return rc;
	b = boot_new(cfg);
	if (!b)
		return shemb__boot_err(err, errlen, SHEMB_ENOMEM,
				       "rank %d: out of memory for the rendezvous",
				       cfg->rank);
	rc = b->rank == 0 ? shemb__boot_root_open(b, err, errlen) :
			    shemb__boot_client_open(b, err, errlen);
	if (rc) {
		boot_free(b);
		return rc;
	}
	*boot = b;
	return 0;
}

static int check_gather_args(const struct shemb__boot *b, const void *mine,
			     const void *all, size_t len, char *err,
			     size_t errlen)
{
	if (!b)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "allgather without a rendezvous handle");
	if (len > SHEMB__BOOT_BLOB_MAX)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "allgather of %zu bytes per rank: at most %d",
				       len, SHEMB__BOOT_BLOB_MAX);
	if (len && (!mine || !all))
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "allgather of %zu bytes with a NULL buffer",
				       len);
	if ((uint64_t)len * (uint64_t)b->world_size > UINT32_MAX)
		return shemb__boot_err(err, errlen, SHEMB_EINVAL,
				       "allgather of %d x %zu bytes: more than one message can carry",
				       b->world_size, len);
	return 0;
}

int shemb__boot_allgather(struct shemb__boot *b, const void *mine,
			  void *all, size_t len, char *err, size_t errlen)
{
	int rc, left;

	if (err && errlen)
		err[0] = '\0';
	rc = check_gather_args(b, mine, all, len, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&b->lock);
	left = atomic_load(&b->left);
	if (b->failed)
		rc = shemb__boot_err(err, errlen, b->failed,
				     "an earlier allgather failed: %s",
				     b->failmsg);
	else if (left >= 0)
		rc = shemb__boot_err(err, errlen, SHEMB_EPEER,
				     "rank %d has left the job", left);
	else if (b->rank == 0)
		rc = shemb__boot_root_allgather(b, mine, all, len, err, errlen);
	else
		rc = shemb__boot_client_allgather(b, mine, all, len, err,
						  errlen);
	pthread_mutex_unlock(&b->lock);
	return rc;
}

int shemb__boot_local_ip(const struct shemb__boot *b, char *ip, size_t len)
{
	size_t n;

	if (!b || !ip || len == 0)
		return SHEMB_EINVAL;
	ip[0] = '\0';
	n = strlen(b->local_ip);
	if (n == 0)
		return SHEMB_EIO;
	if (n >= len)
		return SHEMB_EINVAL;
	memcpy(ip, b->local_ip, n + 1);
	return 0;
}

int shemb__boot_poll_left(struct shemb__boot *b)
{
	int left;

	if (!b)
		return -1;
	left = atomic_load(&b->left);
	/* Rank 0 goes on watching after the first loss: it relays every
	 * rank that leaves to the others. */
	if (left >= 0 && b->rank != 0)
		return left;
	/* An allgather holds the lock and watches the connections itself. */
	if (pthread_mutex_trylock(&b->lock) != 0)
		return left;
	if (b->rank == 0)
		shemb__boot_root_poll(b);
	else
		shemb__boot_client_poll(b);
	pthread_mutex_unlock(&b->lock);
	return atomic_load(&b->left);
}

void shemb__boot_close(struct shemb__boot *b)
{
	if (!b)
		return;
	/* LEFT and FAIL still queued: whatever the sockets take now */
	if (b->rank == 0)
		for (int r = 1; r < b->world_size; r++)
			if (b->peer[r].fd >= 0)
				shemb__boot_peer_flush(&b->peer[r]);
	boot_free(b);
}
