# ts-tokenize against the current release of Hugging Face tokenizers, which the
# test venv cannot hold (transformers 4.44 pins 0.19.1): the ids that release
# gave Unicode-heavy lines, committed in tests/fixtures/tokenizers/latest/ by
# tests/fixtures/gen-tokenizers-latest.py (its docstring says how to remake
# them). Each normaliser behind a byte-level BPE of the bare bytes, so every
# byte it makes shows; the families' own files; bert-base-uncased's vocab.txt.
# Where 0.19.1 and the current release differ (lowercasing: Unicode 15 against
# 17), ts-tokenize follows the current one.
. "$(dirname "$0")/../lib.sh"
L=$FIX/tokenizers/latest
# same NAME WANT.ids TS-TOKENIZE-ARGS...: the records of unicode.txt are WANT's
same() {
	local name=$1 want=$2; shift 2
	if ts-tokenize "$@" --max-len 0 -f lines "$L/unicode.txt" | ts-cat --no-header >"$T/got" &&
		cmp -s "$T/got" "$want"; then
		pass "$name: $(wc -l <"$want") lines as tokenizers $(cat "$L/VERSION") has them"
	else
		fail "$name: ids not tokenizers $(cat "$L/VERSION")'s"
		diff "$T/got" "$want" | head -4 | cut -c1-200 | sed 's/^/    /'
	fi
}
for j in "$L"/bytes-*.json; do
	same "$(basename "$j" .json)" "${j%.json}.ids" -t "$j"
done
xz -dc "$FIX/tokenizers/xlm-roberta/tokenizer.json.xz" >"$T/xlm-roberta.json"
same roberta-base "$L/roberta-base.ids" -t "$FIX/tokenizers/roberta-base/tokenizer.json"
same modernbert "$L/modernbert.ids" -t "$FIX/tokenizers/modernbert/tokenizer.json"
same xlm-roberta "$L/xlm-roberta.ids" -t "$T/xlm-roberta.json"
same "bert-base-uncased's vocab.txt" "$L/bert-uncased.ids" -v "$TOP/examples/vocab.txt"
same "bert-base-uncased's vocab.txt, --cased" "$L/bert-cased.ids" -v "$TOP/examples/vocab.txt" --cased
finish
