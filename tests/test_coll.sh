#!/bin/sh
# Collectives between ranks on this host: shemb-run starts 2, 3 and 4
# ranks of tests/coll_rank over shm and over tcp;ofi_rxm (loopback), each
# run bounded in time; also the caller-progress mode, small chunks and
# collectives of random priorities, rounds that use both lanes at once,
# collectives waited for in different orders or started after a wait,
# collectives only polled while the progress thread may sleep,
# posts refused as by a full queue (SHEMB_FABRIC_EAGAIN),
# bulk data by single copy and through libfabric, a rank that stops
# answering, a provider call that never returns, and
# collectives on device buffers of the emulated device, one rank finding
# no memory for their host copies; and the provider chosen when none is
# asked for.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/coll_rank

one() { # provider ranks scenario [options...]
	ranks_job 120 "$@"
}

# expect_out LABEL LINE COMMAND...: COMMAND succeeds and prints LINE
expect_out() {
	label=$1 want=$2
	shift 2
	if out=$("$@" 2>&1) && echo "$out" | grep -Fq "$want"; then
		echo "ok   $label"
	else
		echo "FAIL $label"
		echo "$out" | tail -n 20
		fails=$((fails + 1))
	fi
}
launcher=$top_builddir/tools/shemb-run

taskset_one() { # cpu provider ranks scenario [options...]
	c=$1 p=$2 n=$3
	shift 3
	job "$p n=$n on CPU $c $*" -n "$n" --provider "$p" --timeout 120 \
		taskset -c "$c" "$rank" "$@"
}

# the first CPU this job may run on ("0-1", "2,5" ...)
first_cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')

for p in shm "tcp;ofi_rxm"; do
	for n in 2 3 4; do
		for s in alltoallv allgatherv allreduce barrier concurrent \
			priorities staggered lanes mismatch-count \
			mismatch-order mismatch-prio mismatch-args; do
			one "$p" "$n" "$s"
		done
		one "$p" "$n" alltoallv-big
	done
	one "$p" 3 concurrent --caller
	# an urgent wait on rank 0 while the others need its bulk lane: a
	# hang would last until the timeout
	one "$p" 3 hold --timeout 10000
	# collectives nobody waits for, after and under blocking ones: the
	# progress thread, which sleeps while a caller moves the transfers,
	# must be woken for them, since it now sleeps longer than they are
	# polled
	SHEMB_FABRIC_STAND_BACK_MS=600000 one "$p" 3 unwatched
	SHEMB_FABRIC_STAND_BACK_MS=600000 one "$p" 4 unwatched --chunk 131072
	# a rank that makes no call: the others time out, naming it (with
	# more ranks, the first to time out leaves, and the others may see
	# that instead: at least one must name it)
	for n in 2 3 4; do
		expect_out "$p n=$n stall --timeout 3000" \
			"timed out: " \
			"$launcher" -n "$n" --provider "$p" --timeout 120 \
			"$rank" stall --timeout 3000
	done
	one "$p" 3 allreduce --caller --chunk 4096
	# chunks that do not hold whole elements of every dtype, and few
	# chunks in flight: the priority queue holds most transfers back
	one "$p" 3 allreduce --chunk 16387
	one "$p" 3 priorities --chunk 262144 --in-flight 4
	# rounds of more chunks than may be in flight, in collectives
	# waited for in different orders, and a collective started by some
	# ranks only after they waited for the one before
	one "$p" 4 staggered --chunk 131072 --in-flight 4
	for n in 2 3 4; do
		one "$p" "$n" late-start
	done
	one "$p" 4 late-start --chunk 131072 --in-flight 4
	# the default chunking of ranks that share one CPU, and of ranks on
	# a CPU each (not crowded where there are as many CPUs as ranks)
	taskset_one "$first_cpu" "$p" 3 priorities
	one "$p" 2 alltoallv --pin
	one "$p" 4 priorities --caller --chunk 100000
	one "$p" 4 alltoallv --chunk 1000
	# two urgent collectives of thousands of chunks in flight together:
	# more receives than shm holds (its chunks no smaller than 8 KiB)
	one "$p" 4 many-chunks --chunk 16384
	one "$p" 4 many-chunks --chunk 1000
	# the path of providers that want registered buffers (verbs, efa)
	SHEMB_FABRIC_REGISTER=1 one "$p" 3 concurrent
	SHEMB_FABRIC_REGISTER=1 one "$p" 2 alltoallv-big
	# about one post in three refused as by a full queue, and posted
	# again: chunks held back by priority and by chunks_in_flight too
	SHEMB_FABRIC_EAGAIN=3
	export SHEMB_FABRIC_EAGAIN
	one "$p" 4 staggered --chunk 131072 --in-flight 4
	one "$p" 3 priorities --chunk 262144 --in-flight 4
	unset SHEMB_FABRIC_EAGAIN
done
# pairwise rounds of alltoallv over shm with more ranks than the loops
# above: an odd count (no round pairs a rank with one peer both ways) and
# an even one (the middle round does)
for n in 5 6; do
	for s in alltoallv staggered priorities mismatch-count mismatch-prio; do
		one shm "$n" "$s"
	done
done
# single copy (shm): the loops above move the bulk collectives' data by
# single copy where this host lets a process read another's memory; here
# through libfabric's messages, turned off by the attr or the
# environment, and by single copy required where it can be had
for n in 2 3 4; do
	for s in alltoallv allgatherv staggered late-start mismatch-count; do
		one shm "$n" "$s" --single-copy -1 --want-single-copy -1
	done
done
SHEMB_SINGLE_COPY=0 one shm 3 priorities --want-single-copy -1
one "tcp;ofi_rxm" 2 barrier --single-copy 1 --want-create-error -4
# ranks that disagree make the same exchanges and agree: one rank's -1
# turns it off for all, and fails the ranks that require it
one shm 3 alltoallv --single-copy-of-rank0 -1 --want-single-copy -1
one shm 3 barrier --single-copy 1 --single-copy-of-rank0 -1 \
	--want-create-error -4
if "$top_builddir/tools/shemb-run" -n 2 --provider shm --timeout 60 \
	"$rank" barrier --single-copy 1 >/dev/null 2>&1; then
	for n in 2 3 4; do
		one shm "$n" alltoallv --single-copy 1 --want-single-copy 1
		one shm "$n" allgatherv --want-single-copy 1
	done
	one shm 4 staggered --single-copy 1 --chunk 131072 --in-flight 4
	one shm 3 allgatherv --single-copy-of-rank0 1 --want-single-copy 1
	one shm 3 concurrent --single-copy 1 --caller
	# more chunks than libfabric holds receives: the acknowledgements
	# the senders wait for must not exhaust them
	one shm 2 alltoallv-big --single-copy 1 --chunk 65536
	one shm 4 staggered --single-copy 1 --chunk 16384
	# the most chunks in flight, which shm's receives bound
	one shm 4 many-chunks --chunk 8192 --in-flight 256
else
	echo "note: this host lets no process read another's memory" \
	     "(process_vm_readv): single copy untested"
fi
# healthy steps waited for past a short timeout: the check for a stuck
# thread must let them be, with the progress thread and without
one shm 2 slow-steps --timeout 1000
one shm 3 slow-steps --timeout 1000 --caller
# the scheduling slice the progress thread asks for (comm_slice_us)
one shm 2 slice
one shm 3 slice --slice 5000
one "tcp;ofi_rxm" 2 slice --slice -1
# a thread of rank 0 that never comes back from libfabric (shm's spin
# locks, as after a peer died holding one): every rank's calls fail, rank
# 0's with SHEMB_EPEER, and every context is destroyed (before the fix,
# rank 0 waited until the job's time ran out)
saved_asan=${ASAN_OPTIONS-}
export SHEMB_TEST_WEDGE=0:1000
export LD_PRELOAD="$top_builddir/tests/.libs/libwedge.so"
export ASAN_OPTIONS="verify_asan_link_order=0${saved_asan:+:$saved_asan}"
for n in 2 3; do
	one shm "$n" wedge --timeout 2000
done
# ... and the thread of rank 0's started steps: its waits fail with
# SHEMB_EPEER, and its shemb_ctx_destroy returns SHEMB_EPEER, leaving the
# context to that thread (before, rank 0 waited for good); a rank whose
# thread spins on a lock the wedged one holds may do the same
export SHEMB_TEST_WEDGE=0:1000:shemb-steps
one shm 2 wedge-steps --timeout 2000
one shm 3 wedge-steps --timeout 2000
# ... or its progress thread, with steps started: they fail, and every
# shemb_ctx_destroy returns
export SHEMB_TEST_WEDGE=0:1000
one shm 2 wedge-steps --timeout 2000
unset SHEMB_TEST_WEDGE LD_PRELOAD
ASAN_OPTIONS=$saved_asan
# collectives on device buffers of GPU contexts on the emulated device of
# tests/emu/ (in a build with CUDA): through host memory, in their turn
emu=$top_builddir/tests/emu/.libs/shemb_emu.so
if [ -f "$emu" ]; then
	export SHEMB_CUDA_PLUGIN="$emu"
	one shm 3 concurrent --device
	one shm 4 priorities --device
	one shm 2 alltoallv --device --caller
	one shm 3 allgatherv --device
	one "tcp;ofi_rxm" 2 allreduce --device
	one "tcp;ofi_rxm" 3 priorities --device --chunk 100000
	# a rank without memory for its device buffers' host copies
	# refuses the call: the others fail it at once, naming it (behind
	# a started lookup, once the lookup is over)
	one shm 3 stage-refused --device --timeout 5000
	one "tcp;ofi_rxm" 2 stage-refused --device --timeout 5000
fi
# more ranks than half of what one shm address vector holds (256): each
# lane has a vector of its own
one shm 130 barrier

# the provider chosen when none is asked for: shm, every rank being on
# this host; FI_PROVIDER's where SHEMB_PROVIDER is unset
expect_out "no provider asked for: shm" "[0] 2 ranks over shm" \
	env -u SHEMB_PROVIDER -u FI_PROVIDER \
	"$launcher" -n 2 --timeout 120 "$rank" barrier
expect_out "FI_PROVIDER=tcp;ofi_rxm" "[0] 2 ranks over tcp;ofi_rxm" \
	env -u SHEMB_PROVIDER "FI_PROVIDER=tcp;ofi_rxm" \
	"$launcher" -n 2 --timeout 120 "$rank" barrier
# ranks named by another launcher's variables only (PMI's, Slurm's; mpirun's
# are tested by test_mpirun.sh): shemb-run's SHEMB_RANK and
# SHEMB_WORLD_SIZE are moved into them
for v in "PMI_RANK PMI_SIZE" "SLURM_PROCID SLURM_NTASKS"; do
	set -- $v
	expect_out "$1 and $2 only: 3 ranks" "[0] 3 ranks over shm" \
		"$launcher" -n 3 --provider shm --timeout 120 \
		sh -c 'export "$1=$SHEMB_RANK" "$2=$SHEMB_WORLD_SIZE"
			unset SHEMB_RANK SHEMB_WORLD_SIZE
			exec "$3" allreduce' sh "$1" "$2" "$rank"
done
[ "$fails" -eq 0 ]
