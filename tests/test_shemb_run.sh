#!/bin/sh
# test_shemb_run.sh - shemb-run: the environment of the ranks, their output
# behind prefixes, exit statuses, forwarded signals, --timeout, bad
# arguments, a stdout that takes nothing more, and that no process of a
# job outlives the launcher.
#
# Every run is bounded by timeout(1); the ranks record their pids in files
# so that the script can check afterwards that none is left.
set -u
: "${top_builddir:=.}"
run=$top_builddir/tools/shemb-run
if ! command -v timeout > /dev/null 2>&1; then
	echo "timeout(1) not found; skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_shemb_run.XXXXXX") || exit 99
pids=	# running in the background (stall_start): stopped on the way out
cleanup()
{
	[ -z "$pids" ] || kill $pids 2> /dev/null
	wait
	rm -rf "$tmp"
}
trap cleanup EXIT

fail()
{
	echo "FAIL: $*"
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f"; head -c 2000 "$f"; echo; }
	done
	exit 1
}

# launch NAME SECONDS ARGS...: shemb-run ARGS, killed after SECONDS at the
# latest, its stdout and stderr in $tmp/NAME.{out,err}, its status in $st.
launch()
{
	name=$1
	secs=$2
	shift 2
	echo "+ shemb-run $*" | tr -s '\n\t' '  ' | cut -c 1-100
	timeout -k 2 "$secs" "$run" "$@" > "$tmp/$name.out" \
		2> "$tmp/$name.err"
	st=$?
}

expect()
{
	[ "$st" -eq "$2" ] || fail "$1: status $st, not $2"
}

# One rank of a test job, started as: rank.sh CASE MODE.  It writes
# "PID PPID" (PPID: the launcher) to $tmp/CASE.pid.RANK once it is ready
# for what its case expects: after its traps are set, since a rank that
# sees every pid written may make the launcher signal the others.
cat > "$tmp/rank.sh" << EOF
#!/bin/sh
dir='$tmp'
EOF
cat >> "$tmp/rank.sh" << 'EOF'
case=$1
started()
{
	f=$dir/$case.pid.$SHEMB_RANK
	echo "$$ $PPID" > "$f.tmp" && mv "$f.tmp" "$f" || exit 99
}
# until every rank of the job has written its pid
wait_all()
{
	while [ "$(ls "$dir/$case".pid.? 2> /dev/null | wc -l)" \
		-lt "$SHEMB_WORLD_SIZE" ]; do
		sleep 0.05
	done
}
# 60000 lines of 100 bytes, numbered: more than the launcher keeps for
# its stdout (4 MiB) and the pipes hold together, so that no rank can
# write them all while the launcher's stdout takes nothing
numbered()
{
	awk -v r="$SHEMB_RANK" 'BEGIN {
		for (i = 0; i < 60000; i++) printf "%d %d %090d\n", r, i, 0 }'
}
case $2 in
sleep)
	started
	exec sleep 1000 ;;
fail)	# rank 1 exits 3 while the others sleep and note SIGTERM
	if [ "$SHEMB_RANK" != 1 ]; then
		trap 'echo > "$dir/$case.term.$SHEMB_RANK"; exit 0' TERM
		started
		sleep 1000 &
		wait
		exit 0
	fi
	started
	wait_all
	exit 3 ;;
kill9)	# rank 1 is killed by SIGKILL while the others sleep
	started
	[ "$SHEMB_RANK" = 1 ] || exec sleep 1000
	wait_all
	kill -KILL $$ ;;
stubborn) # rank 0 ignores SIGTERM, rank 1 exits 5
	if [ "$SHEMB_RANK" = 0 ]; then
		trap '' TERM
		started
		exec sleep 1000
	fi
	started
	wait_all
	exit 5 ;;
straggler) # leaves a process behind that holds its stdout open
	started
	sleep 1000 &
	echo $! > "$dir/$case.bg.$SHEMB_RANK"
	echo started ;;
write_sleep)
	started
	numbered
	exec sleep 1000 ;;
slow_term) # notes SIGTERM, and ends 3 s after it
	trap 'echo > "$dir/$case.term.$SHEMB_RANK"; sleep 3; exit 143' TERM
	started
	numbered
	exec sleep 1000 ;;
write_fail) # rank 1 exits 3; the others write, sleep and note SIGTERM
	if [ "$SHEMB_RANK" != 1 ]; then
		trap 'echo > "$dir/$case.term.$SHEMB_RANK"; exit 0' TERM
		started
		numbered
		sleep 1000 &
		wait
		exit 0
	fi
	started
	wait_all
	exit 3 ;;
write_int) # writes in the background, where SIGINT is ignored; a SIGINT
	# to the rank is noted, and the writing goes on
	trap 'echo > "$dir/$case.int.$SHEMB_RANK"' INT
	started
	echo > "$dir/$case.ready.$SHEMB_RANK"
	numbered &
	w=$!
	wait "$w"
	st=$?
	[ "$st" -gt 128 ] && { wait "$w"; st=$?; }
	exit "$st" ;;
esac
EOF
chmod +x "$tmp/rank.sh" || exit 99

# gone CASE N: N ranks of CASE recorded their pids, and none of them (nor
# any process they left behind) exists any more.
gone()
{
	n=$(ls "$tmp/$1".pid.? 2> /dev/null | wc -l)
	[ "$n" -eq "$2" ] || fail "$1: $n ranks wrote their pid, not $2"
	for f in "$tmp/$1".pid.? "$tmp/$1".bg.?; do
		[ -f "$f" ] || continue
		read -r pid _ < "$f"
		# The launcher reaped its ranks: not even a zombie is left.
		# Processes a rank left behind are reaped by whoever
		# inherited them: a zombie of theirs is fine.
		if kill -0 "$pid" 2> /dev/null; then
			case $f in
			*.bg.*) grep -q '^[^)]*) Z' "/proc/$pid/stat" \
				2> /dev/null && continue ;;
			esac
			fail "$1: process $pid ($f) outlived the launcher"
		fi
	done
}

# wait_pids CASE N: until N ranks of CASE have written their pids (20 s:
# a loaded machine may be slow to start them)
wait_pids()
{
	i=0
	while [ "$(ls "$tmp/$1".pid.? 2> /dev/null | wc -l)" -lt "$2" ]; do
		i=$((i + 1))
		[ "$i" -le 400 ] || fail "$1: the ranks did not start"
		sleep 0.05
	done
}

# ---- the environment of the ranks
show_env='echo "rank=$SHEMB_RANK size=$SHEMB_WORLD_SIZE root=$SHEMB_ROOT'
show_env=$show_env' key=$SHEMB_JOB_KEY provider=${SHEMB_PROVIDER-none}'
show_env=$show_env' foreign=${OMPI_COMM_WORLD_RANK-}${OMPI_COMM_WORLD_SIZE-}'
show_env=$show_env'${PMI_RANK-}${PMI_SIZE-}${SLURM_PROCID-}${SLURM_NTASKS-}"'

# check_env NAME N: one line per rank 0..N-1, all with the same root and
# key; sets key.
check_env()
{
	out=$tmp/$1.out
	[ "$(wc -l < "$out")" -eq "$2" ] || fail "$1: not $2 lines"
	r=0
	while [ "$r" -lt "$2" ]; do
		c=$(grep -c "^\[$r\] rank=$r size=$2 " "$out")
		[ "$c" -eq 1 ] || fail "$1: rank $r has $c lines"
		r=$((r + 1))
	done
	n=$(sed 's/.* root=\([^ ]*\) key=\([^ ]*\) .*/\1 \2/' "$out" |
		sort -u | wc -l)
	[ "$n" -eq 1 ] || fail "$1: ranks differ in root or key"
	key=$(sed -n '1s/.* key=\([^ ]*\) .*/\1/p' "$out")
}

export OMPI_COMM_WORLD_RANK=7 OMPI_COMM_WORLD_SIZE=9 PMI_RANK=7 PMI_SIZE=9 \
	SLURM_PROCID=7 SLURM_NTASKS=9
unset SHEMB_JOB_KEY SHEMB_PROVIDER SHEMB_RANK SHEMB_WORLD_SIZE SHEMB_ROOT

launch env1 10 -n 4 sh -c "$show_env"
expect env1 0
check_env env1 4
key1=$key
echo "$key1" | grep -Eq '^[0-9a-f]{32}$' || fail "env1: key '$key1'"
grep -Eq ' root=127\.0\.0\.1:[0-9]+ ' "$tmp/env1.out" || fail "env1: root"
grep -q ' provider=none foreign=$' "$tmp/env1.out" ||
	fail "env1: SHEMB_PROVIDER, or another launcher's variables, set"
[ -s "$tmp/env1.err" ] && fail "env1: stderr not empty"

launch env2 10 -n 4 sh -c "$show_env"
expect env2 0
check_env env2 4
key2=$key
[ "$key1" != "$key2" ] || fail "two jobs got the same key"

# an empty key is no key: the job gets one of its own
export SHEMB_JOB_KEY=
launch envkey 10 -n 2 sh -c "$show_env"
unset SHEMB_JOB_KEY
expect envkey 0
check_env envkey 2
echo "$key" | grep -Eq '^[0-9a-f]{32}$' ||
	fail "envkey: an empty SHEMB_JOB_KEY was passed on ('$key')"

export SHEMB_JOB_KEY=given
launch env3 10 -n 2 --root 10.1.2.3:4567 --provider tcp -- sh -c "$show_env"
unset SHEMB_JOB_KEY
expect env3 0
check_env env3 2
[ "$(grep -c ' root=10.1.2.3:4567 key=given provider=tcp foreign=$' \
	"$tmp/env3.out")" -eq 2 ] || fail "env3: --root, --provider or key"

launch ipv6 10 -n 1 --root '[::1]:5000' sh -c 'echo "$SHEMB_ROOT"'
expect ipv6 0
grep -qx '\[0\] \[::1\]:5000' "$tmp/ipv6.out" || fail "ipv6: root"

# ---- the root's listener: rank 0 alone inherits a socket listening at the
# root's port (SHEMB_ROOT_FD); an outer job's variable goes; --root and a
# single rank hand none over
cat > "$tmp/root_fd.sh" << 'EOF'
#!/bin/sh
fd=${SHEMB_ROOT_FD-none}
what=none
if [ "$fd" != none ]; then
	ino=$(readlink "/proc/self/fd/$fd" |
		sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
	port=$(printf '%04X' "${SHEMB_ROOT##*:}")
	what=other
	awk -v ino="$ino" -v port="$port" '
		$10 == ino && $4 == "0A" && $2 ~ (":" port "$") { f = 1 }
		END { exit !f }' /proc/net/tcp && what=listening
fi
echo "rank=$SHEMB_RANK fd=$fd $what"
EOF
chmod +x "$tmp/root_fd.sh"
if [ -r /proc/net/tcp ]; then
	SHEMB_ROOT_FD=99 launch rootfd 10 -n 3 "$tmp/root_fd.sh"
	expect rootfd 0
	grep -Eq '^\[0\] rank=0 fd=[0-9]+ listening$' "$tmp/rootfd.out" ||
		fail "rootfd: rank 0 has no listener at the root"
	[ "$(grep -c ' fd=none none$' "$tmp/rootfd.out")" -eq 2 ] ||
		fail "rootfd: ranks 1 and 2 got a listener"
	launch rootfd2 10 -n 2 --root 127.0.0.1:1 "$tmp/root_fd.sh"
	expect rootfd2 0
	[ "$(grep -c ' fd=none none$' "$tmp/rootfd2.out")" -eq 2 ] ||
		fail "rootfd2: --root, yet a listener was handed over"
	launch rootfd1 10 -n 1 "$tmp/root_fd.sh"
	expect rootfd1 0
	grep -q ' fd=none none$' "$tmp/rootfd1.out" ||
		fail "rootfd1: one rank, yet a listener was handed over"
fi

# ---- output
launch prefix 10 -n 11 sh -c 'echo "out $SHEMB_RANK"
	echo "err $SHEMB_RANK" >&2'
expect prefix 0
r=0
while [ "$r" -lt 11 ]; do
	p=$(printf '[%2d] ' "$r")
	grep -Fqx "${p}out $r" "$tmp/prefix.out" || fail "prefix: out $r"
	grep -Fqx "${p}err $r" "$tmp/prefix.err" || fail "prefix: err $r"
	r=$((r + 1))
done
[ "$(wc -l < "$tmp/prefix.out")" -eq 11 ] || fail "prefix: stdout lines"
[ "$(wc -l < "$tmp/prefix.err")" -eq 11 ] || fail "prefix: stderr lines"

# Three ranks write 20 lines of 131072 bytes each at once, then a last
# line without its newline: every line must come out whole.
long='awk -v r="$SHEMB_RANK" "BEGIN { s = r; for (i = 0; i < 17; i++) s = s s;
	for (i = 0; i < 20; i++) print s; printf \"tail %s\", r }"'
launch long 20 -n 3 sh -c "$long"
expect long 0
awk '
	/^\[[0-2]\] tail [0-2]$/ {
		if (substr($0, 2, 1) != substr($0, 10, 1)) exit 1
		tail[substr($0, 2, 1)]++
		next
	}
	{
		r = substr($0, 2, 1)
		if (length($0) != 131076 || substr($0, 1, 4) != "[" r "] ")
			exit 1
		s = substr($0, 5)
		gsub(r, "", s)
		if (s != "") exit 1
		n[r]++
	}
	END {
		for (r = 0; r < 3; r++)
			if (n[r] != 20 || tail[r] != 1) exit 1
	}' "$tmp/long.out" || fail "long: lines mixed, cut or lost"
[ "$(tail -c 1 "$tmp/long.out" | od -An -c | tr -d ' ')" = '\n' ] ||
	fail "long: the last line has no newline"

launch raw 10 -n 1 --no-prefix sh -c 'printf "a\nb"; printf "c" >&2'
expect raw 0
[ "$(od -An -c "$tmp/raw.out" | tr -d ' ')" = 'a\nb' ] ||
	fail "raw: --no-prefix changed the output"
[ "$(cat "$tmp/raw.err")" = c ] || fail "raw: stderr"

echo input | timeout 10 "$run" -n 1 cat > "$tmp/stdin.out" 2>&1
[ -s "$tmp/stdin.out" ] && fail "stdin: a rank read the launcher's stdin"

# ---- exit statuses
launch fail 10 -n 3 "$tmp/rank.sh" fail fail
expect fail 3
grep -q '^shemb-run: rank 1 exited with status 3' "$tmp/fail.err" ||
	fail "fail: no line about rank 1"
[ "$(grep -c '^shemb-run:' "$tmp/fail.err")" -eq 1 ] ||
	fail "fail: more than one line about the ranks"
[ -f "$tmp/fail.term.0" ] && [ -f "$tmp/fail.term.2" ] ||
	fail "fail: the other ranks did not get SIGTERM"
gone fail 3

launch kill9 10 -n 3 "$tmp/rank.sh" kill9 kill9
expect kill9 137
grep -q '^shemb-run: rank 1 was killed by signal 9' "$tmp/kill9.err" ||
	fail "kill9: no line about rank 1"
gone kill9 3

# rank 0 ignores SIGTERM: SIGKILL follows after the grace period
launch stubborn 15 -n 2 "$tmp/rank.sh" stubborn stubborn
expect stubborn 5
gone stubborn 2

launch timeout 15 -n 3 --timeout 5 "$tmp/rank.sh" timeout sleep
expect timeout 124
grep -q '^shemb-run: timed out' "$tmp/timeout.err" ||
	fail "timeout: no message (timeout(1) may have killed shemb-run)"
gone timeout 3

# a process left behind holding the output is stopped after a while
launch straggler 15 -n 2 "$tmp/rank.sh" straggler straggler
expect straggler 0
[ "$(grep -c '^\[[01]\] started$' "$tmp/straggler.out")" -eq 2 ] ||
	fail "straggler: output"
gone straggler 2

launch noexec 10 -n 2 "$tmp/no such program"
expect noexec 127
grep -q 'cannot run' "$tmp/noexec.err" || fail "noexec: no reason given"
grep -q '^shemb-run: rank [01] exited with status 127' "$tmp/noexec.err" ||
	fail "noexec: not reported"
printf 'true\n' > "$tmp/not-executable"
launch noexec2 10 -n 1 "$tmp/not-executable"
expect noexec2 127

# ---- signals: each forwarded one reaches every rank
# signal_job CASE SIGNAL STATUS: SIGNAL to the launcher of 3 sleeping
# ranks ends it with STATUS, and leaves no rank running
signal_job()
{
	echo "+ shemb-run -n 3 rank.sh $1 sleep; kill -$2 shemb-run"
	timeout -k 2 30 "$run" -n 3 "$tmp/rank.sh" "$1" sleep \
		> "$tmp/$1.out" 2> "$tmp/$1.err" &
	bg=$!
	wait_pids "$1" 3
	read -r pid launcher < "$tmp/$1.pid.0"
	kill -"$2" "$launcher" || fail "$1: cannot signal the launcher"
	wait "$bg"
	st=$?
	expect "$1" "$3"
	kill -0 "$launcher" 2> /dev/null &&
		fail "$1: the launcher is still there"
	gone "$1" 3
}

signal_job forward TERM 143
grep -q '^shemb-run: rank [0-2] was killed by signal 15' \
	"$tmp/forward.err" || fail "forward: no line about the first rank"
# Ctrl-\ too, which once left the ranks running
signal_job quit QUIT 131

# ---- a stdout that takes nothing more: the launcher still forwards
# signals, enforces --timeout and stops the job when a rank fails, and the
# ranks' lines come out whole and in order once stdout moves again

# stall_start CASE ARGS...: shemb-run ARGS in the background (40 s at
# most), its stdout into a FIFO that another process holds open but does
# not read; sets bg, sleeper and launcher (the pid of shemb-run)
stall_start()
{
	c=$1
	shift
	echo "+ shemb-run $* > FIFO not read" | tr -s '\n\t' '  ' |
		cut -c 1-100
	mkfifo "$tmp/$c.fifo" || fail "$c: mkfifo"
	sleep 1000 < "$tmp/$c.fifo" &
	sleeper=$!
	reader=
	timeout -k 2 40 "$run" "$@" > "$tmp/$c.fifo" 2> "$tmp/$c.err" &
	bg=$!
	pids="$sleeper $bg"
	wait_pids "$c" 3
	read -r _ launcher < "$tmp/$c.pid.0"
}

# unstall CASE: read the launcher's stdout into $tmp/CASE.out from now on
unstall()
{
	cat "$tmp/$1.fifo" > "$tmp/$1.out" &
	reader=$!
	pids="$pids $reader"
}

# stall_end CASE STATUS: the launcher of CASE ends with STATUS
stall_end()
{
	wait "$bg"
	st=$?
	kill "$sleeper"
	wait "$sleeper" 2> /dev/null	# dash: "Terminated"
	[ -z "$reader" ] || wait "$reader"
	pids=
	expect "$1" "$2"
}

# within SECONDS WHAT COMMAND...: until COMMAND succeeds, or fail
within()
{
	i=0
	secs=$1
	what=$2
	shift 2
	until "$@"; do
		i=$((i + 1))
		[ "$i" -le $((secs * 20)) ] || fail "$what"
		sleep 0.05
	done
}

# ended CASE RANK...: those ranks have ended (zombies that the launcher
# has not reaped yet, or gone)
ended()
{
	c=$1
	shift
	for r; do
		read -r pid _ < "$tmp/$c.pid.$r" || return 1
		[ -d "/proc/$pid" ] || continue
		grep -q '^[^)]*) Z' "/proc/$pid/stat" 2> /dev/null || return 1
	done
}

# present KIND CASE RANK...: $tmp/CASE.KIND.RANK exists for each RANK
present()
{
	k=$1
	c=$2
	shift 2
	for r; do
		[ -f "$tmp/$c.$k.$r" ] || return 1
	done
}

# check_numbered FILE RANKS LINES: the lines of RANKS (as "0 2") that
# numbered() wrote are whole, behind their rank, and each rank's are
# numbered 0, 1, ... in order: LINES of them, or with LINES 0 any number,
# the last of which may be cut short (its rank was killed writing it).
check_numbered()
{
	awk -v ranks="$2" -v lines="$3" '
		BEGIN {
			n = split(ranks, rs, " ")
			for (i = 1; i <= n; i++)
				next_i[rs[i]] = 0
			pad = sprintf("%090d", 0)
		}
		{
			r = substr($0, 2, 1)
			if (!(r in next_i) || cut[r]) {
				bad = 1
				exit
			}
			want = "[" r "] " r " " next_i[r] " " pad
			if ($0 == want) {
				next_i[r]++
				next
			}
			if (lines > 0 || length($0) < 5 ||
			    index(want, $0) != 1) {
				bad = 1
				exit
			}
			cut[r] = 1
		}
		END {
			if (bad)
				exit 1
			for (r in next_i)
				if (lines > 0 && next_i[r] != lines)
					exit 1
		}' "$1"
}

# SIGTERM reaches the ranks, which end; the launcher keeps waiting for its
# stdout, until a signal that comes after the ranks' end gives it 3 s more
stall_start stterm -n 3 "$tmp/rank.sh" stterm write_sleep
kill -TERM "$launcher"
within 10 "stterm: SIGTERM not forwarded while stdout is stalled" \
	ended stterm 0 1 2
kill -0 "$launcher" 2> /dev/null ||
	fail "stterm: the output was given up after one signal"
kill -TERM "$launcher"
stall_end stterm 143
grep -q '^shemb-run: rank [0-2] was killed by signal 15' "$tmp/stterm.err" ||
	fail "stterm: no line about the first rank"
grep -q '^shemb-run: dropped [0-9]* bytes of output' "$tmp/stterm.err" ||
	fail "stterm: no line about the output dropped"
gone stterm 3

# ... also when the launcher learns of the ranks' end only after that
# signal (stopped meanwhile here; a loaded machine can do the same): it
# once took that signal for one that came before the end
stall_start stterm2 -n 3 "$tmp/rank.sh" stterm2 slow_term
kill -TERM "$launcher"
within 10 "stterm2: SIGTERM not forwarded" present term stterm2 0 1 2
kill -STOP "$launcher"
within 10 "stterm2: the ranks did not end" ended stterm2 0 1 2
kill -TERM "$launcher"
kill -CONT "$launcher"
stall_end stterm2 143
gone stterm2 3

# --timeout, and 3 s for the output after the ranks' end
stall_start sttime -n 3 --timeout 5 "$tmp/rank.sh" sttime write_sleep
stall_end sttime 124
grep -q '^shemb-run: timed out' "$tmp/sttime.err" ||
	fail "sttime: no message (timeout(1) may have killed shemb-run)"
gone sttime 3

# a rank fails: the others are stopped, and their output waits
stall_start stfail -n 3 "$tmp/rank.sh" stfail write_fail
within 10 "stfail: the other ranks were not stopped" \
	present term stfail 0 2
within 10 "stfail: the other ranks did not end" ended stfail 0 1 2
kill -0 "$launcher" 2> /dev/null || fail "stfail: the output was dropped"
unstall stfail
stall_end stfail 3
grep -q '^shemb-run: rank 1 exited with status 3' "$tmp/stfail.err" ||
	fail "stfail: no line about rank 1"
check_numbered "$tmp/stfail.out" "0 2" 0 ||
	fail "stfail: lines mixed, cut or out of order"
gone stfail 3

# a SIGINT the ranks take and go on: it is forwarded while stdout is
# stalled, the ranks wait in their writes meanwhile (the launcher keeps
# no more than its bound), and then every line comes out
stall_start stint -n 3 "$tmp/rank.sh" stint write_int
within 10 "stint: the ranks are not ready" present ready stint 0 1 2
kill -INT "$launcher"
within 10 "stint: SIGINT not forwarded while stdout is stalled" \
	present int stint 0 1 2
for r in 0 1 2; do
	ended stint "$r" &&
		fail "stint: rank $r wrote it all to a stalled stdout"
done
unstall stint
stall_end stint 0
[ -s "$tmp/stint.err" ] && fail "stint: stderr not empty"
check_numbered "$tmp/stint.out" "0 1 2" 60000 ||
	fail "stint: lines lost, mixed, cut or out of order"
gone stint 3

# ---- usage
launch help 10 --help
expect help 0
grep -q '^Usage: shemb-run -n N' "$tmp/help.out" || fail "--help"
for args in "-n 0 true" "-n 1025 true" "-n x true" "-n 2" "true" \
	"-n 2 --root nohost true" "-n 2 --root host:0 true" \
	"-n 2 --root host:65536 true" "-n 2 --root ::1:80 true" \
	"-n 2 --timeout 0 true" "-n 2 --timeout -1 true" \
	"-n 2 --bogus true"; do
	launch usage 10 $args
	expect "usage ($args)" 2
	grep -q '^Usage:' "$tmp/usage.err" || fail "usage ($args): no usage"
	[ -s "$tmp/usage.out" ] && fail "usage ($args): stdout not empty"
done
exit 0
