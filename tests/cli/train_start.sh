# ts-train's start: a stop asked for before its first step, and what a
# resumed run needs of what it began from.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack" >/dev/null
TINY=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2
	--max-steps 6 --eval-every 3)
events() { ts-cat "$1/events.msgpack" | jq -r .event | tr '\n' ' '; }
alive() { kill -0 "$1" 2>/dev/null; }
# preloaded LIB CMD...: CMD with LIB preloaded (under ASan too, whose runtime
# would otherwise refuse to come after it)
preloaded() { LD_PRELOAD=$1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 "${@:2}"; }
check "a run to compare with" train "${TINY[@]}" --vocab "$V" --run "$T/ref"

# a stop before the run dir is made ends ts-train at once by the signal and
# leaves nothing: here it waits to read its --vocab from a pipe
for sig in INT TERM; do
	mkfifo "$T/v.$sig"
	ts-train "${TINY[@]}" --vocab "$T/v.$sig" --run "$T/pre.$sig" >/dev/null 2>&1 &
	pid=$!
	exec 3>"$T/v.$sig"
	for _ in $(seq 100); do ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "v\.$sig" && break; sleep 0.05; done
	kill -"$sig" $pid
	for _ in $(seq 50); do alive $pid || break; sleep 0.1; done
	alive $pid && { fail "SIG$sig before the run dir is made: ts-train ends within 5 s"; kill -9 $pid; }
	wait $pid; rc=$?
	exec 3>&-
	expect_eq "SIG$sig before the run dir is made: ended by it, and no run dir" \
		"$rc $(ls -d "$T/pre.$sig" 2>/dev/null)" "$((128 + $(kill -l $sig))) "
done

# a stop request in the dir before the run begins: the run is made, and stops
# before its first step with no checkpoint; --resume then trains it from step 0
mkdir "$T/s" && touch "$T/s/stop"
check "a stop request before the run: it exits 0" train "${TINY[@]}" --vocab "$V" --run "$T/s"
cp "$T/err" "$T/s.err"
expect_eq "...stopped before its first step, at step 0, with no checkpoint" \
	"$(events "$T/s")$(ts-cat "$T/s/events.msgpack" | jq -r 'select(.event == "stop") | .step') $(ls -A "$T/s/ckpt")" \
	"start stop 0 "
check "...saying so, and how to go on" grep -qF "stopped at step 0; continue with ts-train --resume $T/s" "$T/s.err"
check "...and --resume trains it from step 0" train --resume "$T/s"
expect_same "...to the model of the run never stopped" "$(losses "$T/s")" "$(losses "$T/ref")"

# SIGINT once the run dir is made, before the first step, placed by an open()
# that raises it as the event log first opens: the same stop, in a new run and in a
# resumed one, which keeps its checkpoint as it was
cat >"$T/intev.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
static int opened(const char *sym, const char *path, int flags, va_list ap)
{
	static int raised;
	size_t n = strlen(path);
	if (n > 15 && !strcmp(path + n - 15, "/events.msgpack") && !raised++)
		raise(SIGINT);
	return ((int (*)(const char *, int, ...))dlsym(RTLD_NEXT, sym))(path, flags, va_arg(ap, int));
}
int open(const char *path, int flags, ...) { va_list ap; va_start(ap, flags); int fd = opened("open", path, flags, ap); va_end(ap); return fd; }
int open64(const char *path, int flags, ...) { va_list ap; va_start(ap, flags); int fd = opened("open64", path, flags, ap); va_end(ap); return fd; }
EOF
${CC:-cc} -shared -fPIC -o "$T/intev.so" "$T/intev.c" -ldl
check "SIGINT before the first step: it exits 0" preloaded "$T/intev.so" train "${TINY[@]}" --vocab "$V" --run "$T/i"
expect_eq "...stopped at step 0, with no checkpoint" \
	"$(events "$T/i")$(ts-cat "$T/i/events.msgpack" | jq -r 'select(.event == "stop") | .step') $(ls -A "$T/i/ckpt")" \
	"start stop 0 "
cp -r "$T/ref" "$T/j" && rm -rf "$T/j/final" "$T/j/best" "$T/j/ckpt/step-6"
keep_events "$T/j" '{print} /"event":"checkpoint"/ {exit}'
check "SIGINT before a resumed run's first step: it exits 0" preloaded "$T/intev.so" train --resume "$T/j"
expect_eq "...stopped at the checkpoint's step, the checkpoint as it was" \
	"$(events "$T/j" | awk '{print $(NF-1), $NF}') $(ts-cat "$T/j/events.msgpack" | jq -r 'select(.event == "stop") | .step') $(ls -A "$T/j/ckpt")" \
	"resume stop 3 step-3"
check "...and it resumes from there" train --resume "$T/j"
expect_same "...to the model of the run never stopped" "$(losses "$T/j")" "$(losses "$T/ref")"
check "...the same final model" cmp "$T/j/final/model.safetensors" "$T/ref/final/model.safetensors"

# a run from --init resumes from its checkpoint, which holds all its weights, when
# the --init dir has gone since; without a checkpoint it starts again from --init,
# and so needs it, and says so
cp -r "$T/ref/best" "$T/init"
FROM=(--data "$T/data" --init "$T/init" --batch 8 --seed 5 -j 2 --max-steps 6 --eval-every 3)
check "a run from --init to compare with" train "${FROM[@]}" --run "$T/fref"
cp -r "$T/fref" "$T/f" && rm -rf "$T/f/final" "$T/f/best" "$T/f/ckpt/step-6"
keep_events "$T/f" '{print} /"event":"checkpoint"/ {exit}'
cp -r "$T/f" "$T/f0" && rm -rf "$T/f0/ckpt/step-3" && keep_events "$T/f0" '/"event":"checkpoint"/ {exit} {print}'
mv "$T/init" "$T/init-gone"
check "--init gone: the run resumes from its checkpoint" train --resume "$T/f"
expect_same "...to the model of the run never stopped" "$(losses "$T/f")" "$(losses "$T/fref")"
check "...the same final model" cmp "$T/f/final/model.safetensors" "$T/fref/final/model.safetensors"
expect_fail "--init gone, no checkpoint: refused, naming the config's line and why it is needed" 1 \
	"^ts-train: $T/f0/config: init = $T/init: No such file or directory; with no checkpoint yet the run starts again from it: where it has moved, set init there$" \
	train --resume "$T/f0"
cp -r "$T/f" "$T/fv" && rm "$T/fv/vocab.txt" "$T/fv/tokenizer_config.json"
expect_fail "--init gone, no copy of the vocab in the run (killed as it began): refused, saying why" 1 \
	"^ts-train: $T/fv/config: init = $T/init: No such file or directory; the run has no copy of its vocab yet and makes it from there: where it has moved, set init there$" \
	train --resume "$T/fv"
sed -i "s|^init = .*|init = $T/init-gone|" "$T/f0/config"
check "...with init set where it has moved, it starts again" train --resume "$T/f0"
expect_same "...to the model of the run never stopped" "$(losses "$T/f0")" "$(losses "$T/fref")"

# every checkpoint removed by hand (to free the disk): --resume would train the run
# again from step 0 over its best/ and final/; refused, the run left as it was
cp -r "$T/ref" "$T/rm" && rm -rf "$T/rm/ckpt" && cp "$T/rm/events.msgpack" "$T/rm.events"
for more in "" "--max-steps 12"; do
	expect_fail "every checkpoint removed: --resume${more:+ $more} refused, naming the last the run wrote" 1 \
		"^ts-train: $T/rm: no checkpoint is left in ckpt/, where the run wrote ckpt/step-6: --resume would train it again from step 0, over its best/ and final/ \(to train one of its models further, start a new run with --init\)$" \
		train --resume "$T/rm" $more
done
check "...its best/ as it was" cmp "$T/rm/best/model.safetensors" "$T/ref/best/model.safetensors"
check "...its events as they were" cmp "$T/rm/events.msgpack" "$T/rm.events"

# checkpoints past step 2^31 (a long run of small steps): found, resumed from and
# pruned by their full step; names that only look like a step's are no checkpoints
cp -r "$T/ref" "$T/big" && rm -rf "$T/big/final" && keep_events "$T/big" '!/"event":"done"/'
mv "$T/big/ckpt/step-6" "$T/big/ckpt/step-4000000000"
jq '.step = 4000000000' "$T/ref/ckpt/step-6/state.json" >"$T/big/ckpt/step-4000000000/state.json"
redigest "$T/big/ckpt/step-4000000000"
for odd in step-05 step-+7 "step- 8" step-99999999999999999999; do cp -r "$T/ref/ckpt/step-3" "$T/big/ckpt/$odd"; done
check "a checkpoint at step 4000000000: --resume --max-steps 4000000002" \
	timeout 60 ts-train --resume "$T/big" --max-steps 4000000002
expect_eq "...resumed from it, and no other passed over" \
	"$(ts-cat "$T/big/events.msgpack" | jq -r 'select(.event == "resume") | "\(.step) \(.from) \(.passed_over)"')" \
	"4000000000 $T/big/ckpt/step-4000000000 null"
expect_eq "...done at step 4000000002, the newest 3 checkpoints kept, the odd names left alone" \
	"$(ts-cat "$T/big/events.msgpack" | jq -r 'select(.event == "done") | .step') $(ls "$T/big/ckpt" | tr '\n' '|')" \
	"4000000002 step- 8|step-+7|step-05|step-3|step-4000000000|step-4000000002|step-99999999999999999999|"

# a run dir's path must leave room (128 bytes) below PATH_MAX (4096) for the
# files a run makes in it: a longer one is refused before anything is made,
# where a run would have failed partway and left its dir half made; one of
# the longest trains and resumes
long() {   # long DIR N: DIR/ddd.../r, N bytes long
	local p=$1
	while [ $((${#p} + 201)) -lt "$2" ]; do p=$p/$(printf '%0200d' 0); done
	printf '%s/%s' "$p" "$(printf '%*s' $(($2 - ${#p} - 1)) '' | tr ' ' r)"
}
for n in 4060 3968; do
	L=$(long "$T/deep" $n)
	expect_fail "a --run of $n bytes: refused in one line" 1 \
		"^ts-train: $L: a path of $n bytes leaves no room for the files of a run in it \(a run dir's path may have up to 3967\)$" \
		train "${TINY[@]}" --vocab "$V" --run "$L"
	expect_eq "...and nothing made" "$(ls -A "$T/deep" 2>/dev/null)" ""
done
L=$(long "$T/deep" 3967)
check "a --run of 3967 bytes trains, and stops on request" stop_after 4 train "${TINY[@]}" --vocab "$V" --run "$L"
check "...and resumes" train --resume "$L"
expect_same "...to the model of the run never stopped" "$(losses "$L")" "$(losses "$T/ref")"
cp -r "$T/ref" "$T/mv" && keep_events "$T/mv" '!/"event":"done"/' && rm -rf "$T/mv/final"
L=$(long "$T/deep" 3970) && mv "$T/mv" "$L" && cp "$L/events.msgpack" "$T/mv.events"
expect_fail "a run dir moved to a path of 3970 bytes: --resume refused in one line" 1 \
	"^ts-train: $L: a path of 3970 bytes leaves no room" train --resume "$L"
check "...the run as it was" cmp "$L/events.msgpack" "$T/mv.events"
finish
