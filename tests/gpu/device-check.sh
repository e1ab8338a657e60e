#!/bin/sh
# device-check.sh - run on a host with a CUDA GPU: build a clean copy of
# the tree with only what such a host has (CUDA; no libfabric, jemalloc,
# oneDNN or Check), run the GPU tests, and print what they say.  Bounded
# in time; exits non-zero when a GPU test fails or none could run.
#
# The GPU tests: the device probe and a kernel's round trip
# (test_gpu_probe), the CUDA backend against the CPU one, bit for bit
# (test_gpu_backend), training from device bag sets with step plans made
# on the device, against the CPU (test_gpu_train), and the collectives
# of a one-rank GPU context on
# device buffers, through NCCL and with SHEMB_NCCL=0 (test_gpu_coll);
# then shemb-bench gpu at its default size (lookups against a
# device-to-device copy and PyTorch's embedding_bag).  make check runs
# the same tests and, in bench-gpu-smoke.sh, shemb-bench gpu on a small
# table, skipped without a GPU.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
# one deadline for the whole check (8 minutes less a margin by default);
# each step gets what is left of it, a test at most 180 s.  Called as
# t=$(left) on a line of its own, so that set -e ends the script with 124
# when no time is left.
deadline=$(($(date +%s) + ${DEVICE_CHECK_TIMEOUT:-450}))
left() {
	n=$((deadline - $(date +%s)))
	[ "$n" -gt 0 ] || { echo "device-check: out of time" >&2; exit 124; }
	[ -z "${1:-}" ] || [ "$n" -le "$1" ] || n=$1
	echo "$n"
}

cp -a "$src" "$work/src"
cd "$work/src"
if [ ! -x configure ]; then
	command -v autoreconf >/dev/null ||
		{ echo "device-check: no configure and no autoreconf"; exit 2; }
	./autogen.sh
fi
t=$(left)
timeout "$t" ./configure --without-libfabric --without-jemalloc --without-dnnl \
	--without-check --with-cuda >"$work/configure.log" 2>&1 ||
	{ tail -n 30 "$work/configure.log"; exit 2; }
sed -n '/will be built with/,$p' "$work/configure.log"
if grep -q '^#define HAVE_NCCL 1' config.h; then
	echo "device-check: NCCL found: test_gpu_coll runs over it"
else
	echo "device-check: NCCL not found: collectives are staged only"
fi
t=$(left)
timeout "$t" make -j"$(nproc)" >"$work/make.log" 2>&1 ||
	{ tail -n 40 "$work/make.log"; exit 2; }
tests="tests/gpu/test_gpu_probe tests/gpu/test_gpu_backend"
tests="$tests tests/gpu/test_gpu_train tests/gpu/test_gpu_coll"
top_builddir=$PWD; export top_builddir
t=$(left)
timeout "$t" make $tests >>"$work/make.log" 2>&1 ||
	{ tail -n 40 "$work/make.log"; exit 2; }
SHEMB_CUDA_PLUGIN=$PWD/.libs/shemb_cuda.so
export SHEMB_CUDA_PLUGIN
rc=0
for t in $tests; do
	echo "=== $t"
	r=0
	s=$(left 180)
	timeout "$s" "./$t" || r=$?
	[ "$r" -eq 77 ] && echo "device-check: no usable GPU here"
	# a failure counts over a skip
	[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || [ "$r" -eq 0 ] || rc=$r
done
[ "$rc" -eq 0 ] || exit "$rc"
echo "=== shemb-bench gpu"
t=$(left)
timeout "$t" ./tools/shemb-bench gpu ${DEVICE_CHECK_BENCH_ARGS:-} || rc=$?
exit "$rc"
