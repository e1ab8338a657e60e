/*
 * fabric.h - the libfabric communicator: how the core opens one.
 */
#ifndef SHEMB_FABRIC_H
#define SHEMB_FABRIC_H

#include <stdbool.h>
#include <stddef.h>

#include "shemb.h"
#include "lib/comm.h"

struct shemb__fabric_cfg {
	int rank, world_size;
	const char *root;             /* TCP rendezvous, unless oob */
	int root_fd;                  /* > 0: rank 0's listener, bound */
	const char *job_key;
	const char *provider;         /* NULL: by host (shm or tcp;ofi_rxm) */
	int progress;                 /* enum shemb_progress */
	int timeout_ms;
	size_t chunk_bytes;
	int chunks_in_flight;         /* 0: by provider */
	int single_copy;              /* 1 required, 0 if possible, -1 no */
	int slice_us;                 /* the progress thread's, if > 0 */
	shemb_oob_allgather_fn oob_allgather;
	void *oob_arg;
};

extern const struct shemb_comm_ops shemb__fabric_ops;

/* Collective: meet the other ranks and open the endpoint.  0 or a
 * negative SHEMB_E* code with the reason in err. */
int shemb__fabric_open(const struct shemb__fabric_cfg *cfg, void **comm,
		       char *err, size_t errlen);

/* The provider in use ("shm", "tcp;ofi_rxm" ...), the chunk size and the
 * data chunks in flight. */
const char *shemb__fabric_provider(void *comm);
size_t shemb__fabric_chunk(void *comm);
int shemb__fabric_chunks_in_flight(void *comm);
/* Whether bulk alltoallv and allgatherv move by single copy (cma.c) */
bool shemb__fabric_single_copy(void *comm);
/* Whether a rank tells the others of a failed call by injected message,
 * which needs none of the library's memory (ctrl.c) */
bool shemb__fabric_injects_ctrl(void *comm);
/* Whether a collective failed by control message settles before its
 * wait returns, holding nothing after (fabric/settle.c); not over shm. */
bool shemb__fabric_settles(void *comm);
/* How many receives completed with a message of another tag, which the
 * engine dropped (engine.c, wrong_message): a provider's matching gone
 * wrong, or a tag mask left to it (tests: none). */
unsigned long shemb__fabric_wrong_messages(void *comm);
/* How many acknowledgements of single copies that a failed call's peer
 * said it sent were taken by receives posted for them then (mop.c; tests:
 * that the accounts count them). */
unsigned long shemb__fabric_late_acks(void *comm);
/* How many posts of transfers SHEMB_FABRIC_EAGAIN refused (engine.c;
 * tests: that the refusals happened). */
unsigned long shemb__fabric_test_refusals(void *comm);
/* How many calls started on the urgent lane, or on the bulk lane (tests:
 * that a call's priority picks its lane). */
unsigned long shemb__fabric_lane_calls(void *comm, bool urgent);
/* The collectives the transport still holds, transfers and all, once
 * their transfers had up to ms to complete (tests: a failed collective
 * must leave none behind); -1 if the engine's lock cannot be had. */
int shemb__fabric_ops_held(void *comm, int ms);
/* Receives of collectives posted now (not the control messages'), for
 * tests: those of failed calls that nothing will fill stay posted. */
int shemb__fabric_recvs_posted(void *comm);
/* The receives of failed collectives' messages (fabric/mop.c, over shm)
 * still waiting once their messages had up to ms to come (tests: a
 * receive asked for a message that was never sent, none); -1 if the
 * engine's lock cannot be had. */
int shemb__fabric_late_receives(void *comm, int ms);

#endif
