#!/bin/sh
# Distributed tables: shemb-run starts 1 to 4 ranks of tests/dist_rank,
# which train every shard plan with every optimizer against a
# single-process reference (within 1e-5, and bit for bit in deterministic
# mode), over shm, and 3 ranks over tcp;ofi_rxm (loopback); also with rows
# and gradients in 16 bits on the wire, and with SUM and MEAN bags pooled
# by the owners; with device tiers of 75% of each rank's rows (over files,
# some), prefetching each next step; with steps started without waiting
# and a dense allreduce among them; with each backward started with the
# next lookup behind it (relaxed); and on GPU contexts of the emulated
# device, bag sets in device memory too; every run bounded in time.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/dist_rank
# the ranks' cold files go here, gone even when a rank was killed
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/test_dist.XXXXXX") || exit 99
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

one() { # provider ranks [options...]
	ranks_job 300 "$@"
}

for n in 1 2 3 4; do
	one shm "$n"
	one shm "$n" --deterministic
done
one shm 3 --deterministic-on-last
one shm 2 --pool-at-owner
one shm 4 --pool-at-owner
one "tcp;ofi_rxm" 3 --pool-at-owner --steps 6
one shm 3 --wire bf16
one shm 4 --wire f16 --steps 8
one "tcp;ofi_rxm" 3 --deterministic --steps 6
one shm 2 --async
one shm 3 --async --pool-at-owner --steps 8
one shm 4 --async --deterministic --steps 8
one "tcp;ofi_rxm" 2 --async --steps 6
one shm 3 --async --caller --steps 6
one shm 3 --async --cache 75 --steps 8
one shm 2 --relaxed
one shm 4 --relaxed --deterministic --steps 8
one shm 3 --relaxed --pool-at-owner --wire bf16 --steps 8
one "tcp;ofi_rxm" 3 --relaxed --steps 6
one shm 3 --relaxed --caller --steps 6
one shm 3 --relaxed --cache 75 --steps 8
one shm 2 --relaxed --cache 55 --cold
one shm 2 --cache 75 --cold
one shm 3 --cache 75 --deterministic --cold
one shm 4 --cache 75 --pool-at-owner --steps 10
# on a GPU context, over the emulated device of tests/emu/ (in a build
# with CUDA): device-resident rows and device tiers served across ranks,
# started steps, relaxed pairs; bag sets, outputs and gradients in device
# memory
emu=$top_builddir/tests/emu/.libs/shemb_emu.so
if [ -f "$emu" ]; then
	export SHEMB_CUDA_PLUGIN="$emu"
	one shm 3 --gpu --steps 6
	one shm 2 --gpu --relaxed --cache 55 --cold --steps 8
	one shm 3 --device-bags --deterministic --steps 6
	one shm 4 --device-bags --pool-at-owner --cache 75 --steps 6
	one shm 3 --device-bags --async --cache 75 --steps 6
	one shm 4 --device-bags --relaxed --deterministic --steps 6
	one "tcp;ofi_rxm" 2 --device-bags --relaxed --steps 4
fi
# the example program, unchanged, with its tables spread over two ranks:
# it exits 1 unless the loss halves on every rank
job "shm n=2 examples/zipf_train" -n 2 --provider shm --timeout 120 \
	"$top_builddir/examples/zipf_train" --steps 40 --quiet
[ "$fails" -eq 0 ]
