# Distributed training with CPU processes under mpirun: 2 processes x batch
# b train as 1 process x 2b; true gradient over unequal slices; one writer of
# the run dir; exact resume; stop reaching every process; a killed process
# ending the run; one that hangs named after --comm-timeout.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack"
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --seed 5 -j 1 --device cpu)
# mpi N ARGS...: ts-train on N processes, under a time limit
mpi() { local n=$1; shift; timeout 300 mpirun -np "$n" "$BIN/ts-train" "$@"; }
events() { ts-cat "$1/events.msgpack" | jq -r .event | tr '\n' ' '; }
count() { events "$1" 2>/dev/null | grep -ow "$2" | wc -l; }
steps_done() { [ "$(count "$1" step)" -ge "$2" ]; }   # steps_done RUN N: at least N steps logged
# rank_pid RUN N: the pid of process N of the run
rank_pid() {
	for p in $(pgrep -f "ts-train.*--run $1"); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxE "(OMPI_COMM_WORLD_)?RANK=$2" && echo "$p"
	done
}
# close A B TOL: each step's loss in listing A ("step loss" lines) within TOL
# (relative) of listing B's
close() {
	join "$1" "$2" |
		awk -v tol="$3" '{ d = $2 - $3; if (d < 0) d = -d; if (d > tol * ($3 < 0 ? -$3 : $3)) bad++; n++ }
			END { exit !(n > 0 && !bad) }'
}
# loss_at RUN STEP
loss_at() { losses "$1" | awk -v s="$2" '$1 == s { print $2 }'; }

# 80 train records, 6 a process: each epoch's last step has 6 + 2 records
check "2 processes, true gradient: 20 steps" mpi 2 "${TINY[@]}" --run "$T/p2" --batch 6 --max-steps 20 \
	--dropout 0 --true-gradient --eval-every 10
check "1 process, batch 12: 20 steps" train "${TINY[@]}" --run "$T/p1" --batch 12 --max-steps 20 --dropout 0 \
	--eval-every 10
expect_eq "2 processes run 20 steps" "$(losses "$T/p2" | wc -l)" 20
check "2 processes x batch 6 = 1 x batch 12, step for step, within 1e-5, across uneven epoch ends" \
	close <(losses "$T/p2") <(losses "$T/p1") 1e-5
check "2 processes, each process's mean: 20 steps" mpi 2 "${TINY[@]}" --run "$T/m2" --batch 6 \
	--max-steps 20 --dropout 0
check "each process's mean: the same as 1 process while the slices are equal" \
	close <(losses "$T/m2" | head -n 6) <(losses "$T/p1" | head -n 6) 1e-5
check "each process's mean: at an epoch's end (6 + 2 records) the mean of the two means, not of all 8" \
	awk -v a="$(loss_at "$T/m2" 7)" -v b="$(loss_at "$T/p1" 7)" 'BEGIN { d = a - b; exit !((d < 0 ? -d : d) > 1e-4 * b) }'

# evals: "step records accuracy loss", a line each
evals() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="eval") | "\(.step) \(.records) \(.accuracy) \(.loss)"'; }
expect_eq "2 processes evaluate: the same steps, records and accuracy as 1 process" \
	"$(evals "$T/p2" | cut -d' ' -f1-3)" "$(evals "$T/p1" | cut -d' ' -f1-3)"
check "2 processes evaluate: the same loss within 1e-5" \
	close <(evals "$T/p2" | awk '{print $1, $4}') <(evals "$T/p1" | awk '{print $1, $4}') 1e-5
expect_eq "one writer: one start and one done event" "$(count "$T/p2" start) $(count "$T/p2" done)" "1 1"
expect_eq "one writer: the start event counts the processes" \
	"$(ts-cat "$T/p2/events.msgpack" | jq -r 'select(.event=="start") | .processes')" 2
params=$(ts-cat "$T/p2/events.msgpack" | jq -r 'select(.event=="start") | .params')
expect_eq "network statistics: every step sums the gradient (4 bytes a parameter), partly behind the backward pass, and names the slowest process" \
	"$(ts-cat "$T/p2/events.msgpack" | jq -r --argjson p "$params" 'select(.event=="step") | .step_ms as $ms |
		.comm | (.bytes >= 4 * $p and .busbw_gbs > 0 and .ms > .exposed_ms and (.slowest == 0 or .slowest == 1) and
		.exposed_ms < $ms and .slowest_compute_ms > 0)' | sort | uniq -c | awk '{print $1, $2}')" "20 true"
expect_eq "network statistics: a step's own collectives, not those of the start or the evaluation before it" \
	"$(ts-cat "$T/p2/events.msgpack" | jq -r 'select(.event=="step") | .comm.bytes' | sort -u | wc -l)" 1
check "network statistics in the log" grep -q "collectives .* ms (.* ms exposed), .* bytes, bus .* GB/s; slowest process" \
	"$T/p2/log/rank-0.log"
expect_eq "1 process: no network statistics" "$(ts-cat "$T/p1/events.msgpack" | jq -r 'select(.event=="step") | .comm' | sort -u)" null
expect_eq "a log for each process" "$(ls "$T/p2/log" | tr '\n' ' ')" "rank-0.log rank-1.log "
check "process 1's log says which process it is" grep -q "process 1 of 2" "$T/p2/log/rank-1.log"
expect_eq "the checkpoint records 2 processes" "$(jq .processes "$T/p2/ckpt/step-20/state.json")" 2

# exact resume on 2 processes, dropout on: cut back to the checkpoint at step 6
check "2 processes, dropout on: 12 steps" mpi 2 "${TINY[@]}" --run "$T/r0" --batch 8 --max-steps 12 \
	--eval-every 6 --save-every 6
cp -r "$T/r0" "$T/r" && rm -rf "$T/r/final" "$T/r/best" "$T/r/ckpt/step-12"
ts-cat "$T/r/events.msgpack" | awk '{print} /"event":"checkpoint"/ {exit}' | ts-cat --from-json -o "$T/ev" &&
	mv "$T/ev" "$T/r/events.msgpack"
check "2 processes: --resume from step 6" mpi 2 --resume "$T/r" --device cpu
expect_eq "2 processes, resumed: the same losses, step for step" "$(losses "$T/r")" "$(losses "$T/r0")"
check "2 processes, resumed: the same final model" cmp "$T/r/final/model.safetensors" "$T/r0/final/model.safetensors"
# resume on another number of processes: from the same record of the epoch,
# in slices of --batch records a process
# cut_to RUN COPY STEP: COPY is RUN as a kill just after its checkpoint at STEP leaves it
cut_to() {
	cp -r "$1" "$2" && rm -rf "$2/final" "$2/best"
	for d in "$2"/ckpt/step-*; do [ "${d##*-}" -le "$3" ] || rm -rf "$d"; done
	ts-cat "$2/events.msgpack" | awk -v s="\"step\":$3," '{print} /"event":"checkpoint"/ && index($0, s) {exit}' |
		ts-cat --from-json -o "$T/ev" && mv "$T/ev" "$2/events.msgpack"
}
# at RUN STEP: "samples epoch" of that step
at() { ts-cat "$1/events.msgpack" | jq -r --argjson s "$2" 'select(.event=="step" and .step==$s) | "\(.samples) \(.epoch)"' | tail -n 1; }
# the newest checkpoint damaged past the first MiB of its optimizer state, which process 0
# finds only as it loads it: every process goes back to the one before, and on from there
cut_to "$T/r0" "$T/rd" 12
opt=$T/rd/ckpt/step-12/optimizer.safetensors
printf '\377' | dd of="$opt" bs=1 seek=$(($(stat -c %s "$opt") - 100)) conv=notrunc 2>/dev/null
check "2 processes, the newest checkpoint found damaged as it loads: --resume" mpi 2 --resume "$T/rd" --device cpu
expect_eq "found damaged as it loads: all go on from step 6, step 12 passed over" \
	"$(ts-cat "$T/rd/events.msgpack" | jq -r 'select(.event == "resume") | .from, .passed_over[].checkpoint')" \
	"$(printf '%s\n' "$T/rd/ckpt/step-6" "$T/rd/ckpt/step-12")"
expect_same "found damaged as it loads: the same losses, step for step" "$(losses "$T/rd")" "$(losses "$T/r0")"
check "found damaged as it loads: the same final model" cmp "$T/rd/final/model.safetensors" "$T/r0/final/model.safetensors"
check "1 process, batch 8: 12 steps" train "${TINY[@]}" --run "$T/g1" --batch 8 --max-steps 12 --save-every 3 --keep 5
cut_to "$T/g1" "$T/g12" 3
check "a 1-process run, checkpoint at step 3 (24 records), resumed on 2 processes" mpi 2 --resume "$T/g12" --device cpu
expect_eq "resumed on 2: 16 records a step, and the epoch's last step takes the 8 left (process 1 none)" \
	"$(at "$T/g12" 6) | $(at "$T/g12" 7) | $(at "$T/g12" 8)" "72 0 | 80 0 | 96 1"
check "resumed on 2: the log says so" grep -q "the run trained on 1 processes and goes on on 2" "$T/g12/log/rank-1.log"
expect_eq "resumed on 2: its checkpoints record 2 processes" "$(jq .processes "$T/g12/ckpt/step-12/state.json")" 2
check "2 processes, batch 8: 12 steps" mpi 2 "${TINY[@]}" --run "$T/g2" --batch 8 --max-steps 12 --save-every 3 --keep 5
cut_to "$T/g2" "$T/g21" 3
check "a 2-process run, checkpoint at step 3 (48 records), resumed on 1 process" train --resume "$T/g21" --device cpu
expect_eq "resumed on 1: 8 records a step from record 48 on" "$(at "$T/g21" 4) | $(at "$T/g21" 7) | $(at "$T/g21" 8)" \
	"56 0 | 80 0 | 88 1"
# an epoch budget and a decaying schedule across a resize: the run ends with
# its 3 epochs of data, and the schedule of the steps first planned goes on
# from where it was at the pace that ends it with the data
# lrs RUN: "step lr" of each step
lrs() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="step") | "\(.step) \(.lr)"'; }
# lr_fits RUN FROM PACE PLANNED WARMUP: every step after FROM has the lr of
# schedule position FROM + (step - 1 - FROM) x PACE (1e-3 peak, linear decay)
lr_fits() {
	lrs "$1" | awk -v from="$2" -v pace="$3" -v T="$4" -v w="$5" '$1 > from {
		p = from + ($1 - 1 - from) * pace; want = p < w ? 1e-3 * p / w : 1e-3 * (T - p) / (T - w)
		d = $2 - want; if (d < 0) d = -d; if (d > 1e-9) bad++; n++ } END { exit !(n > 0 && !bad) }'
}
SCHED=(--batch 8 --epochs 3 --lr 1e-3 --warmup 0.2 --decay linear --save-every 2 --keep 20 --eval-every 0)
check "2 processes, 3 epochs of 80 records (5 steps each), linear decay" mpi 2 "${TINY[@]}" --run "$T/h2" "${SCHED[@]}"
cut_to "$T/h2" "$T/h21" 4
check "a 3-epoch 2-process run cut at step 4 (record 64), resumed on 1 process" train --resume "$T/h21" --device cpu
expect_eq "resumed 2 -> 1: 2 steps end epoch 1, then 2 epochs of 10: 26 steps, 240 records, 3 epochs" \
	"$(lrs "$T/h21" | tail -n 1 | cut -d' ' -f1) $(at "$T/h21" 26)" "26 240 2"
expect_eq "resumed 2 -> 1: the evaluations at the epochs' ends" \
	"$(ts-cat "$T/h21/events.msgpack" | jq -r 'select(.event=="eval") | .step' | tr '\n' ' ')" "6 16 26 "
check "resumed 2 -> 1: the lr of the 15 steps planned, at pace 11/22 from step 4 (no jump)" lr_fits "$T/h21" 4 0.5 15 3
check "resumed 2 -> 1: up to step 4 the lr of the uninterrupted run" \
	test "$(lrs "$T/h21" | head -n 4)" == "$(lrs "$T/h2" | head -n 4)"
expect_eq "resumed 2 -> 1: ts-top counts the steps planned on 1 process" \
	"$(ts-top --json "$T/h21" | jq -r '.[0] | "\(.step) \(.total_steps)"')" "26 26"
cut_to "$T/h21" "$T/h211" 14
check "that run cut again at step 14, resumed on 1 process" train --resume "$T/h211" --device cpu
expect_eq "resumed again on as many: the same lr and losses, step for step" \
	"$(lrs "$T/h211"; losses "$T/h211")" "$(lrs "$T/h21"; losses "$T/h21")"
check "that run resumed again: the same final model" cmp "$T/h211/final/model.safetensors" "$T/h21/final/model.safetensors"
check "1 process, 3 epochs (10 steps each), linear decay" train "${TINY[@]}" --run "$T/h1" "${SCHED[@]}" --save-every 3
cut_to "$T/h1" "$T/h12" 3
check "a 3-epoch 1-process run cut at step 3 (record 24), resumed on 2 processes" mpi 2 --resume "$T/h12" --device cpu
expect_eq "resumed 1 -> 2: 4 steps end epoch 1, then 2 epochs of 5: 17 steps, 240 records, 3 epochs" \
	"$(lrs "$T/h12" | tail -n 1 | cut -d' ' -f1) $(at "$T/h12" 17)" "17 240 2"
check "resumed 1 -> 2: still in warmup, the lr of the 30 steps planned at pace 27/14 from step 3" \
	lr_fits "$T/h12" 3 "$(awk 'BEGIN { printf "%.17g", 27 / 14 }')" 30 6
check "2 processes, --bucket: 6 steps" mpi 2 "${TINY[@]}" --run "$T/b2" --batch 8 --max-steps 6 --save-every 3 --keep 5 --bucket
cut_to "$T/b2" "$T/b21" 3
cp "$T/b21/events.msgpack" "$T/b21.events"
cp "$T/b21/log/rank-0.log" "$T/b21.log"
b21_tb=$(ls "$T/b21/tb")
expect_fail "a --bucket run resumed on another number of processes: refused" 1 \
	"a --bucket run resumes on as many processes as it trained on \(2\), not 1" train --resume "$T/b21" --device cpu
check "...and left as it was: no failure recorded" cmp "$T/b21/events.msgpack" "$T/b21.events"
check "...nor a resume in its log" cmp "$T/b21/log/rank-0.log" "$T/b21.log"
expect_eq "...nor a TensorBoard file of a resume" "$(ls "$T/b21/tb")" "$b21_tb"

# ZeRO-1: each process keeps the moments of, and updates, its shard; the
# gradient is reduce-scattered and the shards all-gathered
check "--zero 1: 2 processes, 12 steps" mpi 2 "${TINY[@]}" --run "$T/z" --batch 8 --max-steps 12 --eval-every 6 \
	--save-every 6 --zero 1
expect_eq "--zero 1: the losses of plain data parallel" "$(losses "$T/z")" "$(losses "$T/r0")"
check "--zero 1: the same final model" cmp "$T/z/final/model.safetensors" "$T/r0/final/model.safetensors"
check "--zero 1: the checkpoint holds every shard's optimizer state, as plain data parallel's" \
	cmp "$T/z/ckpt/step-12/optimizer.safetensors" "$T/r0/ckpt/step-12/optimizer.safetensors"
cut_to "$T/z" "$T/zr" 6
check "--zero 1: resumed on 2 processes" mpi 2 --resume "$T/zr" --device cpu
expect_eq "--zero 1, resumed: the same losses" "$(losses "$T/zr")" "$(losses "$T/r0")"
check "--zero 1, resumed: the same final model" cmp "$T/zr/final/model.safetensors" "$T/r0/final/model.safetensors"
cut_to "$T/z" "$T/z1" 6
cut_to "$T/r0" "$T/d1" 6
check "--zero 1: resumed on 1 process (one shard: all of it)" train --resume "$T/z1" --device cpu
check "plain data parallel: resumed on 1 process" train --resume "$T/d1" --device cpu
expect_eq "--zero 1 resumed on 1 process: as plain data parallel resumed so" "$(losses "$T/z1")" "$(losses "$T/d1")"
expect_fail "--zero 1 with lamb: refused" 2 "--zero 1 takes adamw, adam or sgd: lamb's trust ratio needs whole tensors" \
	train "${TINY[@]}" --run "$T/zl" --max-steps 2 --zero 1 --optimizer lamb

# ts-stop reaches both processes: one checkpoint, both exit 0
mpi 2 "${TINY[@]}" --run "$T/s" --batch 8 --max-steps 100000 --save-every 100000 >"$T/s.out" 2>&1 &
mpirun_pid=$!
wait_for "a long 2-process run under way" steps_done "$T/s" 3
check "ts-stop stops the 2-process run" ts-stop --wait --timeout 60 "$T/s"
wait "$mpirun_pid"
expect_eq "stopped: mpirun (both processes) exits 0" "$?" 0
expect_eq "stopped: one stop event and one checkpoint" "$(count "$T/s" stop) $(ls "$T/s/ckpt" | wc -l)" "1 1"
check "stopped: both processes logged the stop" grep -q "stopped at step" "$T/s/log/rank-1.log"

# a process killed: the other does not wait forever
mpi 2 "${TINY[@]}" --run "$T/k" --batch 8 --max-steps 100000 --save-every 100000 >"$T/k.out" 2>&1 &
mpirun_pid=$!
wait_for "another long 2-process run under way" steps_done "$T/k" 3
victim=$(rank_pid "$T/k" 1)
expect_eq "process 1 found" "$(wc -w <<<"$victim")" 1
kill -9 $victim
for _ in $(seq 600); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
check "a process killed: the run ends within 60 s" test ! -d "/proc/$mpirun_pid"
wait "$mpirun_pid"
rc=$?
expect_eq "a process killed: mpirun exits non-zero" "$((rc != 0))" 1
check "a process killed: the message names the process" grep -q "rank 1" "$T/k.out"
expect_eq "a process killed: no ts-train left running" "$(pgrep -f "ts-train.*$T/k" | wc -l)" 0
# launched by the environment, over TCP, without MPI (as torchrun launches)
# envrun RANK ARGS...: one process of a launch of $WORLD (2) processes
envrun() {
	local r=$1; shift
	env -u OMPI_COMM_WORLD_SIZE WORLD_SIZE="${WORLD:-2}" RANK="$r" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		timeout 300 ts-train "$@"
}
envrun3() { WORLD=3 envrun "$@"; }
# envrun6 RANK ARGS...: envrun at MASTER_ADDR=[::1]
envrun6() {
	local r=$1; shift
	env -u OMPI_COMM_WORLD_SIZE WORLD_SIZE=2 RANK="$r" MASTER_ADDR='[::1]' MASTER_PORT="$port" timeout 300 ts-train "$@"
}
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/e2" --batch 8 --max-steps 12 --eval-every 6 --save-every 6 >"$T/e1.out" 2>&1 &
check "launched by the environment: process 0" envrun 0 "${TINY[@]}" --run "$T/e2" --batch 8 --max-steps 12 \
	--eval-every 6 --save-every 6
wait $!
expect_eq "launched by the environment: process 1 exits 0" "$?" 0
expect_eq "launched by the environment: the losses of mpirun's 2 processes" "$(losses "$T/e2")" "$(losses "$T/r0")"
expect_eq "launched by the environment: the sums run as a TCP ring, under mpirun by MPI" \
	"$(ts-cat "$T/e2/events.msgpack" "$T/r0/events.msgpack" | jq -r 'select(.event=="step") | .comm.algorithm' | sort | uniq -c | awk '{print $1, $2, $3}' | tr '\n' ';')" \
	"12 mpi allreduce;12 tcp ring;"
check "launched by the environment: the same final model as under mpirun" \
	cmp "$T/e2/final/model.safetensors" "$T/r0/final/model.safetensors"
expect_eq "launched by the environment: the sums run on a thread of their own, partly behind the backward pass" \
	"$(ts-cat "$T/e2/events.msgpack" | jq -r 'select(.event=="step") | .comm.ms > .comm.exposed_ms' | sort | uniq -c |
		awk '{print $1, $2}')" "12 true"
expect_eq "launched by the environment: each process logs the interface the routes chose (lo), which NCCL would take" \
	"$(grep -ho "process [01] of 2 talking over lo$" "$T"/e2/log/rank-*.log | sort | tr '\n' ';')" \
	"process 0 of 2 talking over lo;process 1 of 2 talking over lo;"
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/ez" --batch 8 --max-steps 12 --eval-every 6 --save-every 6 --zero 1 >/dev/null 2>&1 &
check "launched by the environment, --zero 1: process 0" envrun 0 "${TINY[@]}" --run "$T/ez" --batch 8 \
	--max-steps 12 --eval-every 6 --save-every 6 --zero 1
wait $!
expect_eq "launched by the environment, --zero 1: the losses of plain data parallel" "$(losses "$T/ez")" "$(losses "$T/r0")"
check "launched by the environment, --zero 1: the same optimizer state in the checkpoint" \
	cmp "$T/ez/ckpt/step-12/optimizer.safetensors" "$T/r0/ckpt/step-12/optimizer.safetensors"
# 3 processes x batch 4 = 1 x 12 (6 steps, the slices equal): the TCP ring
# with --zero 1 and MPI, each summing in its own order
port=$(free_port)
for r in 1 2; do
	envrun3 "$r" "${TINY[@]}" --run "$T/e3z" --batch 4 --max-steps 6 --dropout 0 --zero 1 >/dev/null 2>&1 &
done
check "3 processes launched by the environment, --zero 1" envrun3 0 "${TINY[@]}" --run "$T/e3z" --batch 4 \
	--max-steps 6 --dropout 0 --zero 1
wait
check "3 processes under mpirun" mpi 3 "${TINY[@]}" --run "$T/m3" --batch 4 --max-steps 6 --dropout 0
check "1 process x batch 12, 6 steps" train "${TINY[@]}" --run "$T/o12" --batch 12 --max-steps 6 --dropout 0
check "3 processes over TCP with --zero 1 = 1 process x batch 12, within 1e-7" \
	close <(losses "$T/e3z") <(losses "$T/o12") 1e-7
check "3 processes under mpirun = 1 process x batch 12, within 1e-7" close <(losses "$T/m3") <(losses "$T/o12") 1e-7
expect_fail "launched by the environment: RANK missing" 1 "WORLD_SIZE is set, so RANK must be too" \
	env WORLD_SIZE=2 ts-train "${TINY[@]}" --run "$T/e3" --max-steps 2
expect_fail "launched by the environment: RANK out of range" 1 "RANK=2: not a whole number from 0 to 1" \
	env WORLD_SIZE=2 RANK=2 ts-train "${TINY[@]}" --run "$T/e3" --max-steps 2
expect_fail "launched by the environment: more processes on the machine than in the run" 1 \
	"LOCAL_WORLD_SIZE=4: not a whole number from 1 to 2" \
	env WORLD_SIZE=2 RANK=1 LOCAL_WORLD_SIZE=4 LOCAL_RANK=3 ts-train "${TINY[@]}" --run "$T/e3" --max-steps 2
expect_fail "launched by the environment: a bad MASTER_PORT" 1 "MASTER_PORT=99999: not a whole number from 1 to 65535" \
	env WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999 ts-train "${TINY[@]}" --run "$T/e3" --max-steps 2
expect_fail "launched by the environment: a MASTER_PORT with a blank before it" 1 "MASTER_PORT= 29555: not a whole number" \
	env WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 "MASTER_PORT= 29555" ts-train "${TINY[@]}" --run "$T/e3" --max-steps 2
expect_fail "launched by the environment: process 0 never comes" 1 \
	"process 1: cannot reach process 0 at 127.0.0.1:$port in 2 s \(MASTER_ADDR, MASTER_PORT\)" \
	envrun 1 "${TINY[@]}" --run "$T/e3" --max-steps 2 --comm-timeout 2
# process 1 never comes: process 0 names it when --comm-timeout is up
port=$(free_port)
envrun3 2 "${TINY[@]}" --run "$T/miss" --max-steps 2 --comm-timeout 2 >/dev/null 2>&1 &
expect_fail "launched by the environment: process 0 names the process that did not come" 1 \
	"^ts-train: process 0: only 2 of 3 processes came in 2 s \(--comm-timeout\); missing: process 1$" \
	envrun3 0 "${TINY[@]}" --run "$T/miss" --max-steps 2 --comm-timeout 2
wait $!
# MASTER_ADDR as torchrun users write an IPv6 address: in brackets
port=$(free_port)
envrun6 1 "${TINY[@]}" --run "$T/v6" --batch 8 --max-steps 12 --eval-every 6 --save-every 6 \
	>/dev/null 2>&1 &
check "MASTER_ADDR=[::1]: the brackets of an IPv6 address are taken off" envrun6 0 "${TINY[@]}" --run "$T/v6" \
	--batch 8 --max-steps 12 --eval-every 6 --save-every 6
wait $!
expect_eq "MASTER_ADDR=[::1]: process 1 exits 0, with the losses of 127.0.0.1" "$? $(losses "$T/v6")" "0 $(losses "$T/e2")"
# processes launched with other WORLD_SIZEs, and something else at
# MASTER_PORT: refused at once, not after --comm-timeout
port=$(free_port)
start=$SECONDS
WORLD=3 envrun 1 "${TINY[@]}" --run "$T/w" --max-steps 2 --comm-timeout 30 >"$T/w1.out" 2>&1 &
expect_fail "launched by the environment, process 0 with WORLD_SIZE=2 and process 1 with 3: process 0 refuses" 1 \
	"^ts-train: process 0: process 1 came with WORLD_SIZE=3, this one has 2$" \
	envrun 0 "${TINY[@]}" --run "$T/w" --max-steps 2 --comm-timeout 30
wait $!
expect_eq "other WORLD_SIZEs: process 1 exits 1, saying why" "$? $(cat "$T/w1.out")" \
	"1 ts-train: process 1: WORLD_SIZE=3 here, 2 at process 0"
check "other WORLD_SIZEs: refused within 15 s, not after --comm-timeout (30 s)" test $((SECONDS - start)) -lt 15
# a second process 1 while process 0 waits for process 2 (RANK given twice, or a
# process of another run started at the same MASTER_ADDR:MASTER_PORT): it is turned
# away at once, saying why, and the run goes on
port=$(free_port)
envrun3 0 "${TINY[@]}" --run "$T/dup" --max-steps 2 --comm-timeout 30 >"$T/dup0.out" 2>&1 &
p0=$!
envrun3 1 "${TINY[@]}" --run "$T/dup" --max-steps 2 --comm-timeout 30 >"$T/dup1.out" 2>&1 &
p1=$!
wait_for "process 0 listens at MASTER_PORT" listens "$port"
sleep 1
start=$SECONDS
expect_fail "a second process 1: turned away" 1 \
	"^ts-train: process 1: process 0 has a process 1 already \(RANK given twice, or a process of another run at MASTER_ADDR:MASTER_PORT\)$" \
	envrun3 1 "${TINY[@]}" --run "$T/dup" --max-steps 2 --comm-timeout 30
check "a second process 1: turned away within 10 s, not after --comm-timeout (30 s)" test $((SECONDS - start)) -lt 10
check "a second process 1: then process 2 comes, and the run trains" \
	envrun3 2 "${TINY[@]}" --run "$T/dup" --max-steps 2 --comm-timeout 30
wait "$p0"; rc0=$?
wait "$p1"; rc1=$?
expect_eq "a second process 1: processes 0 and 1 exit 0" "$rc0 $rc1" "0 0"
check "a second process 1: process 0 names it" grep -q \
	"^ts-train: process 0: turned away a second process 1 from 127.0.0.1 port [0-9]* (RANK given twice, or a process of another run at MASTER_PORT)$" \
	"$T/dup0.out"
# a process 1 of the version before, whose processes connected to each other in
# the ring otherwise: process 0 refuses it at once
port=$(free_port)
envrun 0 "${TINY[@]}" --run "$T/old" --max-steps 2 --comm-timeout 30 >"$T/old0.out" 2>&1 &
p0=$!
wait_for "process 0 listens at MASTER_PORT" listens "$port"
start=$SECONDS
timeout 60 "${TS_PYTHON:-python3}" -c 'import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(struct.pack("<4i", 0x54537031, 1, 5555, 2)); s.recv(16)' "$port"
wait "$p0"
expect_eq "a process of the version before: process 0 refuses it, in a line" "$? $(cat "$T/old0.out")" \
	"1 ts-train: process 0: a ts-train process of another version connected at port $port (MASTER_PORT)"
check "a process of the version before: refused within 10 s, not after --comm-timeout (30 s)" test $((SECONDS - start)) -lt 10
# LOCAL_RANK without LOCAL_WORLD_SIZE, as launches by hand give it: the
# processes of each machine are counted
# local_envrun LOCAL_RANK RANK ARGS...
local_envrun() { local l=$1; shift; LOCAL_RANK=$l envrun "$@"; }
port=$(free_port)
local_envrun 1 1 "${TINY[@]}" --run "$T/lr" --max-steps 2 >"$T/lr1.out" 2>&1 &
check "LOCAL_RANK alone: process 0" local_envrun 0 0 "${TINY[@]}" --run "$T/lr" --max-steps 2
wait $!
expect_eq "LOCAL_RANK alone: process 1 exits 0" "$? $(cat "$T/lr1.out")" "0 "
# a process that cannot start tells the others, who end at once naming it
port=$(free_port)
start=$SECONDS
envrun 0 "${TINY[@]}" --run "$T/rf" --max-steps 2 --comm-timeout 60 >"$T/rf0.out" 2>&1 &
expect_fail "process 1 with a bad option: refused" 2 "--batch" envrun 1 "${TINY[@]}" --run "$T/rf" --batch 0
wait $!
expect_eq "process 1 could not start: process 0 exits 1, naming it and why" "$? $(cat "$T/rf0.out")" \
	"1 ts-train: process 1 could not start: --batch: 0 is out of range (1 to 32768)"
check "process 1 could not start: process 0 ended within 15 s, not after --comm-timeout (60 s)" \
	test $((SECONDS - start)) -lt 15
port=$(free_port)
start=$SECONDS
envrun 1 "${TINY[@]}" --run "$T/rg" --max-steps 2 --comm-timeout 60 >"$T/rg1.out" 2>&1 &
sleep 0.5
expect_fail "process 0 with a bad LOCAL_RANK: refused" 1 "LOCAL_RANK=x: not a whole number from 0 to 1" \
	local_envrun x 0 "${TINY[@]}" --run "$T/rg"
wait $!
expect_eq "process 0 could not start: process 1 exits 1, naming it and why" "$? $(cat "$T/rg1.out")" \
	"1 ts-train: process 1: process 0 could not start: LOCAL_RANK=x: not a whole number from 0 to 1"
check "process 0 could not start: process 1 ended within 15 s, not after --comm-timeout (60 s)" \
	test $((SECONDS - start)) -lt 15
check "a launch refused: no run dir made" test ! -e "$T/rf" -a ! -e "$T/rg"
listening() { listens "$port"; }
# strangers at MASTER_PORT while process 0 waits (a port scanner, a health check, a
# mistyped client): 2,000 random bytes, an HTTP request, a hundred silent connections
# held open, a thousand opened and closed in a row; each is dropped with a line
# naming where it came from, and the run goes on when process 1 comes
port=$(free_port)
envrun 0 "${TINY[@]}" --run "$T/j" --max-steps 2 --comm-timeout 60 >"$T/j.out" 2>&1 &
p0=$!
wait_for "process 0 listens at MASTER_PORT" listening
timeout 120 "${TS_PYTHON:-python3}" - "$port" "$T/strays" <<'PY' &
import os, random, socket, sys, time
port, marks = int(sys.argv[1]), sys.argv[2]
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=30)
def mark(name):
    open(os.path.join(marks + "-" + name), "w").close()
s = conn(); s.sendall(random.Random(1).randbytes(2000)); time.sleep(0.2); s.close()
s = conn(); s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"); time.sleep(0.2); s.close()
silent = [conn() for _ in range(100)]
mark("silent")
time.sleep(2)
for _ in range(1000):
    conn().close()
mark("sent")
time.sleep(60)
PY
strays=$!
wait_for "strangers at MASTER_PORT: a hundred silent connections open" test -e "$T/strays-silent"
sleep 1
fds=0
for p in $(pgrep -x ts-train); do grep -qF "$T/j" "/proc/$p/cmdline" 2>/dev/null && fds=$(ls "/proc/$p/fd" | wc -l); done
check "strangers at MASTER_PORT: process 0 holds 64 of the silent ones, not all ($fds descriptors open)" \
	test "$fds" -gt 64 -a "$fds" -lt 100
wait_for "strangers at MASTER_PORT: a thousand more opened and closed" test -e "$T/strays-sent"
check "strangers at MASTER_PORT: process 1 joins" envrun 1 "${TINY[@]}" --run "$T/j" --max-steps 2 --comm-timeout 60
wait "$p0"
expect_eq "strangers at MASTER_PORT: process 0 exits 0" "$?" 0
kill "$strays" 2>/dev/null; wait "$strays" 2>/dev/null
check "strangers at MASTER_PORT: the run trained" test -s "$T/j/final/model.safetensors"
expect_eq "strangers at MASTER_PORT: process 0 names the first ten and where each came from, then one line for the rest" \
	"$(grep -c "^ts-train: process 0: dropped a connection at port $port (MASTER_PORT) from 127.0.0.1 port [0-9]*: " "$T/j.out") $(grep -c "more connections that are no ts-train processes came at port $port" "$T/j.out")" "10 1"
expect_eq "strangers at MASTER_PORT: the random bytes and the HTTP request, first" \
	"$(grep -o 'port [0-9]*: it is no ts-train process (it did not say hello)' "$T/j.out" | wc -l)" 2
check "strangers at MASTER_PORT: process 0's log counts them" \
	grep -q "dropped 1102 connections at MASTER_PORT that were no processes of the run" "$T/j/log/rank-0.log"
port=$(free_port)
timeout 60 "${TS_PYTHON:-python3}" -c 'import socket, sys
l = socket.create_server(("127.0.0.1", int(sys.argv[1])))
c = l.accept()[0]; c.recv(16); c.sendall(b"HTTP/1.0 200 OK\r\n\r\n" * 100)' "$port" &
wait_for "something else listens at MASTER_PORT" listening
expect_fail "junk from MASTER_PORT: process 1 refuses it at once" 1 \
	"^ts-train: process 1: something that is no ts-train process of this version answered at 127.0.0.1:$port \(MASTER_ADDR, MASTER_PORT\)$" \
	envrun 1 "${TINY[@]}" --run "$T/j" --max-steps 2 --comm-timeout 30
wait $!
# strangers at the port where process 1 waits for process 0 to connect (a scan of
# every port, a health check): dropped with a line naming where each came from,
# and the run goes on when process 0 comes
# ports_of PID: the ports process PID listens at
ports_of() {
	local i
	for i in $(find "/proc/$1/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n'); do
		awk -v i="$i" '$4 == "0A" && $10 == i { sub(/.*:/, "", $2); print $2 }' /proc/net/tcp /proc/net/tcp6
	done | while read -r h; do echo $((16#$h)); done
}
ring_port() { for p in $(rank_pid "$T/ring" 1); do ports_of "$p"; done | grep .; }
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/ring" --max-steps 2 --comm-timeout 30 >"$T/ring1.out" 2>&1 &
p1=$!
wait_for "process 1 listens for process 0" eval 'ring_port >/dev/null'
timeout 60 "${TS_PYTHON:-python3}" -c 'import socket, sys, time
a = ("127.0.0.1", int(sys.argv[1]))
socket.create_connection(a).close()
s = socket.create_connection(a); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); time.sleep(30)' "$(ring_port)" &
strays=$!
sleep 1
check "strangers where process 1 waits for process 0: process 0 joins" \
	envrun 0 "${TINY[@]}" --run "$T/ring" --max-steps 2 --comm-timeout 30
wait "$p1"
expect_eq "strangers where process 1 waits for process 0: process 1 exits 0" "$?" 0
kill "$strays" 2>/dev/null; wait "$strays" 2>/dev/null
expect_eq "strangers where process 1 waits for process 0: it names each, and where it came from" \
	"$(sed 's/port [0-9]*/port N/g' "$T/ring1.out")" \
	"ts-train: process 1: dropped a connection at port N (where process 0 connects to it) from 127.0.0.1 port N: it closed the connection before it said who it is
ts-train: process 1: dropped a connection at port N (where process 0 connects to it) from 127.0.0.1 port N: it is no ts-train process (it did not say hello)"
# process 0's host drops the handshake (a listener whose backlog is full, as an overloaded
# or firewalled host): process 1 gives up at --comm-timeout, not after the kernel's retries
port=$(free_port)
timeout 120 "${TS_PYTHON:-python3}" -c 'import socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(0)
cs = [socket.socket() for _ in range(3)]
for c in cs: c.setblocking(False); c.connect_ex(("127.0.0.1", int(sys.argv[1])))
time.sleep(100)' "$port" &
full=$!
wait_for "a listener whose backlog is full" listening
began=$(date +%s)
expect_fail "a host that drops the handshake: process 1 gives up at --comm-timeout" 1 \
	"^ts-train: process 1: cannot reach process 0 at 127.0.0.1:$port in 3 s \(MASTER_ADDR, MASTER_PORT\)$" \
	envrun 1 "${TINY[@]}" --run "$T/dropped" --max-steps 2 --comm-timeout 3
expect_eq "...within 20 s of its start" "$(( $(date +%s) - began < 20 ))" 1
kill "$full" 2>/dev/null; wait "$full" 2>/dev/null
# processes started otherwise than process 0 (another seed, model shape or
# --init of the same path): all refuse at the start, before the run dir is made
alike="(the processes of a run must be started alike)"
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/a1" --max-steps 4 --comm-timeout 20 --seed 7 >"$T/a1.out" 2>&1 &
expect_fail "launched by the environment, process 1 with another --seed: process 0 refuses" 1 \
	"^ts-train: process 0: process 1 was started otherwise than process 0 \(it says how\)$" \
	envrun 0 "${TINY[@]}" --run "$T/a1" --max-steps 4 --comm-timeout 20
wait $!
expect_eq "another --seed: process 1 exits 1" "$?" 1
expect_eq "another --seed: process 1 says how, in one line" "$(cat "$T/a1.out")" "ts-train: process 1: seed = 7 here, seed = 5 on process 0 $alike"
check "another --seed: no run dir made" test ! -e "$T/a1"
timeout 300 mpirun -np 1 "$BIN/ts-train" "${TINY[@]}" --run "$T/a2" --max-steps 4 : \
	-np 1 "$BIN/ts-train" "${TINY[@]}" --run "$T/a2" --max-steps 4 --hidden 64 >"$T/a2.out" 2>&1
expect_eq "under mpirun, process 1 with another --hidden: the run fails" "$?" 1
check "another --hidden: process 1 says how" grep -qxF "ts-train: process 1: hidden = 64 here, hidden = 32 on process 0 $alike" "$T/a2.out"
check "another --hidden: no run dir made" test ! -e "$T/a2"
# process 1 finds other files at --init's path, as on a server of its own (a bind
# mount in a mount namespace of its own)
port=$(free_port)
INIT=(--data "$T/data" --init "$T/p1/final" -j 1 --batch 8 --max-steps 4 --comm-timeout 20 --device cpu)
if namespaces; then
	env WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 300 unshare -m \
		sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$T/g1/final" "$T/p1/final" \
		ts-train "${INIT[@]}" --run "$T/a3" >"$T/a3.out" 2>&1 &
	expect_fail "process 1 with other weights at --init's path: process 0 refuses" 1 "process 1 was started otherwise" \
		envrun 0 "${INIT[@]}" --run "$T/a3"
	wait $!
	expect_eq "other weights: process 1 exits 1" "$?" 1
	if grep -qE "^ts-train: process 1: starting weights sha256 = [0-9a-f]{16} here, starting weights sha256 = [0-9a-f]{16} on process 0" "$T/a3.out"
	then pass "other weights: process 1 says so"
	else fail "other weights: process 1 says so"; sed 's/^/    /' "$T/a3.out" | head -5; fi
	check "other weights: no run dir made" test ! -e "$T/a3"
	# process 1 finds other data at --data's path: the same records shuffled by another seed
	ts-shard -o "$T/data-seed4" --seed 4 "$T/tok.msgpack"
	port=$(free_port)
	env WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 300 unshare -m \
		sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$T/data-seed4" "$T/data" \
		ts-train "${TINY[@]}" --run "$T/a4" --max-steps 4 --comm-timeout 20 >"$T/a4.out" 2>&1 &
	expect_fail "process 1 with other data at --data's path: process 0 refuses" 1 "process 1 was started otherwise" \
		envrun 0 "${TINY[@]}" --run "$T/a4" --max-steps 4 --comm-timeout 20
	wait $!
	if grep -qE "^ts-train: process 1: data manifest.json sha256 = [0-9a-f]{16} here, data manifest.json sha256 = [0-9a-f]{16} on process 0" "$T/a4.out"
	then pass "other data: process 1 says so"
	else fail "other data: process 1 says so"; sed 's/^/    /' "$T/a4.out" | head -5; fi
	check "other data: no run dir made" test ! -e "$T/a4"
else
	skip_namespaces "process 1 with other weights at --init's path (a bind mount of its own)"
fi
# process 1 names another run dir (a typo): each says so before any event is written
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/a5-typo" --max-steps 4 --comm-timeout 20 >"$T/a5.out" 2>&1 &
expect_fail "process 1 with another --run: process 0 names it" 1 "^ts-train: process 0: process 1 names another run dir than $T/a5\$" \
	envrun 0 "${TINY[@]}" --run "$T/a5" --max-steps 4 --comm-timeout 20
wait $!
expect_eq "another --run: process 1 says so" "$(cat "$T/a5.out")" \
	"ts-train: process 1: --run $T/a5-typo is not the run dir process 0 made (every process names the same dir)"
check "another --run: nothing written in it, and process 0's dir left empty" \
	test ! -e "$T/a5-typo" -a -d "$T/a5" -a -z "$(ls -A "$T/a5")"
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/a5" --max-steps 4 --comm-timeout 20 >/dev/null 2>&1 &
check "another --run: the command put right then trains in process 0's dir" \
	envrun 0 "${TINY[@]}" --run "$T/a5" --max-steps 4 --comm-timeout 20
wait $!
envrun 1 "${TINY[@]}" --run "$T/e4" --batch 8 --max-steps 100000 --save-every 100000 >"$T/e4.out" 2>&1 &
one=$!
envrun 0 "${TINY[@]}" --run "$T/e4" --batch 8 --max-steps 100000 --save-every 100000 >/dev/null 2>&1 &
zero=$!
wait_for "launched by the environment: a long run under way" steps_done "$T/e4" 3
kill -9 $(rank_pid "$T/e4" 0)
wait "$one"
expect_eq "launched by the environment: process 0 killed, process 1 exits non-zero" "$(($? != 0))" 1
check "launched by the environment: and says so" grep -q "process 0 closed its connection (it ended?)" "$T/e4.out"
wait "$zero" 2>/dev/null

# --net-if: the interface the processes talk over
expect_fail "--net-if: an interface this machine lacks" 1 "--net-if nosuch: no network interface of that name with an address here \(lo" \
	train "${TINY[@]}" --run "$T/i0" --max-steps 2 --net-if nosuch
check "--net-if: nothing written for a bad one" test ! -e "$T/i0"
port=$(free_port)
envrun 1 "${TINY[@]}" --run "$T/i1" --batch 8 --max-steps 4 --net-if lo >/dev/null 2>&1 &
check "--net-if lo: launched by the environment" envrun 0 "${TINY[@]}" --run "$T/i1" --batch 8 --max-steps 4 --net-if lo
wait $!
expect_eq "--net-if lo: launched by the environment, both processes exit 0" "$?" 0
check "--net-if lo: under mpirun" mpi 2 "${TINY[@]}" --run "$T/i2" --batch 8 --max-steps 4 --net-if lo
expect_eq "--net-if lo: the same losses both ways" "$(losses "$T/i1")" "$(losses "$T/i2")"
check "--net-if is not kept in the run's config" sh -c "! grep -q net-if '$T/i2/config'"

# a process that hangs (stopped): the other names it after --comm-timeout and the run ends
mpi 2 "${TINY[@]}" --run "$T/h" --batch 8 --max-steps 100000 --save-every 100000 --comm-timeout 3 \
	>"$T/h.out" 2>&1 &
mpirun_pid=$!
wait_for "a third long 2-process run under way" steps_done "$T/h" 3
kill -STOP $(rank_pid "$T/h" 1)
for _ in $(seq 600); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
check "a process hangs: the run ends within 60 s" test ! -d "/proc/$mpirun_pid"
wait "$mpirun_pid"
expect_eq "a process hangs: mpirun exits non-zero" "$(($? != 0))" 1
check "a process hangs: the other names it" grep -q "process 0: no answer from process 1 in 3 s (--comm-timeout)" "$T/h.out"
expect_eq "a process hangs: no ts-train left" "$(pgrep -f "ts-train.*$T/h" | wc -l)" 0
# the same launched by the environment, 3 processes: each hears only from its
# neighbour, and the one after the stopped process names it
port=$(free_port)
for r in 1 2; do envrun3 "$r" "${TINY[@]}" --run "$T/th" --batch 4 --max-steps 100000 --save-every 100000 \
	--comm-timeout 3 >"$T/th$r.out" 2>&1 & done
envrun3 0 "${TINY[@]}" --run "$T/th" --batch 4 --max-steps 100000 --save-every 100000 --comm-timeout 3 \
	>"$T/th0.out" 2>&1 &
wait_for "a long 3-process TCP run under way" steps_done "$T/th" 3
kill -STOP $(rank_pid "$T/th" 1)
wait_for "a process hangs in the TCP ring: the one after it names it, and that it may wait for another" grep -q \
	"process 2: no answer from process 1 in 3 s (--comm-timeout; it hangs, or one it waits for)" "$T/th2.out"
kill -9 $(rank_pid "$T/th" 1) 2>/dev/null
wait
finish
