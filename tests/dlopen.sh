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
