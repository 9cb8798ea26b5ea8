# ts-top: snapshots (--once, --json) of a finished run and a sweep; the time
# prediction of a recorded run with evaluations and checkpoints, after 10% of
# its steps, against its real length; the live view in a real terminal
# (tmux: a 80x24 window, keys, a resize, a stop from the view, NO_COLOR, a
# long list of long names, LANG=C, terminals it cannot drive); a run dir
# deleted and made again while shown; a run whose trainer is killed shown
# stale.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
tmux_session
head -n 1001 "$TOP/examples/spamassassin.csv" >"$T/spam.csv"
ts-tokenize -v "$V" --label label --max-len 64 "$T/spam.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
MODEL=(--data "$T/data" --vocab "$V" --layers 2 --hidden 64 --heads 2 --max-pos 64 --batch 16 --seed 1 -j 1 --device cpu)
# the tiniest model, for the runs whose numbers do not matter
ts-tokenize -v "$V" --label label --max-len 32 "$T/spam.csv" | ts-shard -o "$T/data32" --seed 3 >/dev/null
TINY=(--data "$T/data32" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --seed 1 -j 1 --device cpu)

check "a run of 40 steps, evaluated every 20" train "${MODEL[@]}" --max-steps 40 --eval-every 20 --run "$T/r"
check "--once: a snapshot" ts-top --once "$T/r"
cp "$T/out" "$T/once.txt"
check "--once: the run is done, at step 40 of 40" grep -q "$T/r  \[done\]" "$T/once.txt"
check "--once: progress, loss, the valid metric, the log" sh -c \
	"grep -q '^step 40/40 (100%)' '$T/once.txt' && grep -q '^loss [0-9.]* (smoothed' '$T/once.txt' &&
	 grep -q '^valid accuracy [0-9.]*, best [0-9.]* at step [0-9]*' '$T/once.txt' && grep -q 'summary: 40 steps' '$T/once.txt'"
expect_eq "--json: the same run" "$(ts-top --json "$T/r" | jq -r '.[0] | "\(.state) \(.step) \(.total_steps) \(.metric)"')" \
	"done 40 40 accuracy"
expect_eq "--json: no time left for a run that does not run, as the text says none" \
	"$(ts-top --json "$T/r" | jq -c '.[0] | [.left_s, .left_plus_minus_s]')" "[null,null]"

# the prediction on a recorded run (tests/fixtures/recorded-run: 200 steps of a 2-layer
# model of hidden size 128 on this corpus, recorded on the 2-core development machine,
# evaluated and saved every 20 steps and at each epoch's end, 16 times in all): after
# 10% of its steps, the time so far and the time left predicted then, against its length
rec=$TOP/tests/fixtures/recorded-run
actual=$(ts-cat "$rec/events.msgpack" | jq -s '(map(select(.event=="done"))[0].time) - (map(select(.event=="start"))[0].time)')
predicted=$(ts-top --json --until 20 "$rec" | jq '.[0] | .elapsed_s + .left_s')
expect_eq "--until 20: the state then, running, not the state now" \
	"$(ts-top --json --until 20 "$rec" | jq -r '.[0].state') $(ts-top --json "$rec" | jq -r '.[0].state')" "running done"
# ...as then: finish at its moment (the last event before step 21) and the time left
moment=$(ts-cat "$rec/events.msgpack" | jq -s '(map(.event == "step" and .step > 20) | index(true)) as $i | .[$i - 1].time')
left=$(ts-top --json --until 20 "$rec" | jq '.[0].left_s')
expect_eq "--until 20: the finish counted from step 20's moment, not now" \
	"$(ts-top --once --until 20 "$rec" | grep -o 'finish at .*')" "finish at $(date -d "@$(awk -v m="$moment" -v l="$left" 'BEGIN { printf "%d", m + l }')" +%H:%M)"
error=$(awk -v p="$predicted" -v a="$actual" 'BEGIN { printf "%.3f", (p - a) / a }')
echo "prediction after step 20 of 200: $predicted s for a run of $actual s, error $error"
check "the prediction after 10% of the steps is within 10% of the run's length" \
	awk -v e="$error" 'BEGIN { exit !(e <= 0.1 && e >= -0.1) }'

# ...and the log's lines up to then, not the run's end
train "${TINY[@]}" --max-steps 30 --eval-every 5 --run "$T/r30" >/dev/null 2>&1
ts-top --once --until 25 "$T/r30" | tail -3 >"$T/log3"
check "--until 25: the log's last lines end at step 25's evaluation, not at the run's end" sh -c \
	"tail -1 '$T/log3' | grep -q ' step 25 eval valid' && ! grep -qE 'step (2[6-9]|30)|done at|summary' '$T/log3'"

# a sweep's jobs
check "a sweep of 2 jobs" timeout 300 ts-sweep -p lr=1e-4,1e-3 --dir "$T/sw" -- ts-train "${MODEL[@]}" --max-steps 4
expect_eq "--json of a sweep dir: each job" "$(ts-top --json "$T/sw" | jq -r 'map(.run | sub(".*/"; "")) | join(" ")')" \
	"job-001 job-002"
expect_eq "a sweep dir named with a trailing slash: its jobs' paths have no doubled one" \
	"$(ts-top --json "$T/sw/" | jq -r '.[0].run')" "$T/sw/job-001"
expect_eq "a job named as a run and in its sweep, either way round: listed once" \
	"$(ts-top --json "$T/sw" "$T/sw/job-001" | jq length) $(ts-top --json "$T/sw/./job-001" "$T/sw" | jq length)" "2 2"
# (its data, a train split alone, has a manifest that understates the largest
# token id, which a masked LM's trainer finds only as it batches the records,
# after making its run dir: a labelled task's are all batched before)
awk 'BEGIN { for (r = 0; r < 40; r++) printf "{\"id\":%d,\"ids\":[2,%d,40000,3],\"label\":%d}\n", r, 5 + r, r % 2 }' |
	ts-cat --from-json | ts-shard -o "$T/bad" --seed 3 --split train=1 >/dev/null 2>&1
jq '.splits |= with_entries(.value.max_id = 100)' "$T/bad/manifest.json" >"$T/m" && mv "$T/m" "$T/bad/manifest.json"
check "a sweep whose second job fails after making its run dir" sh -c \
	"timeout 300 ts-sweep -p data=$T/data,$T/bad --dir '$T/swf' -- ts-train ${MODEL[*]:2} --task mlm --max-steps 2 >/dev/null 2>&1; test \$? = 1 && test -f '$T/swf/job-002/config'"
expect_eq "a sweep job that failed is shown failed, as its sweep says" \
	"$(ts-top --json "$T/swf" | jq -r 'map(.state) | join(" ")')" "done failed"
# a running run whose events foretell a finish beyond any calendar: no finish time, no crash
mkdir "$T/huge"
for s in 1 2 3 4 5; do echo "{\"event\":\"step\",\"time\":$s,\"step\":$s,\"step_ms\":1000}"; done |
	sed '1i {"event":"start","time":0,"total_steps":4e18,"processes":1}' | ts-cat --from-json -o "$T/huge/events.msgpack"
echo "$$ $(hostname)" >"$T/huge/lock"
(exec 9<"$T/huge/lock"; flock 9 && exec sleep 60) &   # blocking: the check below takes the lock for a moment
holder=$!
wait_for "a lock held on that run" sh -c "! flock -n '$T/huge/lock' true"
check "a finish beyond any calendar: shown as unknown" sh -c \
	"timeout 10 env LC_ALL=C.UTF-8 ts-top --once '$T/huge' | grep -q '^elapsed 0:00:05  left - ± -  finish at -\$'"
kill "$holder"; wait "$holder" 2>/dev/null
# counts no long holds, or none at all, read as zero: never a cast out of range
mkdir "$T/wild"
printf '%s\n' '{"event":"start","time":0,"total_steps":1e300,"processes":-5,"params":"many"}' \
	'{"event":"step","time":1,"step":1e30,"epoch":1.5,"step_ms":1000}' | ts-cat --from-json -o "$T/wild/events.msgpack"
expect_eq "counts out of range show as zero" "$(ts-top --json "$T/wild" | jq -c '.[0] | [.step, .epoch, .total_steps, .processes, .params]')" \
	"[0,0,0,0,0]"
# a loss too long for its field: shown as %g, not cut short to another number
mkdir "$T/vast"
printf '%s\n' '{"event":"start","time":0,"total_steps":10,"processes":1}' \
	'{"event":"step","time":1,"step":1,"loss":3.4e38,"step_ms":1000}' | ts-cat --from-json -o "$T/vast/events.msgpack"
check "a loss of 3.4e38 shows as 3.4e+38" sh -c "ts-top --once '$T/vast' | grep -q '^loss 3.4e+38 (smoothed 3.4e+38)'"
# a run dir named in Latin-1 and a device that is not UTF-8: --json lists the
# run all the same, with U+FFFD for each byte that is no character
latin=$T/caf$(printf '\351')
mkdir "$latin"
printf '\x82\xa5event\xa5start\xa6device\xa3c\xffu' >"$latin/events.msgpack"   # {"event": "start", "device": "c\xffu"}
expect_eq "--json: a run whose dir and device are not UTF-8" \
	"$(ts-top --json "$T/vast" "$latin" | jq -r 'map("\(.run) \(.device)") | join(",")')" "$T/vast ,$T/caf� c�u"
# LANG=C: ASCII alone, the ± too (a running run, seen as it stood after step 20)
check "LANG=C: the time left's uncertainty as +-" sh -c "LC_ALL=C ts-top --once --until 20 '$rec' | grep -q '^elapsed .* left .* +- .*  finish at'"
check "LANG=C: a snapshot in ASCII alone" sh -c "! LC_ALL=C ts-top --once --until 20 '$rec' | grep -qP '[^\\x00-\\x7f]'"
# a run before its first event: no numbers yet, not zeros or nan
mkdir "$T/new" && touch "$T/new/config"
ts-top --once "$T/new" >"$T/new.txt"
check "a new run: - for the numbers not known yet" sh -c \
	"grep -qx 'speed - samples/s, - tokens/s, - ms a step  ' '$T/new.txt' && grep -qx 'loss - (smoothed -), lr -, grad norm -  ' '$T/new.txt'"
expect_eq "a new run: --json gives them as null" "$(ts-top --json "$T/new" | jq -c '.[0] | [.loss, .loss_smoothed, .lr]')" "[null,null,null]"
expect_fail "a dir that is neither" 1 "neither a run dir nor a sweep dir" ts-top --once "$T/data"
expect_fail "a path that does not exist: the system's reason" 1 "cannot open $T/nothere: No such file or directory" ts-top --once "$T/nothere"
expect_fail "a file: not a directory" 1 "cannot open $T/data/manifest.json: Not a directory" ts-top --once "$T/data/manifest.json"
expect_fail "--once with --json: which snapshot is unclear" 2 "--once and --json are one at a time" ts-top --once --json "$T/r"
expect_fail "--until without --once" 2 "--until goes with --once or --json" ts-top --until 3 "$T/r"
expect_fail "not a terminal" 1 "standard output is not a terminal" ts-top "$T/r"

# the live view, in a real terminal
train "${MODEL[@]}" --max-steps 1000000 --eval-every 100 --run "$T/live" >/dev/null 2>&1 &
trainer=$!
wait_for "a long run under way" test -s "$T/live/events.msgpack"
screen() { tmux capture-pane -p -t "$S" "$@"; }
shows() { screen | grep -q -- "$1"; }
tmux new-session -d -s "$S" -x 80 -y 24 "LC_ALL=C.UTF-8 TERM=xterm-256color $BIN/ts-top $T/live $T/r"
wait_for "the live view shows both runs, one running" sh -c "$(declare -f screen shows); S=$S; shows '\[running\]' && shows 'step [0-9]*/1000000'"
check "80x24: the header fits" sh -c "$(declare -f screen); S=$S; screen | head -1 | grep -q 'q quit'"
check "the view shows the list of runs, the selected one marked" sh -c "$(declare -f screen); S=$S; screen | grep -q '^> .*live'"
# coloured: whether the screen holds a foreground colour's escape sequence
coloured() { tmux capture-pane -e -p -t "$S" | grep -qP '\x1b\[[0-9;]*3[0-7]m'; }
check "colour: escape sequences for the running state" coloured
tmux send-keys -t "$S" Tab
wait_for "tab selects the other run" sh -c "$(declare -f screen); S=$S; screen | grep -q '^> .*/r '"
tmux send-keys -t "$S" h
wait_for "h shows the help" sh -c "$(declare -f screen shows); S=$S; shows 'stop the selected run'"
tmux send-keys -t "$S" h
tmux resize-window -t "$S" -x 120 -y 40
wait_for "after a resize the view fills the new size" sh -c "tmux display -p -t $S '#{window_width}x#{window_height}' | grep -qx 120x40 && $(declare -f screen shows); S=$S; shows '^> .*/r '"
speed=$(LC_ALL=C.UTF-8 ts-top --once "$T/r" | grep '^speed')
check "a line that fits is shown whole, its sparkline of 3-byte blocks too" sh -c "$(declare -f screen); S=$S; screen | grep -qxF '$speed'"
tmux send-keys -t "$S" Tab
wait_for "back on the live run" sh -c "$(declare -f screen); S=$S; screen | grep -q '^> .*live'"
tmux send-keys -t "$S" s
wait_for "s asks first" sh -c "$(declare -f screen shows); S=$S; shows 'with a checkpoint? (y/n)'"
tmux send-keys -t "$S" y
wait_for "y stops the run, which the view then shows stopped" sh -c "$(declare -f screen shows); S=$S; shows '\[stopped\]'"
wait "$trainer"
expect_eq "the trainer stopped cleanly, exit 0" "$?" 0
check "its stop event" sh -c "ts-cat '$T/live/events.msgpack' | jq -r .event | tail -1 | grep -qx stop"
tmux send-keys -t "$S" s
wait_for "s on a run that does not run asks too" sh -c "$(declare -f screen shows); S=$S; shows 'with a checkpoint? (y/n)'"
tmux send-keys -t "$S" y
wait_for "...y shows why it cannot stop it" sh -c "$(declare -f screen shows); S=$S; shows 'no ts-train or ts-sweep is running there'"
tmux send-keys -t "$S" q
wait_for "q quits" sh -c "! tmux has-session -t $S 2>/dev/null"
# Control-C ends it, the terminal given back as it was: echo and lines, as
# the shell that goes on (here one that ignores Control-C itself) finds them
tmux new-session -d -s "$S" -x 80 -y 24 "trap '' INT; TERM=xterm-256color $BIN/ts-top $T/r; echo \$? >$T/int.rc; stty -a >$T/int.stty"
wait_for "a view to interrupt" sh -c "$(declare -f screen shows); S=$S; shows 'q quit'"
tmux send-keys -t "$S" C-c
wait_for "Control-C ends it" test -s "$T/int.stty"
expect_eq "...killed by SIGINT, the terminal echoing again by lines" \
	"$(cat "$T/int.rc") $(grep -oE '(^| )-?(echo|icanon)( |$)' "$T/int.stty" | tr -d ' ' | sort | tr '\n' ' ')" "130 echo icanon "
wait_for "...and its session ends" sh -c "! tmux has-session -t $S 2>/dev/null"

# terminals it cannot drive: its own line, not curses' (TERM unset), nor a
# view run together on one line (TERM=dumb)
for term in "" dumb; do
	rm -f "$T/term.rc"
	tmux new-session -d -s "$S" -x 80 -y 24 "env -u TERM ${term:+TERM=$term} timeout --foreground 5 $BIN/ts-top $T/r 2>$T/term.err; echo \$? >$T/term.rc"
	wait_for "TERM ${term:-unset}: ts-top ends" test -s "$T/term.rc"
	expect_eq "TERM ${term:-unset}: refused in a line of its own, exit 1" "$(cat "$T/term.rc" "$T/term.err")" \
		"1
ts-top: ${term:+TERM=}${term:-TERM unset}: cannot drive this terminal: --once or --json work anywhere"
	tmux kill-session -t "$S" 2>/dev/null
done
# LANG=C: a name of UTF-8 bytes shows a '?' a byte, in as many columns as counted
mkdir "$T/é-run" && cp "$T/r/events.msgpack" "$T/é-run"
tmux new-session -d -s "$S" -x 80 -y 24 -c "$T" "LC_ALL=C TERM=xterm-256color $BIN/ts-top é-run r new"
wait_for "the list: a run before its first evaluation shows its metric as -" sh -c "$(declare -f screen shows); S=$S; shows '^  new  *new  *0/0  *accuracy -\$'"
wait_for "LANG=C: a UTF-8 name, a '?' a byte, the columns lined up" sh -c "$(declare -f screen shows); S=$S; shows '^> ??-run  *done' && [ \"\$(screen | awk '/ done / { print index(\$0, \" done \") }' | sort -u)\" = 39 ]"
tmux send-keys -t "$S" q
wait_for "...q quits" sh -c "! tmux has-session -t $S 2>/dev/null"

# a sweep's view: a line a job, and the jobs that begin while it shows them
# (here the sweep's dirs, hidden, then put back)
mv "$T/sw/job-001" "$T/sw-001" && mv "$T/sw/job-002" "$T/sw-002"
expect_eq "--once of a sweep whose jobs have not begun" "$(ts-top --once "$T/sw")" "no job has begun yet"
tmux new-session -d -s "$S" -x 80 -y 24 "TERM=xterm-256color $BIN/ts-top $T/sw"
wait_for "a sweep's view before its first job" sh -c "$(declare -f screen shows); S=$S; shows 'no job has begun yet'"
mv "$T/sw-001" "$T/sw/job-001"
wait_for "...then its first job" sh -c "$(declare -f screen shows); S=$S; shows '^.*sw/job-001 *\[done\]'"
mv "$T/sw-002" "$T/sw/job-002"
wait_for "a sweep's view lists its jobs as they begin" sh -c "$(declare -f screen); S=$S; screen | grep -q '^> .*sw/job-001 *done' && screen | grep -q '^  .*sw/job-002 *done'"
tmux send-keys -t "$S" q

# a long list: names alike but for their ends, wider characters, more runs
# than rows
L=experiments/bert-spam-baseline-lr-sweep-2026
for i in $(seq -w 1 15); do mkdir -p "$T/$L/trial-$i" && cp "$T/r/events.msgpack" "$T/$L/trial-$i"; done
mkdir "$T/日本語-ü" "$T/$L/$(printf 'é%.0s' $(seq 40))"
cp "$T/r/events.msgpack" "$T/日本語-ü" && cp "$T/r/events.msgpack" "$T/$L/$(printf 'é%.0s' $(seq 40))"
tmux new-session -d -s "$S" -x 80 -y 24 -c "$T" "LC_ALL=C.UTF-8 TERM=xterm-256color $BIN/ts-top 日本語-ü $L/é* $L/trial-*"
wait_for "a long name: its end kept, marked cut" sh -c "$(declare -f screen shows); S=$S; shows '^  …pam-baseline-lr-sweep-2026/trial-01 *done'"
# (where the state begins: its column, after the name's wide characters or those cut)
state_columns() { screen | grep ' done ' | sed 's/ done .*//' | while IFS= read -r l; do printf '%s' "$l" | LC_ALL=C.UTF-8 wc -L; done | sort -u | tr '\n' ' '; }
expect_eq "names of 2-column and 2-byte characters: the columns line up" "$(state_columns)" "38 "
check "a long name of 2-byte characters: cut between them" sh -c "$(declare -f screen); S=$S; screen | grep -q '^  …éééé*é done'"
tmux send-keys -t "$S" Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab Tab
wait_for "the list scrolls to the selected run, the last of more than fit" sh -c "$(declare -f screen shows); S=$S; shows '^> …pam-baseline-lr-sweep-2026/trial-15 *done' && ! shows 'trial-04'"
tmux send-keys -t "$S" Tab
wait_for "...and back to the first" sh -c "$(declare -f screen shows); S=$S; shows '^> 日本語-ü' && shows 'trial-01'"
tmux send-keys -t "$S" q
wait_for "...q quits" sh -c "! tmux has-session -t $S 2>/dev/null"

# a run dir deleted and made again while the view shows it: the new run,
# read from its start, not the old one (nor the new one read from where the
# old one's reading stopped)
train "${TINY[@]}" --max-steps 12 --run "$T/again" >/dev/null 2>&1
tmux new-session -d -s "$S" -x 80 -y 24 "TERM=xterm-256color $BIN/ts-top $T/again"
wait_for "a run shown done" sh -c "$(declare -f screen shows); S=$S; shows '^step 12/12 '"
rm -rf "$T/again" && train "${TINY[@]}" --max-steps 3 --run "$T/again" >/dev/null 2>&1
wait_for "...deleted and made again with fewer steps: the new run" sh -c "$(declare -f screen shows); S=$S; shows '^step 3/3 '"
rm -rf "$T/again" && train "${TINY[@]}" --max-steps 30 --run "$T/again" >/dev/null 2>&1
wait_for "...and again with more: the new run, readable" sh -c "$(declare -f screen shows); S=$S; shows '^step 30/30 ' && shows '\[done\]'"
# (a new file may take the inode number of one deleted: the file read is
# told by its first bytes too)
cat "$T/r/events.msgpack" >"$T/again/events.msgpack"
wait_for "...its events written over in place, longer: the new ones" sh -c "$(declare -f screen shows); S=$S; shows '^step 40/40 '"
tmux send-keys -t "$S" q
wait_for "...q quits" sh -c "! tmux has-session -t $S 2>/dev/null"

# a run that ends on an error is shown failed: its checkpoint dir made a file mid-run
train "${MODEL[@]}" --max-steps 1000000 --save-every 30 --run "$T/fails" >/dev/null 2>"$T/fails.err" &
trainer=$!
wait_for "a run that will fail under way" test -s "$T/fails/events.msgpack"
rm -rf "$T/fails/ckpt" && touch "$T/fails/ckpt"
wait "$trainer"
expect_eq "...it ends on the error, exit 1" "$?" 1
expect_eq "...its last event says it failed, and ts-top shows it failed" \
	"$(ts-cat "$T/fails/events.msgpack" | jq -r .event | tail -1) $(ts-top --json "$T/fails" | jq -r '.[0].state')" "failed failed"

# NO_COLOR, and a trainer killed: stale
train "${MODEL[@]}" --max-steps 1000000 --run "$T/killed" >/dev/null 2>&1 &
trainer=$!
wait_for "another long run under way" test -s "$T/killed/events.msgpack"
tmux new-session -d -s "$S" -x 80 -y 24 "NO_COLOR=1 TERM=xterm-256color $BIN/ts-top $T/killed"
wait_for "NO_COLOR: the view" sh -c "$(declare -f screen shows); S=$S; shows '\[running\]'"
check "NO_COLOR: no colour" sh -c "$(declare -f coloured); S=$S; ! coloured"
# cpu_ticks PID: its user and system time so far, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
top_pid=$(pgrep -f "^$BIN/ts-top $T/killed\$")
before=$(cpu_ticks "$top_pid")
sleep 5
after=$(cpu_ticks "$top_pid")
echo "ts-top (pid $top_pid, $(cat "/proc/$top_pid/comm")): CPU over 5 s of a live run: $(( (after - before) * 1000 / $(getconf CLK_TCK) )) ms"
check "the live view takes negligible CPU: under 2% over 5 s" test $(( (after - before) * 1000 / $(getconf CLK_TCK) )) -lt 100
kill_trainer "$T/killed"
wait_for "a trainer killed: stale" sh -c "$(declare -f screen shows); S=$S; shows '\[stale\]'"
tmux send-keys -t "$S" q
finish
