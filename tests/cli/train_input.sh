# ts-train's input that a user can get wrong: model dirs it cannot load, run
# dirs it must not take, options it cannot honour or record. Each is refused
# in one line, before a run dir exists, and nothing of the user's is lost.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
head -n 121 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 1 --device cpu)

# --- a config.json with sizes beyond the largest model ---
# hf_dir DIR JSON: a model dir of that config.json, the data's vocab and no tensors
hf_dir() { mkdir -p "$1" && cp "$V" "$1/vocab.txt" && echo "$2" >"$1/config.json" &&
	printf '\010\0\0\0\0\0\0\0{}      ' >"$1/model.safetensors"; }
hf_dir "$T/hfbig" '{"model_type":"bert","vocab_size":1073741806,"hidden_size":1073741824,"num_hidden_layers":1,"num_attention_heads":1,"intermediate_size":1073741824,"max_position_embeddings":1,"type_vocab_size":2}'
expect_fail "--init: a hidden_size beyond --hidden's range is refused" 1 "hfbig/config.json: hidden_size 1073741824 is not an integer from 1 to 65536" \
	train --data "$T/data" --init "$T/hfbig" --run "$T/big" --max-steps 1 -j 1
expect_fail "ts-eval refuses it too" 1 "hfbig/config.json: hidden_size 1073741824 is not an integer from 1 to 65536" \
	timeout 60 ts-eval -m "$T/hfbig" --data "$T/data" --split test -j 1
expect_fail "--count-params refuses it too" 1 "hidden_size 1073741824 is not an integer from 1 to 65536" \
	train --data "$T/data" --init "$T/hfbig" --count-params
hf_dir "$T/hfhuge" '{"model_type":"bert","vocab_size":30522,"hidden_size":65536,"num_hidden_layers":1000,"num_attention_heads":1,"intermediate_size":262144,"max_position_embeddings":32768,"type_vocab_size":2}'
expect_eq "--count-params of the largest model: 51548902719490" \
	"$(train --data "$T/data" --init "$T/hfhuge" --count-params 2>&1)" 51548902719490
expect_fail "--init: a model too big for memory is refused before it is made" 1 "model: needs 825 TB for parameters, gradients and optimizer state" \
	train --data "$T/data" --init "$T/hfhuge" --run "$T/huge" --max-steps 1 -j 1
expect_fail "with sgd and no momentum, the optimizer keeps no moment" 1 "model: needs 412 TB for parameters, gradients and optimizer state" \
	train --data "$T/data" --init "$T/hfhuge" --run "$T/huge" --max-steps 1 -j 1 --optimizer sgd --momentum 0
expect_fail "with sgd, one" 1 "model: needs 619 TB for parameters, gradients and optimizer state" \
	train --data "$T/data" --init "$T/hfhuge" --run "$T/huge" --max-steps 1 -j 1 --optimizer sgd
expect_fail "with --ema, the average besides" 1 "model: needs 1.0 PB for parameters, gradients and optimizer state" \
	train --data "$T/data" --init "$T/hfhuge" --run "$T/huge" --max-steps 1 -j 1 --ema 0.9
expect_fail "ts-eval refuses it before it is made" 1 "model: needs 412 TB for parameters and gradients" \
	timeout 60 ts-eval -m "$T/hfhuge" --data "$T/data" --split test -j 1

check "the refused runs left no run dir" test ! -e "$T/big" -a ! -e "$T/huge"

# --- a --run dir that holds no run: only an empty one, or one with a stop request alone ---
mkdir -p "$T/proj/best" && echo "my own vocab" >"$T/proj/vocab.txt" && echo '{"my":"model"}' >"$T/proj/best/config.json" &&
	echo precious >"$T/proj/best/notes.txt"
expect_fail "--run into a dir of the user's files is refused" 1 "proj is not empty and holds no run; choose a new or an empty dir for --run" \
	train "${TINY[@]}" --run "$T/proj" --max-steps 1
expect_eq "and the files are as they were" "$(cat "$T/proj/vocab.txt" "$T/proj/best/config.json" "$T/proj/best/notes.txt"; ls -A "$T/proj" "$T/proj/best" | tr '\n' ' ')" \
	"my own vocab
{\"my\":\"model\"}
precious
${T}/proj: best vocab.txt  ${T}/proj/best: config.json notes.txt "
touch "$T/file"
expect_fail "--run naming a file is refused" 1 "file exists and is not a directory" train "${TINY[@]}" --run "$T/file" --max-steps 1
mkdir "$T/empty"
check "--run into an empty dir trains" train "${TINY[@]}" --run "$T/empty" --max-steps 1
mkdir "$T/stop" && touch "$T/stop/stop"
check "--run into a dir that holds a stop request alone makes the run, and stops" train "${TINY[@]}" --run "$T/stop" --max-steps 4
expect_eq "before its first step" "$(ts-cat "$T/stop/events.msgpack" | jq -c 'select(.event=="stop") | .step')" 0
# a run whose making was cut short right after its config appeared
mkdir "$T/cut" && cp "$T/empty/config" "$T/cut/"
check "a run dir of a config alone resumes" train --resume "$T/cut" --device cpu
check "and ends as the run never cut short" cmp "$T/cut/final/model.safetensors" "$T/empty/final/model.safetensors"

# --- input found wrong once the data or the model is read: refused before the run dir exists ---
# refused RUN NAME CODE PATTERN ARGS...: ts-train ARGS --run RUN is refused, leaves no RUN, and RUN can then be trained
refused() {
	local run=$1 n=$2 code=$3 pat=$4; shift 4
	expect_fail "$n" "$code" "$pat" train "$@" --run "$run"
	check "$n: no run dir is left" test ! -e "$run"
}
refused "$T/r2" "a --metric of no task" 2 "--metric acuracy does not apply to the cls task" "${TINY[@]}" --max-steps 4 --metric acuracy
refused "$T/r3" "--init of a dir that does not exist" 1 "^ts-train: --init /nonexistent: No such file or directory$" \
	--data "$T/data" --init /nonexistent --max-steps 1 -j 1
mkdir -p "$T/novocab" && cp "$T/empty/final/config.json" "$T/empty/final/model.safetensors" "$T/novocab/"
refused "$T/r3" "--init of a model dir without its vocab: what is missing" 1 \
	"novocab: no tokenizer.json or vocab.txt: a model dir holds the vocab its model was trained on" \
	--data "$T/data" --init "$T/novocab" --max-steps 1 -j 1
expect_fail "ts-eval of it: the same" 1 "novocab: no tokenizer.json or vocab.txt" \
	timeout 60 ts-eval -m "$T/novocab" --data "$T/data" -j 1
expect_fail "ts-eval -m of a dir that is not there: named with its option" 1 "^ts-eval: -m /nonexistent: No such file or directory$" \
	timeout 60 ts-eval -m /nonexistent --data "$T/data" -j 1
refused "$T/r3" "--init of a model's file, not its dir: said so" 1 \
	"^ts-train: --init .*/final/model.safetensors: not a directory: a model is a dir \(RUN/final, a checkpoint, a Hugging Face model's\)$" \
	--data "$T/data" --init "$T/empty/final/model.safetensors" --max-steps 1 -j 1
expect_fail "ts-eval -m of a model's file: the same" 1 "^ts-eval: -m .*/final/config.json: not a directory: a model is a dir" \
	timeout 60 ts-eval -m "$T/empty/final/config.json" --data "$T/data" -j 1
expect_fail "ts-eval -m of a run dir: the model in it named" 1 "^ts-eval: -m $T/empty: a run dir, not a model: its model is in $T/empty/best$" \
	timeout 60 ts-eval -m "$T/empty" --data "$T/data" -j 1
refused "$T/r3" "--init of a run dir: the same" 1 "^ts-train: --init $T/empty: a run dir, not a model: its model is in $T/empty/best$" \
	--data "$T/data" --init "$T/empty" --max-steps 1 -j 1
expect_fail "ts-eval -m of a data dir: said so" 1 "^ts-eval: -m $T/data: a data dir, not a model \(give it as --data\)$" \
	timeout 60 ts-eval -m "$T/data" --data "$T/data" -j 1
mkdir "$T/nomodel" && cp "$V" "$T/nomodel/"
expect_fail "ts-eval -m of a dir with no config.json: said so" 1 \
	"^ts-eval: -m $T/nomodel: no config.json: not a model dir \(RUN/best, a checkpoint, a Hugging Face model's\)$" \
	timeout 60 ts-eval -m "$T/nomodel" --data "$T/data" -j 1
# --- the case of the text: a model keeps whether its data was lowercased, as transformers reads it ---
ts-tokenize -v "$V" --cased --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/cased" --seed 3 >/dev/null
check "a run on text tokenized with --cased" train "${TINY[@]}" --data "$T/cased" --run "$T/cased-run" --max-steps 1
expect_eq "its model says do_lower_case false beside its vocab.txt" \
	"$(jq -c . "$T/cased-run/final/tokenizer_config.json")" '{"do_lower_case":false}'
expect_eq "and one of lowercased text says true" "$(jq -c . "$T/empty/final/tokenizer_config.json")" '{"do_lower_case":true}'
printf 'Hello World, CAFÉ\nNew York\n' >"$T/cased.txt"
ts-tokenize -v "$V" --cased -f lines "$T/cased.txt" | ts-cat | jq -c "select(.ids) | .ids" >"$T/cased.ids"
check "transformers' tokenizer of the cased model gives ts-tokenize --cased's ids" "${TS_PYTHON:-python3}" -c '
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
texts, ids = open(sys.argv[2]).read().splitlines(), [json.loads(l) for l in open(sys.argv[3])]
assert len(texts) == len(ids) == 2 and all(tok(t)["input_ids"] == i for t, i in zip(texts, ids)), (texts, ids)
' "$T/cased-run/final" "$T/cased.txt" "$T/cased.ids"
expect_fail "ts-eval of the cased model on lowercased data is refused" 1 \
	"^ts-eval: -m .*/cased-run/final: its tokenizer_config.json has do_lower_case false, but the data was tokenized lowercased \(ts-tokenize --cased keeps the case\)$" \
	timeout 60 ts-eval -m "$T/cased-run/final" --data "$T/data" -j 1
refused "$T/r3" "--init of the cased model on lowercased data" 1 "cased-run/final: its tokenizer_config.json has do_lower_case false" \
	--data "$T/data" --init "$T/cased-run/final" --max-steps 1 -j 1
check "it trains on the cased data" train --data "$T/cased" --init "$T/cased-run/final" --run "$T/cased-2" --max-steps 1 -j 1
# --- a model dir as transformers saves it: tokenizer_config.json's model_max_length is int(1e30), past 64 bits ---
"${TS_PYTHON:-python3}" -c '
import sys, torch
from transformers import BertConfig, BertForMaskedLM, BertTokenizer
tok = BertTokenizer(sys.argv[1])
torch.manual_seed(0)
BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64)).save_pretrained(sys.argv[2])
tok.save_pretrained(sys.argv[2])
' "$V" "$T/hf" 2>/dev/null
expect_eq "transformers writes a model_max_length of int(1e30)" \
	"$(grep -o '"model_max_length": [0-9]*' "$T/hf/tokenizer_config.json")" '"model_max_length": 1000000000000000019884624838656'
check "--init of it trains" train --data "$T/data" --init "$T/hf" --run "$T/hf-run" --max-steps 1 -j 1
check "ts-eval evaluates it" timeout 60 ts-eval -m "$T/hf" --data "$T/data" -j 1
mkdir -p "$T/hf-cased" && cp "$T/hf/"* "$T/hf-cased/" && sed -i 's/"do_lower_case": true/"do_lower_case": false/' "$T/hf-cased/tokenizer_config.json"
refused "$T/r3" "and its do_lower_case is still read beside" 1 "hf-cased: its tokenizer_config.json has do_lower_case false" \
	--data "$T/data" --init "$T/hf-cased" --max-steps 1 -j 1
mkdir -p "$T/hf-big" && cp "$T/hf/"* "$T/hf-big/" && sed -i 's/^{/{"unread": 123456789012345678901234567890, "unread_neg": -99999999999999999999,/' "$T/hf-big/config.json"
check "a config.json key past 64 bits that TopSpin does not read is no matter" \
	train --data "$T/data" --init "$T/hf-big" --run "$T/hf-big-run" --max-steps 1 -j 1
mkdir -p "$T/hf-bom" && cp "$T/hf/"* "$T/hf-bom/" && { printf '\357\273\277'; cat "$T/hf/config.json"; } >"$T/hf-bom/config.json"
refused "$T/r3" "a config.json that opens with a byte order mark (transformers refuses it too): said so" 1 \
	"hf-bom/config.json:1: a UTF-8 byte order mark opens it, which JSON does not allow$" \
	--data "$T/data" --init "$T/hf-bom" --max-steps 1 -j 1
sed -i 's/"max_position_embeddings": 64/"max_position_embeddings": 100000000000000000000/' "$T/hf-big/config.json"
refused "$T/r3" "one it reads is refused, naming the key and its range" 1 \
	"hf-big/config.json: max_position_embeddings 1e20 is not an integer from 1 to [0-9]+$" \
	--data "$T/data" --init "$T/hf-big" --max-steps 1 -j 1
# data of another tokenizer, which keeps the case as RoBERTa's does: refused for its vocab, not its case
ts-tokenize -t "$TOP/examples/roberta-base" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/roberta" --seed 3 >/dev/null
expect_fail "ts-eval of the lowercasing model on data of another vocab: the vocab named, not the case, and the data dir as ts-train names it" 1 \
	"^ts-eval: $T/roberta was tokenized with another vocab \(sha256 .*\) than .*/empty/final/vocab.txt \(sha256 .*\)$" \
	timeout 60 ts-eval -m "$T/empty/final" --data "$T/roberta" -j 1
refused "$T/r3" "--init of it: the same" 1 "^ts-train: $T/roberta was tokenized with another vocab \(sha256 .*\) than .*/empty/final/vocab.txt" \
	--data "$T/roberta" --init "$T/empty/final" --max-steps 1 -j 1

refused "$T/r4" "--freeze-layers beyond the model's layers" 2 "--freeze-layers 3: the model has 1 layer;" "${TINY[@]}" --max-steps 1 --freeze-layers 3
refused "$T/r5" "--max-pos below the data's records" 2 "--max-pos 16: .*data holds records of up to 32 tokens" "${TINY[@]}" --max-steps 1 --max-pos 16
mkdir -p "$T/short" && cp "$T/empty/final/"* "$T/short/" && rm "$T/short/digests.json" && sed -i 's/"max_position_embeddings": 32/"max_position_embeddings": 16/' "$T/short/config.json"
refused "$T/r6" "an --init model of fewer positions than the data's records" 1 "data holds records of up to 32 tokens but the model takes 16" \
	--data "$T/data" --init "$T/short" --max-steps 1 -j 1
expect_fail "ts-eval refuses it before a record is scored" 1 "data/test.shard holds records of up to [0-9]+ tokens but the model takes 16" \
	timeout 60 ts-eval -m "$T/short" --data "$T/data" -j 1
# RoBERTa's positions begin past its pad id: --max-pos of the records' length is one short
refused "$T/r7" "a RoBERTa --max-pos that leaves no room for the positions before the first" 2 \
	"--max-pos 32: .*data holds records of up to 32 tokens, and a roberta model's positions begin at 1: --max-pos 33 takes them" \
	"${TINY[@]}" --arch roberta --max-steps 1
# ...and past the most positions a model has where the tokenizer's pad id is large (ModernBERT's)
ts-tokenize -t "$FIX/tokenizers/modernbert/tokenizer.json" --id id --label label --max-len 32 "$T/small.csv" |
	ts-shard -o "$T/mbdata" --seed 3 >/dev/null
refused "$T/r8" "a RoBERTa from scratch on data of a large pad id: no --max-pos suggested past the largest" 2 \
	"--arch roberta: .*mbdata holds records of up to 32 tokens, and a roberta model's positions begin after its pad id, here 50283: past the 32768 positions" \
	--data "$T/mbdata" --arch roberta --layers 1 --hidden 32 --heads 4 --max-steps 1
refused "$T/r9" "ModernBERT with heads of an odd size: the options named" 2 \
	"--hidden 30 / --heads 2 makes heads of 15: modernbert's rotary positions need an even head size" \
	--data "$T/mbdata" --arch modernbert --layers 1 --hidden 30 --heads 2 --max-steps 1
check "a refused run can then be made with the same --run" train "${TINY[@]}" --max-steps 1 --run "$T/r2"

# --- labels of a kind the task cannot take (a forgotten --task): the one that fits is named ---
for i in $(seq 20); do echo "{\"text\": \"word $i\", \"score\": $i.5, \"tags\": [\"a\", \"b\"]}"; done >"$T/kinds.jsonl"
ts-tokenize -v "$V" --label score --max-len 32 "$T/kinds.jsonl" | ts-shard -o "$T/numbers" >/dev/null
ts-tokenize -v "$V" --label tags --max-len 32 "$T/kinds.jsonl" | ts-shard -o "$T/lists" >/dev/null
ts-tokenize -v "$V" --max-len 32 "$T/kinds.jsonl" | ts-shard -o "$T/unlabelled" >/dev/null
refused "$T/kind" "numbers as labels, without --task reg" 1 "numbers: the labels are numbers; train them with --task reg$" \
	"${TINY[@]:2}" --data "$T/numbers" --max-steps 1
refused "$T/kind" "lists as labels, without --multi-label" 1 \
	"lists: the labels are lists; train them with --multi-label \(classes of a record\) or --task tokcls \(a tag per token\)$" \
	"${TINY[@]:2}" --data "$T/lists" --max-steps 1
refused "$T/kind" "classes as labels, with --task tokcls" 1 \
	"data: the labels are one class per record, not a tag per token; train them with --task cls$" \
	"${TINY[@]}" --task tokcls --max-steps 1
refused "$T/kind" "no labels, without --task mlm" 1 "unlabelled: the records have no labels; only --task mlm trains on them$" \
	"${TINY[@]:2}" --data "$T/unlabelled" --max-steps 1
check "numbers train with --task reg" train "${TINY[@]:2}" --data "$T/numbers" --task reg --max-steps 1 --run "$T/kind"

# --- values the run's config cannot give back as they are ---
cp -r "$T/data" "$T/data2 "
refused "$T/r7" "--data of a trailing blank is refused" 2 "--data: a config file cannot hold a value with a blank at either end or a control character" \
	"${TINY[@]}" --max-steps 1 --data "$T/data2 "
refused "$T/r7" "--data of a leading blank is refused" 2 "--data: a config file cannot hold" "${TINY[@]}" --max-steps 1 --data " $T/data"
refused "$T/r7" "--data of a newline is refused" 2 "--data: a config file cannot hold" "${TINY[@]}" --max-steps 1 --data "$T/da
ta"
refused "$T/r7" "--data of a tab is refused" 2 "--data: a config file cannot hold" "${TINY[@]}" --max-steps 1 --data "$T/da	ta"
mkdir "$T/a	b" && cp -r "$T/data" "$T/a	b/"
expect_fail "so is a relative path whose absolute one has a control character" 2 "--data: a config file cannot hold" \
	bash -c 'cd "$1/a	b" && shift && timeout 60 ts-train "$@"' _ "$T" "${TINY[@]}" --max-steps 1 --run r --data data
expect_fail "so is any string option's" 2 "--betas: a config file cannot hold" train "${TINY[@]}" --run "$T/r7" --betas "0.9,0.999 "

# --- a teacher of the data's classes in another order ---
printf 'ham\nspam\n' >"$T/labels.txt"
ts-tokenize -v "$V" --id id --label label --labels "$T/labels.txt" --max-len 32 "$T/small.csv" | ts-shard -o "$T/flipped" --seed 3 >/dev/null
# its classifier's rows are put in the data's order: it teaches as the same
# teacher with its rows swapped by hand
mkdir "$T/swapped" && cp "$T/empty/final/"* "$T/swapped/" && rm "$T/swapped/digests.json" &&
	jq '.id2label = {"0": "ham", "1": "spam"} | .label2id = {"ham": 0, "spam": 1}' "$T/empty/final/config.json" \
		>"$T/swapped/config.json" &&
	"${TS_PYTHON:-python3}" - "$T/swapped/model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
save_file({k: v.flip(0).contiguous() if k.startswith("classifier.") else v for k, v in t.items()}, sys.argv[1])
PY
KD=("${TINY[@]}" --data "$T/flipped" --max-steps 3 --kd-alpha 1 --dropout 0)
check "a teacher of the data's classes in another order distils" train "${KD[@]}" --run "$T/kd-flip" --teacher "$T/empty/final"
check "so does the same teacher with its rows swapped by hand" train "${KD[@]}" --run "$T/kd-swap" --teacher "$T/swapped"
expect_eq "the teacher's rows put in the data's order: the same losses" "$(losses "$T/kd-flip")" "$(losses "$T/kd-swap")"
check "and the same model" cmp "$T/kd-flip/final/model.safetensors" "$T/kd-swap/final/model.safetensors"
printf 'text,label\na,x\nb,y\n' | ts-tokenize -v "$V" --label label -f csv | ts-shard -o "$T/xy" --split train=1 >/dev/null
refused "$T/r8" "a teacher of other classes is refused, saying which" 1 \
	"--teacher .*/empty/final: its labels are not the data's: it has no x, y; the data has no spam, ham$" \
	"${TINY[@]}" --data "$T/xy" --max-pos 32 --max-steps 1 --teacher "$T/empty/final"
printf 'text,label\na,spam\nb,ham\nc,eggs\n' | ts-tokenize -v "$V" --label label -f csv | ts-shard -o "$T/eggs" --split train=1 >/dev/null
refused "$T/r8" "a teacher that lacks one of the data's classes is refused, naming it" 1 \
	"--teacher .*/empty/final: its labels are not the data's: it has no eggs$" \
	"${TINY[@]}" --data "$T/eggs" --max-pos 32 --max-steps 1 --teacher "$T/empty/final"
{ echo text,label; for i in $(seq 12); do echo "a,c$i"; done; } | ts-tokenize -v "$V" --label label -f csv |
	ts-shard -o "$T/many" --split train=1 >/dev/null
refused "$T/r8" "of many classes it lacks, ten are named and the number given" 1 \
	"its labels are not the data's: it has no c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, ... \(12 in all\); the data has no spam, ham$" \
	"${TINY[@]}" --data "$T/many" --max-pos 32 --max-steps 1 --teacher "$T/empty/final"
check "a teacher of the data's classes in their order distils" train "${TINY[@]}" --run "$T/kd" --max-steps 1 --teacher "$T/empty/final"
mkdir "$T/bare" && cp "$T/empty/final/"* "$T/bare/" && rm "$T/bare/digests.json" &&
	"${TS_PYTHON:-python3}" - "$T/bare/model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
save_file({k: v for k, v in t.items() if not k.startswith("classifier.")}, sys.argv[1])
PY
refused "$T/r11" "a teacher without its classifier is refused" 1 \
	"bare/model.safetensors: no classifier.weight, classifier.bias: the model has no trained head" \
	"${TINY[@]}" --max-steps 1 --teacher "$T/bare"
check "the same model starts a run with --init, its head new" train --data "$T/data" --init "$T/bare" --run "$T/from-bare" --max-steps 1 -j 1
mkdir "$T/unnamed" && cp "$T/empty/final/"* "$T/unnamed/" && rm "$T/unnamed/digests.json" && sed -i 's/"spam"/"LABEL_0"/g; s/"ham"/"LABEL_1"/g' "$T/unnamed/config.json"
check "a teacher of classes never named (LABEL_0, ...) distils" \
	train "${TINY[@]}" --data "$T/flipped" --run "$T/kd2" --max-steps 1 --teacher "$T/unnamed"
refused "$T/r12" "a teacher of classes never named, but fewer than the data's, is refused" 1 \
	"--teacher .*/unnamed: a model of 2 labels, where the data has 3$" \
	"${TINY[@]}" --data "$T/eggs" --max-pos 32 --max-steps 1 --teacher "$T/unnamed"

# --- a run's own config repeats it: it records only the options that apply ---
check "-c RUN/config --run NEW repeats a run" train -c "$T/empty/config" --run "$T/again"
check "to the same model, bit for bit" cmp "$T/again/final/model.safetensors" "$T/empty/final/model.safetensors"
check "with the same config" cmp "$T/again/config" "$T/empty/config"
expect_eq "which records no --kd- or --vat- option" "$(grep -cE '^(kd|vat)-' "$T/empty/config")" 0
check "a --vat run" train "${TINY[@]}" --run "$T/vat" --max-steps 2 --vat 1
check "repeats from its config" train -c "$T/vat/config" --run "$T/vat-again"
check "to the same model" cmp "$T/vat-again/final/model.safetensors" "$T/vat/final/model.safetensors"
check "a --teacher run repeats from its config" train -c "$T/kd/config" --run "$T/kd-again"
check "to the same model" cmp "$T/kd-again/final/model.safetensors" "$T/kd/final/model.safetensors"
check "an --init run" train --data "$T/data" --init "$T/empty/final" --run "$T/fine" --max-steps 4 -j 1
expect_eq "records no shape: the model dir has it" "$(grep -cE '^(arch|vocab|layers|hidden|heads|ffn|max-pos|dropout) =' "$T/fine/config")" 0
check "repeats from its config" train -c "$T/fine/config" --run "$T/fine-again"
check "to the same model" cmp "$T/fine-again/final/model.safetensors" "$T/fine/final/model.safetensors"
check "from scratch without a shape" train --data "$T/data" --run "$T/dflt" --max-steps 1 -j 1
expect_eq "records the default shape" "$(grep -E '^(layers|hidden|heads|ffn|max-pos|dropout) =' "$T/dflt/config" | tr '\n' ' ')" \
	"layers = 4 hidden = 256 heads = 4 ffn = 1024 max-pos = 512 dropout = 0.1 "
# runs made before recorded every option: --resume still takes them
stop_after 1 train "${TINY[@]}" --run "$T/old" --max-steps 4 2>/dev/null
stop_after 1 train --data "$T/data" --init "$T/empty/final" --run "$T/old-init" --max-steps 4 -j 1 2>/dev/null
printf 'kd-alpha = 0.5\nkd-temp = 2\nvat-xi = 0.001\nvat-iters = 1\n' | tee -a "$T/old/config" >>"$T/old-init/config"
printf 'layers = 4\nhidden = 256\nheads = 4\nffn = 1024\nmax-pos = 512\n' >>"$T/old-init/config"
for ck in "$T"/old*/ckpt/step-*; do   # whose checkpoints kept no run.config
	rm "$ck/run.config" && jq 'del(.files["run.config"])' "$ck/digests.json" >"$T/digests" && mv "$T/digests" "$ck/digests.json"
done
check "--resume of a run whose config records --kd- and --vat- options" train --resume "$T/old" --device cpu
check "--resume of an --init run whose config records a shape too" train --resume "$T/old-init" --device cpu
check "which is the --init model's" cmp "$T/old-init/final/model.safetensors" "$T/fine/final/model.safetensors"

# --- the options of a model from scratch do not go with --init ---
for o in "--vocab $V" "--layers 2" "--hidden 64" "--heads 4" "--ffn 128" "--ffn 0" "--max-pos 64"; do
	# shellcheck disable=SC2086 # $o is an option and its value
	refused "$T/r9" "--init with $o is refused" 2 "${o%% *} is for a model from scratch: --init's model dir has its own" \
		--data "$T/data" --init "$T/empty/final" --max-steps 1 -j 1 $o
done
expect_fail "--count-params too" 2 "--layers is for a model from scratch" train --data "$T/data" --init "$T/empty/final" --layers 2 --count-params
check "--dropout, which applies, goes with --init" train --data "$T/data" --init "$T/empty/final" --run "$T/drop" --max-steps 1 -j 1 --dropout 0.2

# --- a vocab from a pipe, read once: the run keeps the bytes it checked ---
train --data "$T/data" --vocab <(cat "$V") --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 \
	--max-steps 1 -j 1 --run "$T/piped" >/dev/null 2>&1
check "--vocab from a pipe: the run's vocab.txt is the whole vocab" cmp "$T/piped/vocab.txt" "$V"
# --- an evaluation that scores nothing would report a loss of 0, the best ---
for i in $(seq 40); do echo "word$i"; done | ts-tokenize -v "$V" | ts-shard -o "$T/words" --seed 3 --split train=0.5,valid=0.5 >/dev/null
refused "$T/r10" "an MLM run whose valid split masks no token is refused" 1 \
	"words/valid.shard: no token is masked for evaluation \(records too short or --mask-prob too small\)" \
	--data "$T/words" --vocab "$V" --task mlm --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --max-steps 1 -j 1 --mask-prob 0.001
check "with masks drawn, the same data trains" train --data "$T/words" --vocab "$V" --task mlm --layers 1 --hidden 32 --heads 2 \
	--ffn 64 --max-pos 32 --max-steps 1 -j 1 --mask-prob 0.5 --run "$T/words-run"
check "steps that mask nothing: a run of one-word records, a record a step" train --data "$T/words" --vocab "$V" --task mlm \
	--layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --max-steps 8 --batch 1 -j 1 --mask-prob 0.3 --run "$T/words-1"
expect_eq "steps that mask nothing: skipped, with no loss (not 0); the others with theirs" \
	"$(ts-cat "$T/words-1/events.msgpack" | jq -r 'select(.event == "step") | "\(.skipped // false) \(.loss != null)"' | sort | uniq -c | awk '{print $2, $3}' | tr '\n' ';')" \
	"false true;true false;"
# --- --init of a classifier whose classes the data names in another order ---
HV=$FIX/hf/tiny-cls/vocab.txt   # its classes: neg, neu, pos
{ echo text,label; for i in $(seq 30); do w=$(sed -n "$((i % 20 + 10))p" "$HV"); echo "$w $w,$(echo neu pos neg | cut -d' ' -f$((i % 3 + 1)))"; done; } >"$T/order.csv"
ts-tokenize -v "$HV" --label label --max-len 16 "$T/order.csv" | ts-shard -o "$T/order" --split train=1 >/dev/null
ts-tokenize -v "$HV" --max-len 16 "$T/order.csv" -o "$T/order.mp"
train --data "$T/order" --init "$FIX/hf/tiny-cls" --run "$T/reordered" --max-steps 1 --lr 1e-12 --batch 30 -j 1 2>"$T/said" >/dev/null
check "--init tells that it puts the classifier's rows in the data's order" grep -q "its labels (neg, neu, pos) are not the data's (pos, neg, neu), in that order: its classifier's rows put in the data's order" "$T/said"
names() { timeout 60 ts-eval -j1 --device cpu -m "$1" --predict "$T/order.mp" | ts-cat | jq -r .pred_name | paste -sd' '; }
expect_same "so the model predicts the same classes, by name, as the checkpoint" "$(names "$T/reordered/final")" "$(names "$FIX/hf/tiny-cls")"
sed 's/,pos$/,x/; s/,neg$/,y/; s/,neu$/,z/' "$T/order.csv" | ts-tokenize -v "$HV" --label label --max-len 16 -f csv | ts-shard -o "$T/other" --split train=1 >/dev/null
train --data "$T/other" --init "$FIX/hf/tiny-cls" --run "$T/otherrun" --max-steps 1 -j 1 2>"$T/said" >/dev/null
check "classes of other names get a new classifier, said so" grep -q "its labels (neg, neu, pos) are not the data's (x, y, z), in that order: new classifier from seed 0" "$T/said"

# --- a model dir from Hugging Face holds vocab.txt beside tokenizer.json (all-MiniLM-L6-v2's does) ---
# data tokenized with either file trains from it, and ts-eval takes it on the model made; data of
# another vocab is still refused, naming the dir's tokenizer.json
m=${TS_MINILM_DIR:?tests/run sets TS_MINILM_DIR}
for f in vocab.txt tokenizer.json; do
	opt=-v; [ "$f" = tokenizer.json ] && opt=-t
	ts-tokenize "$opt" "$m/$f" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/mini-$f" --seed 3 >/dev/null
	check "--init a dir of vocab.txt and tokenizer.json: data tokenized with its $f trains" \
		train --data "$T/mini-$f" --init "$m" --run "$T/mini-run-$f" --max-steps 1 --batch 8 -j 1 --device cpu
	check "and ts-eval takes that data on the model made" \
		ts-eval -m "$T/mini-run-$f/final" --data "$T/mini-$f" --split valid -j 1 --device cpu
done
ts-tokenize -t "$TOP/examples/roberta-base" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/roberta" >/dev/null
expect_fail "--init that dir with data of another vocab (RoBERTa's): refused" 1 \
	"tokenized with another vocab .* than $m/tokenizer.json" \
	train --data "$T/roberta" --init "$m" --run "$T/mini-other" --max-steps 1 -j 1 --device cpu
finish
