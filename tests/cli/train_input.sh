# ts-train's input that a user can get wrong: model dirs it cannot load, run
# dirs it must not take, options it cannot honour or record. Each is refused
# in one line, before a run dir exists, and nothing of the user's is lost.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
head -n 121 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 1)

# --- a config.json with sizes beyond the largest model ---
# hf_dir DIR JSON: a model dir of that config.json, the data's vocab and no tensors
hf_dir() { mkdir -p "$1" && cp "$V" "$1/vocab.txt" && echo "$2" >"$1/config.json" &&
	printf '\010\0\0\0\0\0\0\0{}      ' >"$1/model.safetensors"; }
hf_dir "$T/hfbig" '{"model_type":"bert","vocab_size":1073741806,"hidden_size":1073741824,"num_hidden_layers":1,"num_attention_heads":1,"intermediate_size":1073741824,"max_position_embeddings":1,"type_vocab_size":2}'
expect_fail "--init: a hidden_size beyond --hidden's range is refused" 1 "hfbig/config.json: hidden_size must be an integer from 1 to 65536" \
	train --data "$T/data" --init "$T/hfbig" --run "$T/big" --max-steps 1 -j 1
expect_fail "ts-eval refuses it too" 1 "hfbig/config.json: hidden_size must be an integer from 1 to 65536" \
	timeout 60 ts-eval -m "$T/hfbig" --data "$T/data" --split test -j 1
expect_fail "--count-params refuses it too" 1 "hidden_size must be an integer from 1 to 65536" \
	train --data "$T/data" --init "$T/hfbig" --count-params
hf_dir "$T/hfhuge" '{"model_type":"bert","vocab_size":30522,"hidden_size":65536,"num_hidden_layers":1000,"num_attention_heads":1,"intermediate_size":262144,"max_position_embeddings":32768,"type_vocab_size":2}'
expect_eq "--count-params of the largest model: 51548902719490" \
	"$(train --data "$T/data" --init "$T/hfhuge" --count-params 2>&1)" 51548902719490
expect_fail "--init: a model too big for memory is refused before it is made" 1 "model: needs 825 TB for parameters, gradients and optimizer state" \
	train --data "$T/data" --init "$T/hfhuge" --run "$T/huge" --max-steps 1 -j 1
expect_fail "ts-eval refuses it before it is made" 1 "model: needs 412 TB for parameters and gradients" \
	timeout 60 ts-eval -m "$T/hfhuge" --data "$T/data" --split test -j 1

finish
