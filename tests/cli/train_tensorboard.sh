# ts-train's TensorBoard files read by TensorBoard's own reader (PyPI's
# tensorboard in the reference venv): every scalar of the events log, at its
# step and value; a resumed run adds a file and TensorBoard reads both.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
py=${TS_PYTHON:-$TOP/build/venv/bin/python}
head -n 201 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5
	--max-steps 8 --eval-every 4 --eval-test)
# scalars DIR: "tag step value" lines, as TensorBoard reads the event files in DIR
scalars() {
	"$py" - "$1" <<'END'
import sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0})
acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    for e in acc.Scalars(tag):
        print(tag, e.step, "%.6g" % e.value)
END
}
# logged RUN: the same from the events log, as float32 values
logged() {
	ts-cat "$1/events.msgpack" | jq -r '
		select(.event=="step" or .event=="eval") |
		(if .event=="step" then "train" else .split end) as $p | .step as $s |
		to_entries[] | select(.key != "step" and .key != "epoch" and .key != "time") |
		if (.value | type) == "number" then "\($p)/\(.key) \($s) \(.value)"
		elif (.value | type) == "object" then (.key as $k | .value | to_entries[] | select(.value | type == "number") |
			"\($p)/\($k)/\(.key) \($s) \(.value)")
		else empty end' |
		"$py" -c 'import sys, numpy as np
for line in sys.stdin:
    tag, step, v = line.split()
    print(tag, step, "%.6g" % np.float32(float(v)))' | sort
}

check "a run with evaluations" train "${TINY[@]}" --run "$T/r"
expect_eq "one event file in RUN/tb" "$(ls "$T/r/tb" | grep -c '^events\.out\.tfevents\.')" 1
scalars "$T/r/tb" | sort >"$T/tb.txt"
logged "$T/r" >"$T/log.txt"
check "TensorBoard reads the loss, lr and grad norm of every step" sh -c \
	"[ \$(grep -c '^train/loss ' '$T/tb.txt') = 8 ] && [ \$(grep -c '^train/lr ' '$T/tb.txt') = 8 ] && [ \$(grep -c '^train/grad_norm ' '$T/tb.txt') = 8 ]"
check "TensorBoard reads valid and test metrics at each evaluation" sh -c \
	"[ \$(grep -c '^valid/accuracy ' '$T/tb.txt') = 2 ] && [ \$(grep -c '^test/macro/f1 ' '$T/tb.txt') = 2 ]"
check "every scalar TensorBoard reads is the events log's, at the same step" diff "$T/tb.txt" "$T/log.txt"

stop_after 1 train "${TINY[@]}" --run "$T/s" >/dev/null 2>&1
sleep 1   # the resumed run's file is named by another second
check "a stopped run resumes" train --resume "$T/s"
expect_eq "a resumed run adds an event file" "$(ls "$T/s/tb" | grep -c '^events\.out\.tfevents\.')" 2
expect_eq "TensorBoard reads both: every step's loss" "$(scalars "$T/s/tb" | grep -c '^train/loss ')" 8
# killed after the checkpoint at step 4, at step 6: a resumed run makes steps 5 to 8 again, and
# TensorBoard keeps only the later points
check "a run checkpointed at step 4" train "${TINY[@]}" --run "$T/k0" --save-every 4
cp -r "$T/k0" "$T/k" && rm -rf "$T/k/final" "$T/k/ckpt/step-8"
ts-cat "$T/k0/events.msgpack" | jq -c 'select(.step == null or .step <= 6)' | ts-cat --from-json >"$T/k/events.msgpack"
sleep 1
check "killed at step 6: --resume" train --resume "$T/k"
expect_eq "killed at step 6: TensorBoard reads every step's loss once" "$(scalars "$T/k/tb" 2>/dev/null | grep -c '^train/loss ')" 8
timed='/(step_ms|tokens_per_s|eta_s) '   # of this leg's clock, not the run's
scalars "$T/k/tb" 2>/dev/null | grep -Ev "$timed" | sort >"$T/k.tb"
logged "$T/k0" | grep -Ev "$timed" >"$T/k0.log"
check "killed at step 6: its other scalars those of the run never killed" diff "$T/k.tb" "$T/k0.log"
finish
