#!/bin/sh
# device-check.sh - run on a host with a CUDA GPU: build a clean copy of
# the tree with only what such a host has (CUDA; no libfabric, jemalloc,
# oneDNN or Check), run the GPU tests, and print what they say.  Bounded
# in time; exits non-zero when a GPU test fails or none could run.
#
# This release's GPU tests are the device probe and a kernel's round trip
# (tests/gpu/test_gpu_probe); the GPU backend and shemb-bench gpu are
# not in it yet.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
limit=${DEVICE_CHECK_TIMEOUT:-420}

cp -a "$src" "$work/src"
cd "$work/src"
if [ ! -x configure ]; then
	command -v autoreconf >/dev/null ||
		{ echo "device-check: no configure and no autoreconf"; exit 2; }
	./autogen.sh
fi
./configure --without-libfabric --without-jemalloc --without-dnnl \
	--without-check --with-cuda >"$work/configure.log" 2>&1 ||
	{ tail -n 30 "$work/configure.log"; exit 2; }
sed -n '/will be built with/,$p' "$work/configure.log"
timeout "$limit" make -j"$(nproc)" >"$work/make.log" 2>&1 ||
	{ tail -n 40 "$work/make.log"; exit 2; }
timeout "$limit" make tests/gpu/test_gpu_probe >>"$work/make.log" 2>&1 ||
	{ tail -n 40 "$work/make.log"; exit 2; }
echo "=== tests/gpu/test_gpu_probe"
rc=0
timeout 60 ./tests/gpu/test_gpu_probe || rc=$?
[ "$rc" -eq 77 ] && echo "device-check: no usable GPU here"
exit "$rc"
