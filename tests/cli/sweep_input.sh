# ts-sweep, ts-top and ts-stop on what a user can get wrong or leave
# running, a block each: what must fail fails with one line and its exit
# status; what must not neither hangs nor crashes nor loses a job's state.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
tmux_session
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
BASE=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --eval-every 50 --seed 5 --vocab "$V")
MODEL=("${BASE[@]}" -j 1)
LONG=(ts-train "${MODEL[@]}" --max-steps 100000)
sweep() { timeout 300 ts-sweep "$@"; }
# states DIR: each job's last state, "job state" a line
states() { ts-cat "$1/jobs.msgpack" | jq -r 'select(.event=="job" and .state != "queued" and .state != "running") | "\(.job) \(.state)"' | sort -n; }
# steps_in RUN: whether the run has taken 3 steps
steps_in() { [ "$(ts-cat "$1/events.msgpack" 2>/dev/null | jq -r 'select(.event=="step") | .step' | wc -l)" -ge 3 ]; }
# ended DIR: whether no ts-sweep or ts-train holds DIR's lock any more
ended() { flock -n "$1/lock" true; }
screen() { tmux capture-pane -p -t "$S"; }
shows() { screen | grep -q -- "$1"; }
config_of() { grep -E "^$2 = " "$1/config" | sed "s/^$2 = //"; }

# ts-top counts the evaluations and checkpoints left without a loop over the steps left
train "${MODEL[@]}" --max-steps 1000000000000 --run "$T/big" >/dev/null 2>&1 &
trainer=$!
wait_for "a run of 10^12 steps under way" steps_in "$T/big"
check "ts-top --once of a run of 10^12 steps: at once" timeout 10 ts-top --once "$T/big"
expect_eq "ts-top --json of it: years left" "$(timeout 10 ts-top --json "$T/big" | jq -r '.[0].left_s > 1e8')" true
tmux new-session -d -s "$S" -x 80 -y 24 "TERM=xterm-256color $BIN/ts-top $T/big"
wait_for "the live view of it" sh -c "$(declare -f screen shows); S=$S; shows 'step [0-9]*/1000000000000'"
tmux kill-session -t "$S"
check "ts-stop it" timeout 60 ts-stop --wait "$T/big"
wait "$trainer"

# a job stopped on its own (ts-stop on its run dir, or ts-top's s) is stopped, and --resume goes on with it
sweep -p lr=1e-4,1e-3 --dir "$T/js" -- "${LONG[@]}" >/dev/null 2>&1 &
sweeper=$!
wait_for "a sweep's job 1 under way" steps_in "$T/js/job-001"
check "ts-stop on job 1's run dir" timeout 60 ts-stop --wait "$T/js/job-001"
wait_for "then job 2 under way" steps_in "$T/js/job-002"
check "ts-stop on job 2's run dir" timeout 60 ts-stop --wait "$T/js/job-002"
wait "$sweeper"
expect_eq "jobs stopped on their own: the sweep exits 0 and records each stopped" "$? $(states "$T/js" | tr '\n' ';')" \
	"0 1 stopped;2 stopped;"
sweep --resume "$T/js" >/dev/null 2>&1 &
sweeper=$!
resumed() { ts-cat "$T/js/jobs.msgpack" | jq -se 'any(.[]; .job == 1 and .state == "running" and .argv[1] == "--resume")' >/dev/null; }
wait_for "--resume goes on with job 1 from its checkpoint" resumed
timeout 60 ts-stop --wait "$T/js" >/dev/null 2>&1
wait "$sweeper"

# ts-stop SWEEPDIR from another machine writes SWEEPDIR/stop alone: the sweep finds it
sweep -p lr=1e-4,1e-3 --dir "$T/oh" -- "${LONG[@]}" >/dev/null 2>&1 &
sweeper=$!
wait_for "another sweep's job 1 under way" steps_in "$T/oh/job-001"
check "ts-stop SWEEPDIR from another machine (another host name)" \
	unshare -u sh -c "hostname otherhost && timeout 60 ts-stop '$T/oh'"
wait_for "...the sweep finds the request and stops" ended "$T/oh"
ended "$T/oh" || timeout 60 ts-stop "$T/oh" >/dev/null
wait "$sweeper"
expect_eq "...exit 0, job 1 stopped, job 2 never started, the stop recorded, the request removed" \
	"$? $(states "$T/oh" | tr '\n' ';') $(test -e "$T/oh/job-002" && echo started)$(ts-cat "$T/oh/jobs.msgpack" | jq -r .event | tail -1) $(test -e "$T/oh/stop" && echo left)" \
	"0 1 stopped; stop "

# SIGHUP (the terminal closed) stops the sweep as SIGTERM does: its job checkpoints, no other starts
sweep -p lr=1e-4,1e-3 --dir "$T/hup" -- "${LONG[@]}" >/dev/null 2>&1 &
sweeper=$!
wait_for "SIGHUP: the sweep's job 1 under way" steps_in "$T/hup/job-001"
kill -HUP "$(cut -d' ' -f1 "$T/hup/lock")"
wait_for "SIGHUP: the sweep ends" ended "$T/hup"
ended "$T/hup" || kill "$sweeper"
wait "$sweeper"
rc=$?
stopped=$(ts-cat "$T/hup/job-001/events.msgpack" | jq -r 'select(.event=="stop") | .step')
expect_eq "SIGHUP: exit 0, job 1 stopped with a checkpoint, job 2 never started, the stop recorded" \
	"$rc $(states "$T/hup" | tr '\n' ';') $(test -d "$T/hup/job-001/ckpt/step-$stopped" && echo ckpt) $(test -e "$T/hup/job-002" && echo started)$(ts-cat "$T/hup/jobs.msgpack" | jq -r .event | tail -1)" \
	"0 1 stopped; ckpt stop"
# a hang-up of the sweep's whole process group, as a terminal closed sends it, with
# jobs of 2 processes: the process that leads each job passes the stop on, not dying of it
sweep -p lr=1e-4 --per-job 2 --dir "$T/hupg" -- "${LONG[@]}" >/dev/null 2>&1 &
sweeper=$!
wait_for "SIGHUP to the group: the job of 2 processes under way" steps_in "$T/hupg/job-001"
kill -HUP -- -"$(ps -o pgid= -p "$(cut -d' ' -f1 "$T/hupg/lock")" | tr -d ' ')"
wait_for "SIGHUP to the group: the sweep ends" ended "$T/hupg"
ended "$T/hupg" || kill "$sweeper"
wait "$sweeper"
expect_eq "SIGHUP to the group: exit 0, the job stopped, not failed" "$? $(states "$T/hupg")" "0 1 stopped"

# a job that failed before a stop: the exit status still says a job failed
sweep -P 2 -p max-pos=32,8 --dir "$T/fs" -- "${LONG[@]}" >/dev/null 2>"$T/fs.err" &
sweeper=$!
wait_for "a failed job, then a stop: job 2 failed, job 1 under way" sh -c \
	"$(declare -f states steps_in); states '$T/fs' | grep -qx '2 failed' && steps_in '$T/fs/job-001'"
check "a failed job, then a stop: ts-stop" timeout 60 ts-stop "$T/fs"
wait "$sweeper"
expect_eq "a failed job, then a stop: exit 1, job 1 stopped, job 2 failed, its line on standard error" \
	"$? $(states "$T/fs" | tr '\n' ';') $(grep -c "^ts-sweep: job 2 failed: exit status 2; its output is in $T/fs/job-002.out$" "$T/fs.err")" \
	"1 1 stopped;2 failed; 1"

# standard error a pipe closed early (2>&1 | head -1): the sweep stops at its next line, as
# ts-train does, its records whole
sweep -p max-pos=8,8,8,8,32 --dir "$T/pipe" -- ts-train "${MODEL[@]}" --max-steps 2 2>&1 | head -n 1 >"$T/pipe.head"
expect_eq "standard error closed early: its first line kept; the job whose line found it closed recorded, then the stop" \
	"$(cat "$T/pipe.head") | $(states "$T/pipe" | tr '\n' ';') $(ts-cat "$T/pipe/jobs.msgpack" | jq -r .event | tail -1)" \
	"ts-sweep: job 1 failed: exit status 2; its output is in $T/pipe/job-001.out | 1 failed;2 failed; stop"

# a job stopped before its trainer catches the signal (one that dies of SIGTERM, as ts-train
# does in its first moments) is stopped, not failed
mkdir "$T/early" && cat >"$T/early/ts-train" <<'EOF'
#!/bin/sh
case " $* " in *" --count-params "*) echo 1000; exit;; esac
exec sleep 60
EOF
chmod +x "$T/early/ts-train"
PATH=$T/early:$PATH sweep -p lr=1e-4,1e-3 --dir "$T/es" -- ts-train --data "$T/data" >/dev/null 2>"$T/es.err" &
sweeper=$!
wait_for "a job that dies of the stop: under way" sh -c "ts-cat '$T/es/jobs.msgpack' | grep -q '\"running\"'"
check "a job that dies of the stop: ts-stop" timeout 60 ts-stop "$T/es"
wait "$sweeper"
expect_eq "a job that dies of the stop: exit 0, the job stopped, no line says it failed" \
	"$? $(states "$T/es" | tr '\n' ';') $(grep -c failed "$T/es.err")" "0 1 stopped; 0"

# an option in two specs, or twice in one, would have one value win silently
expect_fail "-p: an option in two specs" 2 "-p: option lr is given twice" \
	sweep -p lr=1e-4,1e-2 -p lr=5e-3 --dir "$T/u1" -- ts-train "${MODEL[@]}" --max-steps 1
expect_fail "-p: an option twice in a group" 2 "-p: option lr is given twice" \
	sweep -p lr,lr=1:2 --dir "$T/u2" -- ts-train "${MODEL[@]}" --max-steps 1
# a word not UTF-8 (a data dir named in Latin-1) the JSON records would leave
# out, and a resume would run another command
expect_fail "a job's word not UTF-8: refused" 1 "' is not UTF-8, which jobs.msgpack cannot record$" \
	sweep -p lr=1e-4 --dir "$T/u6" -- ts-train --data "$T/dat$(printf '\351')" --max-steps 1
check "nothing written for them" sh -c "! ls -d '$T'/u* 2>/dev/null"
# -p threads: each job's own, as ts-train -j in the command is; -P 1024 would give each 1 core
sweep --print -P 1024 -p threads=2,3 --dir "$T/u3" -- ts-train "${BASE[@]}" >"$T/print.txt"
expect_eq "-p threads with --print: each job's own, no -j of the sweep's after it" \
	"$(grep -c -- "--threads [23] --run [^ ]* --device cpu$" "$T/print.txt") $(grep -c -- ' -j ' "$T/print.txt")" "2 0"
# a config file (-c) of the job's own gives its threads and device as the command line would
printf 'threads = 3\ndevice = cuda\n' >"$T/own.conf"
sweep --print -P 2 -p lr=1e-4,1e-3 --dir "$T/u4" -- ts-train "${BASE[@]}" -c "$T/own.conf" >"$T/print2.txt"
expect_eq "-c FILE giving threads and device: the job's own, the sweep adds neither -j nor --device" \
	"$(wc -l <"$T/print2.txt") $(grep -c -- ' -j \| --device ' "$T/print2.txt")" "2 0"
printf 'threads = 3\nnot a setting\n' >"$T/bad.conf"
expect_fail "a job's config file that ts-train would refuse: refused before any job starts" 2 \
	"$T/bad.conf: line 2: expected 'key = value', got 'not a setting'" \
	sweep --print -p lr=1e-4 --dir "$T/u5" -- ts-train "${BASE[@]}" --config="$T/bad.conf"
check "-p threads=2 at -P 1024" sweep -P 1024 -p threads=2 --dir "$T/th" -- ts-train "${BASE[@]}" --max-steps 2
expect_eq "...the job runs on 2 threads" "$(config_of "$T/th/job-001" threads)" 2

# whole-number ranges: each whole number from LO to HI as likely
sweep --print --random 3000 -p layers=1:3 --dir "$T/u4" -- ts-train >"$T/draws.txt"
expect_eq "--random 3000 -p layers=1:3: 1, 2 and 3 each 900 to 1100 times" \
	"$(grep -o -- '--layers [0-9]*' "$T/draws.txt" | sort | uniq -c | awk '{ printf "%s:%d ", $3, ($1 > 900 && $1 < 1100) }')" \
	"1:1 2:1 3:1 "

# events that cannot be read: an error for a snapshot, "unreadable" in the live view
check "a run of 8 steps" train "${MODEL[@]}" --max-steps 8 --eval-every 4 --run "$T/r"
mkdir -p "$T/dir/events.msgpack" "$T/bad" "$T/torn"
cp "$T/r/config" "$T/dir" && cp "$T/r/config" "$T/bad" && cp "$T/r/config" "$T/torn"
expect_fail "ts-top --once: events.msgpack a dir" 1 "^ts-top: cannot read $T/dir/events.msgpack: Is a directory$" \
	timeout 10 ts-top --once "$T/dir"
expect_fail "ts-top --json: events.msgpack a dir" 1 "cannot read $T/dir/events.msgpack: Is a directory" \
	timeout 10 ts-top --json "$T/dir"
ts-cat "$T/r/events.msgpack" | head -n 3 | ts-cat --from-json -o "$T/bad/events.msgpack"
printf '\xc1' >>"$T/bad/events.msgpack"
expect_fail "ts-top --once: a record that is not msgpack" 1 "^ts-top: $T/bad/events.msgpack: record 4: malformed msgpack$" \
	timeout 10 ts-top --once "$T/bad"
# a record torn by a crash is no error; the resumed trainer cuts it off and writes on from there
ts-cat "$T/r/events.msgpack" | head -n 5 | ts-cat --from-json -o "$T/torn/events.msgpack"
whole=$(stat -c %s "$T/torn/events.msgpack")
step=$(ts-cat "$T/r/events.msgpack" | head -n 5 | jq -s 'map(select(.event == "step")) | last | .step')
ts-cat "$T/r/events.msgpack" | sed -n 6p | ts-cat --from-json | head -c 10 >>"$T/torn/events.msgpack"
expect_eq "ts-top --json: a torn last record is no error: the run as its whole records leave it" \
	"$(timeout 10 ts-top --json "$T/torn" 2>"$T/err" | jq -r '.[0] | "\(.state) \(.step)"') $(wc -c <"$T/err")" "stale $step 0"
tmux new-session -d -s "$S" -x 100 -y 30 "TERM=xterm-256color $BIN/ts-top $T/bad $T/torn"
wait_for "the live view: events not msgpack, unreadable and why" sh -c \
	"$(declare -f screen shows); S=$S; shows 'bad  \[unreadable\]' && shows 'record 4: malformed msgpack'"
wait_for "the live view: the torn run at its last whole record" sh -c \
	"$(declare -f screen); S=$S; screen | grep -q '^  .*/torn  *stale  *$step/8 '"
truncate -s "$whole" "$T/torn/events.msgpack"
ts-cat "$T/r/events.msgpack" | tail -n +6 | ts-cat --from-json >>"$T/torn/events.msgpack"
wait_for "the live view: the torn record written over, the run reads to its end" sh -c \
	"$(declare -f screen); S=$S; screen | grep -q '^  .*/torn  *done  *8/8 '"
tmux send-keys -t "$S" q
wait_for "the live view quits" sh -c "! tmux has-session -t $S 2>/dev/null"
expect_fail "ts-top --until 0: refused, not ignored" 2 "--until: 0 is out of range" timeout 10 ts-top --once --until 0 "$T/r"

# a sweep record damaged by hand; a place check that fails
cp -r "$T/oh" "$T/ns"
ts-cat "$T/oh/jobs.msgpack" | jq -c 'if .job == 2 then del(.state) else . end' | ts-cat --from-json -o "$T/ns/jobs.msgpack"
expect_fail "--resume: a job record without a state" 1 "jobs.msgpack: job 2 has no state" sweep --resume "$T/ns"
expect_fail "ts-top: a job record without a state" 1 "jobs.msgpack: job 2 has no state" timeout 10 ts-top --once "$T/ns"
cp -r "$T/oh" "$T/cut"
ts-cat "$T/oh/jobs.msgpack" | head -n 1 | ts-cat --from-json -o "$T/cut/jobs.msgpack"   # the sweep record alone
expect_fail "--resume: the job records cut off after the sweep's" 1 "jobs.msgpack: the sweep has 2 jobs, the file records 0" \
	sweep --resume "$T/cut"
expect_fail "--show too" 1 "jobs.msgpack: the sweep has 2 jobs, the file records 0" sweep --show "$T/cut"
echo nohost >"$T/servers"
sweep --servers "$T/servers" --ssh false -p lr=1e-4 --dir "$T/pl" -- "${LONG[@]}" >/dev/null 2>"$T/pl.err"
expect_eq "no place passes its check: exit 1, why, and no sweep dir left to block a retry" \
	"$? $(grep -c 'no server or GPU is left' "$T/pl.err") $(test -e "$T/pl" && echo left)" "1 1 "
finish
