#!/bin/sh
# Table creations, checkpoint saves and loads, and collectives, in which
# one rank's allocations fail, one at a time, at every point the call
# allocates on the calling thread (tests/oom_rank.c; in the creations,
# saves and loads, the pool's tasks' too; in the other calls the tasks,
# which cannot fail, allocate nothing):
# the failing rank gets SHEMB_ENOMEM, the others succeed or fail naming
# it, and every rank stays in step.  2 and 3 ranks over shm and over
# tcp;ofi_rxm, with the progress thread and with caller progress.  Then
# a shortage: every allocation fails from the armed one on, the
# transport's retries included, so that the failing rank tells the
# others by control message, and the call settles over tcp;ofi_rxm
# (fabric/settle.c), or, over shm, the others receive what was sent for
# it (fabric/mop.c; before, 3 ranks timed out within some 140 calls, and
# 4 ran out of receives), and nothing of a failed call is left held: 2,
# 3 (caller progress) and 4 ranks with single copy (4 once more with
# posts refused as by a full queue, SHEMB_FABRIC_EAGAIN), 4 and 3
# without it, in pairwise rounds; with caller progress after a burst of
# such calls that outruns the spare ops (oom_rank.c, burst); once more
# with every control message kept in a record, not injected, as over a
# provider that injects less than one; and once without spare ops, so
# that such a start cannot settle its call and the others stop settling
# it.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/oom_rank

one() { # provider ranks [options...]
	ranks_job 300 "$@"
}

one shm 2
one shm 3
one shm 2 --caller
one "tcp;ofi_rxm" 2
one "tcp;ofi_rxm" 3 --caller
one shm 2 --shortage
one shm 3 --shortage --caller
one shm 4 --shortage
# about one post in three refused as by a full queue, and posted again:
# the empty messages of single copies among them (fabric/pull.c)
SHEMB_FABRIC_EAGAIN=3
export SHEMB_FABRIC_EAGAIN
one shm 4 --shortage
unset SHEMB_FABRIC_EAGAIN
SHEMB_SINGLE_COPY=0 # pairwise rounds: a peer's first message to a rank
export SHEMB_SINGLE_COPY # may be in a later round
one shm 4 --shortage
one shm 3 --shortage
unset SHEMB_SINGLE_COPY
one "tcp;ofi_rxm" 2 --shortage --caller
one "tcp;ofi_rxm" 3 --shortage
SHEMB_FABRIC_CTRL_RECORDS=1
export SHEMB_FABRIC_CTRL_RECORDS
one "tcp;ofi_rxm" 2 --shortage
unset SHEMB_FABRIC_CTRL_RECORDS
SHEMB_FABRIC_NO_SPARE_OPS=1
export SHEMB_FABRIC_NO_SPARE_OPS
one "tcp;ofi_rxm" 3 --shortage
unset SHEMB_FABRIC_NO_SPARE_OPS
[ "$fails" -eq 0 ]
