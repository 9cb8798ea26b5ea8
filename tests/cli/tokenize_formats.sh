# ts-tokenize from the command line: formats, labels, pairs, truncation and
# folding (expected ids made with Hugging Face tokenizers), ordering, bad input.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
tok() { ts-tokenize -v "$V" "$@"; }
body() { ts-cat --no-header; }

expect_eq "lines from stdin" "$(echo 'Hello, World!' | tok | body)" '{"id":0,"ids":[101,7592,1010,2088,999,102]}'
expect_eq "header carries vocab hash and file, labels, max_len" "$(echo hi | tok | ts-cat | head -1)" \
	'{"kind":"tokens","version":1,"vocab":"07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3","vocab_file":"'"$(realpath "$V")"'","labels":[],"max_len":512,"lower":true}'

# folding: the pieces Hugging Face returns as overflowing tokens with stride 2
expect_eq "fold with stride matches HF overflow" \
	"$(echo 'one two three four five six seven eight nine ten eleven twelve' | tok --max-len 8 --fold --stride 2 | body | tr '\n' ' ')" \
	'{"id":0,"ids":[101,2028,2048,2093,2176,2274,2416,102],"fold":0} {"id":0,"ids":[101,2274,2416,2698,2809,3157,2702,102],"fold":1} {"id":0,"ids":[101,3157,2702,5408,4376,102],"fold":2} '
expect_eq "truncation keeps [SEP]" "$(echo 'one two three four five six' | tok --max-len 5 | body)" '{"id":0,"ids":[101,2028,2048,2093,102]}'
expect_eq "--max-len 0 means no limit" "$(printf 'a %.0s' $(seq 600) | tok --max-len 0 | body | tr -cd , | wc -c)" 602

# pairs: longest-first truncation and type ids as HF gives them
printf 'text,pair\n"a b c d e f g","h i"\n"a b c","d e f g h i j k"\n"a b c d e f","g h i j k l m"\n' >"$T/p.csv"
expect_eq "pairs: longest-first truncation and type ids" "$(tok --max-len 10 --text-pair pair "$T/p.csv" | body | tr '\n' ' ')" \
	'{"id":0,"ids":[101,1037,1038,1039,1040,1041,102,1044,1045,102],"types":[0,0,0,0,0,0,0,1,1,1]} {"id":1,"ids":[101,1037,1038,1039,102,1040,1041,1042,1043,102],"types":[0,0,0,0,0,1,1,1,1,1]} {"id":2,"ids":[101,1037,1038,1039,102,1043,1044,1045,1046,102],"types":[0,0,0,0,0,1,1,1,1,1]} '
expect_eq "pairs: --fold folds the second text" "$(printf 'text,pair\nq,"a b c d e"\n' | tok -f csv --max-len 6 --fold --text-pair pair | body | tr '\n' ' ')" \
	'{"id":0,"ids":[101,1053,102,1037,1038,102],"types":[0,0,0,1,1,1],"fold":0} {"id":0,"ids":[101,1053,102,1039,1040,102],"types":[0,0,0,1,1,1],"fold":1} {"id":0,"ids":[101,1053,102,1041,102],"types":[0,0,0,1,1],"fold":2} '

# labels and ids
printf 'id,text,label\nx1,good,pos\nx2,bad,neg\nx3,fine,pos\n' >"$T/l.csv"
expect_eq "labels in order of first appearance" "$(tok --label label --id id "$T/l.csv" | ts-cat | tr '\n' ' ')" \
	'{"kind":"tokens","version":1,"vocab":"07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3","vocab_file":"'"$(realpath "$V")"'","labels":["pos","neg"],"max_len":512,"lower":true} {"id":"x1","ids":[101,2204,102],"label":0} {"id":"x2","ids":[101,2919,102],"label":1} {"id":"x3","ids":[101,2986,102],"label":0} '
printf 'neg\npos\n' >"$T/names"
expect_eq "--labels fixes the order" "$(tok --label label --labels "$T/names" "$T/l.csv" | ts-cat | cut -c1-200 | tr '\n' ' ' | grep -o '"labels":\[[^]]*\]\|"label":[0-9]' | tr '\n' ' ')" \
	'"labels":["neg","pos"] "label":1 "label":0 "label":1 '
printf 'id,text,label\nx1,good,pos\nx2,bad,meh\n' >"$T/l2.csv"
expect_fail "a label not in --labels" 1 "l2.csv: line 3: label 'meh' is not in" tok --label label --labels "$T/names" "$T/l2.csv"
# JSON labels as names and as class numbers: without --labels, what a number names is unknown
printf '%s\n' '{"text":"a","label":"spam"}' '{"text":"b","label":0}' >"$T/mixed1.jsonl"
printf '%s\n' '{"text":"a","label":[1]}' '{"text":"b","label":["ham"]}' >"$T/mixed2.jsonl"
expect_fail "a class number after names, refused" 1 \
	"mixed1.jsonl: line 2: label 0 is a class number, but labels before it are names \(spam, ...\): give --labels FILE" \
	tok --label label -o "$T/mixed.mp" "$T/mixed1.jsonl"
expect_fail "a name after class numbers (in lists), refused" 1 \
	"mixed2.jsonl: line 2: label 'ham' is a name, but labels before it are class numbers" \
	tok --label label -o "$T/mixed.mp" "$T/mixed2.jsonl"
expect_eq "...nothing written" "$(test -e "$T/mixed.mp" && echo written || echo none)" none
printf 'ham\nspam\n' >"$T/hamspam"
expect_eq "with --labels, numbers index its names" \
	"$(tok --label label --labels "$T/hamspam" "$T/mixed1.jsonl" | body | grep -o '"label":[0-9]' | tr '\n' ' ')" \
	'"label":1 "label":0 ' 
expect_fail "standard input named twice as an input" 2 "standard input is read once: '-' is named twice" \
	tok -f csv - - <"$T/l.csv"
expect_fail "--labels - with the input on standard input too" 2 "standard input is read once: as --labels - or as the input" \
	tok --label label --labels - -f csv <"$T/l.csv"
# a byte order mark at the start of a JSON lines file, a --labels file, a
# vocab.txt or a config file is no part of what follows it
printf '\357\273\277{"text":"hi","label":"pos"}\n' >"$T/bom.jsonl"
expect_eq "a BOM before JSON lines" "$(tok --label label "$T/bom.jsonl" | body)" '{"id":0,"ids":[101,7632,102],"label":0}'
printf '\357\273\277neg\npos\n' >"$T/bom-names"
expect_eq "a BOM before --labels' names" "$(tok --label label --labels "$T/bom-names" "$T/l.csv" | ts-cat | head -n 1 | jq -c .labels)" \
	'["neg","pos"]'
{ printf '\357\273\277'; cat "$V"; } >"$T/bom-vocab.txt"
expect_eq "a BOM before a vocab.txt" "$(echo hello | ts-tokenize -v "$T/bom-vocab.txt" | body)" '{"id":0,"ids":[101,7592,102]}'
printf '\357\273\277max-len = 4\n' >"$T/bom.conf"
expect_eq "a BOM before a config file" "$(echo 'hello world again' | tok -c "$T/bom.conf" | body)" '{"id":0,"ids":[101,7592,2088,102]}'
printf '\357\273\277' >"$T/bom-only.txt"
expect_fail "a file of a byte order mark only is empty, not one empty text" 1 "bom-only.txt: empty input" tok "$T/bom-only.txt"
# UTF-16 text (Excel's "Unicode Text", Windows PowerShell's >) is no UTF-8 to
# mend: refused, where its NULs and byte order mark became records and tokens
printf '\377\376h\0i\0\n\0y\0o\0\n\0' >"$T/u16.txt"
expect_fail "UTF-16 text is refused" 1 "u16.txt: UTF-16 text \(it starts with a UTF-16 byte order mark\)" \
	tok -o "$T/u16.mp" "$T/u16.txt"
printf '\377\376t\0e\0x\0t\0\n\0h\0i\0\n\0' >"$T/u16.csv"
expect_fail "a UTF-16 CSV is refused, not read for a column it cannot name" 1 "u16.csv: UTF-16 text" tok "$T/u16.csv"
# on a terminal an error first clears the line a progress meter may have left
printf 'text\n"unterminated\n' >"$T/unterminated.csv"
script -qec "ts-tokenize -v '$V' -o '$T/u.rec' '$T/unterminated.csv'" /dev/null >"$T/tty.out"
check "an error on a terminal clears the line first" grep -q $'^\r\033\\[Kts-tokenize: .*unterminated quote' "$T/tty.out"
printf 'id,text,label\nx1,good,"me\nh\033[2J"\n' >"$T/l3.csv"
expect_fail "a label of a newline and an escape: the error one line, the terminal sent nothing" 1 \
	"l3.csv: line [0-9]+: label 'me\\\\nh\\\\x1b\\[2J' is not in" tok --label label --labels "$T/names" "$T/l3.csv"
printf '{"text":"hi","label":3,"id":7}\n' >"$T/j1.jsonl"
printf '{"text":"yo","label":[1,0],"id":"b"}\n' >"$T/j2.jsonl"
printf '{"text":"ok","label":0.5,"id":9}\n' >"$T/j3.jsonl"
expect_eq "JSONL: int, list and float labels (a stream of each); int and string ids" \
	"$(for j in 1 2 3; do tok --label label --id id "$T/j$j.jsonl" | body; done | tr '\n' ' ')" \
	'{"id":7,"ids":[101,7632,102],"label":3} {"id":"b","ids":[101,10930,102],"label":[1,0]} {"id":9,"ids":[101,7929,102],"label":0.5} '
printf 'text\tlabel\n"tab\tinside"\tz\n' >"$T/t.tsv"
expect_eq "TSV with a quoted tab" "$(tok "$T/t.tsv" | body)" '{"id":0,"ids":[101,21628,2503,102]}'
expect_eq "--cased keeps case" "$(echo 'Hello' | tok --cased | body)" '{"id":0,"ids":[101,100,102]}'

# many threads give the same bytes as one
tok -j 1 --label label --id id "$TOP/examples/spamassassin.csv" >"$T/one"
tok -j 3 --label label --id id "$TOP/examples/spamassassin.csv" >"$T/three"
check "-j 3 writes the same records in the same order as -j 1" cmp "$T/one" "$T/three"
expect_eq "one record per CSV row" "$(ts-cat --no-header "$T/one" | wc -l)" 6046
tok -o "$T/out.msgpack" --label label --id id "$TOP/examples/spamassassin.csv"
check "-o writes the same bytes as standard output" cmp "$T/out.msgpack" "$T/one"

# bad input: one line, exit 1, no output file left behind
expect_fail "missing column names the columns" 1 "no column 'txt' \(columns: id, text, label\)" tok --text txt "$T/l.csv"
printf 'text,label\n"open,x\n' >"$T/bad.csv"
expect_fail "unterminated quote" 1 "bad.csv: line 2: unterminated quote" tok -o "$T/o1" "$T/bad.csv"
expect_eq "no half-written output" "$(ls -A "$T" | grep -c '^\.\?o1')" 0
: >"$T/empty.csv"
expect_fail "empty input" 1 "empty input" tok "$T/empty.csv"
expect_eq "empty input: not even a header on standard output" "$(wc -c <"$T/out")" 0
printf 'text\n' >"$T/hdr.csv"
expect_fail "header but no records" 1 "empty input" tok -o "$T/o2" "$T/hdr.csv"
expect_eq "no output file for an empty input" "$(ls -A "$T" | grep -c '^\.\?o2')" 0
printf 'text\nok \xff\xfe bytes\n' >"$T/utf.csv"
expect_eq "invalid UTF-8 is replaced and counted, the first named" "$(tok "$T/utf.csv" 2>"$T/w" | body; sed "s|$T/||" "$T/w")" \
	"$(printf '{"id":0,"ids":[101,7929,27507,102]}\nts-tokenize: replaced 2 invalid UTF-8 sequences with U+FFFD, the first in utf.csv: line 2')"
expect_fail "--strict refuses invalid UTF-8" 1 "utf.csv: line 2: invalid UTF-8" tok --strict "$T/utf.csv"
printf '{"text":"caf\xe9 ok"}\n' >"$T/utf.jsonl"
expect_eq "JSON lines: invalid UTF-8 is replaced and named, not refused as JSON" "$(tok "$T/utf.jsonl" 2>"$T/w" | body; sed "s|$T/||" "$T/w")" \
	"$(printf '{"id":0,"ids":[101,24689,7929,102]}\nts-tokenize: utf.jsonl: line 1: replaced an invalid UTF-8 sequence with U+FFFD')"
printf 'fine\nstill fine\nbad \xff\n' | tok --format lines - 2>"$T/w" >/dev/null
expect_eq "invalid UTF-8 on standard input is named so" "$(cat "$T/w")" \
	"ts-tokenize: standard input: line 3: replaced an invalid UTF-8 sequence with U+FFFD"
expect_fail "JSON lines: --strict refuses invalid UTF-8" 1 "utf.jsonl: line 1: invalid UTF-8" tok --strict "$T/utf.jsonl"
printf 'hello\nworld\n' >"$T/notvocab.txt"
expect_fail "a vocab that is not one" 1 "notvocab.txt" ts-tokenize -v "$T/notvocab.txt" "$T/l.csv"
printf '{"text": 5}\n' >"$T/num.jsonl"
expect_fail "JSONL text that is not a string" 1 "num.jsonl: line 1: field 'text' is not a string" tok "$T/num.jsonl"
printf '{"text":"a\\u0000b"}\n' >"$T/nul.jsonl"
expect_fail "JSONL text with \\u0000: said plainly" 1 "nul.jsonl: line 1: a string holds .u0000, a NUL character, which no text or name may hold" \
	tok "$T/nul.jsonl"
printf '{"text":"a","id":1.5}\n' >"$T/fid.jsonl"
expect_fail "a JSONL id of a fraction: what an id may be" 1 "fid.jsonl: line 1: field 'id' is not a string or a whole number" \
	tok --id id -o "$T/fid.mp" "$T/fid.jsonl"
# integers past 64 bits, which Python writes and jansson alone refuses
printf '{"text":"hi","label":1,"views":123456789012345678901234567890,"id":9223372036854775807,"x":{"y":[-99999999999999999999]}}\n' >"$T/big.jsonl"
expect_eq "JSONL: an integer past 64 bits in a field not read is no matter; an id of 2^63-1 stays exact" \
	"$(tok --label label --id id "$T/big.jsonl" | body)" '{"id":9223372036854775807,"ids":[101,7632,102],"label":1}'
printf '{"text":"a","id":123456789012345678901234567890}\n' >"$T/bigid.jsonl"
expect_fail "a JSONL id past 64 bits: said so, and how to keep it" 1 \
	"bigid.jsonl: line 1: field 'id' is a whole number beyond 64 bits \(-2\^63 to 2\^63-1\): write it as a string$" \
	tok --id id -o "$T/bigid.mp" "$T/bigid.jsonl"
printf '{"text":"a","label":123456789012345678901234567890}\n' >"$T/biglabel.jsonl"
expect_fail "a JSONL class label past 64 bits: out of range" 1 \
	"biglabel.jsonl: line 1: label 1.2345678901234568e\+29 is out of range \(0 to 2147483647\)$" \
	tok --label label -o "$T/biglabel.mp" "$T/biglabel.jsonl"
printf '{"text":"a","label":[0,18446744073709551616]}\n' >"$T/biglist.jsonl"
expect_fail "one in a list of labels: the same" 1 \
	"biglist.jsonl: line 1: label 1.8446744073709552e\+19 is out of range \(0 to 2147483647\)$" \
	tok --label label -o "$T/biglabel.mp" "$T/biglist.jsonl"
# the floats JSON lacks, which Python's json.dumps writes: NaN, Infinity, -Infinity
printf '{"text":"hi","label":1,"score":NaN,"x":[Infinity,-Infinity,1e400]}\n' >"$T/nan.jsonl"
expect_eq "JSONL: NaN, Infinity and a real past a double in fields not read are no matter" \
	"$(tok --label label "$T/nan.jsonl" | body)" '{"id":0,"ids":[101,7632,102],"label":1}'
printf '{"text":"hi","label":NaN}\n' >"$T/nanlabel.jsonl"
expect_fail "a NaN label: said so" 1 "nanlabel.jsonl: line 1: field 'label' is null, NaN or infinite$" \
	tok --label label --numeric-labels -o "$T/nan.mp" "$T/nanlabel.jsonl"
printf '{"text":-Infinity}\n' >"$T/inftext.jsonl"
expect_fail "an infinite text: the same" 1 "inftext.jsonl: line 1: field 'text' is null, NaN or infinite$" \
	tok -o "$T/nan.mp" "$T/inftext.jsonl"
printf '{"text":"a", "b": NaNa}\n' >"$T/nana.jsonl"
expect_fail "a word that is none of them is not JSON" 1 "nana.jsonl: line 1: not JSON: invalid token near 'NaNa'$" \
	tok -o "$T/nan.mp" "$T/nana.jsonl"
printf '[\n  {"text": "a"}\n]\n' >"$T/pretty.json"
expect_fail "JSON spread over lines: said, where 'not JSON' said the file was none" 1 \
	"pretty.json: line 1: not JSON: .* \(the line ends inside it: JSON lines hold one whole object a line\)" tok "$T/pretty.json"
printf '{"text": "a"} x\n' >"$T/trail.jsonl"
expect_fail "JSONL with text after the object: no such hint" 1 "trail.jsonl: line 1: not JSON: end of file expected near 'x'$" \
	tok "$T/trail.jsonl"
printf '{"txt": "a"}\n' >"$T/miss.jsonl"
expect_fail "JSONL missing field names the fields" 1 "line 1: no field 'text' \(fields: txt\)" tok "$T/miss.jsonl"
echo '{"%s%n%s": 1}' >"$T/pct.jsonl"
expect_fail "JSONL field names are shown as they are" 1 "line 1: no field 'text' \(fields: %s%n%s\)" tok "$T/pct.jsonl"
printf 'text,label\na,b,c\n' >"$T/ragged.csv"
expect_fail "a row with too many fields" 1 "ragged.csv: line 2: 3 fields, expected 2" tok "$T/ragged.csv"
# a CR is a line end only before LF: a doubled one made the label 'pos\r', a class
# of its own beside 'pos', and an old Mac CSV (CR line ends) one record, its header
printf 'text,label\r\nhello,pos\r\r\nbye,pos\r\n' >"$T/crcr.csv"
expect_fail "a CR before CR LF, refused" 1 "crcr.csv: line 2: a CR outside quotes that ends no line" \
	tok --label label "$T/crcr.csv"
printf 'text,label\r"hello","pos"\r' >"$T/mac.csv"
expect_fail "CR line ends, refused as such" 1 "mac.csv: line 1: a CR outside quotes that ends no line" tok "$T/mac.csv"
expect_fail "no vocab" 2 "a tokenizer is required: -t tokenizer.json or -v vocab.txt" ts-tokenize "$T/l.csv"
expect_fail "unknown format" 2 "--format: 'xml' is not one of" tok -f xml "$T/l.csv"
expect_fail "stride too large: the room there is" 2 "--stride 6 must be smaller than the 6 tokens --max-len 8 leaves for folded text" \
	tok --fold --max-len 8 --stride 6 "$T/l.csv"
expect_fail "a pair's stride: half the room" 2 "--stride 3 must be smaller than the 3 tokens --max-len 8 leaves" \
	tok --fold --max-len 8 --stride 3 --text-pair pair "$T/p.csv"
expect_fail "no room for a pair: the least --max-len" 2 "--max-len 3 leaves no room for the text pair \(4 at least\)" \
	tok --max-len 3 --text-pair pair "$T/p.csv"
expect_fail "--stride without --fold, which it is for" 2 "--stride is the overlap of folded pieces: it goes with --fold" \
	tok --max-len 8 --stride 2 "$T/l.csv"
expect_fail "unknown extension" 2 "cannot tell the format" tok "$T/notvocab.txt.gz"
mkdir "$T/texts.d"
expect_fail "a dir for a file: said to be one, not that its name tells no format" 1 "^ts-tokenize: read $T/texts.d: Is a directory$" \
	tok "$T/texts.d"
expect_fail "so with --format" 1 "^ts-tokenize: read $T/texts.d: Is a directory$" tok --format lines "$T/texts.d"
mkfifo "$T/fifo"
sleep 10 >"$T/fifo" &
writer=$!
ts-tokenize -v "$V" -f lines -o "$T/o3" "$T/fifo" &
reader=$!
writing=no
for _ in $(seq 100); do ls -A "$T" | grep -q '^\.\?o3.*tmp' && { writing=yes; break; }; sleep 0.02; done
kill -INT $reader; wait $reader; rc=$?
kill $writer 2>/dev/null
expect_eq "interrupted: it was writing its temp file" "$writing" yes
expect_eq "interrupted: exits by the signal" "$rc" 130
expect_eq "interrupted: no temp file left" "$(ls -A "$T" | grep -c '^\.\?o3')" 0
finish
