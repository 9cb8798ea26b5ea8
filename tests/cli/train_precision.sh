# ts-train --precision: fp32 as before, bf16 on the CPU within its stated
# tolerance of fp32 (per-step loss and final accuracy), bf16's exact resume,
# a bf16 run resumed in fp32, and the refusals: a CPU without bf16
# (ONEDNN_MAX_CPU_ISA hides it), an unknown precision, tf32 and fp16 on the
# CPU, a GPU this machine lacks.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 601 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 64 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
MODEL=(--data "$T/data" --vocab "$V" --layers 2 --hidden 64 --heads 2 --ffn 128 --max-pos 64 --batch 16 --seed 5
	--lr 1e-3)
SMALL=("${MODEL[@]}" -j 2 --device cpu)
no_bf16() { ONEDNN_MAX_CPU_ISA=AVX512_CORE "$@"; }
stepped() { ts-cat "$1/events.msgpack" | grep -q '"event":"step"'; }
accuracy() { ts-cat "$1/events.msgpack" | jq -r 'select(.event=="eval") | .accuracy' | tail -1; }

check "the default precision" train "${SMALL[@]}" --run "$T/default" --epochs 3
check "--precision fp32" train "${SMALL[@]}" --run "$T/fp32" --epochs 3 --precision fp32
check "fp32 is the default: the same final model bit for bit" \
	cmp "$T/default/final/model.safetensors" "$T/fp32/final/model.safetensors"
expect_eq "the run records the precision it took by default" "$(grep '^precision' "$T/default/config")" \
	"precision = fp32"

if grep -qw 'avx512_bf16\|amx_bf16' /proc/cpuinfo; then
	check "--precision bf16" train "${SMALL[@]}" --run "$T/bf16" --epochs 3 --precision bf16
	expect_eq "the run records its precision" "$(grep '^precision' "$T/bf16/config")" "precision = bf16"
	expect_eq "its start event names the bf16 CPU backend" \
		"$(ts-cat "$T/bf16/events.msgpack" | jq -r 'select(.event=="start") | .device')" "cpu bf16"
	# the tolerance the manual states: per-step loss within 0.01 on average and
	# 0.05 at worst, final accuracy within 0.02; and not fp32's bits
	diffs=$(paste <(losses "$T/fp32") <(losses "$T/bf16") |
		awk '$1 == $3 { d = $2 - $4; d = d < 0 ? -d : d; s += d; m = d > m ? d : m; n++ }
		     END { printf "%d %.6f %.6f", n, s / n, m }')
	read -r n mean worst <<<"$diffs"
	expect_eq "bf16's loss curve within tolerance of fp32's over all 90 steps (mean $mean, worst $worst)" \
		"$(awk -v n="$n" -v a="$mean" -v w="$worst" 'BEGIN { print (n == 90 && a <= 0.01 && w <= 0.05 && a > 0) }')" 1
	expect_eq "bf16's final validation accuracy within 0.02 of fp32's ($(accuracy "$T/bf16") and $(accuracy "$T/fp32"))" \
		"$(awk -v a="$(accuracy "$T/bf16")" -v b="$(accuracy "$T/fp32")" 'BEGIN { d = a - b; print (d < 0 ? -d : d) <= 0.02 }')" 1
	check "ts-eval reads the bf16-trained model (saved fp32)" ts-eval -m "$T/bf16/final" --data "$T/data" --split test
	# inference in bf16: the same class as fp32's on at least 99.5% of the records
	preds() { ts-eval -m "$T/fp32/final" --data "$T/data" --split "$1" --predict "${@:2}" | ts-cat | jq -r '"\(.id) \(.pred)"'; }
	for split in valid test; do
		agree=$(paste <(preds "$split" --precision fp32) <(preds "$split" --precision bf16) |
			awk '$1 == $3 { n++; s += $2 == $4 } END { printf "%d %d", s, n }')
		read -r same all <<<"$agree"
		expect_eq "ts-eval --precision bf16: the same class as fp32 on $same of $all $split records" \
			"$(awk -v s="$same" -v n="$all" 'BEGIN { print (n > 0 && s >= 0.995 * n) }')" 1
	done
	logits() { ts-eval -m "$T/fp32/final" --data "$T/data" --predict "$@" | ts-cat | jq -c .logits | md5sum; }
	check "ts-eval --precision bf16: the logits are not fp32's bits" test "$(logits --precision bf16)" != "$(logits)"
	expect_fail "ts-eval --precision bf16 where the CPU has no bf16: refused in one line" 1 \
		"^ts-eval: --precision bf16 on the CPU: this processor has neither" \
		no_bf16 ts-eval -m "$T/fp32/final" --data "$T/data" --precision bf16

	# exact resume: cut back to the checkpoint at step 30, resumed to the end
	cp -r "$T/bf16" "$T/cut" && rm -rf "$T/cut/final" "$T/cut/best" "$T/cut/ckpt/step-60" "$T/cut/ckpt/step-90"
	keep_events "$T/cut" '{print} /"event":"checkpoint"/ {exit}'
	check "a bf16 run cut back to its first checkpoint: --resume" train --resume "$T/cut" --device cpu
	expect_eq "resumed in bf16: the same losses as the run never stopped" "$(losses "$T/cut")" "$(losses "$T/bf16")"
	check "resumed in bf16: the same final model bit for bit" \
		cmp "$T/cut/final/model.safetensors" "$T/bf16/final/model.safetensors"

	# a non-finite step's record says bf16, and --replay runs it in bf16
	check "a bf16 run with non-finite steps ends" train "${SMALL[@]}" --run "$T/nan" --max-steps 3 --optimizer sgd \
		--lr 1e12 --clip 0 --warmup 0 --precision bf16
	bug=$(ls -d "$T"/nan/bug/step-* | head -n 1)
	expect_eq "its bug record says bf16" "$(ts-cat "$bug/batch.msgpack" | jq -r .precision | sort -u)" bf16
	expect_eq "--replay reproduces it" "$(train --replay "$bug" | jq -r .reproduced)" true
	expect_fail "--replay of a bf16 record where the CPU has no bf16: refused in one line" 1 \
		"precision bf16 on the CPU: this processor has neither" no_bf16 ts-train --replay "$bug"

	# one thread pool: OpenMP's, which OpenBLAS and oneDNN both run on
	for how in 1 2 default; do
		jopt=(-j "$how") j=$how
		[ "$how" = default ] && jopt=() j=$(nproc)
		train "${MODEL[@]}" --device cpu "${jopt[@]}" --run "$T/threads-$how" --max-steps 100000 --precision bf16 \
			>/dev/null 2>&1 &
		wait_for "a bf16 run with ${jopt[*]:-no -j} under way" stepped "$T/threads-$how"
		expect_eq "its process runs as many threads as asked ($j), no more" "$(ls "/proc/$(cut -d' ' -f1 "$T/threads-$how/lock")/task" | wc -l)" "$j"
		check "and stops on request" ts-stop --wait --timeout 60 "$T/threads-$how"
		wait
	done

	cp -r "$T/bf16" "$T/moved" && rm -rf "$T/moved/final" "$T/moved/ckpt/step-60" "$T/moved/ckpt/step-90"
	keep_events "$T/moved" '{print} /"event":"checkpoint"/ {exit}'
	cp "$T/moved/events.msgpack" "$T/moved.events"
	expect_fail "resuming a bf16 run where the CPU has no bf16: refused in one line" 1 \
		"precision bf16 on the CPU: this processor has neither AVX512-BF16 nor AMX-BF16" \
		no_bf16 ts-train --resume "$T/moved" --device cpu
	check "the refused resume left the run as it was" cmp "$T/moved/events.msgpack" "$T/moved.events"
	check "the same run resumed there with --precision fp32" \
		no_bf16 ts-train --resume "$T/moved" --device cpu --precision fp32
	expect_eq "its resumed leg ran on the fp32 CPU backend" \
		"$(ts-cat "$T/moved/events.msgpack" | jq -r 'select(.event=="resume") | .device')" "cpu"
	expect_eq "and trained to the end" "$(losses "$T/moved" | tail -1 | cut -d' ' -f1)" \
		"$(losses "$T/bf16" | tail -1 | cut -d' ' -f1)"
	expect_eq "the run's config still says bf16" "$(grep '^precision' "$T/moved/config")" "precision = bf16"
	cp -r "$T/bf16" "$T/moved2" && rm -rf "$T/moved2/final" "$T/moved2/ckpt/step-60" "$T/moved2/ckpt/step-90"
	keep_events "$T/moved2" '{print} /"event":"checkpoint"/ {exit}'
	check "resumed with --precision fp32 and a change the config records" \
		no_bf16 ts-train --resume "$T/moved2" --device cpu --precision fp32 --eval-every 45
	expect_eq "its config records the change, and still says bf16" \
		"$(grep -E '^(precision|eval-every)' "$T/moved2/config")" "$(printf 'eval-every = 45\nprecision = bf16')"
else
	expect_fail "bf16 on a CPU without it: refused in one line" 1 "neither AVX512-BF16 nor AMX-BF16" \
		ts-train "${SMALL[@]}" --run "$T/nobf" --epochs 1 --precision bf16
fi

expect_fail "bf16 where oneDNN sees no bf16: refused in one line" 1 \
	"^ts-train: --precision bf16 on the CPU: this processor has neither AVX512-BF16 nor AMX-BF16; --precision fp32 runs here$" \
	no_bf16 ts-train "${SMALL[@]}" --run "$T/hidden" --epochs 1 --precision bf16
check "the refused run left no run dir" test ! -e "$T/hidden"
expect_fail "an unknown precision: a usage error" 2 "'fp8' is not one of fp32|tf32|bf16|fp16" \
	ts-train "${SMALL[@]}" --run "$T/fp8" --epochs 1 --precision fp8
expect_fail "tf32 on the CPU: refused in one line" 1 \
	"^ts-train: --precision tf32 on --device cpu: tf32 is the tensor cores' format of a GPU; the CPU runs fp32 or bf16$" \
	ts-train "${SMALL[@]}" --run "$T/tf32" --epochs 1 --precision tf32
expect_fail "fp16 on the CPU: refused in one line" 1 "^ts-train: --precision fp16 on --device cpu: fp16 is a GPU's format; the CPU runs fp32 or bf16$" \
	ts-train "${SMALL[@]}" --run "$T/fp16" --epochs 1 --precision fp16
expect_same "ts-eval on the CPU: fp32 by default, the same output as --precision fp32" \
	"$(ts-eval -m "$T/fp32/final" --data "$T/data" --device cpu)" \
	"$(ts-eval -m "$T/fp32/final" --data "$T/data" --device cpu --precision fp32)"
expect_fail "ts-eval --precision tf32 on the CPU: refused in one line that speaks of no training" 1 \
	"^ts-eval: --precision tf32 on --device cpu: tf32 is the tensor cores' format of a GPU; the CPU runs fp32 or bf16$" \
	ts-eval -m "$T/fp32/final" --data "$T/data" --device cpu --precision tf32
expect_fail "ts-eval --precision fp16 on the CPU: so is fp16, without the loss scaling of a training" 1 \
	"^ts-eval: --precision fp16 on --device cpu: fp16 is a GPU's format; the CPU runs fp32 or bf16$" \
	ts-eval -m "$T/fp32/final" --data "$T/data" --device cpu --precision fp16
expect_fail "ts-eval with an unknown precision: a usage error" 2 "'fp8' is not one of fp32\|tf32\|bf16\|fp16" \
	ts-eval -m "$T/fp32/final" --data "$T/data" --precision fp8
check "the refused runs left no run dir" test ! -e "$T/tf32" -a ! -e "$T/fp16"
expect_fail "--loss-scale not a power of two: a usage error" 2 "^ts-train: --loss-scale 1000: not a power of two" \
	ts-train "${SMALL[@]}" --run "$T/ls" --epochs 1 --loss-scale 1000
expect_fail "--loss-scale without fp16: a usage error" 2 "^ts-train: --loss-scale applies to --precision fp16, not fp32" \
	ts-train "${SMALL[@]}" --run "$T/ls" --epochs 1 --loss-scale 1024
check "the refused runs left no run dir" test ! -e "$T/ls"
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 0 ]; then
	expect_fail "bf16 on a GPU this machine lacks: refused in one line" 1 "^ts-train: --device cuda: " \
		ts-train "${MODEL[@]}" --device cuda --run "$T/gpu" --epochs 1 --precision bf16
fi
finish
