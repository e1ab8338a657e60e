#!/bin/sh
# GPU contexts of several ranks on this host's GPUs, with the CUDA module
# (make check points SHEMB_CUDA_PLUGIN at it): collectives on device
# buffers over NCCL when each rank has a GPU of its own, through host
# memory when they share one or with SHEMB_NCCL=0; distributed tables on
# GPU contexts against the CPU reference, bag sets in device memory
# included.  As many ranks as GPUs (2 to 4).  Skipped (77) without a GPU;
# every run bounded in time.
. "$top_srcdir/tests/run_ranks.sh"
n=$("$top_builddir/tests/gpu/test_gpu_probe" --count 2>/dev/null) || n=0
if [ "${n:-0}" -lt 1 ]; then
	echo "skipped: no usable GPU"
	exit 77
fi
ranks=$n
[ "$ranks" -lt 2 ] && ranks=2
[ "$ranks" -gt 4 ] && ranks=4
echo "$n GPU(s), $ranks ranks"
coll=$top_builddir/tests/coll_rank
dist=$top_builddir/tests/dist_rank

one() { # program ranks [arguments...]
	prog=$1 r=$2
	shift 2
	job "$(basename "$prog") n=$r $*" -n "$r" --provider shm \
		--timeout 300 "$prog" "$@"
}

for s in concurrent priorities allreduce; do
	one "$coll" "$ranks" "$s" --device
done
export SHEMB_NCCL=0
one "$coll" "$ranks" concurrent --device
unset SHEMB_NCCL
one "$dist" "$ranks" --gpu --steps 6
one "$dist" "$ranks" --device-bags --deterministic --steps 6
one "$dist" "$ranks" --device-bags --relaxed --steps 6
one "$dist" 2 --device-bags --async --cache 75 --steps 6
[ "$fails" -eq 0 ]
