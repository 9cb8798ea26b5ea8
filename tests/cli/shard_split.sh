# ts-shard: splits, seeded shuffle, dedupe, refusals, atomic output, bounded memory.
. "$(dirname "$0")/../lib.sh"
if ! command -v jq >/dev/null; then skip "ts-shard tests need jq"; finish; fi

# gen N [FIRST]: token records FIRST.. as JSON lines; record k has id k,
# tokens [101, k, k*7 % 997, 102] and label k % 2.
gen() {
	awk -v n="$1" -v first="${2:-0}" 'BEGIN { for (k = first; k < first + n; k++)
		printf "{\"id\":%d,\"ids\":[101,%d,%d,102],\"label\":%d}\n", k, k, k * 7 % 997, k % 2 }'
}
header() {   # header VOCAB [LABELS]
	printf '{"kind":"tokens","version":1,"vocab":"%s","labels":%s,"max_len":64,"lower":true}\n' "$1" "${2:-[\"neg\",\"pos\"]}"
}
records() { ts-cat --from-json -o "$1"; }       # records FILE: JSON lines on stdin to FILE
m() { jq -r "$1" "$2/manifest.json"; }          # m FILTER DIR: a manifest value
ids_of() { for f in "$@"; do ts-cat "$f"; done | jq -r .id; }   # ids_of SHARD...: ids in shard order
# expect_ne NAME GOT NOT
expect_ne() { if [ "$2" != "$3" ]; then pass "$1"; else fail "$1"; printf '    got what it must not: %s\n' "$2" | head -3; fi; }

AB=$(printf 'ab%.0s' {1..32})   # a vocab's sha256, as a header holds one
{ header "$AB"; gen 1000; } | records "$T/a.msgpack"

check "shards 1000 records" ts-shard -o "$T/d" "$T/a.msgpack"
expect_eq "default split is 800/100/100" "$(m '[.splits[].count] | join(" ")' "$T/d")" "800 100 100"
expect_eq "the data dir holds a shard per split and the manifest" "$(ls -A "$T/d" | tr '\n' ' ')" \
	"manifest.json test.shard train.shard valid.shard "
expect_eq "every record is in exactly one split" "$(ids_of "$T"/d/{train,valid,test}.shard | sort -n)" "$(seq 0 999)"
expect_ne "records are shuffled" "$(ids_of "$T/d/train.shard")" "$(ids_of "$T/d/train.shard" | sort -n)"
expect_eq "records keep their tokens and labels" \
	"$(ts-cat "$T/d/valid.shard" | jq -c 'select(.ids != [101, .id, .id * 7 % 997, 102] or .label != .id % 2)')" ""
expect_eq "manifest: vocab, labels, max_len, lower from the header" \
	"$(m '[.vocab_sha256[0:4], (.labels | join("/")), .max_len, .lower, .label_kind] | join(" ")' "$T/d")" \
	"abab neg/pos 64 true int"
expect_eq "manifest: counts add up" "$(m '[.records_in, .duplicates_dropped, .records_left_out,
	([.splits[].tokens] | add)] | join(" ")' "$T/d")" "1000 0 0 4000"
expect_eq "manifest: label counts by name" \
	"$(m '.splits | [.[].label_counts.neg] | add' "$T/d") $(m '.splits | [.[].label_counts.pos] | add' "$T/d")" "500 500"
expect_eq "manifest: length histogram" "$(m '.splits.train.length_hist | tostring' "$T/d")" "[[4,800]]"
expect_eq "the label counts match the shard" "$(ts-cat "$T/d/train.shard" | jq -s 'map(select(.label == 0)) | length')" \
	"$(m .splits.train.label_counts.neg "$T/d")"

# Determinism: the same seed gives the same bytes, another seed another order.
ts-shard -o "$T/d2" "$T/a.msgpack"
check "the same seed gives identical shards" cmp "$T/d/train.shard" "$T/d2/train.shard"
check "the same seed gives an identical manifest" cmp "$T/d/manifest.json" "$T/d2/manifest.json"
ts-shard -o "$T/d3" --seed 1 "$T/a.msgpack"
expect_ne "another seed gives another order" "$(ids_of "$T/d3/train.shard")" "$(ids_of "$T/d/train.shard")"
expect_eq "another seed keeps the same records" "$(ids_of "$T"/d3/*.shard | sort -n)" "$(seq 0 999)"
ts-cat "$T/a.msgpack" | ts-cat --from-json | ts-shard -o "$T/d4"
check "standard input gives the same shards" cmp "$T/d/train.shard" "$T/d4/train.shard"
ts-cat --no-header "$T/a.msgpack" | head -400 | records "$T/p1.msgpack"
ts-cat --no-header "$T/a.msgpack" | tail -600 | records "$T/p2.msgpack"
ts-shard -o "$T/d5" "$T/p1.msgpack" - <"$T/p2.msgpack"
expect_eq "several inputs are one stream (same order as one file)" \
	"$(ids_of "$T/d5/train.shard" | head -50)" "$(ids_of "$T/d/train.shard" | head -50)"

# The order is independent of the memory budget: --mem 1 holds 8192 records,
# so 41000 records make 6 runs, more than one merge reads at that budget.
gen 40000 1000 | records "$T/mid.msgpack"
/usr/bin/time -f %M -o "$T/rss256" ts-shard -o "$T/big-mem" --mem 256 "$T/a.msgpack" "$T/mid.msgpack"
ts-shard -o "$T/small-mem" --mem 1 "$T/a.msgpack" "$T/mid.msgpack"
for f in train.shard valid.shard test.shard manifest.json; do
	check "--mem 1 and --mem 256 give the same $f" cmp "$T/big-mem/$f" "$T/small-mem/$f"
done
# a budget past the machine's memory (16 TiB) is taken as the input needs it
/usr/bin/time -f %M -o "$T/rss" ts-shard -o "$T/huge-mem" --mem 16777216 "$T/a.msgpack" "$T/mid.msgpack"
check "--mem 16777216 gives the same shards" cmp "$T/big-mem/train.shard" "$T/huge-mem/train.shard"
check "in no more memory than --mem 256 (its peak RSS at most that one's and 50 MB)" \
	test "$(cat "$T/rss")" -le $(($(cat "$T/rss256") + 51200))

# Dedupe: exact token duplicates go, the first in input order stays.
{
	gen 100
	gen 100 | jq -c '.id += 1000 | .label = 1 - .label'            # the same tokens again, later
	gen 10 | jq -c '.id += 2000 | .ids[2] += 1'                      # one token differs
	gen 10 | jq -c '.id += 3000 | .types = [0, 0, 1, 1]'             # type ids differ
} | records "$T/dup.msgpack"
ts-shard -o "$T/dd" --dedupe --split all=1.0 "$T/dup.msgpack"
expect_eq "--dedupe drops exact duplicates only" "$(m '[.records_in, .duplicates_dropped, .splits.all.count] | join(" ")' "$T/dd")" "220 100 120"
expect_eq "--dedupe keeps the first of each" "$(ids_of "$T/dd/all.shard" | awk '$1 < 1000' | sort -n)" "$(seq 0 99)"
expect_eq "--dedupe records the choice" "$(m .dedupe "$T/dd")" true
cp "$T/mid.msgpack" "$T/mid-copy.msgpack"
ts-shard -o "$T/dd2" --dedupe --mem 1 --split all=1.0 "$T/dup.msgpack" "$T/mid.msgpack" "$T/mid-copy.msgpack"
ts-shard -o "$T/dd3" --dedupe --mem 64 --split all=1.0 "$T/dup.msgpack" "$T/mid.msgpack" "$T/mid-copy.msgpack"
check "--dedupe is independent of --mem too" cmp "$T/dd2/all.shard" "$T/dd3/all.shard"
expect_eq "--dedupe over files" "$(m '[.records_in, .splits.all.count] | join(" ")' "$T/dd2")" "80220 40120"

# Counts and rest.
ts-shard -o "$T/c1" --split valid=10,test=20,train=rest "$T/a.msgpack"
expect_eq "counts and rest" "$(m '[.splits[].count] | join(" ")' "$T/c1")" "10 20 970"
ts-shard -o "$T/c2" --split a=10,b=20 "$T/a.msgpack"
expect_eq "counts below the records leave the rest out" "$(m '[.splits[].count, .records_left_out] | join(" ")' "$T/c2")" "10 20 970"
expect_eq "a split's file is named after it" "$(ls -A "$T/c2" | tr '\n' ' ')" "a.shard b.shard manifest.json "
ts-shard -o "$T/c3" --split valid=0.0005,train=0.9995 "$T/a.msgpack"
expect_eq "fractions round down, the last split takes the rest" "$(m '[.splits[].count] | join(" ")' "$T/c3")" "0 1000"
ts-shard -o "$T/c4" --split train=1.0,test=0.0 "$T/a.msgpack"
expect_eq "an empty split gets a valid empty shard" "$(stat -c %s "$T/c4/test.shard") $(ts-cat "$T/c4/test.shard" | wc -l)" "64 0"

ts-shard -o "$T/c5" --split train=0.3333,valid=0.6667,test=0 "$T/a.msgpack"
expect_eq "a split of 0 among fractions is empty: the rounding's rest goes to the last that asks for some" \
	"$(m '[.splits[].count] | join(" ")' "$T/c5")" "333 667 0"
ts-shard -o "$T/c6" --split train=0.3333,valid=0.6667,test=0.0 "$T/a.msgpack"
expect_eq "...as does a fraction of 0" "$(m '[.splits[].count] | join(" ")' "$T/c6")" "333 667 0"

# The pieces of a folded text (text k cut into k % 5 + 1) stay together in one
# split, in order: a text cut between train and test would be learnt, then scored
awk 'BEGIN { for (k = 0; k < 300; k++) for (f = 0; f <= k % 5; f++)
	printf "{\"id\":%d,\"ids\":[101,%d,%d,102],\"label\":%d,\"fold\":%d}\n", k, k, f, k % 2, f }' |
	{ header "$AB"; cat; } | records "$T/folded.msgpack"
texts_whole() {   # texts_whole DIR: each split's ids, each text's pieces in a row, whole ("ok" or what is not)
	for s in "$1"/*.shard; do ts-cat "$s" | jq -r '"\(.id) \(.fold)"'; echo end; done | awk '
		$1 == "end" { last = ""; next }
		{ if ($1 in seen && $1 != last) { print "text " $1 " in two places"; bad = 1 }
		  if ($2 != ($1 == last ? f + 1 : 0)) { print "text " $1 " piece " $2 " out of order"; bad = 1 }
		  seen[$1] = 1; last = $1; f = $2; n++ }
		END { if (!bad) print n == 900 ? "ok" : n " pieces" }'
}
ts-shard -o "$T/fo1" "$T/folded.msgpack"
expect_eq "folded texts: each in one split, its pieces in a row and in order" "$(texts_whole "$T/fo1")" ok
expect_eq "...a split ends after a text's last piece, a little past its share" \
	"$(m '[.splits[].count] | add' "$T/fo1") $(m '.splits.train.count >= 720' "$T/fo1")" "900 true"
ts-shard -o "$T/fo2" --split valid=7,test=11,train=rest "$T/folded.msgpack"
expect_eq "...with counts too" "$(texts_whole "$T/fo2")" ok
ts-shard -o "$T/fo3" --dedupe "$T/folded.msgpack"
expect_eq "...and with --dedupe (no two texts alike)" "$(texts_whole "$T/fo3")" ok
# Refusals: one line, exit 1 (2 for usage), nothing left behind.
{ header "$(printf 'cd%.0s' {1..32})"; gen 5; } | records "$T/b.msgpack"
expect_fail "streams with another vocab are refused" 1 \
	"ts-shard: $T/b.msgpack: vocab sha256 cdcdcdcdcdcd… differs from $T/a.msgpack's abababababab…" \
	ts-shard -o "$T/x" "$T/a.msgpack" "$T/b.msgpack"
# streams that number their classes otherwise: one numbering, by name
{ header "$AB" '["pos","mixed"]'; gen 5 5000; } | records "$T/l.msgpack"
check "streams that name other classes, in another order" ts-shard -o "$T/l" --split train=1 "$T/a.msgpack" "$T/l.msgpack"
expect_eq "their classes numbered by name, the first stream's first" \
	"$(m ".labels | tojson" "$T/l") $(ts-cat "$T/l/train.shard" | jq -r 'select(.id >= 5000) | "\(.id % 2)\(.label)"' | sort -u | tr '\n' ' ')" \
	'["neg","pos","mixed"] 01 12 '
expect_eq "and counted by name" "$(m ".splits.train.label_counts | tojson" "$T/l")" '{"neg":500,"pos":503,"mixed":2}'
{ header "$AB"; gen 5 | jq -c '.label = 2'; } | records "$T/range.msgpack"
expect_fail "a label out of range names the record" 1 "range.msgpack: record 2: label 2 is out of range \(2 label names\)" \
	ts-shard -o "$T/x" "$T/range.msgpack"
{ gen 3; gen 1 | jq -c '.label = 0.5'; } | records "$T/kinds.msgpack"
expect_fail "mixed label kinds are refused" 1 "kinds.msgpack: record 4: a float label, but earlier records have class labels" \
	ts-shard -o "$T/x" "$T/kinds.msgpack"
{ header "$AB" '["neg","pos","neg"]'; gen 2; } | records "$T/twice.msgpack"
expect_fail "a label name given twice is refused" 1 "twice.msgpack: record 1: header label 'neg' appears twice" \
	ts-shard -o "$T/x" "$T/twice.msgpack"
{ gen 2; gen 1 | jq -c '.fold = -3'; } | records "$T/fold.msgpack"
expect_fail "a negative fold is refused" 1 "fold.msgpack: record 3: fold -3 is out of range" \
	ts-shard -o "$T/x" "$T/fold.msgpack"
header "$AB" | records "$T/empty.msgpack"
expect_fail "an input without records is refused, named" 1 "^ts-shard: $T/empty.msgpack: no records$" ts-shard -o "$T/x" "$T/empty.msgpack"
expect_fail "an empty standard input is refused, named so" 1 "^ts-shard: standard input: no records$" ts-shard -o "$T/x" </dev/null
expect_fail "inputs without records, all of them" 1 "^ts-shard: the inputs: no records$" \
	ts-shard -o "$T/x" "$T/empty.msgpack" - </dev/null
head -c -5 "$T/a.msgpack" >"$T/trunc.msgpack"
expect_fail "a truncated stream names the record" 1 "trunc.msgpack: record 1001: truncated stream" \
	ts-shard -o "$T/x" "$T/trunc.msgpack"
# a first record cut short whose header claims 4 billion entries (or a
# 4 GB string): said so, and nothing allocated for what never came
printf '\xdf\xff\xff\xff\xff\xa2id' >"$T/huge.msgpack"
expect_fail "a record claiming 4 billion entries, cut short: said so" 1 "^ts-shard: $T/huge.msgpack: record 1: truncated stream$" \
	ts-shard -o "$T/x" "$T/huge.msgpack"
printf '\x81\xa4text\xdb\xff\xff\xff\xf0abc' >"$T/huge.msgpack"
expect_fail "a record claiming a 4 GB string, cut short: said so, from standard input" 1 \
	"^ts-shard: standard input: record 1: truncated stream$" ts-shard -o "$T/x" <"$T/huge.msgpack"
printf '\x81\xa2id\xc1' >"$T/huge.msgpack"
expect_fail "a byte that starts no msgpack" 1 "record 1: malformed msgpack" ts-shard -o "$T/x" "$T/huge.msgpack"
expect_fail "a missing file" 1 "cannot open $T/nope.msgpack" ts-shard -o "$T/x" "$T/nope.msgpack"
expect_eq "no data dir and no temp dir left after failures" "$(ls -d "$T"/x* 2>/dev/null)" ""
expect_fail "fractions that do not sum to 1" 2 "--split: the fractions sum to 0.9, not 1" \
	ts-shard -o "$T/x" --split train=0.8,test=0.1 "$T/a.msgpack"
# each malformed --split says what is wrong in it, and the form it should have
bad_split() { expect_fail "$1" 2 "^ts-shard: --split: $2; see 'ts-shard --help'\$" ts-shard -o "$T/x" --split "$3" "$T/a.msgpack"; }
bad_split "a value of no kind" "'x' of 'train' is neither a fraction \(0\.8\), a count \(500\), 'rest' nor @FILE" train=x
bad_split "a part without =" "'valid' is not NAME=VALUE, as in train=0\.8,valid=0\.1,test=0\.1" train=0.8,valid
bad_split "another sign than =" "'train:0\.8' is not NAME=VALUE, as in train=0\.8,valid=0\.1,test=0\.1" train:0.8,valid:0.2
bad_split "a comma in a file's path" \
	"'b' is not NAME=VALUE: the comma after 'train=@a' ends its path \(give a path without commas\)" 'train=@a,b'
bad_split "no name" "'=0\.5' has no NAME before '='" =0.5,valid=0.5
bad_split "@ without a file" "'train=@' names no file: give NAME=@FILE" train=@
bad_split "an empty part" "an empty part in 'train=1,': give NAME=VALUE,\.\.\., as in train=0\.8,valid=0\.1,test=0\.1" train=1,
bad_split "parts not separated by commas" \
	"'0\.8;valid=0\.2' of 'train' is neither a fraction \(0\.8\), a count \(500\), 'rest' nor @FILE: parts are separated by commas" \
	'train=0.8;valid=0.2'
bad_split "rest before the last share" "'train=rest' is not the last share: only the last may be 'rest'" train=rest,valid=.2
bad_split "fractions and counts mixed" "'train=2' is a count and 'valid=0\.5' a fraction: give every share as a fraction or every one as a count" \
	train=2,valid=0.5
expect_fail "counts above the records" 1 "--split asks for 2000 records but there are only 1000" \
	ts-shard -o "$T/x" --split a=1000,b=1000 "$T/a.msgpack"
expect_fail "-o is required" 2 "-o DIR is required" ts-shard "$T/a.msgpack"
expect_fail "--mem must be positive" 2 "--mem: 0 is out of range \(1 to " ts-shard -o "$T/x" --mem 0 "$T/a.msgpack"
awk 'BEGIN { s = "{\"id\":7,\"ids\":[101"; for (i = 0; i < 300000; i++) s = s ",200"; print s ",102]}" }' |
	records "$T/huge.msgpack"
expect_fail "a record larger than the sort's memory: named, with the way out" 1 \
	"huge.msgpack: record 1: it takes 1200024 bytes, more than the shuffle's memory holds \(786432\): give a larger --mem" \
	ts-shard -o "$T/x" --mem 1 "$T/a.msgpack" "$T/huge.msgpack"
expect_eq "still nothing left behind" "$(ls -d "$T"/x* 2>/dev/null)" ""

# An existing dir: refused when not empty, replaced with --force only when it is a data dir.
expect_fail "an existing data dir is refused" 1 "$T/d exists and is not empty \(--force replaces it\)" \
	ts-shard -o "$T/d" "$T/a.msgpack"
check "--force replaces a data dir" ts-shard -f -o "$T/d" --split all=1.0 "$T/a.msgpack"
expect_eq "--force leaves only the new data" "$(ls -A "$T/d" | tr '\n' ' ')" "all.shard manifest.json "
mkdir "$T/home" && touch "$T/home/precious"
expect_fail "--force does not replace a dir that is not a data dir" 1 "holds no manifest.json; not replacing it" \
	ts-shard --force -o "$T/home" "$T/a.msgpack"
expect_eq "the other dir is untouched" "$(ls -A "$T/home")" precious
mkdir "$T/emptydir"
check "an existing empty dir is filled" ts-shard -o "$T/emptydir/" "$T/a.msgpack"
expect_eq "no temp dirs left beside the outputs" "$(ls -A "$T" | grep -c '\.tmp\.\|\.old\.')" 0

# Corpora that come split (CoNLL's train/dev/test files): a part a file,
# whole, tokenized on its own; only train is shuffled, and the tags get
# one numbering, by name
V=$TOP/examples/vocab.txt
sentences() {   # sentences N SEED: N sentences of 4 tagged words
	awk -v n="$1" -v s="$2" "$RAND"' BEGIN { seed(s); split("alice bob paris rome went to", w, " ")
		split("B-PER B-PER B-LOC B-LOC O O", t, " ")
		for (i = 0; i < n; i++) { for (k = 0; k < 4; k++) { x = int(rnd() * 6) + 1; print w[x], t[x] }; print "" } }'
}
sentences 200 1 >"$T/train.conll"
{ printf 'rome B-LOC\nwent O\n\n'; sentences 30 2; } >"$T/dev.conll"
{ printf 'went O\nzed B-MISC\nbob B-PER\n\n'; sentences 40 3; } >"$T/test.conll"
for f in train dev test; do ts-tokenize -v "$V" -o "$T/$f.rec" "$T/$f.conll"; done
check "ts-shard --split train=@FILE,valid=@FILE,test=@FILE" \
	ts-shard -o "$T/cs" --seed 1 --split train=@"$T/train.rec",valid=@"$T/dev.rec",test=@"$T/test.rec"
expect_eq "a part a file, whole" "$(m '[.splits.train.count, .splits.valid.count, .splits.test.count] | join(" ")' "$T/cs")" \
	"200 31 41"
expect_eq "the tags numbered by name: train's first, then those only the others have" \
	"$(m '.labels | join(" ")' "$T/cs")" "$(ts-cat "$T/train.rec" | head -n 1 | jq -r '.labels | join(" ")') B-MISC"
ids() { ts-cat --no-header "$1" | jq -r .id; }
expect_eq "valid and test keep their files' order" "$(ids "$T/cs/valid.shard"; ids "$T/cs/test.shard")" \
	"$(ids "$T/dev.rec"; ids "$T/test.rec")"
expect_ne "train is shuffled" "$(ids "$T/cs/train.shard")" "$(ids "$T/train.rec")"
expect_eq "with every record of its file" "$(ids "$T/cs/train.shard" | sort -n)" "$(ids "$T/train.rec" | sort -n)"
# tags_of FILE NAMES: each record's tags by name, a line each
tags_of() { ts-cat --no-header "$1" | jq -r --argjson n "$2" '[.label[] | select(. >= 0) | $n[.]] | join(" ")'; }
expect_eq "every tag keeps its name" \
	"$(tags_of "$T/cs/test.shard" "$(m .labels "$T/cs")"; tags_of "$T/cs/valid.shard" "$(m .labels "$T/cs")")" \
	"$(tags_of "$T/test.rec" "$(ts-cat "$T/test.rec" | head -n 1 | jq -c .labels)"
	  tags_of "$T/dev.rec" "$(ts-cat "$T/dev.rec" | head -n 1 | jq -c .labels)")"
check "shares of the inputs beside a file of its own" \
	ts-shard -o "$T/cm" --seed 1 --split train=0.9,valid=rest,test=@"$T/test.rec" "$T/train.rec"
expect_eq "train and valid divide the inputs, test is its file" \
	"$(m '[.splits.train.count, .splits.valid.count, .splits.test.count] | join(" ")' "$T/cm")" "180 20 41"
expect_eq "the parts in the order --split gives them" "$(m '.splits | keys_unsorted | join(" ")' "$T/cm")" "train valid test"
cat "$T/a.msgpack" "$T/a.msgpack" >"$T/twice-a.msgpack"
cp "$T/twice-a.msgpack" "$T/twice-a2.msgpack"
check "--dedupe with parts of their own files" ts-shard -o "$T/cdd" --dedupe --split train=@"$T/twice-a.msgpack",test=@"$T/twice-a2.msgpack"
expect_eq "--dedupe drops repeats in train, the part shuffled; test keeps its file as it is" \
	"$(m '[.splits.train.count, .splits.test.count, .records_in, .duplicates_dropped] | join(" ")' "$T/cdd")" "1000 2000 4000 1000"
expect_fail "every part a file, and FILE operands: refused" 2 "every part of --split names its file" \
	ts-shard -o "$T/x" --split train=@"$T/train.rec",test=@"$T/test.rec" "$T/dev.rec"
expect_fail "one file for two parts: refused, naming it as given" 2 \
	"^ts-shard: $T/a.msgpack and $T/./a.msgpack are the same file: its records would be read twice, in more than one split; see" \
	ts-shard -o "$T/x" --split train=@"$T/a.msgpack",test=@"$T/./a.msgpack"
ln -sf a.msgpack "$T/a-link.msgpack"
expect_fail "a part's file among the FILE operands, by a link: refused" 2 "a.msgpack and .*a-link.msgpack are the same file" \
	ts-shard -o "$T/x" --split train=1.0,test=@"$T/a.msgpack" "$T/b.msgpack" "$T/a-link.msgpack"
expect_fail "a FILE operand twice: refused" 2 "b.msgpack and .*b.msgpack are the same file" \
	ts-shard -o "$T/x" "$T/b.msgpack" "$T/b.msgpack"
check "and nothing made" test ! -e "$T/x"
expect_fail "standard input for two parts: refused" 2 "standard input is read once" \
	ts-shard -o "$T/x" --split train=@-,test=@- </dev/null
expect_fail "standard input for a part and the shares: refused" 2 "standard input is read once" \
	ts-shard -o "$T/x" --split train=1.0,test=@- </dev/null
: >"$T/none.rec"
expect_fail "a part's file without records: refused" 1 "none.rec: no records for the test split" \
	ts-shard -o "$T/x" --split train=@"$T/train.rec",test=@"$T/none.rec"
expect_fail "a part's file of another vocab: refused" 1 "b.msgpack: vocab sha256 cdcdcdcdcdcd… differs from .*a.msgpack's" \
	ts-shard -o "$T/x" --split train=@"$T/a.msgpack",test=@"$T/b.msgpack"
expect_fail "a part's file that is missing" 1 "cannot open $T/nope.rec" ts-shard -o "$T/x" --split train=@"$T/nope.rec"
expect_eq "nothing left behind" "$(ls -d "$T"/x* 2>/dev/null)" ""

# Bounded memory: an input several times larger than --mem (50 MB, 125k records).
if [ ! -x /usr/bin/time ]; then skip "bounded memory (needs /usr/bin/time)"; finish; fi
awk 'BEGIN { for (k = 0; k < 1000; k++) { s = "{\"id\":" k ",\"ids\":[101"
	for (i = 0; i < 124; i++) s = s "," (k * 131 + i * 17) % 30000 + 200
	print s ",102],\"label\":" k % 2 "}" } }' | records "$T/chunk.msgpack"
for i in $(seq 125); do cat "$T/chunk.msgpack"; done >"$T/large.msgpack"
size=$(stat -c %s "$T/large.msgpack")
/usr/bin/time -f %M ts-shard --help >/dev/null 2>"$T/rss0"
# Under make test SAN=1, ASan would hold freed memory in its quarantine (256 MiB) and
# the RSS would measure that; without it, the limit holds for sanitized builds too.
ASAN_OPTIONS=${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0 \
	/usr/bin/time -f %M ts-shard -o "$T/large" --mem 8 "$T/large.msgpack" 2>"$T/rss"
base=$(tail -1 "$T/rss0") rss=$(tail -1 "$T/rss")
echo "    input $((size / 1048576)) MiB, --mem 8: max RSS $((rss / 1024)) MiB (idle $((base / 1024)) MiB)"
if [ "$size" -gt 40000000 ] && [ "$rss" -lt $((base + 16 * 1024)) ]; then pass "RSS stays within --mem plus 8 MiB on a 6x larger input"
else fail "RSS stays within --mem plus 8 MiB on a 6x larger input (input $size bytes, RSS $rss KiB, idle $base KiB)"; fi
expect_eq "the large input is all there" "$(m '[.splits[].count] | add' "$T/large")" 125000
cp "$T/large.msgpack" "$T/large-copy.msgpack"
ASAN_OPTIONS=${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0 \
	/usr/bin/time -f %M ts-shard -o "$T/large2" --mem 8 --split train=@"$T/large.msgpack",test=@"$T/large-copy.msgpack" 2>"$T/rss"
rss=$(tail -1 "$T/rss")
echo "    one input and its copy as two parts of their own, --mem 8: max RSS $((rss / 1024)) MiB"
if [ "$rss" -lt $((base + 16 * 1024)) ]; then pass "parts of their own files: RSS stays within --mem plus 8 MiB"
else fail "parts of their own files: RSS stays within --mem plus 8 MiB (RSS $rss KiB, idle $base KiB)"; fi
expect_eq "both parts are all there" "$(m '[.splits[].count] | join(" ")' "$T/large2")" "125000 125000"
# Short records (19 tokens, 96 bytes in the sort): the sort's keys, and the
# copy of them qsort may take, fill up as fast as its records.
awk 'BEGIN { for (k = 0; k < 1000; k++) { s = "{\"id\":" k ",\"ids\":[101"
	for (i = 0; i < 17; i++) s = s "," (k * 131 + i * 17) % 30000 + 200
	print s ",102],\"label\":" k % 2 "}" } }' | records "$T/chunk.msgpack"
for i in $(seq 600); do cat "$T/chunk.msgpack"; done >"$T/short.msgpack"
ASAN_OPTIONS=${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0 \
	/usr/bin/time -f %M ts-shard -o "$T/short" --mem 64 "$T/short.msgpack" 2>"$T/rss"
rss=$(tail -1 "$T/rss")
echo "    short records, $(($(stat -c %s "$T/short.msgpack") / 1048576)) MiB, --mem 64: max RSS $((rss / 1024)) MiB"
if [ "$rss" -lt $((base + 72 * 1024)) ]; then pass "short records: RSS stays within --mem plus 8 MiB"
else fail "short records: RSS stays within --mem plus 8 MiB (RSS $rss KiB, idle $base KiB)"; fi
expect_eq "the short records are all there" "$(m '[.splits[].count] | add' "$T/short")" 600000
finish
