# Training methods on a small slice of the spam corpus with a tiny model:
# layer-wise learning-rate decay, freezing, label smoothing, a moving
# average of the weights, distillation, R-Drop and VAT; what each does to
# the run, its resume, and the mistakes a user can make with them.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
PY=${TS_PYTHON:-python3}
head -n 301 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 2 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2)
FROM=(--data "$T/data" --batch 8 --seed 5 -j 2)   # with --init, whose model dir has the vocab and shape

# --- layer-wise learning-rate decay ---
check "--llrd 0.5" train "${TINY[@]}" --run "$T/llrd" --max-steps 2 --llrd 0.5
expect_eq "the log's table gives each tensor's share of the learning rate: head 1, layer l of 2 0.5^(2-l), embeddings 0.5^3" \
	"$(grep -E '^(classifier.weight|bert.encoder.layer.1.output.dense.weight|bert.encoder.layer.0.output.dense.weight|bert.embeddings.word_embeddings.weight) ' "$T/llrd/log/rank-0.log" | awk '{ print $1, $NF }' | sort)" \
	"bert.embeddings.word_embeddings.weight 0.125
bert.encoder.layer.0.output.dense.weight 0.25
bert.encoder.layer.1.output.dense.weight 0.5
classifier.weight 1"

# --- freezing ---
check "a model to start from" train "${TINY[@]}" --run "$T/base" --max-steps 2
check "--freeze-embeddings --freeze-layers 1 from it" train "${FROM[@]}" --run "$T/frozen" --init "$T/base/final" \
	--max-steps 6 --freeze-embeddings --freeze-layers 1
expect_eq "frozen tensors learn at 0" "$(awk '$1 ~ /^bert.embeddings|^bert.encoder.layer.0\./ { print $NF }' "$T/frozen/log/rank-0.log" | sort -u)" 0
if "$PY" -c 'import safetensors' 2>/dev/null; then
	check "the embeddings and layer 0 are the start's, bit for bit; layer 1 and the head learnt" "$PY" - \
		"$T/base/final/model.safetensors" "$T/frozen/final/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
for name in a:
    frozen = name.startswith("bert.embeddings.") or name.startswith("bert.encoder.layer.0.")
    same = (a[name] == b[name]).all()
    assert same == frozen or name.endswith("position_ids"), name
PY
else
	fail "frozen tensors unchanged (no python with safetensors: set TS_PYTHON)"
fi
expect_fail "--freeze-layers beyond the model: refused" 2 "--freeze-layers 3: the model has 2 layers" \
	train "${TINY[@]}" --run "$T/bad" --freeze-layers 3

# --- label smoothing ---
check "--label-smoothing 0.1" train "${TINY[@]}" --run "$T/smooth" --max-steps 4 --eval-every 4 --label-smoothing 0.1
check "without it" train "${TINY[@]}" --run "$T/plain" --max-steps 4 --eval-every 4
expect_eq "smoothing changes the training loss" \
	"$(ts-cat "$T/smooth/events.msgpack" | jq -r 'select(.event=="step" and .step==1) | .loss' | grep -vxF "$(ts-cat "$T/plain/events.msgpack" | jq -r 'select(.event=="step" and .step==1) | .loss')" | wc -l)" 1
expect_fail "--label-smoothing on a regression: refused" 2 "--label-smoothing is for the cross-entropy" \
	train "${TINY[@]}" --run "$T/bad" --task reg --label-smoothing 0.1

# --- a moving average of the weights ---
check "--ema 0.9" train "${TINY[@]}" --run "$T/ema" --max-steps 12 --eval-every 4 --ema 0.9
check "the checkpoints keep the average" sh -c "ts-cat '$T/ema/ckpt/step-12/optimizer.safetensors' | grep -q 'ema.classifier.weight'"
check "the same run without it" train "${TINY[@]}" --run "$T/noema" --max-steps 12 --eval-every 4
expect_eq "the same training losses: the average does not train" "$(losses "$T/ema")" "$(losses "$T/noema")"
check "final/ is the average, not the last weights" sh -c "! cmp -s '$T/ema/final/model.safetensors' '$T/noema/final/model.safetensors'"
check "--ema: a run stopped at step 1" stop_after 1 train "${TINY[@]}" --run "$T/ema2" --max-steps 12 --eval-every 4 --ema 0.9
check "resumes" train --resume "$T/ema2"
check "to the same average, bit for bit" cmp "$T/ema2/final/model.safetensors" "$T/ema/final/model.safetensors"
expect_fail "--ema with --zero 1: refused" 2 "--zero 1 does not go with --ema" \
	train "${TINY[@]}" --run "$T/bad" --ema 0.9 --zero 1

# --- distillation: a 1-layer student of the 2-layer model above ---
STUDENT=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2)
check "--teacher --kd-alpha 0" train "${STUDENT[@]}" --run "$T/kd0" --max-steps 6 --teacher "$T/noema/final" --kd-alpha 0
check "the student alone" train "${STUDENT[@]}" --run "$T/alone" --max-steps 6
expect_eq "alpha 0 learns from the labels alone: the same losses" "$(losses "$T/kd0")" "$(losses "$T/alone")"
check "--teacher --kd-alpha 0.9 --kd-temp 3" train "${STUDENT[@]}" --run "$T/kd" --max-steps 6 --teacher "$T/noema/final" \
	--kd-alpha 0.9 --kd-temp 3
expect_eq "the teacher changes the losses" "$(losses "$T/kd" | cut -d' ' -f2 | grep -cvxF -f <(losses "$T/alone" | cut -d' ' -f2))" 6
check "a masked language model" train "${STUDENT[@]}" --run "$T/mlm" --max-steps 1 --task mlm
expect_fail "a teacher of another task: refused" 1 "--teacher .*: a model of task mlm, where the run trains task cls$" \
	train "${STUDENT[@]}" --run "$T/bad-teacher" --teacher "$T/mlm/final"
# pair records hold token type 1, which a teacher of RoBERTa's one token type cannot read:
# refused before the run, naming the teacher, not at step 1 as the model's
ts-tokenize -v "$V" --id id --text-pair text --label label --max-len 32 "$T/small.csv" |
	ts-shard -o "$T/pairs" --seed 3 >/dev/null
check "a teacher of one token type" train --data "$T/data" --vocab "$V" --arch roberta --layers 1 --hidden 32 \
	--heads 2 --ffn 64 --max-pos 34 --batch 8 -j 2 --run "$T/rteacher" --max-steps 1
expect_fail "...for pair records: refused" 1 "pairs/train.shard: record 1: token type 1 is beyond the --teacher's 1 token types" \
	train --data "$T/pairs" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 -j 2 \
	--run "$T/kd-pairs" --teacher "$T/rteacher/final"
check "...no run dir" test ! -e "$T/kd-pairs"
expect_fail "--kd-alpha without --teacher: refused" 2 "--kd-alpha and --kd-temp go with --teacher" \
	train "${STUDENT[@]}" --run "$T/bad" --kd-alpha 0.3
expect_fail "two regularizers at once: refused" 2 "--teacher, --rdrop and --vat are one at a time" \
	train "${STUDENT[@]}" --run "$T/bad" --teacher "$T/noema/final" --rdrop 1

# --- R-Drop and VAT ---
check "--rdrop 1" train "${STUDENT[@]}" --run "$T/rdrop" --max-steps 6 --rdrop 1
expect_eq "R-Drop changes the losses" "$(losses "$T/rdrop" | cut -d' ' -f2 | grep -cvxF -f <(losses "$T/alone" | cut -d' ' -f2))" 6
check "--vat 1" train "${STUDENT[@]}" --run "$T/vat" --max-steps 6 --eval-every 3 --vat 1 --vat-iters 2
expect_eq "VAT adds its divergence to the losses" "$(paste -d' ' <(losses "$T/vat") <(losses "$T/alone") | awk '$2 > $4' | wc -l)" 6
check "--vat: a run stopped at step 1" stop_after 1 train "${STUDENT[@]}" --run "$T/vat2" --max-steps 6 --eval-every 3 --vat 1 --vat-iters 2
check "resumes" train --resume "$T/vat2"
expect_eq "to the same losses" "$(losses "$T/vat2")" "$(losses "$T/vat")"
check "and the same model, bit for bit" cmp "$T/vat2/final/model.safetensors" "$T/vat/final/model.safetensors"
expect_fail "--rdrop on a regression: refused" 2 "--rdrop is for --task cls and tokcls" \
	train "${STUDENT[@]}" --run "$T/bad" --task reg --rdrop 1
expect_fail "--vat on multi-label: refused" 2 "--teacher and --vat are for the softmax heads" \
	train "${STUDENT[@]}" --run "$T/bad" --multi-label --vat 1
expect_fail "--vat-iters without --vat: refused" 2 "--vat-xi and --vat-iters go with --vat" \
	train "${STUDENT[@]}" --run "$T/bad" --vat-iters 3
finish
