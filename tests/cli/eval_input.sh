# ts-eval and ts-cat on awkward input: a planted temp file, ids shared by
# inputs, empty or oversized fields, names CSV must quote, pipes, MLM masks.
. "$(dirname "$0")/../lib.sh"
HF=$FIX/hf
PY=${TS_PYTHON:-python3}
export OMP_NUM_THREADS=1
eval1() { timeout 60 ts-eval -j1 --device cpu "$@"; }
cat1() { timeout 20 ts-cat "$@"; }

printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":0}' '{"id":"b","ids":[2,7,8,9,3],"label":1}' \
	'{"id":"c","ids":[2,10,3],"label":2}' >"$T/r.jsonl"
cat1 --from-json "$T/r.jsonl" -o "$T/r.mp"

# the temporary shard of record files lives in a private dir, gone at the end
mkdir "$T/tmpd" && echo precious >"$T/victim"
TMPDIR=$T/tmpd timeout 60 sh -c 'ln -s "$1" "$TMPDIR/ts-records-$$.shard"; exec ts-eval -m "$2" -j1 --device cpu "$3"' \
	sh "$T/victim" "$HF/tiny-cls" "$T/r.mp" >/dev/null 2>&1
expect_eq "a symlink planted in TMPDIR is not written through" "$(cat "$T/victim")" precious
rm -f "$T"/tmpd/*
TMPDIR=$T/tmpd eval1 -m "$HF/tiny-cls" "$T/r.mp" >/dev/null
expect_eq "the temporary shard and its dir are gone after a run" "$(ls -A "$T/tmpd")" ""
printf '{"ids":[2,99999,3]}\n' | cat1 --from-json -o "$T/far.mp"
TMPDIR=$T/tmpd eval1 -m "$HF/tiny-cls" --predict "$T/far.mp" >/dev/null 2>&1
expect_eq "the temporary dir is gone after an error too" "$(ls -A "$T/tmpd")" ""

# an empty standard input is named as other errors name it
expect_fail "an empty standard input is refused by its name" 1 "^ts-eval: standard input: no records$" \
	eval1 -m "$HF/tiny-cls" </dev/null

# a token stream given as --data: not a data dir, said so
expect_fail "a token stream as --data is not a data dir" 1 "r.mp: not a data dir \(no manifest.json; ts-shard makes one" \
	eval1 -m "$HF/tiny-cls" --data "$T/r.mp"

# --merge-folds merges the folded pieces of an id, never records that were not folded
expect_eq "--merge-folds keeps unfolded records that share ids apart" \
	"$(eval1 -m "$HF/tiny-cls" --merge-folds --predict "$T/r.mp" "$T/r.mp" | cat1 | wc -l)" 6
printf '%s\n' '{"id":"a","ids":[2,5,3],"fold":0}' '{"id":"a","ids":[2,6,3],"fold":1}' '{"id":"b","ids":[2,7,3],"fold":0}' |
	cat1 --from-json -o "$T/folds.mp"
expect_eq "--merge-folds merges the pieces of each id" \
	"$(eval1 -m "$HF/tiny-cls" --merge-folds --predict "$T/folds.mp" | cat1 | jq -r .id | paste -sd' ')" "a b"
expect_fail "--merge-folds refuses a piece that appears twice" 1 "id 'a': piece 0 appears twice \(ids must be unique across the inputs\)" \
	eval1 -m "$HF/tiny-cls" --merge-folds --predict "$T/folds.mp" "$T/folds.mp"

# a tokcls model on folded text: an entity that runs across a cut is one entity, as
# in the text whole, and every word is scored once (tags B-X, I-X, O for seqeval)
cp -r "$HF/tiny-tokcls" "$T/bio"
"$PY" -c 'import json, sys
p = sys.argv[1] + "/config.json"; c = json.load(open(p))
c["id2label"] = {"0": "B-X", "1": "I-X", "2": "O"}; c["label2id"] = {v: int(k) for k, v in c["id2label"].items()}
json.dump(c, open(p, "w"))' "$T/bio"
printf 'ba\tB-X\nbe\tI-X\nbi\tI-X\nbo\tI-X\nbu\tI-X\nda\tO\n\nde\tO\ndi\tB-X\n\n' >"$T/bio.conll"
ts-tokenize -v "$T/bio/vocab.txt" --max-len 4 --fold -o "$T/cut.mp" "$T/bio.conll"
ts-tokenize -v "$T/bio/vocab.txt" --max-len 5 --fold --stride 1 -o "$T/over.mp" "$T/bio.conll"
for f in cut over; do
	eval1 -m "$T/bio" "$T/$f.mp" | jq -c '[.predicted, .entities.classes.X.support]' >"$T/$f.json"
done
expect_eq "tokcls on folded text: entities across a cut counted once (2), every word once (8)" \
	"$(cat "$T/cut.json") $(cat "$T/over.json")" "[8,2] [8,2]"
expect_eq "and the words' tags predicted, by text, as many as whole" \
	"$(eval1 -m "$T/bio" --predict "$T/cut.mp" | cat1 | jq -s -c 'map(.pred | length) | add')" 8
# --merge-folds of a tokcls model: a row per text, the tags of its pieces joined in
# fold order, a tag a word as the whole text has; where the text fits in one piece
# (the model sees what it sees whole), the row is the whole text's
printf 'ba\tB-X\nbe\tI-X\nbi\tI-X\nbo\tI-X\nbu\tI-X\nda\tO\nde\tO\ndi\tB-X\ndo\tO\ndu\tI-X\n\nde\tO\ndi\tB-X\n\n' >"$T/long.conll"
ts-tokenize -v "$T/bio/vocab.txt" --max-len 6 --fold --stride 2 -o "$T/long.mp" "$T/long.conll"
ts-tokenize -v "$T/bio/vocab.txt" -o "$T/whole.mp" "$T/long.conll"
eval1 -m "$T/bio" --merge-folds --predict "$T/long.mp" | cat1 >"$T/merged.jsonl"
eval1 -m "$T/bio" --predict "$T/long.mp" | cat1 >"$T/pieces.jsonl"
eval1 -m "$T/bio" --predict "$T/whole.mp" | cat1 >"$T/whole.jsonl"
expect_eq "tokcls --merge-folds: the text folded in 4 pieces and the one in 1, a row each" \
	"$(jq -c .id "$T/merged.jsonl" | paste -sd' ') $(jq -s -c 'map(.id) | group_by(.) | map(length)' "$T/pieces.jsonl")" \
	"0 1 [4,1]"
expect_same "and a row's tags are its pieces', joined in fold order" "$(jq -c .pred "$T/merged.jsonl")" \
	"$(jq -s -c 'reduce .[] as $r ([]; if $r.id == (.[-1][0] // null) then .[-1][1] += $r.pred else . + [[$r.id, $r.pred]] end) | .[][1]' "$T/pieces.jsonl")"
expect_eq "a tag a word, as the whole text's" \
	"$(jq -c '.pred | length' "$T/merged.jsonl" | paste -sd' ')" "$(jq -c '.pred | length' "$T/whole.jsonl" | paste -sd' ')"
expect_same "the text of one piece: the whole text's row" "$(sed -n 2p "$T/merged.jsonl")" "$(sed -n 2p "$T/whole.jsonl")"
expect_eq "in CSV, a line per text" "$(eval1 -m "$T/bio" --merge-folds --predict --csv "$T/long.mp" | cut -d, -f1 | paste -sd' ')" \
	'id "0" "1"'
eval1 -m "$T/bio" --merge-folds --predict -o "$T/mp.mp" "$T/long.mp" >"$T/mmetrics.json"
expect_same "its metrics (with -o) are those without --merge-folds" "$(cat "$T/mmetrics.json")" \
	"$(eval1 -m "$T/bio" "$T/long.mp")"
expect_fail "tokcls --merge-folds goes with --predict" 2 "merge-folds of a token classifier goes with --predict" \
	eval1 -m "$T/bio" --merge-folds "$T/long.mp"
tag() { printf '{"id":"%s","ids":[2,5,3],"label":[-100,0,-100],"fold":%s}\n' "$@"; }
{ tag a 0; tag b 0; tag a 1; } | cat1 --from-json -o "$T/apart.mp"
{ tag a 1; tag a 0; } | cat1 --from-json -o "$T/back.mp"
{ tag a 0; tag a 2; } | cat1 --from-json -o "$T/gap.mp"
expect_fail "tokcls --merge-folds: a text's pieces apart, refused" 1 \
	"^ts-eval: id 'a': piece 1 is apart from the others \(a text's pieces must be records in a row\)$" \
	eval1 -m "$T/bio" --merge-folds --predict "$T/apart.mp"
expect_fail "pieces out of fold order, refused" 1 "^ts-eval: id 'a': piece 1 comes where piece 0 should" \
	eval1 -m "$T/bio" --merge-folds --predict "$T/back.mp"
expect_fail "a piece missing, refused" 1 "^ts-eval: id 'a': piece 2 comes where piece 1 should" \
	eval1 -m "$T/bio" --merge-folds --predict "$T/gap.mp"

# labels of another task's data: refused, naming what they are, before any is scored
printf '%s\n' '{"kind":"tokens","version":1,"labels":[],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":0.5}' '{"id":"b","ids":[2,7,3],"label":-1.25}' | cat1 --from-json -o "$T/nums.mp"
expect_fail "a reg model on class names" 1 "r.mp: the labels are the names of classes, which a reg model does not score" \
	eval1 -m "$HF/tiny-reg" "$T/r.mp"
check "which it predicts all the same" sh -c "timeout 60 ts-eval -j1 --device cpu -m '$HF/tiny-reg' --predict '$T/r.mp' >/dev/null"
expect_fail "a cls model on numbers" 1 "nums.mp: the labels are numbers, which a cls model does not score" \
	eval1 -m "$HF/tiny-cls" "$T/nums.mp"
expect_fail "a tokcls model on a class a record" 1 "r.mp: the labels are a class a record, not a tag a word, which a tokcls model" \
	eval1 -m "$HF/tiny-tokcls" "$T/r.mp"

# records with and without labels: --predict keeps each one's own
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":2}' '{"id":"b","ids":[2,7,3]}' '{"id":"c","ids":[2,10,3],"label":0}' |
	cat1 --from-json -o "$T/some.mp"
expect_eq "--predict: the labelled records keep their labels beside one without" \
	"$(eval1 -m "$HF/tiny-cls" --predict "$T/some.mp" | cat1 | jq -r '.label // "-"' | paste -sd' ')" "2 - 0"
# the pieces of one folded record with other labels: refused, not the first's taken
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,3],"fold":0,"label":1}' '{"id":"a","ids":[2,6,3],"fold":1,"label":2}' |
	cat1 --from-json -o "$T/split.mp"
expect_fail "--merge-folds: pieces of other labels" 1 "id 'a': its pieces are labelled 1 and 2" \
	eval1 -m "$HF/tiny-cls" --merge-folds "$T/split.mp"
# a folded record with a piece unlabelled: --predict takes the label the others have
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,3],"fold":0}' '{"id":"a","ids":[2,6,3],"fold":1,"label":2}' |
	cat1 --from-json -o "$T/partial.mp"
expect_eq "--merge-folds --predict: a piece without a label, merged" \
	"$(eval1 -m "$HF/tiny-cls" --merge-folds --predict "$T/partial.mp" | cat1 | jq -c '[.id, .label]')" '["a",2]'
# ids as numbers and as strings: each kept as it came, and 7 is not "7"
printf '%s\n' '{"id":7,"ids":[2,5,3],"fold":0}' '{"id":"7","ids":[2,6,3],"fold":0}' '{"id":"x","ids":[2,7,3]}' |
	cat1 --from-json -o "$T/ids.mp"
expect_eq "--predict: a number id stays a number beside string ids" \
	"$(eval1 -m "$HF/tiny-cls" --predict "$T/ids.mp" | cat1 | jq -c .id | paste -sd' ')" '7 "7" "x"'
expect_eq "--merge-folds: the number 7 and the string \"7\" are two records" \
	"$(eval1 -m "$HF/tiny-cls" --merge-folds --predict "$T/ids.mp" | cat1 | jq -c .id | paste -sd' ')" '7 "7" "x"'

# a token type past the model's, named with its record
printf '%s\n' '{"id":"a","ids":[2,5,3],"types":[0,0,0]}' '{"id":"b","ids":[2,6,3],"types":[0,5,1]}' |
	cat1 --from-json -o "$T/types.mp"
expect_fail "a token type beyond the model's: its file and record" 1 \
	"^ts-eval: $T/types.mp: record 2: token type 5 is beyond the model's 2 token types$" \
	eval1 -m "$HF/tiny-cls" --predict "$T/types.mp"

# --report of class names with a newline and a tab: each row on its line, the names escaped
cp -r "$HF/tiny-cls" "$T/ctl-cls"
"$PY" -c 'import json, sys
p = sys.argv[1] + "/config.json"; c = json.load(open(p))
c["id2label"] = {"0": "ne\ng", "1": "ne\tu", "2": "pos"}; c["label2id"] = {v: int(k) for k, v in c["id2label"].items()}
json.dump(c, open(p, "w"))' "$T/ctl-cls"
printf '%s\n' '{"kind":"tokens","version":1,"labels":["ne\ng","ne\tu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":0}' '{"id":"b","ids":[2,7,8,9,3],"label":1}' '{"id":"c","ids":[2,10,3],"label":2}' |
	cat1 --from-json -o "$T/ctl.mp"
eval1 -m "$T/ctl-cls" --report "$T/ctl.mp" >"$T/ctl.txt"
expect_eq "--report: the names escaped, a row a line (a header, 3 classes, 4 totals, 5 of the matrix, 3 blank)" \
	"$(grep -c 'ne\\n' "$T/ctl.txt") $(grep -c 'ne\\t' "$T/ctl.txt") $(wc -l <"$T/ctl.txt")" "3 3 16"

# every record has token ids
printf '%s\n' '{"id":"a","ids":[2,5,3]}' '{"id":"b","ids":[]}' | cat1 --from-json -o "$T/empty.mp"
expect_fail "an empty 'ids' is refused" 1 "empty.mp: record 2: 'ids' is empty" \
	eval1 -m "$HF/tiny-cls" --predict "$T/empty.mp"

# masked language models
printf '{"id":"a","ids":[2,5,3]}\n' | cat1 --from-json -o "$T/short.mp"
expect_fail "ts-eval of an MLM says when no token was masked" 1 \
	"short.mp: no token was masked \(records too short or --mask-prob too small\)" eval1 -m "$HF/tiny-mlm" --report "$T/short.mp"
expect_fail "--predict of an MLM: a usage error that says why" 2 \
	"^ts-eval: --predict and --merge-folds are not for a masked language model: they predict labels" \
	eval1 -m "$HF/tiny-mlm" --predict "$T/short.mp"
expect_fail "--threshold of an MLM: refused, not ignored" 2 "^ts-eval: --threshold is for multi-label models" \
	eval1 -m "$HF/tiny-mlm" --threshold 0.3 "$T/short.mp"
cp -r "$HF/tiny-mlm" "$T/longvocab"
seq -f 'extra%g' 30000 >>"$T/longvocab/vocab.txt"
awk 'BEGIN { for (r = 0; r < 20; r++) { printf "{\"id\":%d,\"ids\":[2", r; for (i = 0; i < 28; i++) printf ",%d", 5 + (r + i) % 50; print ",3]}" } }' |
	cat1 --from-json -o "$T/long.mp"
check "MLM replacement tokens stay within the model's vocab_size" \
	eval1 -m "$T/longvocab" --mask-prob 0.5 "$T/long.mp"

# integer ids above INT64_MAX keep their value
printf '\x82\xa2id\xcf\xff\xff\xff\xff\xff\xff\xff\xff\xa3ids\x93\x02\x05\x03' >"$T/bigid.mp"
expect_eq "ts-eval --predict keeps an id of 2^64-1" \
	"$(eval1 -m "$HF/tiny-cls" --predict "$T/bigid.mp" | cat1 | grep -o '"id":[0-9]*')" '"id":18446744073709551615'
timeout 20 ts-shard -f -o "$T/bigdata" --split train=1 "$T/bigid.mp" 2>/dev/null
expect_eq "a shard prints an id of 2^64-1" "$(cat1 "$T/bigdata/train.shard" | grep -o '"id":[0-9]*')" '"id":18446744073709551615'

# label names that CSV must quote
for m in cls multi; do
	cp -r "$HF/tiny-$m" "$T/names-$m"
	jq '.id2label = {"0": "a,b", "1": "say \"hi\"", "2": "pos"} | .label2id = {"a,b": 0, "say \"hi\"": 1, "pos": 2}' \
		"$HF/tiny-$m/config.json" >"$T/names-$m/config.json"
done
cat1 "$T/r.mp" | jq -c 'if .kind then .labels = ["a,b", "say \"hi\"", "pos"] else . end' | cat1 --from-json -o "$T/rq.mp"
eval1 -m "$T/names-cls" --predict --csv -o "$T/cls.csv" "$T/rq.mp" >/dev/null
expect_eq "CSV: prob_NAME headers are quoted" "$(head -n 1 "$T/cls.csv")" 'id,label,pred,"prob_a,b","prob_say ""hi""",prob_pos'
expect_eq "CSV: a label name is quoted" "$(sed -n 2p "$T/cls.csv" | cut -c1-10)" '"a","a,b",'
eval1 -m "$T/names-multi" --predict --csv --threshold 0.000001 -o "$T/multi.csv" "$T/rq.mp" >/dev/null
expect_eq "CSV: quotes in the pred list are doubled" "$(sed -n 2p "$T/multi.csv" | sed 's/",[^"]*$/"/')" \
	'"a","a,b say ""hi"" pos"'
fields() { "$PY" -c 'import csv, sys; print(" ".join(str(len(r)) for r in csv.reader(open(sys.argv[1]))))' "$1"; }
expect_eq "CSV: every cls row has its columns" "$(fields "$T/cls.csv")" "6 6 6 6"
expect_eq "CSV: every multi row has its columns" "$(fields "$T/multi.csv")" "5 5 5 5"

# a model to evaluate has its trained head: a new one from a seed scores nothing
expect_fail "a checkpoint without its classifier is refused, not scored at random" 1 \
	"tiny-cls-alias/model.safetensors: no classifier.weight, classifier.bias: the model has no trained head" \
	eval1 -m "$HF/tiny-cls-alias" "$T/r.mp"

# labels go by name: classes the model does not know cannot be scored
expect_fail "labels the model does not know are not scored" 1 \
	"-m .*/names-cls: it knows no class neg, neu of the data's \(its labels: a,b, say \"hi\", pos\)$" \
	eval1 -m "$T/names-cls" "$T/r.mp"
expect_fail "nor named in CSV" 1 "it knows no class neg, neu of the data's" eval1 -m "$T/names-cls" --predict --csv "$T/r.mp"
# the data's classes in another order than the model's: scored by name, as
# the same records numbered as the model
for m in cls multi; do
	cp -r "$HF/tiny-$m" "$T/perm-$m"
	jq '.id2label = {"0": "pos", "1": "neg", "2": "neu"} | .label2id = {"pos": 0, "neg": 1, "neu": 2}' \
		"$HF/tiny-$m/config.json" >"$T/perm-$m/config.json"
done
renumber() { jq -c 'if .kind then .labels = ["pos", "neg", "neu"] elif (.label | type) == "array" then .label |= map((. + 1) % 3)
	else .label = (.label + 1) % 3 end'; }
cat1 "$T/r.mp" | renumber | cat1 --from-json -o "$T/r-perm.mp"
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":[0,2]}' '{"id":"b","ids":[2,7,8,9,3],"label":[1]}' \
	'{"id":"c","ids":[2,10,3],"label":[2,1]}' | cat1 --from-json -o "$T/m.mp"
cat1 "$T/m.mp" | renumber | cat1 --from-json -o "$T/m-perm.mp"
expect_eq "cls: classes in another order scored by name" \
	"$(eval1 -m "$T/perm-cls" "$T/r.mp"; eval1 -m "$T/perm-cls" --predict --csv "$T/r.mp")" \
	"$(eval1 -m "$T/perm-cls" "$T/r-perm.mp"; eval1 -m "$T/perm-cls" --predict --csv "$T/r-perm.mp")"
expect_eq "record files that number the classes otherwise are read as one, by name" \
	"$(eval1 -m "$T/perm-cls" "$T/r.mp" "$T/r-perm.mp")" "$(eval1 -m "$T/perm-cls" "$T/r.mp" "$T/r.mp" | grep .)"
expect_eq "cls: by name, record a (neg) is the model's class 1" \
	"$(eval1 -m "$T/perm-cls" --predict "$T/r.mp" | cat1 | head -n 1 | jq .label)" 1
expect_eq "multi-label: classes in another order scored by name" \
	"$(eval1 -m "$T/perm-multi" "$T/m.mp"; eval1 -m "$T/perm-multi" --predict --csv "$T/m.mp")" \
	"$(eval1 -m "$T/perm-multi" "$T/m-perm.mp"; eval1 -m "$T/perm-multi" --predict --csv "$T/m-perm.mp")"
expect_eq "multi-label: the scores count every class" "$(eval1 -m "$T/perm-multi" "$T/m.mp" | jq -c '.classes | keys')" \
	'["neg","neu","pos"]'
check "predictions by class id (no metrics) need no names" sh -c "timeout 60 ts-eval -j1 --device cpu -m '$T/names-cls' --predict '$T/r.mp' >/dev/null"
check "a model's LABEL_0, LABEL_1, ... name nothing" sh -c "jq '.id2label = {\"0\": \"LABEL_0\", \"1\": \"LABEL_1\", \"2\": \"LABEL_2\"} | del(.label2id)' \
	'$HF/tiny-cls/config.json' >'$T/names-cls/config.json' && timeout 60 ts-eval -j1 --device cpu -m '$T/names-cls' '$T/r.mp' >/dev/null"

# a config value with a leading zero is not a JSON number
printf 'seed = 0042\nlr = 0.5\nsteps = 0\n' >"$T/config"
expect_eq "ts-cat: 0042 stays a string" "$(cat1 "$T/config")" '{"seed":"0042","lr":0.5,"steps":0}'

# a header's version is compared before it is narrowed
printf '%s\n' '{"kind":"tokens","version":4294967297}' '{"id":"a","ids":[2,5,3]}' | cat1 --from-json -o "$T/v.mp"
expect_fail "a stream version above 2^32 is refused" 1 "v.mp: record 1: stream version 4294967297 is newer" \
	eval1 -m "$HF/tiny-cls" --predict "$T/v.mp"
printf '%s\n' '{"kind":"tokens","version":1,"max_len":3000000000}' '{"id":"a","ids":[2,5,3]}' | cat1 --from-json -o "$T/ml.mp"
expect_fail "a header's max_len beyond int32 is refused" 1 "ml.mp: record 1: header field 'max_len' 3000000000 is out of range" \
	timeout 20 ts-shard -o "$T/mldata" --split train=1 "$T/ml.mp"
printf '%s\n' '{"kind":"tokens","version":1,"vocab":"abc"}' '{"id":"a","ids":[2,5,3]}' | cat1 --from-json -o "$T/vs.mp"
expect_fail "a header's vocab that is no sha256 is refused" 1 "vs.mp: record 1: header field 'vocab' is not a sha256" \
	timeout 20 ts-shard -o "$T/vsdata" --split train=1 "$T/vs.mp"
printf '%s\n' '{"kind":"tokens","version":1,"lower":"yes"}' '{"id":"a","ids":[2,5,3]}' | cat1 --from-json -o "$T/lw.mp"
expect_fail "a header's lower that is no boolean is refused" 1 "lw.mp: record 1: header field 'lower' is not true or false" \
	timeout 20 ts-shard -o "$T/lwdata" --split train=1 "$T/lw.mp"

# ts-cat reads named pipes and process substitutions as record streams
expect_eq "ts-cat reads a process substitution" "$(cat1 <(cat "$T/r.mp"))" "$(cat1 "$T/r.mp")"
mkfifo "$T/fifo"
timeout 20 cat "$T/r.mp" >"$T/fifo" &
expect_same "ts-cat reads a named pipe" "$(cat1 "$T/fifo")" "$(cat1 "$T/r.mp")"
wait

# an error names the record by its file and its place there, headers counted
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"lower":true}' '{"id":"a","ids":[2,5,3],"label":0}' \
	'{"id":"b","ids":[2,6,3],"label":7}' | cat1 --from-json -o "$T/bad3.mp"
expect_fail "an error names the record's place in its file" 1 "bad3.mp: record 3: label 7 is out of range \(3 label names\)" \
	eval1 -m "$HF/tiny-cls" "$T/bad3.mp"
expect_fail "an error names the file that holds the record" 1 "bad3.mp: record 3: label 7 is out of range" \
	eval1 -m "$HF/tiny-cls" "$T/r.mp" "$T/bad3.mp"
printf '{"id":"a","ids":[2,5,3]}\n{"id":"%s","ids":[2,6,3]}\n' "$(head -c 70000 /dev/zero | tr '\0' x)" |
	cat1 --from-json -o "$T/longid.mp"
expect_fail "an id too long for the shard names its file and record" 1 \
	"longid.mp: record 2: id is 70000 bytes long; shards hold ids of at most 65535 bytes" eval1 -m "$HF/tiny-cls" "$T/longid.mp"

# -o is for predictions
expect_fail "ts-eval -o without --predict is a usage error" 2 "-o goes with --predict" \
	eval1 -m "$HF/tiny-cls" -o "$T/metrics.json" "$T/r.mp"
expect_fail "ts-eval --report --predict without -o: refused, not a report left out" 2 "--report with --predict needs -o FILE" \
	eval1 -m "$HF/tiny-cls" --report --predict "$T/r.mp"
check "ts-eval --report --predict -o FILE" eval1 -m "$HF/tiny-cls" --report --predict -o "$T/pred.mp" "$T/r.mp"
expect_eq "the report on standard output, the predictions in FILE" \
	"$(grep -c '^confusion matrix' "$T/out") $(cat1 "$T/pred.mp" | grep -c '"pred"')" "1 3"
expect_fail "ts-eval --split with record files is a usage error, not ignored" 2 "--split goes with --data" \
	eval1 -m "$HF/tiny-cls" --split valid "$T/r.mp"
# a diverged model (a NaN in its head) scores NaN, written null as every
# other task writes it, never a rank that NaNs were sorted into
nan_head() {
	cp -r "$HF/tiny-$1" "$T/nan-$1" && "$PY" - "$T/nan-$1/model.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b")
n = struct.unpack("<Q", f.read(8))[0]
f.seek(8 + n + json.loads(f.read(n))["classifier.bias"]["data_offsets"][0])
f.write(struct.pack("<f", float("nan")))
PY
}
nan_head reg && nan_head cls
printf '%s\n' '{"kind":"tokens","version":1,"max_len":32,"lower":true}' '{"id":"a","ids":[2,5,6,3],"label":0.5}' \
	'{"id":"b","ids":[2,7,8,9,3],"label":1.5}' '{"id":"c","ids":[2,10,3],"label":-1.5}' '{"id":"d","ids":[2,11,3],"label":2.5}' |
	cat1 --from-json -o "$T/reg.mp"
expect_eq "regression: its correlations are null" \
	"$(eval1 -m "$T/nan-reg" "$T/reg.mp" | jq -c '[.pearson, .spearman, .mse]')" '[null,null,null]'
expect_eq "classifier: its loss is null, not left out" "$(eval1 -m "$T/nan-cls" "$T/r.mp" | jq -c '[has("loss"), .loss]')" \
	'[true,null]'
finish
