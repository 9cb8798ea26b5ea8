# Data is checked where it enters: token ids against the vocab (ts-shard,
# ts-train, ts-eval), labels against their type, ids for NUL bytes; data dirs
# keep their vocab; long lines and many labels cost linear time.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
SHA=$(sha256sum "$V" | cut -d' ' -f1)
export OMP_NUM_THREADS=1
TINY=(--layers 1 --hidden 16 --heads 2 --ffn 32 --max-pos 8 --batch 8 -j 1 --device cpu)
header() { printf '{"kind":"tokens","version":1,"vocab":"%s","vocab_file":"%s","labels":[],"max_len":8,"lower":true}\n' "$SHA" "$V"; }
# 40 records with class labels 0 and 1 (no names); record $1 (from 1) gets token id $2
records() { awk -v bad="${1:-0}" -v id="$2" 'BEGIN { for (i = 1; i <= 40; i++)
	printf "{\"id\":%d,\"ids\":[101,%d,%s,102],\"label\":%d}\n", i, 1000 + i, i == bad ? id : 2000 + i, i % 2 }'; }
msgpack() { ts-cat --from-json; }

# token ids beyond the vocab
{ header; records 7 99999999; } | msgpack >"$T/bad.msgpack"
expect_fail "ts-shard refuses a token id beyond the header's vocab" 1 \
	"standard input: record 8: token id 99999999 is beyond the vocab's 30522 tokens" ts-shard -f -o "$T/x" - <"$T/bad.msgpack"
records 7 99999999 | msgpack >"$T/bad-nohdr.msgpack"
expect_fail "ts-shard -v refuses a token id beyond the vocab" 1 "record 7: token id 99999999 is beyond the vocab's 30522" \
	ts-shard -v "$V" -f -o "$T/x" "$T/bad-nohdr.msgpack"
expect_fail "an id of 2^32 is out of range, not 'not an integer'" 1 "record 7: token id 4294967296 is out of range" \
	ts-shard -f -o "$T/x" - < <(records 7 4294967296 | msgpack)
ts-shard -o "$T/bad" --split train=1 "$T/bad-nohdr.msgpack"
for task in "cls" "mlm" "mlm --whole-word"; do
	expect_fail "ts-train --task $task checks the data's token ids before step 1" 1 \
		"bad: the train split holds token id 99999999, beyond the vocab's 30522 tokens" \
		ts-train --data "$T/bad" --run "$T/r-$RANDOM" --vocab "$V" --task $task "${TINY[@]}" --max-steps 2
done
mkdir "$T/liar" && cp "$T/bad/train.shard" "$T/liar/" && sed 's/"max_id": 99999999/"max_id": 2040/' "$T/bad/manifest.json" >"$T/liar/manifest.json"
expect_fail "ts-train guards against a manifest that lies about the ids" 1 \
	"liar/train.shard: record [0-9]+: token id 99999999 is beyond the vocab's 30522 tokens" \
	ts-train --data "$T/liar" --run "$T/r-liar" --vocab "$V" --task mlm --whole-word "${TINY[@]}" --max-steps 10

# integer labels without names train, evaluate and report with classes named by number
records | msgpack | ts-shard -o "$T/good" --split train=.8,valid=.2 2>/dev/null
check "integer labels without names train and evaluate" \
	ts-train --data "$T/good" --run "$T/r" --vocab "$V" "${TINY[@]}" --max-steps 4 --eval-every 2
expect_eq "their classes are named by number" "$(ts-cat "$T/r/events.msgpack" | jq -c 'select(.event=="eval") | .labels' | head -1)" '["0","1"]'
check "ts-eval reports on them" ts-eval -m "$T/r/best" --data "$T/good" --split valid --report
expect_fail "ts-eval checks a data dir's token ids" 1 "bad: the train split holds token id 99999999" \
	ts-eval -m "$T/r/best" --data "$T/bad" --split train
expect_fail "ts-eval checks the token ids of records" 1 "record 7: token id 99999999 is beyond the vocab's 30522 tokens" \
	ts-eval -m "$T/r/best" "$T/bad-nohdr.msgpack"
expect_fail "ts-eval guards against a manifest that lies about the ids" 1 "record [0-9]+: token id 99999999 is beyond" \
	ts-eval -m "$T/r/best" --data "$T/liar" --split train

# labels
one() { echo "$1" | msgpack | ts-shard -f -o "$T/x"; }
expect_fail "a negative label is refused" 1 "record 1: label -1 is out of range" one '{"ids":[101,102],"label":-1}'
expect_fail "a label above int32 does not wrap" 1 "record 1: label 2147483648 is out of range" one '{"ids":[101,102],"label":2147483648}'
expect_fail "a negative label in a list other than -1 and -100 is refused" 1 "record 1: label -3 is neither a class" one '{"ids":[101,102],"label":[1,-3]}'
awk 'BEGIN { for (i = 1; i <= 8; i++) printf "{\"id\":%d,\"ids\":[101,%d,102],\"label\":%s}\n", i, 1000 + i, i == 5 ? "1e31" : "2.5" }' |
	msgpack | ts-shard -o "$T/vast" --split train=1 >/dev/null
expect_fail "a regression label of 1e31 is refused as too large, not as not finite" 1 "label 1e\+31 is beyond 1e30 in size" \
	ts-train --data "$T/vast" --run "$T/r-vast" --vocab "$V" --task reg "${TINY[@]}" --max-steps 1
echo '{"text":"hi","label":4294967296}' >"$T/big.jsonl"
expect_fail "ts-tokenize: a label above int32 does not wrap" 1 "big.jsonl: line 1: label 4294967296 is out of range" \
	ts-tokenize -v "$V" --label label "$T/big.jsonl"
echo '{"text":"hi","label":[0,-2]}' >"$T/neg.jsonl"
expect_fail "ts-tokenize: a negative label is refused" 1 "neg.jsonl: line 1: label -2 is out of range" \
	ts-tokenize -v "$V" --label label "$T/neg.jsonl"

# a NUL byte in an id would cut it short
expect_fail "ts-shard refuses an id with a NUL byte" 1 "record 1: 'id' holds a NUL byte" \
	ts-shard -f -o "$T/x" - < <(printf '\x82\xa2id\xa3a\x00b\xa3ids\x92\x65\x66')
printf 'id,text\nok,fine\na\0b,hello\n' >"$T/nul.csv"
expect_fail "ts-tokenize refuses an id with a NUL byte" 1 "nul.csv: line 3: the id holds a NUL byte" \
	ts-tokenize -v "$V" --id id "$T/nul.csv"

# the data dir keeps the vocab, and ts-train takes it from there
printf 'text,label\n' >"$T/t.csv"
for i in $(seq 30); do printf 'good day %d,pos\nbad night %d,neg\n' "$i" "$i"; done >>"$T/t.csv"
ts-tokenize -v "$V" --label label "$T/t.csv" | ts-shard -o "$T/data" 2>/dev/null
check "ts-tokenize | ts-shard keeps the vocab in the data dir" cmp "$V" "$T/data/vocab.txt"
check "ts-train from scratch needs no --vocab" ts-train --data "$T/data" --run "$T/rv" "${TINY[@]}" --max-steps 2
check "the run keeps the data dir's vocab" cmp "$V" "$T/rv/vocab.txt"
cp "$V" "$T/moved.txt"
ts-tokenize -v "$T/moved.txt" "$T/t.csv" >"$T/moved.msgpack" && rm "$T/moved.txt"
expect_fail "a vocab the header names but that is gone asks for -v" 1 "moved.msgpack: cannot read .*moved.txt, the vocab the header names.*-v FILE" \
	ts-shard -f -o "$T/x" "$T/moved.msgpack"
check "-v gives it" ts-shard -v "$V" -f -o "$T/x" "$T/moved.msgpack"
{ cat "$V"; echo zzqqxx; } >"$T/other.txt"
expect_fail "-v with another vocab is refused" 1 "moved.msgpack: made with the vocab of sha256 ${SHA:0:12}.*other.txt has sha256" \
	ts-shard -v "$T/other.txt" -o "$T/y" "$T/moved.msgpack"
{ cat "$V"; echo '[PAD]'; } >"$T/changed.txt" && ts-tokenize -v "$V" "$T/t.csv" | ts-cat | sed "s|$V|$T/changed.txt|" |
	ts-cat --from-json -o "$T/changed.msgpack"
expect_fail "the vocab the header names, changed since (a token twice): the change named, not the parse" 1 \
	"changed.msgpack: made with the vocab of sha256 ${SHA:0:12}.*changed.txt, the vocab the header names, has changed since" \
	ts-shard -o "$T/z" "$T/changed.msgpack"
expect_fail "without a vocab anywhere ts-train asks for --vocab" 1 "needs the vocab .*--vocab FILE" \
	ts-train --data "$T/bad" --run "$T/rn" "${TINY[@]}" --max-steps 1

# linear time: a 60 MB line from a pipe (quadratic: a minute or more), and
# 200000 label names in a stream's header and a manifest (quadratic: minutes)
check "a 60 MB CSV line from a pipe takes linear time" timeout 15 bash -c \
	"{ echo text; head -c 60000000 /dev/zero | tr '\\0' a; echo; } | cat | ts-tokenize -v '$V' -f csv >/dev/null"
awk 'BEGIN { print "text,label"; for (i = 0; i < 200000; i++) print "a,L" i }' >"$T/labels.csv"
check "ts-shard numbers 200000 labels in linear time" timeout 30 bash -c \
	"ts-tokenize -v '$V' --label label '$T/labels.csv' | ts-shard -o '$T/many' --split train=1 2>/dev/null"
check "a manifest of 200000 labels reads in linear time" timeout 30 \
	ts-train --data "$T/many" --run "$T/rm" --task mlm "${TINY[@]}" --max-steps 1
finish
