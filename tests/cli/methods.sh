# Training methods on a small slice of the spam corpus with a tiny model:
# layer-wise learning-rate decay, freezing, label smoothing and a moving
# average of the weights; what each does to the run, its resume, and the
# mistakes a user can make with them.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
PY=${TS_PYTHON:-python3}
head -n 301 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 2 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2)

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
check "--freeze-embeddings --freeze-layers 1 from it" train "${TINY[@]}" --run "$T/frozen" --init "$T/base/final" \
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
expect_fail "--freeze-layers beyond the model: refused" 1 "--freeze-layers 3: the model has 2 layers" \
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
mkdir -p "$T/ema2" && touch "$T/ema2/stop"
check "--ema: a run stopped at step 1" train "${TINY[@]}" --run "$T/ema2" --max-steps 12 --eval-every 4 --ema 0.9
check "resumes" train --resume "$T/ema2"
check "to the same average, bit for bit" cmp "$T/ema2/final/model.safetensors" "$T/ema/final/model.safetensors"
expect_fail "--ema with --zero 1: refused" 2 "--zero 1 does not go with --ema" \
	train "${TINY[@]}" --run "$T/bad" --ema 0.9 --zero 1
finish
