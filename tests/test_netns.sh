#!/bin/sh
# Two ranks on two "hosts": network namespaces made here, joined by a veth
# pair with private addresses that exist only inside them, so the ranks
# meet and exchange over tcp;ofi_rxm on a real link instead of shm or
# loopback.  Skipped (77) where namespaces cannot be made (not root, no
# iproute2, a container without the capability).
rank=$top_builddir/tests/coll_rank
ns0=shemb-t0-$$ ns1=shemb-t1-$$ v0=shv0-$$ v1=shv1-$$
port=$((20000 + $$ % 20000))

cleanup() {
	ip netns del "$ns0" 2>/dev/null
	ip netns del "$ns1" 2>/dev/null
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 ||
	! ip netns add "$ns0" 2>/dev/null; then
	echo "skipped: cannot make network namespaces here (needs root and iproute2)"
	exit 77
fi
set -e
ip netns add "$ns1"
ip link add "$v0" type veth peer name "$v1"
ip link set "$v0" netns "$ns0"
ip link set "$v1" netns "$ns1"
ip -n "$ns0" addr add 10.213.77.1/24 dev "$v0"
ip -n "$ns1" addr add 10.213.77.2/24 dev "$v1"
for n in "$ns0" "$ns1"; do
	ip -n "$n" link set lo up
done
ip -n "$ns0" link set "$v0" up
ip -n "$ns1" link set "$v1" up
set +e

run_rank() { # namespace rank scenario
	ip netns exec "$1" env SHEMB_RANK="$2" SHEMB_WORLD_SIZE=2 \
		SHEMB_ROOT="10.213.77.1:$port" SHEMB_JOB_KEY="netns-$$" \
		SHEMB_PROVIDER="tcp;ofi_rxm" timeout 60 "$rank" "$3"
}

fails=0
for s in alltoallv allreduce concurrent; do
	run_rank "$ns0" 0 "$s" > out0.$$ 2>&1 &
	p0=$!
	run_rank "$ns1" 1 "$s" > out1.$$ 2>&1
	r1=$?
	wait "$p0"
	r0=$?
	if [ "$r0" = 0 ] && [ "$r1" = 0 ]; then
		echo "ok   two hosts, $s: $(head -n 1 out0.$$)"
	else
		echo "FAIL two hosts, $s (rank 0: $r0, rank 1: $r1)"
		cat out0.$$ out1.$$
		fails=$((fails + 1))
	fi
	port=$((port + 1))
done
rm -f out0.$$ out1.$$
[ "$fails" = 0 ]
