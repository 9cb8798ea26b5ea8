# Where outputs go: -o through a symlink, into a FIFO or a device, and a
# write error on standard output, for every command.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 41 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
TOK=(ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv")
"${TOK[@]}" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack"
train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
	--batch 8 --max-steps 2 -j 2 --run "$T/run" 2>/dev/null || fail "a model to predict with"

# out CMD FILE: CMD's output written with -o FILE; want/CMD holds what it must be
out() {
	case $1 in
	cat) timeout 60 ts-cat -o "$2" "$T/tok.msgpack" ;;
	tokenize) timeout 60 "${TOK[@]}" -o "$2" ;;
	eval) timeout 60 ts-eval -m "$T/run/final" --data "$T/data" --predict -o "$2" >/dev/null ;;
	esac
}
mkdir "$T/want"
for c in cat tokenize eval; do out $c "$T/want/$c"; done
[ -s "$T/want/eval" ] && pass "outputs to compare with" || fail "outputs to compare with"

for c in cat tokenize eval; do
	echo old >"$T/$c.target" && ln -s "$c.target" "$T/$c.link"
	check "$c -o a symlink" out $c "$T/$c.link"
	check "$c -o a symlink: the link stays a link" test -L "$T/$c.link"
	check "$c -o a symlink: its target is written" cmp "$T/$c.target" "$T/want/$c"
	ln -s "$c.new" "$T/$c.dangling"
	check "$c -o a dangling symlink" out $c "$T/$c.dangling"
	check "$c -o a dangling symlink: the link stays a link" test -L "$T/$c.dangling"
	check "$c -o a dangling symlink: its target is created" cmp "$T/$c.new" "$T/want/$c"

	mkfifo "$T/$c.fifo"
	cat "$T/$c.fifo" >"$T/$c.got" & reader=$!
	check "$c -o a FIFO" out $c "$T/$c.fifo"
	for _ in $(seq 100); do kill -0 $reader 2>/dev/null || break; sleep 0.05; done
	kill $reader 2>/dev/null; wait $reader 2>/dev/null
	check "$c -o a FIFO: the reader gets the data" cmp "$T/$c.got" "$T/want/$c"
	check "$c -o a FIFO: it is still a FIFO" test -p "$T/$c.fifo"
done

# -o /dev/stdout or /dev/fd/1 with standard output a file: written through the
# descriptor, after what came before it (> and >>), not renamed over the file
# (ts-eval's standard output has its report)
for c in cat tokenize; do
	{ echo before; out $c /dev/stdout; echo after; } >"$T/$c.stdout"
	{ echo before; cat "$T/want/$c"; echo after; } >"$T/$c.expected"
	check "$c -o /dev/stdout, stdout a file: the lines before and after it kept" cmp "$T/$c.stdout" "$T/$c.expected"
	echo before >"$T/$c.appended" && out $c /dev/fd/1 >>"$T/$c.appended"
	{ echo before; cat "$T/want/$c"; } >"$T/$c.expected"
	check "$c -o /dev/fd/1 >>file: appended" cmp "$T/$c.appended" "$T/$c.expected"
done
expect_fail "-o a closed descriptor" 1 "cannot write /dev/fd/9: Bad file descriptor" out cat /dev/fd/9

# An output that is an input, by its name, a symlink or a hard link: refused,
# the input left whole
cp "$T/small.csv" "$T/in.csv" && cp "$T/tok.msgpack" "$T/in.msgpack" && cp "$V" "$T/vocab.txt"
ln -s in.msgpack "$T/in.link" && ln "$T/in.msgpack" "$T/in.hard"
for o in in.msgpack in.link in.hard; do
	expect_fail "ts-cat -o $o, its input" 1 "cannot write $T/$o: it is the input $T/in.msgpack" \
		ts-cat -o "$T/$o" "$T/in.msgpack"
done
expect_fail "ts-tokenize -o its input" 1 "cannot write $T/in.csv: it is the input" \
	ts-tokenize -v "$V" --label label -o "$T/in.csv" "$T/in.csv"
expect_fail "ts-tokenize -o its vocab" 1 "cannot write $T/vocab.txt: it is the tokenizer" \
	ts-tokenize -v "$T/vocab.txt" --label label -o "$T/vocab.txt" "$T/in.csv"
check "...the inputs left whole" cmp "$T/in.csv" "$T/small.csv"
check "...the inputs left whole (records)" cmp "$T/in.msgpack" "$T/tok.msgpack"
check "...the inputs left whole (vocab)" cmp "$T/vocab.txt" "$V"
cp -r "$T/run/final" "$T/model"
expect_fail "ts-eval --predict -o a file of its model" 1 "cannot write $T/model/model.safetensors: it is in the model dir" \
	ts-eval -m "$T/model" --data "$T/data" --predict -o "$T/model/model.safetensors"
expect_fail "ts-eval --predict -o a file of its data dir" 1 "cannot write $T/data/test.shard: it is in the data dir" \
	ts-eval -m "$T/model" --data "$T/data" --predict -o "$T/data/test.shard"
check "...the model left whole" ts-eval -m "$T/model" --data "$T/data"
cp -r "$T/data" "$T/data2" && cp "$T/tok.msgpack" "$T/data2/"
expect_fail "ts-shard --force -o the dir its input is in" 1 "cannot replace $T/data2: the input $T/data2/tok.msgpack is in it" \
	ts-shard --force -o "$T/data2" "$T/data2/tok.msgpack"
check "...the input left" cmp "$T/data2/tok.msgpack" "$T/tok.msgpack"

# A read-only file is not replaced, as > would not replace it (root's > writes
# it, so as root the command runs as nobody)
as_user() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }
chmod 755 "$T" && mkdir -m 777 "$T/ro" && as_user sh -c 'echo old >"$1" && chmod 444 "$1"' sh "$T/ro/x"
expect_fail "ts-cat -o a read-only file" 1 "cannot write $T/ro/x: Permission denied" as_user ts-cat -o "$T/ro/x" "$T/tok.msgpack"
expect_eq "...which is left as it was" "$(cat "$T/ro/x")" old

# ts-tokenize holds the records in a temporary file until it knows the label
# names: in $TMPDIR, as ts-eval's, so that a small /tmp can be passed over
expect_fail "ts-tokenize's temporary file in \$TMPDIR" 1 "cannot create a temporary file in $T/none: No such file" \
	env TMPDIR="$T/none" "${TOK[@]}"
check "...and with \$TMPDIR a dir, the same records" cmp <(TMPDIR="$T" "${TOK[@]}") "$T/tok.msgpack"

# A dir replaced keeps its permissions, as a file does: a private one stays private
mkdir -m 700 "$T/private"
check "ts-shard -o an empty private dir" ts-shard -o "$T/private" "$T/tok.msgpack"
expect_eq "...which stays private" "$(stat -c %a "$T/private")" 700
chmod 750 "$T/private"
check "ts-shard --force over a data dir of mode 750" ts-shard --force -o "$T/private" "$T/tok.msgpack"
expect_eq "...which keeps it" "$(stat -c %a "$T/private")" 750

# New outputs take their modes from the umask, as cp's do: a group that shares
# a project dir (umask 002) can write them
(umask 002 && ts-cat -o "$T/shared.msgpack" "$T/tok.msgpack" && ts-shard -o "$T/shared" "$T/tok.msgpack" &&
	train --data "$T/shared" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
		--batch 8 --max-steps 1 -j 2 --run "$T/sharedrun" 2>/dev/null)
expect_eq "with umask 002, new files and dirs are group-writable" \
	"$(stat -c %a "$T/shared.msgpack" "$T/shared" "$T/shared/manifest.json" "$T/sharedrun" "$T/sharedrun/events.msgpack" \
		"$T/sharedrun/final" "$T/sharedrun/final/model.safetensors" | sort -u | tr '\n' ' ')" "664 775 "

# A name as long as the file system allows: the temp name beside it is cut, not refused
long=$(printf 'n%.0s' {1..250})é
check "ts-cat -o a name of 252 bytes" ts-cat -o "$T/$long" "$T/tok.msgpack"
check "...written whole" cmp "$T/$long" <(ts-cat "$T/tok.msgpack")
check "ts-shard -o a dir named so" ts-shard -o "$T/d$long" "$T/tok.msgpack"
check "ts-shard --force over it" ts-shard --force -o "$T/d$long" "$T/tok.msgpack"
expect_eq "...nothing else left beside them" "$(ls "$T" | grep -c "^d\?$long")" 2

mkdir "$T/dir" && ln -s dir "$T/dirlink"
check "ts-shard -o a symlink to a dir" ts-shard -o "$T/dirlink" "$T/tok.msgpack"
check "ts-shard -o a symlink: the link stays a link" test -L "$T/dirlink"
check "ts-shard -o a symlink: the dir it names is written" test -f "$T/dir/manifest.json"
# a symlink to nothing yet: its target is made, by ts-shard -o and ts-train --run alike
ln -s newdata "$T/datalink" && ln -s newrun/ "$T/runlink"
check "ts-shard -o a dangling symlink" ts-shard -o "$T/datalink/" "$T/tok.msgpack"
check "ts-shard -o a dangling symlink: the link stays a link, the dir it names made" test -L "$T/datalink" -a -f "$T/newdata/manifest.json"
check "ts-train --run a dangling symlink" train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 \
	--max-pos 32 --batch 8 --max-steps 1 -j 2 --run "$T/runlink/"
check "ts-train --run a dangling symlink: the link stays a link, the run made where it points" \
	test -L "$T/runlink" -a -f "$T/newrun/config" -a -f "$T/newrun/final/model.safetensors"
check "...and resumes through it" train --resume "$T/runlink" --max-steps 2

# Copies of /dev/null and /dev/full in $T: a regression replaces these, not the real ones.
if mknod "$T/null" c 1 3 2>/dev/null && mknod "$T/full" c 1 7 2>/dev/null && echo x >"$T/null" 2>/dev/null; then
	for c in cat tokenize eval; do
		check "$c -o /dev/null" out $c "$T/null"
		check "$c -o /dev/null: still a character device" test -c "$T/null"
		expect_fail "$c -o /dev/full fails in one line" 1 "write $T/full: No space left on device" out $c "$T/full"
		check "$c -o /dev/full: still a character device" test -c "$T/full"
	done
	# the run's log: a full disk there is an error too, not a silent gap
	# (a run stopped at once, its log then put on the device, resumed)
	mkdir -p "$T/logfull" && touch "$T/logfull/stop"
	train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
		--batch 8 --max-steps 2 -j 2 --run "$T/logfull" >/dev/null 2>&1
	ln -sf "$T/full" "$T/logfull/log/rank-0.log"
	expect_fail "ts-train with its log on a full device fails in one line" 1 \
		"log/rank-0.log: cannot write: No space left on device" train --resume "$T/logfull"
else
	skip "-o to a device: mknod needs root and a file system that allows devices"
fi

# Standard output: a failed write is an error, whatever the command printed.
to_full() { "$@" >/dev/full; }
for c in ts-cat ts-tokenize ts-shard ts-train ts-eval ts-stop; do
	for o in --help --version; do
		expect_fail "$c $o >/dev/full" 1 "write standard output: No space left on device" to_full $c $o
	done
done
expect_fail "ts-cat >/dev/full" 1 "write standard output: No space left on device" to_full ts-cat "$T/tok.msgpack"
expect_fail "ts-tokenize >/dev/full" 1 "write standard output: No space left on device" to_full "${TOK[@]}"
expect_fail "ts-eval >/dev/full" 1 "write standard output: No space left on device" to_full ts-eval -m "$T/run/final" --data "$T/data"
expect_fail "ts-eval --report >/dev/full" 1 "write standard output: No space left on device" \
	to_full ts-eval -m "$T/run/final" --data "$T/data" --report
expect_fail "ts-eval --predict >/dev/full" 1 "write standard output: No space left on device" \
	to_full ts-eval -m "$T/run/final" --data "$T/data" --predict
expect_fail "ts-eval --predict -o FILE, its metrics >/dev/full" 1 "write standard output: No space left on device" \
	to_full ts-eval -m "$T/run/final" --data "$T/data" --predict -o "$T/full-pred.msgpack"
check "...and no file of predictions appears" test ! -e "$T/full-pred.msgpack"
# A standard descriptor closed (>&-, 2>&-): its use fails, and the next file
# opened, taking its number, gets nothing meant for it (the records in
# ts-tokenize's spool, ts-train's messages in its run's lock)
closed_out() { "$@" >&-; }
expect_fail "ts-tokenize >&-" 1 "write standard output: Bad file descriptor" closed_out "${TOK[@]}"
expect_fail "ts-cat >&-" 1 "write standard output: Bad file descriptor" closed_out ts-cat "$T/tok.msgpack"
train --data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 \
	--batch 8 --max-steps 2 -j 2 --run "$T/noerr" >/dev/null 2>&-
expect_eq "ts-train 2>&-: its lock holds its pid and host, no messages" "$(grep -c ts-train "$T/noerr/lock")" 0
# ts-stop prints when it finds a trainer: the lock held here stands in for one
mkdir "$T/held" && exec 9>"$T/held/lock" && flock 9
expect_fail "ts-stop >/dev/full" 1 "write standard output: No space left on device" to_full ts-stop "$T/held"
exec 9>&-
finish
