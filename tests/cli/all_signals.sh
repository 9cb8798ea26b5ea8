# Signals: SIGINT, SIGTERM, SIGHUP and SIGPIPE end a command promptly even while
# it is blocked reading a pipe, and leave no temp file or dir behind; ts-train stops
# with a checkpoint on SIGINT as it does on SIGTERM.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" >"$T/tok.msgpack"

# wait_for COND...: polls COND every 0.1 s for at most 30 s
wait_for() { for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
alive() { kill -0 "$1" 2>/dev/null; }
gone() { ! alive "$1"; }
has_tmp() { compgen -G "$1.tmp.*" >/dev/null; }

# blocked NAME SIG OUT CMD...: runs CMD reading a FIFO that is fed the input
# and then held open, so that CMD waits in read(); once OUT's temp exists, sends
# SIG and expects CMD to be gone within 5 s with exit 128+SIG and no OUT at all.
blocked() {
	local name=$1 sig=$2 out=$3; shift 3
	local fifo=$T/fifo.$RANDOM
	mkfifo "$fifo"
	"$@" <"$fifo" >/dev/null 2>"$T/err" &
	local pid=$!
	exec 3>"$fifo"
	cat "$T/tok.msgpack" >&3
	if ! wait_for has_tmp "$out"; then fail "$name: the temp output appears"; kill -9 $pid; exec 3>&-; wait $pid; return; fi
	kill -"$sig" $pid
	local ended=0
	for _ in $(seq 50); do gone $pid && { ended=1; break; }; sleep 0.1; done
	[ $ended = 1 ] || kill -9 $pid
	wait $pid; local rc=$?
	exec 3>&-
	rm -f "$fifo"
	[ $ended = 1 ] && pass "$name: SIG$sig ends it within 5 s while it waits for input" || fail "$name: SIG$sig ends it within 5 s"
	expect_eq "$name: SIG$sig: exit status 128+signal" "$rc" $((128 + $(kill -l "$sig")))
	expect_eq "$name: SIG$sig: no temp left, no output" "$(ls -d "$out" "$out".tmp.* 2>/dev/null)" ""
}

blocked "ts-shard" INT "$T/d1" ts-shard -o "$T/d1"
blocked "ts-shard" TERM "$T/d2" ts-shard -o "$T/d2"
blocked "ts-shard" HUP "$T/d3" ts-shard -o "$T/d3"
blocked "ts-cat" TERM "$T/c.msgpack" ts-cat --no-header -o "$T/c.msgpack"
blocked "ts-tokenize" INT "$T/t.msgpack" ts-tokenize -v "$V" -j 2 -o "$T/t.msgpack"
blocked "ts-tokenize" TERM "$T/t2.msgpack" ts-tokenize -v "$V" -j 2 -o "$T/t2.msgpack"
blocked "ts-cat" PIPE "$T/c2.msgpack" ts-cat --no-header -o "$T/c2.msgpack"

# an error told to a standard error that is a closed pipe: SIGPIPE ends the
# command, and its temp output goes too
printf 'text\n"unterminated\n' >"$T/bad.csv"
{ sleep 0.3; ts-tokenize -v "$V" -o "$T/t3.msgpack" "$T/bad.csv"; } 2>&1 | true
expect_eq "ts-tokenize's error to a closed pipe: no temp left, no output" "$(ls -d "$T/t3.msgpack"* 2>/dev/null)" ""
{ sleep 0.3; ts-shard -o "$T/d4" "$T/tok.msgpack" "$T/bad.csv"; } 2>&1 >/dev/null | true
expect_eq "ts-shard's: no temp left, no output" "$(ls -d "$T/d4"* 2>/dev/null)" ""

# ts-train: SIGINT (Control-C) stops a live run with a checkpoint, and it resumes
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack" >/dev/null
ts-train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
	--batch 8 -j 2 --run "$T/r" --max-steps 5000 --eval-every 5000 >/dev/null 2>"$T/train.err" &
pid=$!
steps() { [ -s "$T/r/events.msgpack" ] && [ "$(ts-cat "$T/r/events.msgpack" | grep -c '"step"')" -ge 2 ]; }
wait_for steps || fail "ts-train: the run gets going"
kill -INT $pid
for _ in $(seq 300); do gone $pid && break; sleep 0.1; done
alive $pid && kill -9 $pid
wait $pid; rc=$?
expect_eq "ts-train: SIGINT stops the run with exit 0" "$rc" 0
stopped=$(ts-cat "$T/r/events.msgpack" | jq -c 'select(.event=="stop") | .step')
[ -n "$stopped" ] && [ -d "$T/r/ckpt/step-$stopped" ] && pass "ts-train: SIGINT leaves a checkpoint at the stop (step $stopped)" \
	|| fail "ts-train: SIGINT leaves a checkpoint at the stop (got '$stopped')"
# the resumed run gets a SIGINT once it has gone on (a signal before it takes
# its run dir would end it, the run as it was), so it stops again a few steps on
ts-train --resume "$T/r" >/dev/null 2>"$T/resume.err" &
pid=$!
past_stop() { [ "$(ts-cat "$T/r/events.msgpack" | jq -c 'select(.event=="step") | .step' | tail -n 1)" -gt "$stopped" ]; }
wait_for past_stop || fail "ts-train: the resumed run gets going"
kill -INT $pid
for _ in $(seq 300); do gone $pid && break; sleep 0.1; done
alive $pid && kill -9 $pid
wait $pid
expect_eq "ts-train: the run resumes after SIGINT, and stops again with exit 0" "$?" 0
again=$(ts-cat "$T/r/events.msgpack" | jq -c 'select(.event=="stop") | .step' | tail -n 1)
[ "$again" -gt "$stopped" ] && pass "ts-train: the resumed run went on from step $stopped to $again" \
	|| fail "ts-train: the resumed run went on from step $stopped (stopped at '$again')"
# a second Control-C quits at once (a step of this model takes about a second),
# here in the middle of the checkpoint the first asked for, leaving the run to
# resume from its last checkpoint as after a crash, without that one's temp dir
SLOW=(ts-train --data "$T/data" --vocab "$V" --layers 4 --hidden 512 --heads 8 --ffn 2048 --max-pos 32 --batch 80
	-j 2 --max-steps 5000 --save-every 1 --eval-every 5000)
"${SLOW[@]}" --run "$T/q" >/dev/null 2>"$T/q.err" &
pid=$!
wait_for sh -c "ts-cat '$T/q/events.msgpack' 2>/dev/null | grep -q checkpoint" || fail "a slow run under way"
kill -INT $pid
for _ in $(seq 3000); do compgen -G "$T/q/ckpt/*.tmp.*" >/dev/null && break; sleep 0.01; done
kill -INT $pid
wait $pid
expect_eq "a second Control-C: the run quits at once, killed by SIGINT, no stop event" \
	"$? $(ts-cat "$T/q/events.msgpack" | grep -c '"stop"')" "130 0"
check "...the first said a second would" grep -q "stopping after this step (Control-C again quits now" "$T/q.err"
expect_eq "...only the first" "$(grep -c "stopping after this step" "$T/q.err")" 1
expect_eq "...and the checkpoint it was writing leaves no temp dir" "$(ls "$T/q/ckpt" | grep -c '\.tmp\.')" 0
last=$(ts-cat "$T/q/events.msgpack" | jq -r 'select(.event=="checkpoint") | .step' | tail -n 1)
check "...and the run resumes from its last checkpoint" timeout 300 ts-train --resume "$T/q" --max-steps $((last + 1))
check "...at it" grep -q "resumed from .*step-$last at step $last" "$T/q/log/rank-0.log"
# a lost connection or terminal stops it the same way: its standard error a
# pipe that nothing reads any more (an ssh session gone: SIGPIPE), SIGHUP
LOST=(ts-train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 -j 2
	--max-steps 5000 --eval-every 5)
{ timeout 300 "${LOST[@]}" --run "$T/p" 2>&1 >/dev/null; echo $? >"$T/p.rc"; } | head -c 1 >/dev/null
stopped=$(ts-cat "$T/p/events.msgpack" | jq -c 'select(.event=="stop") | .step')
expect_eq "ts-train: its standard error a closed pipe: stopped with a checkpoint, exit 0" \
	"$(cat "$T/p.rc") $(test -n "$stopped" && test -d "$T/p/ckpt/step-$stopped" && echo checkpoint)" "0 checkpoint"
"${LOST[@]}" --run "$T/h" >/dev/null 2>&1 &
pid=$!
wait_for sh -c "ts-cat '$T/h/events.msgpack' 2>/dev/null | grep -q '\"step\"'" || fail "a run to lose its terminal under way"
kill -HUP $pid
wait $pid
expect_eq "ts-train: SIGHUP stops it with a checkpoint, exit 0" \
	"$? $(ts-cat "$T/h/events.msgpack" | jq -r 'select(.event=="stop") | .event')" "0 stop"
finish
