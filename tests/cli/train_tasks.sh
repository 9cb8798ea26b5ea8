# The tasks beyond cls and mlm, end to end on small made-up corpora that a
# tiny model learns: token classification (CoNLL and JSON word lists, tags
# on first pieces, entity scores, predictions, BertForTokenClassification),
# regression (Pearson, Spearman), multi-label classification (thresholds),
# and sentence pairs; and the mistakes a user can make with them.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
TINY=(--vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 64 --batch 16 --seed 5 -j 2)
SMALL=(--vocab "$V" --layers 2 --hidden 64 --heads 4 --ffn 128 --max-pos 64 --batch 16 --seed 5 -j 2)
PY=${TS_PYTHON:-python3}

# --- token classification ---
# sentences of 8 words: names are B-PER, cities B-LOC (two of them two words, B- then I-)
awk "$RAND"' BEGIN { seed(7); split("alice bob carol dave erin frank", n, " "); split("paris london berlin rome", c, " ")
	split("went to saw the in and met", w, " ")
	for (s = 0; s < 300; s++) { for (k = 0; k < 8; k++) { r = int(rnd() * 5)
		if (r == 0) print n[int(rnd() * 6) + 1] " NNP B-PER"
		else if (r == 1) print c[int(rnd() * 4) + 1] " NNP B-LOC"
		else if (r == 2) { print "new NNP B-LOC"; print "york NNP I-LOC"; k++ }
		else print w[int(rnd() * 7) + 1] " XX O" }
	print "" } }' >"$T/ner.conll"
printf -- '-DOCSTART- -X- O\n\nunbelievably RB O\nalice NNP B-PER\n\n' >"$T/pieces.conll"
check "ts-tokenize reads CoNLL" ts-tokenize -v "$V" -o "$T/pieces.rec" "$T/pieces.conll"
expect_eq "CoNLL: a tag on each word's first piece, -100 on the others and on [CLS] and [SEP]" \
	"$(ts-cat "$T/pieces.rec" | jq -c 'select(.ids) | [(.ids | length), .label]')" '[8,[-100,0,-100,-100,-100,-100,1,-100]]'
expect_eq "CoNLL: the tags are the label names, in order of first appearance" \
	"$(ts-cat "$T/pieces.rec" | head -n 1 | jq -c .labels)" '["O","B-PER"]'
printf '{"tokens": ["unbelievably", "alice"], "tags": ["O", "B-PER"]}\n' >"$T/words.jsonl"
check "ts-tokenize reads JSON word lists" ts-tokenize -v "$V" --text tokens --label tags -o "$T/words.rec" "$T/words.jsonl"
expect_eq "a JSON word list gives the records CoNLL gives" "$(ts-cat "$T/words.rec" | jq -c 'select(.ids) | [.ids, .label]')" \
	"$(ts-cat "$T/pieces.rec" | jq -c 'select(.ids) | [.ids, .label]')"
printf '{"tokens": ["alice", "went"]}\n' >"$T/untagged.jsonl"
check "a word list without tags" ts-tokenize -v "$V" --text tokens -o "$T/untagged.rec" "$T/untagged.jsonl"
expect_eq "marks each word's first piece -1: predicted, not scored" \
	"$(ts-cat "$T/untagged.rec" | jq -c 'select(.ids) | .label')" '[-100,-1,-1,-100]'
printf '{"tokens": [], "tags": []}\n' >"$T/nowords.jsonl"
expect_eq "a list of no words: a record of no word, as HF aligns it, tagged or not" \
	"$(for l in "--label tags" ""; do ts-tokenize -v "$V" --text tokens $l "$T/nowords.jsonl" | ts-cat | jq -c 'select(.ids) | .label'; done | tr '\n' ' ')" \
	'[-100,-100] [-100,-100] '
printf '{"tokens": ["alice", "went"], "tags": ["B-PER"]}\n' >"$T/short.jsonl"
expect_fail "words and tags of different counts: refused" 1 "line 1: 2 words but 1 tags" \
	ts-tokenize -v "$V" --text tokens --label tags "$T/short.jsonl"
printf '{"tokens": ["alice"], "tags": "B-PER"}\n' >"$T/one.jsonl"
expect_fail "a word list with one label, not a list of tags: refused as such" 1 \
	"line 1: a list of words takes a list of tags, one a word, not one label" \
	ts-tokenize -v "$V" --text tokens --label tags "$T/one.jsonl"
expect_fail "--label on CoNLL: refused" 2 "conll input has its words and tags in fixed columns" \
	ts-tokenize -v "$V" --label tag "$T/ner.conll"
ts-tokenize -v "$V" --max-len 12 --fold "$T/ner.conll" | ts-shard -o "$T/ner" --split train=.8,valid=.2 --seed 1 >/dev/null
expect_eq "folded sentences keep a tag list the length of their tokens" \
	"$(ts-cat "$T/ner/train"* | jq -c 'select(.ids) | (.ids | length) == (.label | length)' | sort -u)" true
ts-tokenize -v "$V" --max-len 8 --fold --stride 3 -o "$T/strided.rec" "$T/ner.conll"
expect_eq "folded with overlap, each word is tagged in one piece only: trained and scored once" \
	"$(ts-cat "$T/strided.rec" | jq -s 'map(.label // [] | map(select(. != -100)) | length) | add')" \
	"$(grep -c . "$T/ner.conll")"
check "tokcls training" train "${TINY[@]}" --data "$T/ner" --run "$T/tok" --task tokcls --epochs 3 --lr 2e-3 --eval-every 20
expect_eq "tokcls: best/ follows the entity F1" "$(ts-cat "$T/tok/events.msgpack" | jq -r 'select(.event=="best") | .metric' | sort -u)" entity-f1
expect_eq "ts-top shows the entity F1 of the best evaluation, as best/ follows it" \
	"$(ts-top --json "$T/tok" | jq -c '.[0] | [.metric, .best]')" \
	"$(ts-cat "$T/tok/events.msgpack" | jq -sc '[.[] | select(.event=="best")] | last | ["entity-f1", .value]')"
check "a sweep of tokcls jobs" sh -c "timeout 300 ts-sweep -P 2 -p lr=1e-4,2e-3 --dir '$T/tsw' -- ts-train ${TINY[*]} \
	--data '$T/ner' --task tokcls --max-steps 6 --eval-every 3 >/dev/null"
expect_eq "its leaderboard ranks by the entity F1 by default, as the jobs' best/" \
	"$(ts-sweep --show "$T/tsw" --format json | jq -c '[.[0].metric, (.[0].value == .[0].best.entities.micro.f1)]')" '["entity-f1",true]'
expect_eq "or by the word accuracy when asked" \
	"$(ts-sweep --show "$T/tsw" --format json --metric accuracy | jq -c '[.[] | .value == .best.accuracy] | unique')" '[true]'
check "ts-eval scores the entities" ts-eval -m "$T/tok/best" --data "$T/ner" --split valid
cp "$T/out" "$T/tok.json"
expect_eq "tokcls learns the entities (micro F1 above 0.9)" "$(jq '.entities.micro.f1 > 0.9' "$T/tok.json")" true
expect_eq "entity types as seqeval names them" "$(jq -c '.entities.classes | keys' "$T/tok.json")" '["LOC","PER"]'
expect_eq "the word accuracy" "$(jq '.accuracy > 0.9' "$T/tok.json")" true
check "ts-eval --report: entities, then the tags of words" ts-eval -m "$T/tok/best" --data "$T/ner" --split valid --report
expect_eq "the report's sections" "$(grep -cE '^entities$|^tags of words$|micro avg|confusion matrix' "$T/out")" 4
check "ts-eval --predict on untagged words" ts-eval -m "$T/tok/best" --predict -o "$T/tok.pred" "$T/untagged.rec"
expect_eq "a predicted tag per word, by name" "$(ts-cat "$T/tok.pred" | jq -c '[(.pred | length), .pred_names[0]]')" '[2,"B-PER"]'
# an official test file tokenized on its own numbers its tags otherwise: they
# are scored by name, as when --labels gives them the model's numbers
{ printf 'paris NNP B-LOC\nnew NNP B-LOC\nyork NNP I-LOC\nwent XX O\nalice NNP B-PER\n\n'
	awk 'BEGIN { RS = ""; ORS = "\n\n" } NR > 250' "$T/ner.conll"; } >"$T/test.conll"
ts-tokenize -v "$V" --max-len 12 --fold -o "$T/test.rec" "$T/test.conll"
jq -r '.id2label | to_entries | sort_by(.key | tonumber) | .[].value' "$T/tok/best/config.json" >"$T/tags.txt"
expect_eq "CoNLL test file on its own: its tags in another order than the model's" \
	"$(ts-cat "$T/test.rec" | head -n 1 | jq -c .labels) $(jq -cR . "$T/tags.txt" | jq -sc .)" \
	"[\"B-LOC\",\"I-LOC\",\"O\",\"B-PER\"] $(jq -cR . "$T/tags.txt" | jq -sc .)"
check "CoNLL: --labels FILE numbers the tags as the model does" \
	ts-tokenize -v "$V" --max-len 12 --fold --labels "$T/tags.txt" -o "$T/test-numbered.rec" "$T/test.conll"
check "ts-eval scores the test file tokenized on its own" ts-eval -m "$T/tok/best" "$T/test.rec"
cp "$T/out" "$T/test.json"
check "ts-eval scores the test file numbered as the model" ts-eval -m "$T/tok/best" "$T/test-numbered.rec"
expect_same "by name, the same scores as numbered as the model" "$(cat "$T/test.json")" "$(cat "$T/out")"
expect_eq "and they are the model's scores (entity F1 above 0.9)" "$(jq '.entities.micro.f1 > 0.9' "$T/test.json")" true
printf 'paris NNP B-LOC\nacme NNP B-ORG\nwent XX O\nzeta NNP B-MISC\n\n' >"$T/org.conll"
ts-tokenize -v "$V" -o "$T/org.rec" "$T/org.conll"
expect_fail "a tag the model does not know: named" 1 \
	"-m .*/tok/best: it knows no class B-ORG, B-MISC of the data's \(its labels: .*\)$" ts-eval -m "$T/tok/best" "$T/org.rec"
expect_fail "--labels on lines input: refused" 2 "--labels names the classes of --label COL or of conll input's tags" \
	ts-tokenize -v "$V" --labels "$T/tags.txt" -f lines "$T/test.conll"
printf 'alice B-PER\nwent O\n\nbob\nwent\n\n' >"$T/part.conll"
ts-tokenize -v "$V" "$T/part.conll" | ts-shard -o "$T/part" --split train=1 >/dev/null
expect_fail "words without tags do not train: refused before step 1" 1 "record [12]: word at token 1 has no tag" \
	train "${TINY[@]}" --data "$T/part" --run "$T/part-run" --task tokcls --max-steps 2
check "...with no run dir made" test ! -e "$T/part-run"
# tags as numbers (a dataset's ner_tags) name no entities: entity F1 is refused, not scored as 0
for i in $(seq 40); do echo '{"words": ["alice", "went", "to", "paris"], "tags": [1, 0, 0, 2]}'; done >"$T/numbered.jsonl"
ts-tokenize -v "$V" --text words --label tags "$T/numbered.jsonl" | ts-shard -o "$T/numbered" --split train=.5,valid=.5 >/dev/null
expect_fail "numbered tags: entity F1, tokcls's default, is refused before a run dir" 1 \
	"numbered numbers its tags, which name no entities: --metric entity-f1 \(tokcls's default\) needs them named" \
	train "${TINY[@]}" --data "$T/numbered" --run "$T/num-run" --task tokcls --max-steps 2
check "...with no run dir made" test ! -e "$T/num-run"
check "numbered tags: --metric accuracy trains" train "${TINY[@]}" --data "$T/numbered" --run "$T/num-acc" --task tokcls --max-steps 2 --metric accuracy
expect_eq "...its evaluations score words, and no entities" \
	"$(ts-cat "$T/num-acc/events.msgpack" | jq -c 'select(.event == "eval") | [has("accuracy"), has("entities")]' | sort -u)" '[true,false]'
check "ts-eval of its model (classes LABEL_0, ...)" ts-eval -m "$T/num-acc/best" --data "$T/numbered" --split valid
expect_eq "...scores no entities of the names LABEL_0, ... either" "$(jq -c '[has("accuracy"), has("entities")]' "$T/out")" '[true,false]'
check "...and its report has the tags of words alone" sh -c "ts-eval -m '$T/num-acc/best' --data '$T/numbered' --split valid --report | head -n 1 | grep -qx 'tags of words'"
expect_eq "the model dir is a BertForTokenClassification" "$(jq -r '.architectures[0]' "$T/tok/best/config.json")" \
	BertForTokenClassification
if "$PY" -c 'import transformers' 2>/dev/null; then
	check "transformers loads it whole and predicts the same tags" "$PY" - "$T/tok/best" "$T/pieces.rec" <<'PY'
import json, subprocess, sys, torch
from transformers import BertForTokenClassification
model, info = BertForTokenClassification.from_pretrained(sys.argv[1], output_loading_info=True)
assert not any(info.values()), info
rec = [json.loads(l) for l in subprocess.run(["ts-cat", sys.argv[2]], capture_output=True, text=True).stdout.splitlines()][1]
logits = model.eval()(input_ids=torch.tensor([rec["ids"]])).logits[0]
ours = json.loads(subprocess.run(["sh", "-c", "ts-eval -m %s --predict %s | ts-cat" % (sys.argv[1], sys.argv[2])],
                                 capture_output=True, text=True).stdout)
theirs = [int(logits[i].argmax()) for i, t in enumerate(rec["label"]) if t != -100]
assert theirs == ours["pred"], (theirs, ours)
PY
else
	fail "transformers loads it whole and predicts the same tags (no python with transformers: set TS_PYTHON)"
fi

# --- regression: the share of "good" words in a line ---
awk "$RAND"' BEGIN { seed(3); split("good fine bad poor meh", w, " ")
	for (i = 0; i < 400; i++) { g = 0; t = ""; for (k = 0; k < 6; k++) { x = int(rnd() * 5) + 1; t = t " " w[x]; g += x <= 2 }
		printf "{\"text\": \"%s\", \"score\": %.4f}\n", t, g / 6 } }' >"$T/reg.jsonl"
ts-tokenize -v "$V" --label score "$T/reg.jsonl" | ts-shard -o "$T/reg" --split train=.8,valid=.2 --seed 1 >/dev/null
check "reg training" train "${TINY[@]}" --data "$T/reg" --run "$T/reg-run" --task reg --epochs 6 --lr 2e-3 --metric pearson
expect_eq "ts-top shows the run's --metric pearson" "$(ts-top --json "$T/reg-run" | jq -c '.[0] | [.metric, .best > 0.9]')" '["pearson",true]'
check "ts-eval scores a regression" ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid
cp "$T/out" "$T/reg.json"
expect_eq "reg: mse, rmse, pearson and spearman" "$(jq -c '[.mse == .loss, (.rmse * .rmse - .mse | fabs < 1e-9), .pearson > 0.9, .spearman > 0.9]' "$T/reg.json")" \
	'[true,true,true,true]'
expect_eq "reg: no perplexity (e to a squared error means nothing)" "$(jq -c 'has("ppl")' "$T/reg.json")" false
expect_fail "reg: --metric ppl refused" 2 "--metric ppl does not apply to the reg task" \
	train "${TINY[@]}" --data "$T/reg" --run "$T/reg-ppl" --task reg --metric ppl
# a valid split whose scores are all one: Pearson is undefined (nan) at every evaluation
head -n 40 "$T/reg.jsonl" | sed 's/"score": [0-9.]*/"score": 0.5/' >"$T/flat.jsonl"
ts-tokenize -v "$V" --label score -o "$T/flat.rec" "$T/flat.jsonl"
ts-tokenize -v "$V" --label score "$T/reg.jsonl" | ts-shard -o "$T/flat" --split "train=rest,valid=@$T/flat.rec" >/dev/null
check "a valid split of one score, Pearson undefined at every evaluation: the run ends well" \
	train "${TINY[@]}" --data "$T/flat" --run "$T/flat-run" --task reg --metric pearson --max-steps 6 --eval-every 2
expect_eq "...saying so, its evaluations' Pearson null, none the best, and best/ the last model" \
	"$(grep -c "no evaluation gave a valid pearson (each was nan): best/ is the last model" "$T/err") \
$(ts-cat "$T/flat-run/events.msgpack" | jq -c 'select(.event=="eval") | .pearson' | sort -u) \
$(ts-cat "$T/flat-run/events.msgpack" | jq -c 'select(.event=="best")' | wc -l) \
$(cmp -s "$T/flat-run/best/model.safetensors" "$T/flat-run/final/model.safetensors" && echo same)" "1 null 0 same"
expect_eq "reg: the model dir says regression" "$(jq -c '[.problem_type, .num_labels // (.id2label | length)]' "$T/reg-run/best/config.json")" '["regression",1]'
# the CPU scores a batch in slices of at most 2,048 tokens: the training
# records (about 320 of 8 to 12 tokens), shortest first, in one batch go
# through the model as two slices, as two batches cut where the first slice
# ends do, and each record keeps its own score (the cut found from the
# records' lengths, before the last record)
read -r records cut < <(ts-cat --no-header "$T/reg/train.shard" | jq -rs '[.[].ids | length] | sort |
	[length, (reduce .[] as $l ({t: 0, n: 0, cut: false};
		if .cut or .t + $l > 2048 then .cut = true else .t += $l | .n += 1 end) | .n)] | @tsv')
expect_eq "reg: the 2,048 tokens end before the last of the $records training records" "$((cut < records && records <= 400))" 1
regeval() { ts-eval -m "$T/reg-run/best" --data "$T/reg" --split train --batch "$@"; }
expect_same "reg: a batch cut in two slices scores each record as two batches do" \
	"$(regeval 400 --predict | ts-cat | jq -c '[.id, .pred]')" "$(regeval "$cut" --predict | ts-cat | jq -c '[.id, .pred]')"
expect_same "reg: and its metrics are the same" "$(regeval 400)" "$(regeval "$cut")"
check "reg: --predict" ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid --predict --csv
expect_eq "reg: a number a record" "$(head -n 1 "$T/out"; sed -n 2p "$T/out" | awk -F, '{ print ($2 == $2 + 0) }')" "id,pred
1"
expect_fail "--merge-folds of a regression without --predict: refused" 2 "goes with --predict: its metrics are by record" \
	ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid --merge-folds
check "--merge-folds --predict of a regression" ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid --merge-folds --predict -o "$T/reg.pred"
expect_same "a prediction per id" "$(ts-cat "$T/reg.pred" | jq -r .id | sort -u | grep -c .)" \
	"$(ts-cat "$T/reg.pred" | grep -c . | grep -vx 0)"
# a regression from CSV: the label column read as numbers with --numeric-labels
jq -r '[.text, .score] | @csv' "$T/reg.jsonl" | sed '1i text,score' >"$T/reg.csv"
check "ts-tokenize --numeric-labels on a CSV" ts-tokenize -v "$V" --label score --numeric-labels -o "$T/reg-csv.rec" "$T/reg.csv"
expect_same "a CSV's numbers are the labels JSON's numbers give" "$(ts-cat --no-header "$T/reg-csv.rec" | jq -c '[.ids, .label]')" \
	"$(ts-tokenize -v "$V" --label score "$T/reg.jsonl" | ts-cat --no-header | jq -c '[.ids, .label]')"
printf '{"text": "good", "y": 3}\n{"text": "bad", "y": "-2.5"}\n' >"$T/ints.jsonl"
expect_eq "--numeric-labels: JSON integers and numbers in strings are numbers too" \
	"$(ts-tokenize -v "$V" --label y --numeric-labels "$T/ints.jsonl" | ts-cat --no-header | jq -c .label | paste -sd' ')" "3 -2.5"
printf '{"text": "good", "y": 2.5}\n{"text": "bad", "y": 3}\n' >"$T/mixed.jsonl"
expect_fail "JSON numbers of which one is whole (a class otherwise): refused where it is, saying how" 1 \
	"mixed.jsonl: line 2: the label is a class, but .*mixed.jsonl: line 1's is a number \(--numeric-labels reads every label as a number\)$" \
	ts-tokenize -v "$V" --label y -o "$T/mixed.rec" "$T/mixed.jsonl"
check "...and no output is left" test ! -e "$T/mixed.rec"
printf '{"text": "good", "y": ["a"]}\n{"text": "bad", "y": "b"}\n' >"$T/mixed2.jsonl"
expect_fail "a list of classes, then one class: refused" 1 "mixed2.jsonl: line 2: the label is a class, but .*line 1's is a list$" \
	ts-tokenize -v "$V" --label y "$T/mixed2.jsonl"
ts-tokenize -v "$V" --label score "$T/reg.csv" | ts-shard -o "$T/reg-names" --split train=.8,valid=.2 --seed 1 >/dev/null
expect_fail "--task reg on a CSV's numbers read as class names: refused, saying how" 1 \
	"reg-names: the labels are the names of [0-9]+ classes, not numbers; --task reg takes a number a record" \
	train "${TINY[@]}" --data "$T/reg-names" --run "$T/reg-names-run" --task reg --max-steps 1
check "a run refused for its labels leaves no run dir" test ! -e "$T/reg-names-run"
printf 'text,score\ngood,0.5\nbad,  high \n' >"$T/word.csv"
expect_fail "--numeric-labels: a label that is no number: refused" 1 "word.csv: line 3: label 'high' is not a decimal number \\(--numeric-labels\\)" \
	ts-tokenize -v "$V" --label score --numeric-labels -o "$T/word.rec" "$T/word.csv"
check "nothing written" test ! -e "$T/word.rec"
printf 'text,score\ngood,1e39\n' >"$T/big.csv"
expect_fail "--numeric-labels: a number beyond a float: refused" 1 "line 2: label '1e39' is beyond a float's range" \
	ts-tokenize -v "$V" --label score --numeric-labels "$T/big.csv"
printf 'text,score\nhello,0x10\n' >"$T/hex.csv"
expect_fail "--numeric-labels: C's hex is no decimal number" 1 "line 2: label '0x10' is not a decimal number" \
	ts-tokenize -v "$V" --label score --numeric-labels "$T/hex.csv"
printf '{"text":"hi","label":1e39}\n' >"$T/bigj.jsonl"
expect_fail "a JSON number label beyond a float: refused" 1 "bigj.jsonl: line 1: field 'label' is a number beyond a float's range" \
	ts-tokenize -v "$V" --label label "$T/bigj.jsonl"
printf 'text,label\nhello,\n' >"$T/nolabel.csv"
expect_fail "an empty label: refused, not a class named ''" 1 "nolabel.csv: line 2: the label is empty" \
	ts-tokenize -v "$V" --label label "$T/nolabel.csv"
printf 'text,label,text\nhello,a,b\n' >"$T/twice.csv"
expect_fail "a column named twice: refused, not the first taken" 1 "twice.csv: columns 1 and 3 are both named 'text'" \
	ts-tokenize -v "$V" --label label "$T/twice.csv"
expect_fail "--numeric-labels without --label: a usage error" 2 "^ts-tokenize: --numeric-labels reads the labels of --label COL" \
	ts-tokenize -v "$V" --numeric-labels "$T/reg.csv"
expect_fail "--numeric-labels with --labels: a usage error" 2 "^ts-tokenize: --numeric-labels and --labels are one at a time" \
	ts-tokenize -v "$V" --label score --labels "$T/word.csv" --numeric-labels "$T/reg.csv"
expect_fail "reg on class lists: refused" 1 "ner: the labels are lists; train them with --multi-label \\(classes of a record\\) or --task tokcls" \
	train "${TINY[@]}" --data "$T/ner" --run "$T/reg-bad" --task reg --max-steps 1

# --- multi-label: each of three topics when its word is in the line ---
awk "$RAND"' BEGIN { seed(5); split("ball vote cash", w, " "); split("sport politics money", t, " ")
	for (i = 0; i < 400; i++) { s = "the"; l = ""; for (k = 1; k <= 3; k++) if (rnd() < 0.5) { s = s " " w[k]; l = l (l ? "," : "") "\"" t[k] "\"" }
		printf "{\"text\": \"%s news\", \"topics\": [%s]}\n", s, l ? l : "\"none\"" } }' >"$T/multi.jsonl"
ts-tokenize -v "$V" --label topics "$T/multi.jsonl" | ts-shard -o "$T/multi" --split train=.8,valid=.2 --seed 1 >/dev/null
check "multi-label training" train "${SMALL[@]}" --data "$T/multi" --run "$T/multi-run" --task cls --multi-label --epochs 20 \
	--lr 1e-3 --warmup 0.1 --dropout 0
expect_eq "multi-label: best/ follows the micro F1" "$(ts-cat "$T/multi-run/events.msgpack" | jq -r 'select(.event=="best") | .metric' | sort -u)" micro-f1
expect_eq "ts-top shows the micro F1 of a multi-label run" "$(ts-top --json "$T/multi-run" | jq -c '.[0] | [.metric, .best > 0.9]')" '["micro-f1",true]'
check "ts-eval scores each class" ts-eval -m "$T/multi-run/best" --data "$T/multi" --split valid
cp "$T/out" "$T/multi.json"
expect_eq "multi-label learns the topics (micro F1 above 0.9)" "$(jq -c '[.micro.f1 > 0.9, .exact_match > 0.7, .threshold, (.classes | keys)]' "$T/multi.json")" \
	'[true,true,0.5,["money","none","politics","sport"]]'
check "--threshold 0.99 predicts fewer classes" ts-eval -m "$T/multi-run/best" --data "$T/multi" --split valid --threshold 0.99
expect_eq "so its recall is lower" \
	"$(jq -c --slurpfile a "$T/multi.json" '[.threshold, .micro.recall < $a[0].micro.recall]' "$T/out")" '[0.99,true]'
expect_eq "the model dir says multi-label" "$(jq -r .problem_type "$T/multi-run/best/config.json")" multi_label_classification
check "multi-label --predict" ts-eval -m "$T/multi-run/best" --data "$T/multi" --split valid --predict -o "$T/multi.pred"
expect_eq "the classes at the threshold, by number and name, with a probability each" \
	"$(ts-cat "$T/multi.pred" | head -n 1 | jq -c '[(.pred | length) == (.pred_names | length), (.probs | length)]')" '[true,4]'
expect_fail "--multi-label with --task reg: refused" 2 "--multi-label goes with --task cls" \
	train "${TINY[@]}" --data "$T/multi" --run "$T/bad" --task reg --multi-label
expect_fail "--threshold without --multi-label: refused" 2 "--threshold goes with --multi-label" \
	train "${TINY[@]}" --data "$T/multi" --run "$T/bad" --threshold 0.3
expect_fail "a metric of another task: refused" 2 "--metric pearson does not apply to the multi task" \
	train "${TINY[@]}" --data "$T/multi" --run "$T/bad" --task cls --multi-label --metric pearson
expect_fail "ts-eval --threshold on a regression model: refused" 2 "--threshold is for multi-label models" \
	ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid --threshold 0.3
for o in "--mask-prob 0.3" "--seed 4"; do
	expect_fail "ts-eval $o on a regression model: refused" 2 \
		"--mask-prob, --whole-word, --max-ngram and --seed are for masked language models" \
		ts-eval -m "$T/reg-run/best" --data "$T/reg" --split valid $o
done

# --- sentence pairs: does the second text name the first's colour? ---
awk "$RAND"' BEGIN { seed(9); split("red green blue black white", c, " "); print "a,b,label"
	for (i = 0; i < 400; i++) { x = c[int(rnd() * 5) + 1]; y = rnd() < 0.5 ? x : c[int(rnd() * 5) + 1]
		printf "the %s car,it is %s,%s\n", x, y, x == y ? "same" : "other" } }' >"$T/pairs.csv"
ts-tokenize -v "$V" --text a --text-pair b --label label "$T/pairs.csv" | ts-shard -o "$T/pairs" --split train=.8,valid=.2 --seed 1 >/dev/null
expect_eq "pairs carry token types, 0 then 1" "$(ts-cat "$T/pairs/train"* | jq -c 'select(.types) | .types | [.[0], .[-1]]' | sort -u)" '[0,1]'
check "sentence-pair training" train "${SMALL[@]}" --data "$T/pairs" --run "$T/pairs-run" --epochs 30 --lr 1e-3 \
	--warmup 0.1 --dropout 0
check "ts-eval on pairs" ts-eval -m "$T/pairs-run/best" --data "$T/pairs" --split valid
expect_eq "pairs: learnt from both texts (accuracy above 0.9)" "$(jq '.accuracy > 0.9' "$T/out")" true
finish
