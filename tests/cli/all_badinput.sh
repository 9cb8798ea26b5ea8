#!/usr/bin/env bash
# The README's "Bad input" table: each row's command, run in a dir holding
# vocab.txt, small.csv, its data dir data/ and a two-step run r1/, exits as the
# row says and prints the row's stderr ("..." matches any text; "(nothing...)"
# means no stderr at all).
. "$(dirname "$0")/../lib.sh"
W=$T/w
mkdir -p "$W" && cd "$W" || exit 1
cp "$TOP/examples/vocab.txt" .
head -n 201 "$TOP/examples/spamassassin.csv" >small.csv
ts-tokenize -v vocab.txt --label label --max-len 64 small.csv | ts-shard -o data/ 2>/dev/null
timeout 120 ts-train --data data/ --run r1 --layers 1 --hidden 16 --heads 2 --max-pos 64 \
	--max-steps 2 2>/dev/null || fail "the setup run r1"

# The table's rows, as "command<TAB>exit<TAB>stderr": cells split on | that are
# not \|, the backquotes taken off.
rows() {
	sed -n '/^<!-- bad-input -->$/,/^$/p' "$TOP/README.md" | tail -n +4 | sed '/^$/d' |
		sed -E 's/\\\|/\x01/g' | awk -F'|' '{ print $3 "\t" $4 "\t" $5 }' |
		sed -E -e 's/\x01/|/g' -e 's/(^|\t) *`?/\1/g' -e 's/`? *(\t|$)/\1/g'
}
n=0
while IFS=$'\t' read -r cmd code want; do
	n=$((n + 1))
	timeout 60 bash -c "$cmd" >/dev/null 2>"$T/err"; rc=$?
	got=$(cat "$T/err")
	case $want in "(nothing"*) want="" ;; esac
	pat=$(sed -e 's/[][*?\\]/\\&/g' -e 's/\.\.\./*/g' <<<"$want")
	# unquoted: $pat is a pattern
	if [ "$rc" = "$code" ] && [[ $got == $pat ]]; then pass "bad input row $n: $cmd"
	else fail "bad input row $n: $cmd"; printf '    exit %s (want %s)\n    got:  %s\n    want: %s\n' "$rc" "$code" "$got" "$want"; fi
done < <(rows)
[ "$n" -ge 16 ] || fail "the README's bad input table has its rows (found $n)"
finish
