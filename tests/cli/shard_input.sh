# Awkward input and output for ts-tokenize and ts-shard, each case one that
# once went wrong quietly or with an error beside the point.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=1
tok() { timeout 60 ts-tokenize -v "$V" "$@"; }
shard() { timeout 60 ts-shard --split train=1 "$@"; }
msgpack() { timeout 60 ts-cat --from-json "$@"; }
echo hello | tok -o "$T/hello.msgpack"

# a data dir's shard given where a token stream belongs: said what it is
shard -o "$T/d1" "$T/hello.msgpack" >/dev/null
expect_fail "ts-shard of a shard" 1 "d1/train.shard: a shard of a data dir, not a token stream" shard -o "$T/d2" "$T/d1/train.shard"
expect_fail "ts-eval of a shard: --data named" 1 "d1/train.shard: a shard of a data dir, not a token stream: give the dir as --data DIR" \
	timeout 60 ts-eval -m "$FIX/hf/tiny-cls" "$T/d1/train.shard"

# text given where token records belong: said to look like text
printf 'text,label\nhello,x\n' >"$T/hello.csv"
expect_fail "ts-shard of a CSV" 1 "^ts-shard: $T/hello.csv: record 1: not a map: it looks like text, not msgpack records$" \
	shard -o "$T/d3" "$T/hello.csv"
expect_fail "ts-eval of JSON lines, from standard input" 1 \
	"^ts-eval: standard input: record 1: not a map: it looks like text, not msgpack records$" \
	timeout 60 ts-eval -m "$FIX/hf/tiny-cls" <<<'{"text":"hello"}'

# -o /dev/stdout into a pipe is written in place; a replaced file keeps its permissions
to_pipe() ( set -o pipefail; echo hi | tok -o /dev/stdout | timeout 60 ts-cat --no-header )
check "-o /dev/stdout into a pipe" to_pipe
expect_eq "gives the records" "$(cat "$T/out")" '{"id":0,"ids":[101,7632,102]}'
echo old >"$T/private.msgpack" && chmod 600 "$T/private.msgpack"
echo hi | tok -o "$T/private.msgpack"
expect_eq "ts-tokenize -o keeps a file's permissions" "$(stat -c %a "$T/private.msgpack")" 600
chmod 640 "$T/private.msgpack" && ln -s private.msgpack "$T/private.link"
timeout 60 ts-cat -o "$T/private.link" "$T/hello.msgpack"
expect_eq "ts-cat -o keeps them through a link" "$(stat -c %a "$T/private.msgpack")" 640

# The records of a labelled CSV wait in a temp file for the header; its last
# piece (here all of them: under 4 KiB) is written only when it is read
# back, and that write may fail too.
{ echo text,label; for i in $(seq 100); do echo "word $i,l$((i % 3))"; done; } >"$T/labelled.csv"
small_files() { (trap '' XFSZ; ulimit -f 1; "$@"); }
expect_fail "a temp file that cannot be written is an error, not lost records" 1 \
	"cannot write a temporary file in .*: File too large" small_files tok --label label -o /dev/null "$T/labelled.csv"
check "the same without the limit" tok --label label -o "$T/labelled.msgpack" "$T/labelled.csv"
expect_eq "and it holds every record" "$(timeout 60 ts-cat --no-header "$T/labelled.msgpack" | wc -l)" 100

# label names: no NUL byte, valid UTF-8
printf 'text,label\nhello,a\000b\nworld,a\000b\nfoo,a\n' >"$T/nul.csv"
expect_fail "a NUL byte in a CSV label" 1 "nul.csv: line 2: the label holds a NUL byte" \
	tok --label label -o "$T/out.msgpack" "$T/nul.csv"
printf 'hello\tO\nwor\000ld\tB-X\000Y\n\n' >"$T/nul.conll"
expect_fail "a NUL byte in a CoNLL tag" 1 "nul.conll: line 1: the label holds a NUL byte" tok -o "$T/out.msgpack" "$T/nul.conll"
printf 'hello\tO\nwor\000ld\tB-X\n\n' >"$T/nulword.conll"
expect_eq "a NUL byte in a CoNLL word is data, as in text (BERT's cleaning drops it), not its end" \
	"$(tok "$T/nulword.conll" | timeout 60 ts-cat --no-header)" '{"id":0,"ids":[101,7592,2088,102],"label":[-100,0,1,-100]}'
printf 'text\tlabel\nhello\tsp\377m\n' >"$T/bad.tsv"
expect_fail "a TSV label not in UTF-8" 1 "bad.tsv: line 2: the label is not valid UTF-8" \
	tok --label label -o "$T/out.msgpack" "$T/bad.tsv"
printf 'text,label\nhi,spam\nyo,ham\n' >"$T/two.csv"
printf 'ham\nsp\377m\n' >"$T/bad-names.txt"
expect_fail "a --labels name not in UTF-8" 1 "bad-names.txt: line 2: the label name is not valid UTF-8" \
	tok --label label --labels "$T/bad-names.txt" -o "$T/out.msgpack" "$T/two.csv"

# integer labels in JSON lines are classes of --labels FILE
printf 'ham\nspam\n' >"$T/labels.txt"
printf '{"text":"hi","label":7}\n' >"$T/int.jsonl"
expect_fail "an integer label beyond --labels" 1 "int.jsonl: line 1: label 7 is beyond the 2 names in .*labels.txt" \
	tok --label label --labels "$T/labels.txt" "$T/int.jsonl"
printf '{"text":"hi","label":[1]}\n{"text":"x","label":[0,9]}\n' >"$T/list.jsonl"
expect_fail "a list label beyond --labels" 1 "list.jsonl: line 2: label 9 is beyond the 2 names in .*labels.txt" \
	tok --label label --labels "$T/labels.txt" "$T/list.jsonl"
printf '{"text":"hi","label":1}\n' >"$T/in-range.jsonl"
check "an integer label that --labels names" tok --label label --labels "$T/labels.txt" -o "$T/out.msgpack" "$T/in-range.jsonl"

# --strict names the file that holds the invalid UTF-8, in a batch that spans files
printf 'good one\ngood two\n' >"$T/a.txt"
printf 'fine\nbad \377 here\n' >"$T/b.txt"
expect_fail "--strict names the later file" 1 "b.txt: line 2: invalid UTF-8" tok --strict "$T/a.txt" "$T/b.txt"

# a CSV or TSV that starts with a byte order mark
printf '\357\273\277text,label\nhi,spam\n' >"$T/bom.csv"
check "a CSV with a byte order mark" tok --label label -o "$T/bom.msgpack" "$T/bom.csv"
expect_eq "its first column is text" "$(timeout 60 ts-cat "$T/bom.msgpack" | jq -c '.labels // .ids')" \
	'["spam"]
[101,7632,102]'
printf '\357\273\277text\tlabel\nhi\tspam\n' >"$T/bom.tsv"
check "a TSV with a byte order mark" tok --label label -o "$T/bom.msgpack" "$T/bom.tsv"

# ts-shard keeps the vocab bytes it checked, also from a pipe
check "ts-shard -v a pipe" shard -v <(cat "$V") -o "$T/piped" "$T/hello.msgpack"
check "the data dir's vocab.txt is the vocab" cmp "$T/piped/vocab.txt" "$V"

# A header after headerless records applies to them too: the order of the inputs changes nothing.
tok --label label -o "$T/header.msgpack" "$T/two.csv"
echo '{"id":0,"ids":[101,999999,102],"label":1}' | msgpack -o "$T/far-id.msgpack"
echo '{"id":0,"ids":[101,102],"label":5}' | msgpack -o "$T/far-label.msgpack"
echo '{"id":0,"ids":[101,102],"label":1}' | msgpack -o "$T/fine.msgpack"
for order in "far-id header" "header far-id"; do
	set -- $order
	expect_fail "a token id beyond the vocab is refused ($1 first)" 1 \
		"far-id.msgpack: record 1: token id 999999 is beyond the vocab's 30522 tokens" \
		shard -o "$T/o-$1" "$T/$1.msgpack" "$T/$2.msgpack"
done
deep=$(printf '[%.0s' $(seq 40))1$(printf ']%.0s' $(seq 40))
echo '{"id":0,"ids":[101,102],"label":1,"extra":'"$deep"'}' | msgpack -o "$T/deep.msgpack"
expect_fail "a record nested deeper than the reader's 32 levels: said so, not 'out of memory'" 1 \
	"deep.msgpack: record 1: nested deeper than 32 levels, or out of memory$" shard -o "$T/o-deep" "$T/deep.msgpack"
for order in "far-label header" "header far-label"; do
	set -- $order
	expect_fail "a label beyond the names is refused ($1 first)" 1 \
		"far-label.msgpack: record 1: label 5 is out of range \(2 label names\)" \
		shard -o "$T/o-$1" "$T/$1.msgpack" "$T/$2.msgpack"
done
check "records in range before the header are kept" shard -o "$T/fine" "$T/fine.msgpack" "$T/header.msgpack"
expect_eq "all of them" "$(jq .records_in "$T/fine/manifest.json")" 3

# records without ids are numbered as ts-tokenize numbers them: from 0 over all
# inputs, a header left out, whether or not a stream has one
tok "$T/two.csv" | timeout 20 ts-cat | jq -c 'del(.id)' | msgpack -o "$T/noid-h.msgpack"
tok "$T/two.csv" | timeout 20 ts-cat --no-header | jq -c 'del(.id)' | msgpack -o "$T/noid.msgpack"
shard -o "$T/noid" "$T/noid-h.msgpack" "$T/noid.msgpack" >/dev/null
expect_eq "records without ids: numbered from 0 over the inputs, headers left out" \
	"$(timeout 20 ts-cat "$T/noid/train.shard" | jq -r .id | sort -n | paste -sd' ')" "0 1 2 3"

# a data dir cannot be renamed to . or ..
mkdir "$T/here"
in_here() ( cd "$T/here" && "$@" )
expect_fail "ts-shard -o . is refused before any work" 1 "cannot write a dir as \.: its name must not be \., \.\. or /" \
	in_here shard -o . "$T/hello.msgpack"
expect_fail "ts-shard -o DIR/.. too" 1 "cannot write a dir as .*here/\.\.: its name" shard -o "$T/here/.." "$T/hello.msgpack"
expect_eq "and nothing is left behind" "$(ls -A "$T/here")" ""
finish
