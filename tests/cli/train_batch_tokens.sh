# ts-train --batch-tokens N: micro-batches of whole records up to N real
# tokens, cut greedily from each epoch's order; the steps they make; its
# refusals; exact resume; 2 processes as 1 with --accum 2; resume on
# another number of processes.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# 30 e-mails folded into pieces of up to 64 tokens: mostly 64, the last piece of each shorter
head -n 31 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 64 --fold "$T/small.csv" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack"
SMALL=(--data "$T/data" --vocab "$V" --layers 2 --hidden 64 --heads 2 --ffn 128 --max-pos 64 --seed 5 -j 2 --device cpu)
RECORDS=$(jq .splits.train.count "$T/data/manifest.json")
TOKENS=$(jq .splits.train.tokens "$T/data/manifest.json")
# mpi N ARGS...: ts-train on N processes, under a time limit
mpi() { local n=$1; shift; timeout 300 mpirun -np "$n" "$BIN/ts-train" "$@"; }
# steps RUN: "step epoch samples tokens" of each step, the samples and tokens the run's so far
steps() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="step") | "\(.step) \(.epoch) \(.samples) \(.tokens)"'; }
# start RUN FIELD: a field of the start event
start() { ts-cat "$1/events.msgpack" | jq -r "select(.event==\"start\") | .$2"; }
# step_tokens RUN: the tokens of each step
step_tokens() { steps "$1" | awk '{ print $4 - t; t = $4 }'; }
# epoch_ends RUN: "samples tokens" at each epoch's last step
epoch_ends() { steps "$1" | awk 'NR > 1 && $2 != e { print s, t } { e = $2; s = $3; t = $4 } END { print s, t }' | tr '\n' ' '; }

# --- micro-batches by tokens ---
check "--batch-tokens 160 --accum 2: 2 epochs" train "${SMALL[@]}" --run "$T/a" --batch-tokens 160 --accum 2 --epochs 2 \
	--save-every 20 --keep 10
expect_eq "every step holds at most 160 x 2 tokens" "$(step_tokens "$T/a" | awk '$1 > 320 || $1 < 1' | wc -l)" 0
expect_eq "each epoch takes every training record once: $RECORDS records, $TOKENS tokens" "$(epoch_ends "$T/a")" \
	"$RECORDS $TOKENS $((2 * RECORDS)) $((2 * TOKENS)) "
expect_eq "the start event plans the steps the run took and says the tokens" \
	"$(start "$T/a" total_steps) $(start "$T/a" batch_tokens)" "$(steps "$T/a" | wc -l) 160"
expect_eq "steps_per_epoch: the first epoch's steps" "$(start "$T/a" steps_per_epoch)" \
	"$(steps "$T/a" | awk '$2 == 0' | wc -l)"
check "the log says the micro-batch is 160 tokens" grep -q "batch 160 tokens x 2 accumulation x 1 processes" \
	"$T/a/log/rank-0.log"
expect_eq "the config records batch-tokens, and no --batch" "$(grep '^batch' "$T/a/config")" "batch-tokens = 160"
expect_eq "the evaluations score the whole valid split" \
	"$(ts-cat "$T/a/events.msgpack" | jq -r 'select(.event=="eval") | .records' | sort -u)" \
	"$(jq .splits.valid.count "$T/data/manifest.json")"
check "--batch-tokens 160: 1 epoch, a micro-batch a step" train "${SMALL[@]}" --run "$T/g" --batch-tokens 160 --epochs 1
expect_eq "greedy: a step's group holds at most 160 tokens, and with the next one more than 160" \
	"$(step_tokens "$T/g" | awk 'NR > 1 && p + $1 <= 160 { bad++ } $1 > 160 { bad++ } { p = $1 } END { print bad + 0, NR }')" \
	"0 $(start "$T/g" total_steps)"
expect_eq "whole records by tokens, not a fixed count: the steps before the last hold 2 or 3 records" \
	"$(steps "$T/g" | awk '{ print $3 - s; s = $3 }' | head -n -1 | sort -u | tr '\n' ' ')" "2 3 "

# --- refusals ---
expect_fail "--batch-tokens with --batch: a usage error" 2 "^ts-train: --batch-tokens and --batch are one at a time" \
	train "${SMALL[@]}" --run "$T/x" --batch-tokens 160 --batch 8
expect_fail "--batch-tokens with --bucket: a usage error" 2 "^ts-train: --batch-tokens does not go with --bucket" \
	train "${SMALL[@]}" --run "$T/x" --batch-tokens 160 --bucket
expect_fail "--batch-tokens 0: out of range" 2 "^ts-train: --batch-tokens: 0 is out of range \(1 to 16777216\)" \
	train "${SMALL[@]}" --run "$T/x" --batch-tokens 0
expect_fail "--batch-tokens 16777217: out of range" 2 "^ts-train: --batch-tokens: 16777217 is out of range" \
	train "${SMALL[@]}" --run "$T/x" --batch-tokens 16777217
expect_fail "a record longer than --batch-tokens: named, with the longest record's length" 1 \
	"^ts-train: .*/train\.shard: record [0-9]+: '[^']+' has 64 tokens, more than --batch-tokens 50; the longest record has 64 tokens$" \
	train "${SMALL[@]}" --run "$T/x" --batch-tokens 50
check "a run refused for its records leaves no run dir" test ! -e "$T/x"
expect_fail "the memory check counts ceil(N / longest) records of the longest" 1 \
	"ts-train: batch: needs [0-9.]+ [KMGTPEZY]?B for the model and the activations of 262144 records of 64 tokens" \
	train "${SMALL[@]}" --run "$T/x" --hidden 4096 --heads 4096 --ffn 4096 --batch-tokens 16777216

# --- exact resume: run a cut back to its checkpoint at step 60, in its second epoch ---
# cut_to RUN COPY STEP: COPY is RUN as a kill just after its checkpoint at STEP leaves it
cut_to() {
	cp -r "$1" "$2" && rm -rf "$2/final" "$2/best"
	for d in "$2"/ckpt/step-*; do [ "${d##*-}" -le "$3" ] || rm -rf "$d"; done
	keep_events "$2" "{print} /\"event\":\"checkpoint\"/ && index(\$0, \"\\\"step\\\":$3,\") {exit}"
}
cut_to "$T/a" "$T/a60" 60
check "resumed at step 60" train --resume "$T/a60"
expect_eq "resumed: the same losses, step for step" "$(losses "$T/a60")" "$(losses "$T/a")"
check "resumed: the same final model" cmp "$T/a60/final/model.safetensors" "$T/a/final/model.safetensors"

# --- 2 processes: process r takes group r of each micro-batch ---
# close A B TOL: each step's loss in listing A within TOL (relative) of listing B's
close() {
	join "$1" "$2" |
		awk -v tol="$3" '{ d = $2 - $3; if (d < 0) d = -d; if (d > tol * ($3 < 0 ? -$3 : $3)) bad++; n++ }
			END { exit !(n > 0 && !bad) }'
}
check "2 processes, --batch-tokens 160, true gradient: 2 epochs" mpi 2 "${SMALL[@]}" --run "$T/p2" --batch-tokens 160 \
	--epochs 2 --dropout 0 --true-gradient
check "1 process, --batch-tokens 160 --accum 2: 2 epochs" train "${SMALL[@]}" --run "$T/p1" --batch-tokens 160 --accum 2 \
	--epochs 2 --dropout 0
expect_eq "2 processes take the steps of 1 process with --accum 2, each with its records and tokens" \
	"$(steps "$T/p2")" "$(steps "$T/p1")"
check "2 processes x --batch-tokens 160 = 1 x --accum 2, step for step, within 1e-5" \
	close <(losses "$T/p2") <(losses "$T/p1") 1e-5
# resume on another number of processes: from the same record, in groups of the same cuts
check "1 process, a micro-batch a step: 2 epochs" train "${SMALL[@]}" --run "$T/q1" --batch-tokens 160 --epochs 2 \
	--save-every 30 --keep 10 --dropout 0
cut_to "$T/q1" "$T/q12" 30
check "cut at step 30, resumed on 2 processes" mpi 2 --resume "$T/q12" --device cpu
# q1_on_2: q1's steps as a run resumed on 2 processes after step 30 takes them: after
# step 30, and from each epoch's start on, every second group and the epoch's last
q1_on_2() {
	steps "$T/q1" | awk '{ s[NR] = $1; e[NR] = $2; l[NR] = $2 " " $3 " " $4 } END {
		base = 30
		for (i = 1; i <= NR; i++) {
			if (i > 1 && e[i] != e[i - 1] && s[i - 1] >= 30) base = s[i - 1]
			if (s[i] <= 30 || (s[i] - base) % 2 == 0 || i == NR || e[i + 1] != e[i]) print l[i]
		} }'
}
expect_eq "resumed on 2: up to step 30 the records of the 1-process run, then 2 of its groups a step" \
	"$(steps "$T/q12" | cut -d' ' -f2-)" "$(q1_on_2)"
finish
