# ts-tokenize -t with real tokenizer.json files (tests/fixtures/tokenizers/):
# ids identical to Hugging Face tokenizers' on the e-mails and a Unicode
# stress file, single texts, pairs, truncation and folding; the header, the
# tokens shown, word lists; and a tokenizer.json that cannot be read exactly
# refused in one line with nothing written.
. "$(dirname "$0")/../lib.sh"
PY=${TS_PYTHON:-python3}
if ! "$PY" -c 'import tokenizers' 2>/dev/null; then
	fail "tokenizer parity: $PY has no tokenizers (set TS_PYTHON; make test makes build/venv)"
	finish
fi
F=$FIX/tokenizers
MAILS=$TOP/examples/spamassassin.csv
# parity NAME TOKENIZER TS-TOKENIZE-ARGS... -- HF_PARITY-ARGS...
parity() {
	local name=$1 tok=$2; shift 2
	local ours=()
	while [ "$1" != -- ]; do ours+=("$1"); shift; done
	shift
	if ts-tokenize -t "$tok" "${ours[@]}" | ts-cat --no-header | sed 's/,"label":[0-9]*//' >"$T/ours" &&
		"$PY" "$TOP/tests/cli/hf_parity.py" "$tok" "$T/ours" "$@" >"$T/parity"; then
		pass "$name: $(cat "$T/parity")"
	else
		fail "$name"
		sed 's/^/    /' "$T/parity" | head -8
	fi
}
# pairs.csv: e-mails paired with stress lines and e-mails; mix.csv: the
# stress lines and 300 e-mails
"$PY" - "$MAILS" "$F/stress.txt" "$T/pairs.csv" "$T/mix.csv" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))[:500]
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
with open(sys.argv[3], "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["text", "pair"])
    for i, r in enumerate(rows):
        w.writerow([r["text"][:600], lines[i % len(lines)] + " " + rows[(i + 1) % len(rows)]["text"][:300]])
with open(sys.argv[4], "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["text"])
    w.writerows([t] for t in lines + [r["text"] for r in rows[:300]])
PYEOF
mkdir "$T/xlm-roberta"
xz -dc "$F/xlm-roberta/tokenizer.json.xz" >"$T/xlm-roberta/tokenizer.json"
for fam in roberta-base xlm-roberta modernbert; do
	tok=$F/$fam/tokenizer.json
	[ -e "$tok" ] || tok=$T/$fam/tokenizer.json
	parity "$fam: the Unicode stress lines" "$tok" --max-len 0 -f lines "$F/stress.txt" -- --lines "$F/stress.txt"
	parity "$fam: the e-mails whole" "$tok" --max-len 0 --label label "$MAILS" -- --csv "$MAILS"
	parity "$fam: the e-mails cut to 64" "$tok" --max-len 64 --label label "$MAILS" -- --csv "$MAILS" --max-len 64
	parity "$fam: the e-mails folded, 96 with 16 over" "$tok" --max-len 96 --fold --stride 16 --label label "$MAILS" -- \
		--csv "$MAILS" --max-len 96 --fold --stride 16
	parity "$fam: pairs, longest first to 80" "$tok" --max-len 80 --text-pair pair "$T/pairs.csv" -- \
		--csv "$T/pairs.csv" --pair pair --max-len 80
done

# words of many symbols (DNA, one letter, random letters, a repeated pair):
# the merges found by a heap past 48 symbols, in HF's order
"$PY" - "$T/long.txt" <<'PYEOF'
import random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for n in (47, 48, 49, 50, 64, 200, 1000, 3000):
        f.write("".join(r.choice("ACGT") for _ in range(n)) + "\n")
        f.write("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)) + "\n")
        f.write("x" * n + " " + "ab" * (n // 2) + " " + "aab" * (n // 3) + "\n")
PYEOF
for fam in roberta-base modernbert; do
	parity "$fam: words of 47 to 3,000 letters" "$F/$fam/tokenizer.json" --max-len 0 -f lines "$T/long.txt" -- \
		--lines "$T/long.txt"
done

# every component and setting, in files HF tokenizers wrote (hf_variants.py)
R=$F/roberta-base/tokenizer.json
mkdir "$T/variants"
if "$PY" "$TOP/tests/cli/hf_variants.py" "$R" "$T/xlm-roberta/tokenizer.json" "$MAILS" "$T/variants" >"$T/variants.list"; then
	while read -r v; do
		parity "$(basename "$v" .json)" "$v" --max-len 0 "$T/mix.csv" -- --csv "$T/mix.csv"
	done <"$T/variants.list"
else
	fail "hf_variants.py makes the variant tokenizers"
fi

# every code point from U+0080 to U+1FFFF (above are ideographs only)
# after and before a mark, 128 a line: HF takes its character classes and
# normal forms from older Unicode than utf8proc's. BERT's tokenizer.json
# (examples/vocab.txt), and one that splits with the Punctuation
# pre-tokenizer: a word split where HF's is whole is [UNK] against several
# ids; ModernBERT's (NFC), and RoBERTa's with each normal form and
# StripAccents: byte-level, so every character shows.
"$PY" -W ignore - "$TOP/examples/vocab.txt" "$R" "$T" <<'PYEOF'
import sys
from transformers import BertTokenizerFast
from tokenizers import Tokenizer, normalizers, pre_tokenizers
vocab, roberta, out = sys.argv[1:4]
tok = BertTokenizerFast(vocab_file=vocab).backend_tokenizer
tok.save(out + "/bert.json")
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
tok.save(out + "/bert-punct.json")
for name in ("NFC", "NFD", "NFKC", "NFKD", "StripAccents"):
    tok = Tokenizer.from_file(roberta)
    tok.normalizer = getattr(normalizers, name)()
    tok.save(out + "/roberta-" + name + ".json")
cps = [c for c in range(0x80, 0x20000) if not 0xD800 <= c < 0xE000]
with open(out + "/cp.txt", "w", encoding="utf-8") as f:
    for i in range(0, len(cps), 128):
        f.write(" ".join(f"e{chr(c)}\u0301 e\u0301{chr(c)}" for c in cps[i:i + 128]) + "\n")
PYEOF
for v in bert bert-punct roberta-NFC roberta-NFD roberta-NFKC roberta-NFKD roberta-StripAccents; do
	parity "$v: every code point" "$T/$v.json" --max-len 0 -f lines "$T/cp.txt" -- --lines "$T/cp.txt"
done
parity "modernbert: every code point" "$F/modernbert/tokenizer.json" --max-len 0 -f lines "$T/cp.txt" -- --lines "$T/cp.txt"
printf 'e\341\267\266\314\201 \341\253\213\341\252\275 \360\221\244\265\360\221\244\260 \343\213\277\n' >"$T/marks.txt"
for v in roberta-NFC roberta-NFKC; do
	parity "$v: new marks, a new composition, a new compatibility character" "$T/$v.json" --max-len 0 -f lines "$T/marks.txt" -- --lines "$T/marks.txt"
done

expect_eq "the header names the tokenizer.json, its sha256, model and special ids" "$(echo hi | ts-tokenize -t "$R" | ts-cat | head -1)" \
	'{"kind":"tokens","version":1,"vocab":"'"$(sha256sum "$R" | cut -d' ' -f1)"'","vocab_file":"'"$(realpath "$R")"'","tokenizer":{"file":"tokenizer.json","model":"BPE","pad":1,"unk":3,"cls":0,"sep":2,"mask":50264},"labels":[],"max_len":512,"lower":false}'
expect_eq "XLM-R's: a Unigram" "$(echo hi | ts-tokenize -t "$T/xlm-roberta" | ts-cat | head -1 | grep -o '"tokenizer":{[^}]*}')" \
	'"tokenizer":{"file":"tokenizer.json","model":"Unigram","pad":1,"unk":3,"cls":0,"sep":2,"mask":250001}'
echo hi | ts-tokenize -t "$R" -o "$T/hi.msgpack"
expect_eq "ts-shard keeps the tokenizer.json in the data dir" \
	"$(ts-shard -o "$T/d" "$T/hi.msgpack" && ls "$T/d" | grep tokenizer && cmp "$T/d/tokenizer.json" "$R" && echo same)" \
	"$(printf 'tokenizer.json\nsame')"
printf '%s\n' '{"kind":"tokens","version":1,"tokenizer":{"file":"spm.model","model":"Unigram"}}' '{"id":0,"ids":[0,1]}' |
	ts-cat --from-json -o "$T/odd.msgpack"
expect_fail "a header's tokenizer of another kind of file" 1 "header field 'tokenizer.file' is 'spm.model'" ts-shard -o "$T/d2" "$T/odd.msgpack"
# a lone surrogate's escape: Python's json.loads keeps it, and HF makes it
# the three U+FFFD of its bytes; a pair is one character, \\u no escape
printf '%s\n' '{"text":"lone \ud800 x"}' '{"text":"a\udc00\ud800b"}' '{"text":"a\ud83d\ude00b"}' '{"text":"a\\ud800b"}' >"$T/sur.jsonl"
expect_eq "JSON lines: lone surrogates become U+FFFD as HF has them, counted" \
	"$(ts-tokenize -t "$R" "$T/sur.jsonl" 2>"$T/w" | ts-cat --no-header | tr '\n' ' '; sed "s|$T/||" "$T/w")" \
	'{"id":0,"ids":[0,462,1264,1437,48618,3023,2]} {"id":1,"ids":[0,102,48697,47119,428,2]} {"id":2,"ids":[0,102,18636,7471,428,2]} {"id":3,"ids":[0,102,37457,1906,3913,428,2]} ts-tokenize: replaced 9 invalid UTF-8 sequences with U+FFFD, the first in sur.jsonl: line 1'
expect_fail "JSON lines: --strict refuses a lone surrogate" 1 "sur.jsonl: line 1: invalid UTF-8" ts-tokenize --strict -t "$R" "$T/sur.jsonl"
expect_eq "a dir that holds a tokenizer.json" "$(echo 'Hello world' | ts-tokenize -t "$F/roberta-base" | ts-cat --no-header)" \
	'{"id":0,"ids":[0,31414,232,2]}'
# integers past 64 bits (Python's int(1e30)): no matter where unread, refused where read
sed '0,/{/s//{"unread": 1000000000000000019884624838656,/' "$R" >"$T/big-unread.json"
expect_eq "a tokenizer.json with an unread key past 64 bits" "$(echo 'Hello world' | ts-tokenize -t "$T/big-unread.json" | ts-cat --no-header)" \
	'{"id":0,"ids":[0,31414,232,2]}'
sed 's/"Hello":31414/"Hello":100000000000000000000/' "$R" >"$T/big-id.json"
expect_fail "a vocab id past 64 bits is out of range" 1 "big-id.json: model: vocab: the id of 'Hello' is not a whole number in 0\.\.16777215$" \
	ts-tokenize -t "$T/big-id.json" -f lines /dev/null
expect_eq "--show-tokens prints the pieces" "$(echo 'Hello world <mask>' | ts-tokenize -t "$R" --show-tokens)" \
	'{"id":0,"tokens":["<s>","Hello","Ġworld","<mask>","</s>"]}'
expect_eq "--show-tokens with a vocab.txt" "$(echo 'Hello world' | ts-tokenize -v "$TOP/examples/vocab.txt" --show-tokens)" \
	'{"id":0,"tokens":["[CLS]","hello","world","[SEP]"]}'
printf 'The\tO\nlongest\tO\nword\tB\n\nHello\tB\n' >"$T/w.conll"
expect_eq "CoNLL words: the words after the first with the space before them" \
	"$(ts-tokenize -t "$R" "$T/w.conll" | ts-cat --no-header | tr '\n' ' ')" \
	'{"id":0,"ids":[0,133,6463,2136,2],"label":[-100,0,0,1,-100]} {"id":1,"ids":[0,31414,2],"label":[-100,1,-100]} '
expect_fail "--cased with a tokenizer.json" 2 "--cased is for a vocab.txt" ts-tokenize -t "$R" --cased /dev/null
expect_fail "both -t and -v" 2 "one at a time: a tokenizer.json or a vocab.txt" \
	ts-tokenize -t "$R" -v "$TOP/examples/vocab.txt" /dev/null
expect_fail "a tokenizer.json given to -v" 2 "ts-tokenize: -v $R: a tokenizer.json, which -t reads" \
	ts-tokenize -v "$R" -f lines /dev/null
expect_fail "--max-len below the template's specials" 2 "--max-len must be at least 3" ts-tokenize -t "$R" --max-len 2 -f lines /dev/null

# bad tokenizer.json files: one line each, exit 1, no output file
bad() {
	local name=$1 pat=$2 file=$3
	expect_fail "refused: $name" 1 "$pat" ts-tokenize -t "$file" -o "$T/out.msgpack" "$F/stress.txt"
	if [ -e "$T/out.msgpack" ]; then fail "refused: $name: an output was written"; fi
}
mutate() {   # mutate OUT PYTHON-STATEMENTS-ON-j
	"$PY" -c 'import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"))' "$R" "$T/$1" "$2"
}
head -c 100000 "$R" >"$T/cut.json"
bad "a file cut short" "cut.json: line [0-9]+: " "$T/cut.json"
printf '{"model": {"type": "BPE", "vocab": {"a": 0,}, "merges": []}}' >"$T/malformed.json"
bad "malformed JSON" "malformed.json: line 1: " "$T/malformed.json"
mutate outside.json 'j["model"]["vocab"]["Ġthe"] = 99999999999'
bad "a vocab id out of range" "model: vocab: the id of 'Ġthe' is not a whole number in 0..16777215" "$T/outside.json"
mutate twice.json 'j["model"]["vocab"]["Ġthe"] = 0'
bad "two tokens with one id" "model: vocab: '.*' and '.*' have the same id 0" "$T/twice.json"
mutate merge.json 'j["model"]["merges"][5] = "Ġ zzzunknown"'
bad "a merge of an unknown token" "model: merge 6 names 'zzzunknown', which is not in the vocab" "$T/merge.json"
mutate regex.json 'j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False}'
bad "a regex PCRE2 refuses" "pre_tokenizer: the regex /\(unclosed/ is refused: missing closing parenthesis" "$T/regex.json"
mutate scripts.json 'j["pre_tokenizer"] = {"type": "UnicodeScripts"}'
bad "a component TopSpin does not have" "scripts.json: pre_tokenizer 'UnicodeScripts' is not supported" "$T/scripts.json"
mutate dropout.json 'j["model"]["dropout"] = 0.1'
bad "BPE dropout, which would tokenize a text otherwise every time" \
	"dropout.json: model: \"dropout\" is not supported: records must be the same every time" "$T/dropout.json"
mutate nodropout.json 'j["model"]["dropout"] = 0.0'
expect_same "...but a dropout of 0 is none" "$(ts-tokenize -t "$T/nodropout.json" "$F/stress.txt" | ts-cat --no-header)" \
	"$(ts-tokenize -t "$R" "$F/stress.txt" | ts-cat --no-header)"
mutate clsid.json 'j["post_processor"]["cls"] = ["<s>", -3]'
bad "a post-processor's token of an id out of range" "clsid.json: post_processor: \"cls\": the id -3 is outside 0..16777215" \
	"$T/clsid.json"
mutate nomodel.json 'del j["model"]'
bad "no model" "nomodel.json: model: missing or not an object" "$T/nomodel.json"
R=$F/modernbert/tokenizer.json mutate tokens.json 'j["post_processor"]["special_tokens"]["[CLS]"]["tokens"] = []'
bad "a template's special token of more ids than tokens" "special token '\\[CLS\\]' has not as many tokens as ids" "$T/tokens.json"
truncate -s 100M "$T/huge.json"
bad "a 100 MB file" "huge.json: 104857600 bytes, more than a tokenizer.json holds" "$T/huge.json"
bad "a device" "/dev/null: not a regular file" /dev/null
mkdir "$T/empty"
bad "a dir without one" "empty/tokenizer.json: No such file" "$T/empty"
printf 'text,label\nhi,x\n' >"$T/text.csv"
bad "a file that is not JSON: said so, with jansson's why" "text.csv: line 1: not JSON: '.' or '.' expected near 'text'$" "$T/text.csv"
finish
