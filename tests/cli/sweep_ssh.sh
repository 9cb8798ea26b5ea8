# ts-sweep over ssh against a real sshd on 127.0.0.1 (started here on a
# high port with throw-away keys): values with spaces, quotes, $ and ; reach
# the remote ts-train verbatim, servers that cannot be reached or lack the
# data are left out, and ts-stop stops the remote jobs.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
cleanup() { [ -f "$T/sshd.pid" ] && kill "$(cat "$T/sshd.pid")" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$T/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$T/id" &&
	cp "$T/id.pub" "$T/authorized_keys"
port=$(free_port)
cat >"$T/sshd_config" <<END
Port $port
ListenAddress 127.0.0.1
HostKey $T/host_key
AuthorizedKeysFile $T/authorized_keys
PidFile $T/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AcceptEnv ASAN_OPTIONS UBSAN_OPTIONS
END
check "sshd starts on 127.0.0.1:$port" /usr/sbin/sshd -f "$T/sshd_config" -E "$T/sshd.log"
# the sanitizers' settings of make test SAN=1 reach the remote commands too
SSH="ssh -p $port -i $T/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR
	-o SendEnv=ASAN_OPTIONS -o SendEnv=UBSAN_OPTIONS"
wait_for "sshd lets the throw-away key in" $SSH 127.0.0.1 true

head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
MODEL=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --eval-every 3 --seed 5)
odd="$T/a vocab's \$HOME; \"x\".txt"
cp "$V" "$odd"
echo "127.0.0.1 2" >"$T/servers"
sweep() { timeout 300 ts-sweep --ssh "$SSH" "$@"; }

check "a sweep on a server over ssh" sweep --servers "$T/servers" -p "vocab=$odd,$V" -p lr=1e-4,1e-3 --dir "$T/s" \
	-- "$BIN/ts-train" "${MODEL[@]}" --max-steps 4
expect_eq "4 jobs, all done" "$(ts-cat "$T/s/jobs.msgpack" | jq -r 'select(.state=="done") | .job' | sort -n | tr '\n' ' ')" \
	"1 2 3 4 "
expect_eq "each ran on the server" "$(ts-cat "$T/s/jobs.msgpack" | jq -r 'select(.state=="running") | .host' | sort -u)" \
	127.0.0.1
expect_eq "a value with spaces, quotes, \$ and ; arrives verbatim" "$(grep '^vocab = ' "$T/s/job-001/config" | cut -d' ' -f3-)" \
	"$odd"
expect_eq "the server's cores are shared among its 2 slots" "$(grep '^threads = ' "$T/s/job-001/config")" \
	"threads = $(($(nproc) / 2 > 1 ? $(nproc) / 2 : 1))"
expect_eq "the sweep record names the server" \
	"$(ts-cat "$T/s/jobs.msgpack" | jq -r 'select(.event=="sweep") | .places | map("\(.host) \(.slots)") | join(";")')" "127.0.0.1 2"

printf '# unreachable, then the good one\nnosuchhost.invalid 4\n127.0.0.1\n' >"$T/servers2"
check "a server that cannot be reached is left out, the others run" sweep --servers "$T/servers2" -p lr=1e-4 \
	--dir "$T/s2" -- "$BIN/ts-train" "${MODEL[@]}" --vocab "$V" --max-steps 2
cp "$T/err" "$T/s2.err"
check "...with a warning naming it" grep -q "server nosuchhost.invalid left out: ssh: Could not resolve" "$T/s2.err"
# left_out NAME WHY ARGS...: the sweep exits 1, its warning says WHY and its last line that none is left
left_out() {
	local n=$1 why=$2; shift 2
	sweep "$@" >/dev/null 2>"$T/lo.err"
	local rc=$?
	if [ $rc = 1 ] && grep -q -- "$why" "$T/lo.err" && tail -1 "$T/lo.err" | grep -q "no server or GPU is left to run the jobs"; then
		pass "$n"
	else fail "$n"; echo "    exit $rc"; sed 's/^/    /' "$T/lo.err" | head -5; fi
}
left_out "no server left: the sweep ends, saying why" "server nosuchhost.invalid left out" \
	--servers <(echo "nosuchhost.invalid") -p lr=1e-4 --dir "$T/s3" -- "$BIN/ts-train" "${MODEL[@]}" --vocab "$V"
left_out "a data dir the server lacks leaves it out" "server 127.0.0.1 left out: no data dir $T/nodata" \
	--servers "$T/servers" -p lr=1e-4 --dir "$T/s4" -- "$BIN/ts-train" "${MODEL[@]/$T\/data/$T/nodata}" --vocab "$V"
printf 'data = %s\n' "$T/nodata" >"$T/nodata.conf"
left_out "...as does a data dir a spec gives" "server 127.0.0.1 left out: no data dir $T/nodata" \
	--servers "$T/servers" -p "data=$T/data,$T/nodata" --dir "$T/s5" -- "$BIN/ts-train" "${MODEL[@]:2}" --vocab "$V"
left_out "...or a config file the command names" "server 127.0.0.1 left out: no data dir $T/nodata" \
	--servers "$T/servers" -p lr=1e-4 --dir "$T/s7" -- "$BIN/ts-train" -c "$T/nodata.conf" "${MODEL[@]:2}" --vocab "$V"
expect_fail "a bad servers line" 2 "line 1: not HOST \[SLOTS\]" sweep --servers <(echo "host many") -p lr=1 --dir "$T/s6" \
	-- "$BIN/ts-train" "${MODEL[@]}"

# ts-stop reaches the remote jobs through their run dirs
sweep --servers "$T/servers" -p lr=1e-4,2e-4,3e-4 --dir "$T/st" -- "$BIN/ts-train" "${MODEL[@]}" --vocab "$V" \
	--max-steps 400 --eval-every 200 >"$T/st.out" 2>&1 &
sweeper=$!
two_running() { [ "$(ls "$T"/st/job-00[12]/events.msgpack 2>/dev/null | wc -l)" = 2 ]; }
wait_for "two remote jobs under way" two_running
check "ts-stop SWEEPDIR" ts-stop "$T/st"
for _ in $(seq 600); do kill -0 "$sweeper" 2>/dev/null || break; sleep 0.1; done
wait "$sweeper"
expect_eq "the sweep ends, exit 0" "$?" 0
expect_eq "the remote jobs stopped with a checkpoint, the third never started" \
	"$(ts-cat "$T/st/jobs.msgpack" | jq -r 'select(.state=="stopped") | .job' | sort -n | tr '\n' ' ')$(test -e "$T/st/job-003" && echo started)" \
	"1 2 "
check "job 1 wrote its stop event" sh -c "ts-cat '$T/st/job-001/events.msgpack' | grep -q '\"stop\"'"
check "--resume goes on over ssh" sweep --resume "$T/st"
expect_eq "--resume: all 3 done" \
	"$(ts-sweep --show "$T/st" --format json | jq -r 'sort_by(.job) | map("\(.job) \(.state)") | join(";")')" \
	"1 done;2 done;3 done"
expect_eq "--resume: jobs 1 and 2 went on from their checkpoints on the server" \
	"$(ts-cat "$T/st/jobs.msgpack" | jq -r 'select(.state=="running" and .argv[1]=="--resume") | "\(.job)@\(.host)"' | tr '\n' ' ')" \
	"1@127.0.0.1 2@127.0.0.1 "

# ts-stop while the sweep still checks its servers (an ssh slow to answer):
# no job starts, every one stays queued, and --resume runs them
printf '#!/bin/sh\nsleep 3\nshift 2\nexec sh -c "$*"\n' >"$T/slowssh"   # HOST -- COMMAND
chmod +x "$T/slowssh"
timeout 300 ts-sweep --ssh "$T/slowssh" --servers "$T/servers" -p lr=1e-4,2e-4 --dir "$T/early" -- "$BIN/ts-train" \
	"${MODEL[@]}" --vocab "$V" --max-steps 2 >/dev/null 2>"$T/early.err" &
sweeper=$!
wait_for "a sweep checking its server" test -s "$T/early/lock"
check "ts-stop while the sweep checks its servers" ts-stop "$T/early"
wait "$sweeper"
expect_eq "...the sweep ends, exit 0, every job queued" \
	"$? $(ts-sweep --show "$T/early" --format json | jq -r 'map(.state) | unique | join(";")')" "0 queued"
check "...and --resume runs them" timeout 300 ts-sweep --resume "$T/early"
expect_eq "...both done" "$(ts-sweep --show "$T/early" --format json | jq -r 'map(.state) | unique | join(";")')" done

# a sweep killed outright: its remote jobs lose their ssh sessions, and so
# their standard error's reader, and stop with a checkpoint at their next line
sweep --servers "$T/servers" -p lr=1e-4,2e-4 --dir "$T/sk" -- "$BIN/ts-train" "${MODEL[@]}" --vocab "$V" \
	--max-steps 100000 --eval-every 3 >/dev/null 2>&1 &
sweeper=$!
two_evals() { for j in 1 2; do ts-cat "$T/sk/job-00$j/events.msgpack" 2>/dev/null | grep -q '"eval"' || return 1; done; }
wait_for "two remote jobs under way, to be killed" two_evals
kill -9 "$(cut -d' ' -f1 "$T/sk/lock")"
wait "$sweeper" 2>/dev/null
stopped() { for j in 1 2; do flock -n "$T/sk/job-00$j/lock" true || return 1; done; }
wait_for "...the remote jobs end" stopped
expect_eq "...each stopped with a checkpoint, to go on from" \
	"$(for j in 1 2; do s=$(ts-cat "$T/sk/job-00$j/events.msgpack" | jq -r 'select(.event=="stop") | .step'); test -n "$s" && test -d "$T/sk/job-00$j/ckpt/step-$s" && echo "$j"; done | tr '\n' ' ')" "1 2 "

# a server gone mid-sweep (its sshd ended; the session of the job under way
# lives on): the next job cannot reach it and fails, the server is left out
# saying why, and the jobs left stay queued for --resume, not each failed as fast
sweep --servers <(echo "127.0.0.1 1") -p lr=1e-4,2e-4,3e-4,4e-4 --dir "$T/gone" -- "$BIN/ts-train" "${MODEL[@]}" \
	--vocab "$V" --max-steps 200 --eval-every 100 >"$T/gone.out" 2>"$T/gone.err" &
sweeper=$!
wait_for "a remote job under way" test -s "$T/gone/job-001/events.msgpack"
kill "$(cat "$T/sshd.pid")"
wait "$sweeper"
expect_eq "a server gone: exit 1, job 1 done, job 2 failed, the others queued" \
	"$? $(ts-sweep --show "$T/gone" --format json | jq -r 'sort_by(.job) | map("\(.job) \(.state)") | join(";")')" \
	"1 1 done;2 failed;3 queued;4 queued"
check "...a warning names the server and ssh's reason" grep -qx \
	"ts-sweep: server 127.0.0.1 left out: job 2 could not start there: ssh: connect to host 127.0.0.1 port $port: Connection refused" \
	"$T/gone.err"
check "...and the last line says none is left" sh -c "tail -n 1 '$T/gone.err' | grep -q 'no server or GPU is left to run the jobs'"
check "...its board, the sweep over, tells no time left to run" sh -c "grep -q '2 queued' '$T/gone.out' && ! grep -q 'min left' '$T/gone.out'"
# back on another port: --resume --ssh reaches it there, over the command recorded
port2=$(free_port)
sed "s/^Port $port\$/Port $port2/" "$T/sshd_config" >"$T/sshd_config2"
check "sshd starts again, on another port" /usr/sbin/sshd -f "$T/sshd_config2" -E "$T/sshd.log"
SSH2=${SSH/-p $port /-p $port2 }
wait_for "sshd lets the throw-away key in again" $SSH2 127.0.0.1 true
check "the server back: --resume --ssh runs the jobs left" timeout 300 ts-sweep --ssh "$SSH2" --resume "$T/gone"
expect_eq "...all 4 done" "$(ts-sweep --show "$T/gone" --format json | jq -r 'map(.state) | unique | join(";")')" done
finish
