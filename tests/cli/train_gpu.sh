# ts-train and ts-eval on the GPU against the CPU: the same run's losses agree
# step for step within a tolerance, a stopped GPU run resumes exactly, a GPU
# checkpoint goes on on the CPU, and ts-eval scores alike on both; bf16 and
# tf32 against fp32 on the GPU; CUDA graphs against eager launches. Without a GPU (or a build without the CUDA
# backend) every check is reported skipped.
. "$(dirname "$0")/../lib.sh"
# train ARGS...: lib.sh's, with each run's wall time and exit on the test's output
# (the first attention of a process on cuDNN compiles its kernels: seconds)
exec 3>&1
train() {
	local t0 rc run="" a prev=""
	for a in "$@"; do [[ $prev == --run || $prev == --resume ]] && run=${a#"$T/"}; prev=$a; done
	t0=$(date +%s.%N)
	timeout 300 ts-train "$@"; rc=$?
	awk -v t0="$t0" -v t1="$(date +%s.%N)" -v rc="$rc" -v run="$run" -v how="${*: -2}" \
		'BEGIN { printf "    time: ts-train %s (... %s): %.1f s, exit %d\n", run, how, t1 - t0, rc }' >&3
	return "$rc"
}
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 301 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 64 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
BASE=(--data "$T/data" --vocab "$V" --layers 2 --hidden 64 --heads 4 --ffn 128 --max-pos 64 --batch 8 --seed 5
	--max-steps 12 --eval-every 4)
BERT=("${BASE[@]}" --precision fp32)
CHECKS=("losses on the GPU within 2e-3 of the CPU's, step for step" "stopped and resumed on the GPU: the same losses"
	"stopped and resumed on the GPU: the same model bytes" "a GPU checkpoint resumes on the CPU"
	"ts-eval on the GPU: the CPU's accuracy" "mlm on the GPU: losses within 2e-3 of the CPU's"
	"sentence pairs (token types) on the GPU: losses within 2e-3 of the CPU's"
	"without --precision an sm_80 GPU trains in bf16"
	"bf16 on the GPU: losses within 0.01 of fp32's on average and 0.05 at worst over 200 steps"
	"bf16 on the GPU: final accuracy within 0.01 of fp32's"
	"tf32 on the GPU: losses within 0.01 of fp32's on average and 0.05 at worst over 200 steps"
	"bf16 stopped and resumed on the GPU: the same losses and model bytes"
	"a bf16 checkpoint resumes on the CPU in fp32"
	"fp16 on the GPU: losses within 0.01 of fp32's on average and 0.05 at worst over 200 steps"
	"fp16 from --loss-scale 2^24: overflowed steps skipped, the scale halved until the steps fit"
	"fp16 stopped and resumed on the GPU: the same losses and loss scales"
	"the done event counts the GPU memory its buffers held at most: some, less than the GPU has; none on the CPU"
	"the done event counts the attention's calls by kernel: fp32's all on the own kernel, bf16's on cuDNN from sm_90 (where it loads), else the own")
# CUDA graphs: precision, task and batching of each case
GRAPH_CASES=("bf16 cls even" "bf16 mlm even" "fp32 cls even" "fp32 mlm even" "bf16 cls packed" "bf16 mlm packed")
GRAPHS=()
for g in "${GRAPH_CASES[@]}"; do
	read -r p k how <<<"$g"
	what="records of one length"
	[ "$how" = packed ] && what="--batch-tokens 256 over records of many lengths"
	GRAPHS+=("CUDA graphs, $p $k, $what: passes captured and replayed, no capture failed"
		"CUDA graphs, $p $k, $how: the same losses and model bytes as --no-cuda-graphs, which replays none")
done
GPU_CHOICE=("--device cuda: the start event names the GPU it took" "--gpus 0 trains on cuda:0"
	"--gpus naming a GPU that is not here: one line" "--gpus beside --device cuda:0: a usage error"
	"ts-sweep --gpus 0: its jobs run on the GPU"
	"2 processes on 1 GPU, no --device: each stops in one line naming --device cpu, no run dir"
	"ts-sweep --per-job 2 without --gpus: its jobs train on the cores")

# close A B: the loss columns of two loss lists agree within 2e-3 relative
close() { [ -n "$1" ] && paste <(echo "$1") <(echo "$2") | awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 2e-3 * ($4 < 0 ? -$4 : $4) + 1e-6) bad++ } END { exit bad > 0 || NR == 0 }'; }

expect_fail "--gpus with a bad list: a usage error" 2 "--gpus 0,x: GPU numbers from 0 to 63" \
	train "${BERT[@]}" --run "$T/badlist" --gpus 0,x
check "--gpus with a bad list: no run dir" test ! -e "$T/badlist"

if ! train "${BERT[@]}" --run "$T/probe" --max-steps 1 --device cuda >/dev/null 2>"$T/probe.err"; then
	if grep -qE -- "--device cuda: (this build has no CUDA backend|CUDA sees no GPU)" "$T/probe.err"; then
		expect_fail "--gpus where CUDA has no GPU: one line" 1 "--gpus 0: (this build has no CUDA backend|CUDA sees no GPU)" \
			train "${BERT[@]}" --run "$T/nogpu" --gpus 0
		check "--gpus where CUDA has no GPU: no run dir" test ! -e "$T/nogpu"
		for c in "${CHECKS[@]}" "${GRAPHS[@]}" "${GPU_CHOICE[@]}"; do skip "GPU: $c ($(cut -d: -f3- "$T/probe.err" | sed "s/^ //"))"; done
		finish
	fi
	fail "ts-train --device cuda runs"; sed 's/^/    /' "$T/probe.err"
	finish
fi

device_of() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="start") | .device'; }
check "GPU: ${GPU_CHOICE[0]}" grep -qxE "cuda:[0-9]+" <(device_of "$T/probe")
train "${BERT[@]}" --run "$T/gpus0" --max-steps 1 --gpus 0 >/dev/null 2>&1
expect_eq "GPU: ${GPU_CHOICE[1]}" "$(device_of "$T/gpus0")" cuda:0
expect_fail "GPU: ${GPU_CHOICE[2]}" 1 "--gpus 63: CUDA sees [0-9]+ GPUs? here" train "${BERT[@]}" --run "$T/g63" --gpus 63
expect_fail "GPU: ${GPU_CHOICE[3]}" 2 "--gpus chooses GPUs for --device cuda; --device cuda:0 names one" \
	train "${BERT[@]}" --run "$T/g0" --gpus 0 --device cuda:0

timeout 300 ts-sweep --gpus 0 -p lr=1e-4,2e-4 --dir "$T/sweep" -- ts-train "${BERT[@]}" --max-steps 2 >/dev/null 2>&1
expect_eq "GPU: ${GPU_CHOICE[4]}" "$(device_of "$T/sweep/job-001") $(device_of "$T/sweep/job-002")" "cuda:0 cuda:0"

port=$(free_port) pids=()
for r in 0 1; do
	CUDA_VISIBLE_DEVICES=0 WORLD_SIZE=2 RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
		timeout 60 ts-train "${BERT[@]}" --run "$T/two" >/dev/null 2>"$T/two-$r.err" & pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
expect_eq "GPU: ${GPU_CHOICE[5]}" "$rcs$(cat "$T"/two-*.err | grep -c -- 'GPU each: 1 GPU here (--device cpu trains them on the cores)$') $(cat "$T"/two-*.err | wc -l) $(test -e "$T/two" && echo made)" "1 1 2 2 "
timeout 120 ts-sweep --per-job 2 -p lr=1e-4 --dir "$T/cores" -- ts-train "${BERT[@]}" --max-steps 2 >/dev/null 2>&1
expect_eq "GPU: ${GPU_CHOICE[6]}" "$(device_of "$T/cores/job-001")" cpu

train "${BERT[@]}" --run "$T/cpu" --device cpu >/dev/null 2>&1 || fail "the CPU run"
train "${BERT[@]}" --run "$T/gpu" --device cuda >/dev/null 2>&1 || fail "the GPU run"
check "GPU: ${CHECKS[0]}" close "$(losses "$T/gpu")" "$(losses "$T/cpu")"
peak_of() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="done") | .peak_memory_mib // "none"'; }
total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null || echo 0)
check "GPU: ${CHECKS[16]} ($(peak_of "$T/gpu") MiB of $total)" awk -v p="$(peak_of "$T/gpu")" -v t="$total" \
	-v c="$(peak_of "$T/cpu")" 'BEGIN { exit !(p + 0 > 0 && p + 0 < t + 0 && c == "none") }'

stop_after 1 train "${BERT[@]}" --run "$T/stop" --device cuda >/dev/null 2>&1
train --resume "$T/stop" --device cuda >/dev/null 2>&1 || fail "the GPU resume"
expect_eq "GPU: ${CHECKS[1]}" "$(losses "$T/stop")" "$(losses "$T/gpu")"
check "GPU: ${CHECKS[2]}" cmp "$T/stop/final/model.safetensors" "$T/gpu/final/model.safetensors"

stop_after 1 train "${BERT[@]}" --run "$T/move" --device cuda >/dev/null 2>&1
check "GPU: ${CHECKS[3]}" train --resume "$T/move" --device cpu

acc() { ts-eval -m "$1" --data "$T/data" --device "$2" | jq -r .accuracy; }
expect_same "GPU: ${CHECKS[4]}" "$(acc "$T/cpu/final" cuda)" "$(acc "$T/cpu/final" cpu)"

train "${BERT[@]}" --task mlm --run "$T/mlm-cpu" --device cpu >/dev/null 2>&1 || fail "the CPU mlm run"
train "${BERT[@]}" --task mlm --run "$T/mlm-gpu" --device cuda >/dev/null 2>&1 || fail "the GPU mlm run"
check "GPU: ${CHECKS[5]}" close "$(losses "$T/mlm-gpu")" "$(losses "$T/mlm-cpu")"

# sentence pairs: does the second text name the first's colour?
awk "$RAND"' BEGIN { seed(9); split("red green blue black white", c, " "); print "a,b,label"
	for (i = 0; i < 200; i++) { x = c[int(rnd() * 5) + 1]; y = rnd() < 0.5 ? x : c[int(rnd() * 5) + 1]
		printf "the %s car,it is %s,%s\n", x, y, x == y ? "same" : "other" } }' >"$T/pairs.csv"
ts-tokenize -v "$V" --text a --text-pair b --label label "$T/pairs.csv" | ts-shard -o "$T/pairs" --seed 1 >/dev/null
PAIRS=("${BERT[@]}" --data "$T/pairs" --max-steps 20 --eval-every 10)
train "${PAIRS[@]}" --run "$T/pairs-cpu" --device cpu >/dev/null 2>&1 || fail "the CPU run on pairs"
train "${PAIRS[@]}" --run "$T/pairs-gpu" --device cuda >/dev/null 2>&1 || fail "the GPU run on pairs"
check "GPU: ${CHECKS[6]}" close "$(losses "$T/pairs-gpu")" "$(losses "$T/pairs-cpu")"

# below fp32: the spam e-mails, 200 steps of each precision from the same start
LONG=("${BASE[@]}" --max-steps 200 --eval-every 100 --device cuda)
train "${LONG[@]}" --run "$T/dflt" --max-steps 1 >/dev/null 2>&1
expect_eq "GPU: ${CHECKS[7]}" "$(device_of "$T/dflt" | cut -d' ' -f2)" \
	"$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 | awk '{ print ($1 >= 8 ? "bf16" : "cuda:0") }')"
for p in fp32 bf16 tf32 fp16; do
	train "${LONG[@]}" --precision "$p" --run "$T/long-$p" >/dev/null 2>"$T/long-$p.err" ||
		{ fail "the $p run of 200 steps"; sed 's/^/    /' "$T/long-$p.err" | tail -n 5; }
done
# within: mean and worst |loss difference| of two runs over all their steps
within() {
	paste <(losses "$1") <(losses "$2") | awk -v n="$3" '$1 == $3 { d = $2 - $4; d = d < 0 ? -d : d; s += d; m = d > m ? d : m; k++ }
		END { exit !(k == n && s / k <= 0.01 && m <= 0.05) }'
}
check "GPU: ${CHECKS[8]}" within "$T/long-bf16" "$T/long-fp32" 200
final_acc() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="eval") | .accuracy' | tail -1; }
expect_eq "GPU: ${CHECKS[9]} ($(final_acc "$T/long-bf16") and $(final_acc "$T/long-fp32"))" \
	"$(awk -v a="$(final_acc "$T/long-bf16")" -v b="$(final_acc "$T/long-fp32")" 'BEGIN { d = a - b; print (a != "" && (d < 0 ? -d : d) <= 0.01) }')" 1
check "GPU: ${CHECKS[10]}" within "$T/long-tf32" "$T/long-fp32" 200
attention() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="done") | .attention | "\(.cudnn_unified) \(.cudnn_composite) \(.own)"'; }
sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 | tr -d .)
cudnn=$(grep -c "libcudnn.so.9) not found" "$T/long-bf16.err")
check "GPU: ${CHECKS[17]} (fp32: $(attention "$T/long-fp32"); bf16: $(attention "$T/long-bf16"); sm_$sm)" awk \
	-v f="$(attention "$T/long-fp32")" -v b="$(attention "$T/long-bf16")" -v cudnn=$((sm >= 90 && cudnn == 0)) \
	'BEGIN { split(f, x, " "); split(b, y, " "); exit !(x[1] + x[2] == 0 && x[3] > 0 &&
		(cudnn ? y[1] + y[2] > 0 : y[1] + y[2] == 0 && y[3] > 0)) }'

stop_after 1 train "${LONG[@]}" --precision bf16 --run "$T/stop16" --max-steps 12 >/dev/null 2>&1
train --resume "$T/stop16" >/dev/null 2>&1 || fail "the bf16 resume"
train "${LONG[@]}" --precision bf16 --run "$T/whole16" --max-steps 12 >/dev/null 2>&1
check "GPU: ${CHECKS[11]}" test "$(losses "$T/stop16")" = "$(losses "$T/whole16")" -a -n "$(losses "$T/whole16")" \
	-a "$(sha256sum <"$T/stop16/final/model.safetensors")" = "$(sha256sum <"$T/whole16/final/model.safetensors")"
stop_after 1 train "${LONG[@]}" --precision bf16 --run "$T/move16" --max-steps 12 >/dev/null 2>&1
train --resume "$T/move16" --device cpu --precision fp32 >/dev/null 2>&1
check "GPU: ${CHECKS[12]}" test "$(ts-cat "$T/move16/events.msgpack" | jq -r 'select(.event=="resume") | .device')" = cpu \
	-a -s "$T/move16/final/model.safetensors"

check "GPU: ${CHECKS[13]}" within "$T/long-fp16" "$T/long-fp32" 200
train "${LONG[@]}" --precision fp16 --loss-scale 16777216 --run "$T/over" --max-steps 30 >/dev/null 2>&1
scales() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="step") | "\(.step) \(.loss_scale) \(.overflow // false)"'; }
# the first step overflows at 2^24; each overflow halves the scale; the last step is taken
check "GPU: ${CHECKS[14]}" awk 'NR == 1 { ok = $2 == 16777216 && $3 == "true" } $3 == "true" { o++ } NR > 1 && p3 == "true" { ok = ok && $2 == p2 / 2 }
	{ p2 = $2; p3 = $3 } END { exit !(ok && NR == 30 && o >= 1 && $3 == "false") }' <(scales "$T/over")
stop_after 1 train "${LONG[@]}" --precision fp16 --loss-scale 16777216 --run "$T/stopfp16" --max-steps 30 >/dev/null 2>&1
train --resume "$T/stopfp16" >/dev/null 2>&1 || fail "the fp16 resume"
check "GPU: ${CHECKS[15]}" test "$(scales "$T/stopfp16")" = "$(scales "$T/over")" -a -n "$(scales "$T/over")" \
	-a "$(losses "$T/stopfp16")" = "$(losses "$T/over")"

# CUDA graphs: the e-mails cut at 32 tokens, so that most passes (two a step)
# repeat their shapes; and packed to 256 tokens from the e-mails cut at 64
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/even" --seed 3 >/dev/null
GRAPH_RUN=(--vocab "$V" --layers 2 --hidden 64 --heads 4 --ffn 128 --max-pos 64 --seed 5 --max-steps 16
	--eval-every 8 --accum 2 --device cuda)
passes() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="done") | .passes | "\(.eager) \(.captured) \(.replayed)"'; }
i=0
for g in "${GRAPH_CASES[@]}"; do
	read -r p k how <<<"$g"
	data=(--data "$T/even" --batch 8)
	[ "$how" = packed ] && data=(--data "$T/data" --batch-tokens 256)
	run=("${GRAPH_RUN[@]}" "${data[@]}" --precision "$p" --task "$k")
	train "${run[@]}" --run "$T/graph-$p-$k-$how" >/dev/null 2>&1 || fail "the $g run with graphs"
	train "${run[@]}" --run "$T/eager-$p-$k-$how" --no-cuda-graphs >/dev/null 2>&1 || fail "the $g run without graphs"
	n=$(passes "$T/graph-$p-$k-$how")
	check "GPU: ${GRAPHS[i]} ($n: eager, captured, replayed)" awk -v n="$n" \
		-v failed="$(grep -c "CUDA graphs" "$T/graph-$p-$k-$how/log/rank-0.log")" \
		'BEGIN { split(n, c, " "); exit !(c[2] >= 1 && c[3] >= 1 && failed == 0) }'
	check "GPU: ${GRAPHS[i + 1]} ($(passes "$T/eager-$p-$k-$how"))" test "$(losses "$T/graph-$p-$k-$how")" = \
		"$(losses "$T/eager-$p-$k-$how")" -a -n "$(losses "$T/graph-$p-$k-$how")" \
		-a "$(passes "$T/eager-$p-$k-$how" | cut -d' ' -f2-)" = "0 0" \
		-a "$(sha256sum <"$T/graph-$p-$k-$how/final/model.safetensors")" = \
		"$(sha256sum <"$T/eager-$p-$k-$how/final/model.safetensors")"
	i=$((i + 2))
done
finish
