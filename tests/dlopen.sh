#!/bin/sh
# Loading libshemb with dlopen into a host that did not link it.  A build
# with jemalloc carries initial-exec TLS: the load needs
# GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 (the documented
# workaround), which must then work; a build without jemalloc loads as is.
so=$top_builddir/.libs/libshemb.so.0
host=$top_builddir/tests/dlopen_host
[ -f "$so" ] || { echo "no $so"; exit 1; }
if nm -D "$so" | grep -q ' U __asan_init'; then
	echo "skipped: a sanitizer build cannot be loaded into an uninstrumented host"
	exit 77
fi

out=$("$host" "$so")
rc=$?
echo "plain: $out"
if grep -q '^#define HAVE_JEMALLOC 1' "$top_builddir/config.h"; then
	if [ $rc -eq 2 ]; then
		echo "$out" | grep -q 'static TLS' ||
			{ echo "dlopen failed for another reason"; exit 1; }
	elif [ $rc -ne 0 ]; then
		exit 1
	fi
	out=$(GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 \
		"$host" "$so") || { echo "with tunable: $out"; exit 1; }
	echo "with tunable: $out"
else
	[ $rc -eq 0 ] || exit 1
fi
# The same host as two ranks (the launcher's environment) over
# tcp;ofi_rxm, whose provider sets no handler of its own: libfabric is
# loaded then, and the host's handlers must stay.
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || exit 0
tls=
if grep -q '^#define HAVE_JEMALLOC 1' "$top_builddir/config.h"; then
	tls=glibc.rtld.optional_static_tls=65536
fi
out=$(GLIBC_TUNABLES=$tls timeout 120 "$top_builddir/tools/shemb-run" -n 2 \
	--provider "tcp;ofi_rxm" --timeout 100 "$host" "$so" 2>&1) ||
	{ echo "two ranks: $out"; exit 1; }
echo "two ranks: $out"
