# ts-train, ts-eval and ts-stop on a small slice of the spam corpus with a
# tiny model: run dir layout, events, exact resume after stop and crash,
# accumulation, NaN skip and replay, evaluation outputs, bad input.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 301 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2 --device cpu)
# at_step DIR N: the run has logged N steps
at_step() { [ "$(ts-cat "$1/events.msgpack" | jq -c 'select(.event=="step")' | wc -l)" -ge "$2" ]; }

check "a short run finishes" train "${TINY[@]}" --run "$T/r1" --max-steps 12 --eval-every 4
for f in config events.msgpack log/rank-0.log ckpt/step-12/model.safetensors ckpt/step-12/optimizer.safetensors \
	ckpt/step-12/state.json best/config.json final/model.safetensors final/vocab.txt; do
	[ -e "$T/r1/$f" ] && pass "run dir has $f" || fail "run dir has $f"
done
check "a checkpoint keeps the run's options" cmp "$T/r1/ckpt/step-12/run.config" "$T/r1/config"
expect_eq "--keep 3 keeps the newest checkpoints" "$(ls -A "$T/r1/ckpt" | tr '\n' ' ')" "step-12 step-4 step-8 "
expect_eq "a step event for every step" "$(ts-cat "$T/r1/events.msgpack" | jq -c 'select(.event=="step") | .step' | tr '\n' ' ')" "1 2 3 4 5 6 7 8 9 10 11 12 "
expect_eq "step events carry the fields" "$(ts-cat "$T/r1/events.msgpack" | jq -c 'select(.event=="step") | keys' | sort -u)" \
	'["epoch","eta_s","event","grad_norm","loss","lr","samples","step","step_ms","time","tokens","tokens_per_s"]'
expect_eq "eval events at steps 4, 8, 12" "$(ts-cat "$T/r1/events.msgpack" | jq -c 'select(.event=="eval") | [.step, .split, (.accuracy|type)]' | tr '\n' ' ')" \
	'[4,"valid","number"] [8,"valid","number"] [12,"valid","number"] '
expect_eq "the run ends with a done event" "$(ts-cat "$T/r1/events.msgpack" | tail -n 1 | jq -r .event)" done
check "the log has the parameter table" grep -q "bert.embeddings.word_embeddings.weight *30522x32 *976704" "$T/r1/log/rank-0.log"
check "the log predicts the finish" grep -q "predicted finish" "$T/r1/log/rank-0.log"
check "the log ends with a summary: steps, time, throughput, the best evaluation" grep -qE \
	"summary: 12 steps in [0-9]+h[0-9]{2}m[0-9]{2}s of training, [0-9.]+ samples/s, [0-9]+ tokens/s; best valid accuracy [0-9.]+ at step [0-9]+$" \
	"$T/r1/log/rank-0.log"
expect_eq "the done event has the throughput" \
	"$(ts-cat "$T/r1/events.msgpack" | jq -r 'select(.event=="done") | (.samples_per_s > 0 and .tokens_per_s > .samples_per_s)')" true
expect_eq "the same seed gives the same losses" "$(train "${TINY[@]}" --run "$T/r1b" --max-steps 12 --eval-every 4 2>/dev/null && losses "$T/r1b")" "$(losses "$T/r1")"

# stop before the first step ends, then resume: bitwise the same losses
mkdir -p "$T/r2" && touch "$T/r2/stop"
check "a stop request ends the run with exit 0" train "${TINY[@]}" --run "$T/r2" --max-steps 12 --eval-every 4
expect_eq "a stop event at step 0, no checkpoint" "$(ts-cat "$T/r2/events.msgpack" | jq -c 'select(.event=="stop") | .step') $(ls -A "$T/r2/ckpt")" "0 "
check "resume continues the run" train --resume "$T/r2" --device cpu
expect_eq "stopped and resumed: the same losses, step for step" "$(losses "$T/r2")" "$(losses "$T/r1")"
check "the resumed model is the same bytes" cmp "$T/r2/final/model.safetensors" "$T/r1/final/model.safetensors"
# a run dir named with a blank and a quote: the commands the messages give run as they are
mkdir -p "$T/my run's" && touch "$T/my run's/stop"
train "${TINY[@]}" --run "$T/my run's" --max-steps 2 2>"$T/err" >/dev/null
expect_eq "stopped: the command to continue quotes the run dir" "$(sed -n 's/.*; continue with //p' "$T/err")" \
	"ts-train --resume '$T/my run'\\''s'"
check "stopped: that command resumes the run" eval "timeout 300 $(sed -n 's/.*; continue with //p' "$T/err")"
train "${TINY[@]}" --run "$T/slash/" --max-steps 1 2>"$T/err" >/dev/null
expect_eq "a run dir named with a trailing slash: its model is named with no doubled one" "$(tail -n 1 "$T/err")" \
	"ts-train: done at step 1; the model is in $T/slash/best"
expect_fail "a run dir that holds a run: the command to continue quotes it" 1 "continue it with --resume '$T/my run'\\\\''s' or" \
	train "${TINY[@]}" --run "$T/my run's" --max-steps 2

expect_eq "--recompute: the same losses, step for step" \
	"$(train "${TINY[@]}" --run "$T/rre" --max-steps 12 --eval-every 4 --recompute 2>/dev/null && losses "$T/rre")" \
	"$(losses "$T/r1")"
check "--recompute: the same model bytes" cmp "$T/rre/final/model.safetensors" "$T/r1/final/model.safetensors"

# --device: the CPU by name; a device the build or machine lacks stops before
# the run dir exists; a resume may name the device, which the config leaves out
check "--device cpu trains" train "${TINY[@]}" --run "$T/rdev" --max-steps 4 --device cpu
check "the log names the device and OpenBLAS's kernels" grep -q "on cpu (OpenBLAS's [A-Za-z0-9]* kernels)$" \
	"$T/rdev/log/rank-0.log"
# OpenBLAS's kernels are those of what the processor can do, where OpenBLAS
# does not know its model (Debian 12's falls back to SSE3's on Emerald Rapids)
kernels=$(sed -n "s/.* (OpenBLAS's \(.*\) kernels)$/\1/p" "$T/rdev/log/rank-0.log")
flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
has() { [[ $flags == *" $1 "* ]]; }
if has avx512f && has avx512dq && has avx512bw && has avx512vl; then
	check "AVX-512 here: OpenBLAS's AVX-512 kernels ($kernels)" grep -qxE 'SkylakeX|Cooperlake|SapphireRapids' \
		<<<"$kernels"
elif has avx2; then
	check "AVX2 here: not OpenBLAS's SSE3 kernels ($kernels)" test "$kernels" != Prescott
fi
check "a core type the user sets is kept" env OPENBLAS_CORETYPE=Prescott timeout 300 ts-train "${TINY[@]}" \
	--run "$T/rcore" --max-steps 2
check "the log names it" grep -q "on cpu (OpenBLAS's Prescott kernels)$" "$T/rcore/log/rank-0.log"
check "the run's config leaves the device out" bash -c "! grep -q device '$T/rdev/config'"
expect_fail "--device cuda:7 on a machine without it" 1 "--device cuda:7: " \
	train "${TINY[@]}" --run "$T/rnodev" --max-steps 4 --device cuda:7
check "a refused device leaves no run dir" test ! -e "$T/rnodev"
for d in "cuda: 1" cuda:-1 cuda: cuda:1x cuda:1024 gpu; do
	expect_fail "--device '$d' is a usage error" 2 "--device $d: not cpu, cuda or cuda:N" \
		train "${TINY[@]}" --run "$T/rnodev" --device "$d"
done
stop_after 1 train "${TINY[@]}" --run "$T/r2d" --max-steps 12 --eval-every 4 >/dev/null 2>&1
check "--resume takes --device" train --resume "$T/r2d" --device cpu
expect_eq "resumed with --device cpu: the same losses" "$(losses "$T/r2d")" "$(losses "$T/r1")"
expect_fail "--resume takes no other option" 2 "--resume takes no other options but --device, --gpus, --net-if, --precision, --epochs, --max-steps, --eval-every, --save-every and --patience \(not --lr\)" \
	train --resume "$T/r2d" --lr 0.1

# ts-stop on a live run, then resume
train "${TINY[@]}" --run "$T/r3" --max-steps 300 --eval-every 100 --keep 1 >"$T/r3.out" 2>&1 &
pid=$!
wait_for "a run to stop is under way" at_step "$T/r3" 3
check "ts-stop asks the run to stop" ts-stop --wait --timeout 60 "$T/r3"
wait $pid; rc=$?
expect_eq "the stopped trainer exits 0" "$rc" 0
stopped=$(ts-cat "$T/r3/events.msgpack" | jq -c 'select(.event=="stop") | .step')
[ -n "$stopped" ] && [ "$stopped" -lt 300 ] && pass "stopped mid-run at step $stopped" || fail "stopped mid-run (got '$stopped')"
[ -d "$T/r3/ckpt/step-$stopped" ] && pass "a checkpoint at the stop" || fail "a checkpoint at the stop"
expect_fail "ts-stop on a run that is not running" 1 "no ts-train or ts-sweep is running there" ts-stop "$T/r3"
expect_fail "ts-stop --timeout without --wait: no wait to end" 2 "--timeout goes with --wait" ts-stop --timeout 60 "$T/r3"
expect_fail "ts-stop on a path that does not exist says so" 1 "cannot open $T/nothere: No such file or directory" ts-stop "$T/nothere"
# the request is made in place, not renamed from a temp file: a trainer starting
# with the lock held removes the temp files it finds, ts-stop's among them
# (a trainer on another host stands in, so that no signal is sent)
mkdir "$T/held" && echo "1 elsewhere" >"$T/held/lock" && exec 8<"$T/held/lock" && flock 8
check "ts-stop on a run of another host" strace -f -qq -e trace=openat,rename,renameat,renameat2 -o "$T/stop.trace" \
	ts-stop "$T/held"
exec 8<&-
check "its request is there" test -e "$T/held/stop"
check "made in place" grep -qF "$T/held/stop\", O_WRONLY|O_CREAT" "$T/stop.trace"
check "no temp file renamed to it" bash -c "! grep -q 'stop.tmp' '$T/stop.trace'"
# a lock naming 2^32 + N names no process: as a pid_t it is N, a bystander here
# (and 2^32 - 1 is -1, every process of the user)
sleep 60 & bystander=$!
mkdir "$T/wild" && echo "$((4294967296 + bystander)) $(hostname)" >"$T/wild/lock" && exec 8<"$T/wild/lock" && flock 8
expect_eq "ts-stop on a lock naming pid 2^32 + N names no pid" "$(ts-stop "$T/wild")" \
	"$T/wild: stop requested"
exec 8<&-
check "...and process N is not signalled" kill -0 "$bystander"
kill "$bystander"
wait "$bystander" 2>/dev/null
check "a run never stopped, to compare with" train "${TINY[@]}" --run "$T/r3full" --max-steps 300 --eval-every 100 --keep 1
check "resume after ts-stop" train --resume "$T/r3" --device cpu
expect_eq "ts-stop and resume: the same losses as a run never stopped" "$(losses "$T/r3")" "$(losses "$T/r3full")"

# a crash (SIGKILL) loses only the steps after the last checkpoint
# (--keep 100: at a few ms a step, --keep 3 would remove step 10 before a poll sees it)
train "${TINY[@]}" --run "$T/r4" --max-steps 300 --save-every 5 --keep 100 >/dev/null 2>&1 &
wait_for "a run to crash reaches its second checkpoint" test -d "$T/r4/ckpt/step-10"
kill_trainer "$T/r4"
expect_eq "killed mid-run: not finished" "$(ts-cat "$T/r4/events.msgpack" | jq -c 'select(.event=="done")')" ""
check "resume after a crash" train --resume "$T/r4" --device cpu
expect_eq "crashed and resumed: the same losses" "$(losses "$T/r4")" "$(losses "$T/r3full" | head -n 300)"

# gradient accumulation: 2 x 8 is one batch of 16 ("true gradient" over both)
check "one batch of 16" train "${TINY[@]}" --run "$T/a1" --max-steps 4 --dropout 0 --batch 16
check "2 accumulated batches of 8" train "${TINY[@]}" --run "$T/a2" --max-steps 4 --dropout 0 --batch 8 --accum 2
expect_eq "accumulation: a loss for every step" "$(losses "$T/a2" | wc -l)" 4
expect_eq "accumulation matches the big batch" "$(losses "$T/a2" | awk '{printf "%d %.5f\n", $1, $2}')" "$(losses "$T/a1" | awk '{printf "%d %.5f\n", $1, $2}')"

# NaN: the step is skipped, the batch saved, and --replay reproduces it
check "a run with non-finite steps ends" train "${TINY[@]}" --run "$T/nan" --max-steps 6 --optimizer sgd --lr 1e12 --clip 0 --warmup 0
skipped=$(ts-cat "$T/nan/events.msgpack" | jq -c 'select(.event=="done") | .skipped')
[ "${skipped:-0}" -gt 0 ] && pass "non-finite steps are skipped and counted ($skipped)" || fail "non-finite steps are skipped and counted"
bug=$(ls -d "$T"/nan/bug/step-* 2>/dev/null | head -n 1)
[ -n "$bug" ] && pass "the bad batch is saved in bug/" || fail "the bad batch is saved in bug/"
expect_eq "--replay reproduces the non-finite step" "$(train --replay "$bug" | jq -r .reproduced)" true
expect_fail "--replay: a failed write to standard output" 1 "write standard output: No space left on device" \
	sh -c "timeout 300 ts-train --replay '$bug' >/dev/full"
# a tampered bug record: numbers out of range are refused, not cast
for edit in '.B = 4294967297' '.mask[0] = 7' '.ids[0] = -1' '.seed = -5'; do
	cp -r "$bug" "$T/tampered" && ts-cat "$bug/batch.msgpack" | jq -c "$edit" | ts-cat --from-json -o "$T/tampered/batch.msgpack"
	expect_fail "--replay of a bug record with $edit" 1 "batch.msgpack: record 1: '[a-zB]+' (holds a value that is not an integer|is missing or not)" \
		train --replay "$T/tampered"
	rm -rf "$T/tampered"
done

# evaluation choices
check "--eval-test runs" train "${TINY[@]}" --run "$T/e1" --max-steps 4 --eval-every 2 --eval-test
expect_eq "--eval-test evaluates the test split too" "$(ts-cat "$T/e1/events.msgpack" | jq -c 'select(.event=="eval") | [.step, .split]' | tr '\n' ' ')" \
	'[2,"valid"] [2,"test"] [4,"valid"] [4,"test"] '
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/novalid" --split train=0.9,test=0.1 >/dev/null
check "no valid split: the run ends" train "${TINY[@]}" --data "$T/novalid" --run "$T/e2" --max-steps 4 --eval-every 2
expect_eq "no valid split: no evaluation" "$(ts-cat "$T/e2/events.msgpack" | jq -c 'select(.event=="eval")' | wc -l)" 0
check "no valid split: best/ is the final model" cmp "$T/e2/best/model.safetensors" "$T/e2/final/model.safetensors"
check "--patience: the run ends" train "${TINY[@]}" --run "$T/e3" --max-steps 50 --eval-every 1 --patience 2 --lr 1e-9 --metric loss --warmup 0
expect_eq "...its progress, by --metric loss, says the valid loss once" \
	"$(grep -c 'valid loss [0-9.]*$' "$T/err") $(grep -c 'valid loss [0-9.]*, loss' "$T/err")" \
	"$(ts-cat "$T/e3/events.msgpack" | jq -c 'select(.event=="eval")' | wc -l) 0"
es=$(ts-cat "$T/e3/events.msgpack" | jq -c 'select(.event=="early_stop") | .step')
[ -n "$es" ] && [ "$es" -lt 50 ] && pass "--patience stops early (step $es)" || fail "--patience stops early (got '$es')"
check "--metric ppl is known" train "${TINY[@]}" --run "$T/e4" --max-steps 1 --metric ppl
check "--metric ppl chooses best/" grep -q "new best ppl" "$T/e4/log/rank-0.log"
expect_fail "a metric that does not fit the task" 2 "--metric accuracy does not apply to the mlm task" train "${TINY[@]}" --run "$T/e5" --task mlm --metric accuracy --max-steps 1

# every optimizer and decay runs from the command line
for o in adamw:linear adam:cosine sgd:poly lamb:constant; do
	end=(--end-lr-ratio 0.1) && [ "${o#*:}" = constant ] && end=()   # a constant rate has no end
	check "--optimizer ${o%:*} --decay ${o#*:}" train "${TINY[@]}" --run "$T/o-${o%:*}" --max-steps 3 --optimizer "${o%:*}" --decay "${o#*:}" --warmup 1 "${end[@]}"
done

# a tiny model memorises 64 examples
printf 'id,text,label\n' >"$T/64.csv"; sed -n '2,65p' "$T/small.csv" >>"$T/64.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/64.csv" | ts-shard -o "$T/d64" --split train=1 >/dev/null
check "overfit: the run ends" train --data "$T/d64" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
	--batch 16 --dropout 0 --lr 3e-3 --warmup 0 --decay constant --epochs 60 --run "$T/fit" -j 2
last=$(ts-cat "$T/fit/events.msgpack" | jq -r 'select(.event=="step") | .loss' | tail -n 4 | awk '{s+=$1} END {print s/NR}')
awk -v l="$last" 'BEGIN {exit !(l < 0.01)}' && pass "overfit: 64 examples memorised (loss $last)" || fail "overfit: 64 examples memorised (loss $last)"
expect_eq "overfit: every training example right" "$(ts-eval -m "$T/fit/final" --data "$T/d64" --split train | jq '.accuracy == 1')" true

# ts-eval
expect_eq "ts-eval prints metrics" "$(ts-eval -m "$T/r1/final" --data "$T/data" | jq -r 'has("accuracy") and has("mcc") and has("confusion") and has("macro")')" true
expect_eq "--predict writes a record per input" "$(ts-eval -m "$T/r1/final" --data "$T/data" --predict | ts-cat | wc -l)" "$(ts-cat --no-header "$T/data/test.shard" | wc -l)"
expect_fail "ts-eval --split of none there: the splits named" 1 "^ts-eval: $T/data: no split 'dev' \(its splits: train, valid, test\)$" \
	ts-eval -m "$T/r1/final" --data "$T/data" --split dev
expect_eq "--predict --csv" "$(ts-eval -m "$T/r1/final" --data "$T/data" --predict --csv | head -n 1)" "id,label,pred,prob_spam,prob_ham"
check "--report shows the confusion matrix" sh -c "ts-eval -m '$T/r1/final' --data '$T/data' --report | grep -qi confusion"
ts-tokenize -v "$V" --id id --label label --max-len 16 --fold "$T/small.csv" >"$T/folds.msgpack"
expect_eq "--merge-folds gives one prediction per id" "$(ts-eval -m "$T/r1/final" --merge-folds --predict "$T/folds.msgpack" | ts-cat | wc -l)" 300
expect_eq "streams work as input" "$(ts-eval -m "$T/r1/final" "$T/folds.msgpack" | jq .records)" "$(ts-cat --no-header "$T/folds.msgpack" | wc -l)"

# mlm
check "mlm with whole-word n-gram masking trains" train "${TINY[@]}" --run "$T/m1" --task mlm --whole-word --max-ngram 3 --max-steps 6 --eval-every 3
expect_eq "mlm eval reports perplexity" "$(ts-eval -m "$T/m1/final" --data "$T/data" | jq -r '(.ppl > 1) and (.loss > 0)')" true

# bad input
sed '2000s/.*/notaword/' "$V" >"$T/vocab2.txt"
expect_fail "data made with another vocab" 1 "tokenized with another vocab" train "${TINY[@]}" --vocab "$T/vocab2.txt" --run "$T/b1" --max-steps 1
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/notrain" --split valid=0.5,test=0.5 >/dev/null
expect_fail "an empty train split" 1 "train split is empty or missing" train "${TINY[@]}" --data "$T/notrain" --run "$T/b2" --max-steps 1
printf '%s\n' '{"ids":[101,1037,102],"label":0}' '{"ids":[101,1038,102],"label":2}' | ts-cat --from-json |
	ts-shard -o "$T/three" --split train=1 >/dev/null
expect_fail "labels beyond the head's classes" 1 "label 2 is beyond the head's 2 classes" ts-eval -m "$T/r1/final" --data "$T/three" --split train
printf 'text,label\na,x\nb,y\nc,z\n' | ts-tokenize -v "$V" --label label -f csv | ts-shard -o "$T/xyz" --split train=1 >/dev/null
expect_fail "labels the model does not know" 1 "it knows no class x, y, z of the data's \(its labels: spam, ham\)$" \
	ts-eval -m "$T/r1/final" --data "$T/xyz" --split train
# CSV labels as strings: a file that names ham first is scored by name
{ head -n 1 "$T/small.csv"; grep -a $',ham\r$' "$T/small.csv" | head -n 20; grep -a $',spam\r$' "$T/small.csv" | head -n 20; } >"$T/hamfirst.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 -o "$T/hamfirst.rec" "$T/hamfirst.csv"
printf 'spam\nham\n' >"$T/model-order.txt"
ts-tokenize -v "$V" --id id --label label --labels "$T/model-order.txt" --max-len 32 -o "$T/numbered.rec" "$T/hamfirst.csv"
expect_eq "a CSV that names ham first numbers it 0, the model spam" \
	"$(ts-cat "$T/hamfirst.rec" | head -n 1 | jq -c .labels) $(jq -c '.id2label | [.["0"], .["1"]]' "$T/r1/final/config.json")" \
	'["ham","spam"] ["spam","ham"]'
expect_eq "scored by name: the metrics and predictions of the file numbered as the model" \
	"$(ts-eval -m "$T/r1/final" "$T/hamfirst.rec"; ts-eval -m "$T/r1/final" --predict --csv "$T/hamfirst.rec")" \
	"$(ts-eval -m "$T/r1/final" "$T/numbered.rec"; ts-eval -m "$T/r1/final" --predict --csv "$T/numbered.rec")"
expect_eq "its confusion matrix counts 20 ham and 20 spam" \
	"$(ts-eval -m "$T/r1/final" "$T/hamfirst.rec" | jq -c '[.confusion[] | add]')" "[20,20]"
expect_fail "an unknown option suggests the nearest" 2 "unknown option '--epoch' \\(did you mean '--epochs'\\?\\); see 'ts-train --help'$" train --epoch 3
printf 'layer = 2\n' >"$T/bad.conf"
expect_fail "an unknown config key" 2 "bad.conf: line 1: unknown key 'layer' \\(did you mean 'layers'\\?\\)" train -c "$T/bad.conf"
expect_fail "a run dir that holds a run" 1 "already holds a run" train "${TINY[@]}" --run "$T/r1" --max-steps 1
mkdir -p "$T/broken" && cp "$T/r1/final/config.json" "$T/r1/final/vocab.txt" "$T/broken/" && printf 'garbage' >"$T/broken/model.safetensors"
expect_fail "a corrupt safetensors header" 1 "corrupt safetensors header" train --data "$T/data" --init "$T/broken" --run "$T/b3" --max-steps 1 -j 2
expect_fail "resume of a dir without a run" 1 "not a run dir" train --resume "$T/data"
expect_fail "resume of a dir that does not exist: said so" 1 "^ts-train: $T/nosuch: No such file or directory$" \
	train --resume "$T/nosuch"
# a full disk: the first checkpoint fits, the second does not
if mkdir -p "$T/full" && mount -t tmpfs -o size=18m tmpfs "$T/full" 2>/dev/null; then
	train "${TINY[@]}" --run "$T/full/r" --max-steps 3 --save-every 1 --keep 1 >/dev/null 2>"$T/full.err"; rc=$?
	expect_eq "a full disk at checkpoint time fails the run" "$rc" 1
	check "and says so in one line" sh -c "[ \$(wc -l <'$T/full.err') = 1 ] && grep -q 'No space left on device' '$T/full.err'"
	expect_eq "the last good checkpoint is untouched" "$(ls -A "$T/full/r/ckpt")" "step-1"
	check "and still loads" sh -c "ts-eval -m '$T/full/r/ckpt/step-1' --data '$T/data' >/dev/null"
	umount "$T/full"
else
	skip "a full disk at checkpoint time: cannot mount a tmpfs here"
fi
finish
