# ts-tokenize -j: worker and writer threads give the same records as one
# thread over many batches, and an error found on a thread ends the command
# with one line. Under make test SAN=1 this also catches a batch's record
# slots being read before they are set (they were, for the label fields).
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
awk 'BEGIN { print "id,text,label"; for (i = 0; i < 5000; i++) printf "%d,record %d says %s,%s\n", i, i, (i % 3 ? "hello" : "goodbye world"), (i % 2 ? "spam" : "ham") }' >"$T/many.csv"
awk 'BEGIN { for (i = 0; i < 5000; i++) printf "{\"text\": \"record %d\", \"label\": %s}\n", i, (i % 2 ? "[1, 2]" : "[0]") }' >"$T/lists.jsonl"
# 400 records of 4 kB: batches cut by their bytes, not their count
awk 'BEGIN { print "text,label"; for (i = 0; i < 400; i++) { printf "\"record %d", i; for (j = 0; j < 400; j++) printf " word%d", (i * j) % 997; printf "\",%s\n", (i % 2 ? "spam" : "ham") } }' >"$T/long.csv"

for input in many.csv:5000 lists.jsonl:5000 long.csv:400; do
	records=${input#*:} input=${input%:*}
	timeout 120 ts-tokenize -v "$V" --label label -j 1 -o "$T/one.msgpack" "$T/$input"
	check "$input: -j 4 runs" timeout 120 ts-tokenize -v "$V" --label label -j 4 -o "$T/four.msgpack" "$T/$input"
	check "$input: -j 4 writes the same records as -j 1, over several batches" cmp "$T/one.msgpack" "$T/four.msgpack"
	expect_eq "$input: every record is there" "$(ts-cat --no-header "$T/four.msgpack" | wc -l)" "$records"
done

awk 'BEGIN { for (i = 0; i < 5000; i++) printf "line %d caf\351\n", i }' >"$T/bad.txt"
expect_fail "--strict: invalid UTF-8 found on a thread ends it with one line" 1 "bad.txt: line 1: invalid UTF-8" \
	timeout 120 ts-tokenize -v "$V" -j 4 --strict "$T/bad.txt"
if [ -w /dev/full ]; then
	expect_fail "a write error on the writer thread ends it with one line" 1 "write standard output: No space left" \
		bash -c 'timeout 120 ts-tokenize -v "$1" -j 4 "$2" >/dev/full' _ "$V" "$T/bad.txt"
else
	fail "a write error on the writer thread: /dev/full is missing"
fi
finish
