# ts-train --resume of runs killed at every stage: before the first
# checkpoint, after the last one, mid-append to the event log; and refusal
# of a tampered checkpoint state. Crash states are mostly made by hand from a
# finished run, so that no test depends on when a kill lands.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack"
ts-shard -o "$T/novalid" --seed 3 --split train=0.9,test=0.1 "$T/tok.msgpack"
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5 -j 2)
events() { ts-cat "$1/events.msgpack" | jq -r .event | tr '\n' ' '; }
count() { events "$1" 2>/dev/null | grep -ow "$2" | wc -l; }   # count DIR TYPE: events of a type
has() { [ "$(count "$1" "$2")" -ge "$3" ]; }                     # has DIR TYPE N: at least N such events

check "a run to crash in copies" train "${TINY[@]}" --run "$T/r0" --max-steps 6 --eval-every 3
expect_eq "checkpoints at the evaluations, no temp dir beside them" "$(ls -A "$T/r0/ckpt" | tr '\n' ' ')" "step-3 step-6 "

# killed right after the run dir was made: config, no checkpoint
mkdir -p "$T/a/log" "$T/a/ckpt" && cp "$T/r0/config" "$T/a/"
expect_fail "killed before its first checkpoint: the run cannot be made again" 1 "already holds a run" \
	train "${TINY[@]}" --run "$T/a" --max-steps 6 --eval-every 3
check "killed before its first checkpoint: --resume starts it from step 0" train --resume "$T/a"
expect_eq "started again: the same losses as the run never killed" "$(losses "$T/a")" "$(losses "$T/r0")"
check "started again: the same final model" cmp "$T/a/final/model.safetensors" "$T/r0/final/model.safetensors"
check "started again: its own vocab copy" cmp "$T/a/vocab.txt" "$V"

# killed while it wrote the config: no run yet, and no rerun held back by the temp config
mkdir "$T/z" && printf 'layers = ' >"$T/z/config.tmp.99999"
check "killed while writing its config: --run makes the run there" train "${TINY[@]}" --run "$T/z" --max-steps 6 --eval-every 3
expect_eq "killed while writing its config: the temp config is gone" "$(ls -A "$T/z" | grep -c "\.tmp\.")" 0
check "killed while writing its config: the same final model" cmp "$T/z/final/model.safetensors" "$T/r0/final/model.safetensors"

# killed after some steps but before the first checkpoint
cp -r "$T/r0" "$T/b" && rm -rf "$T/b/ckpt/"* "$T/b/best" "$T/b/final"
keep_events "$T/b" '/"event":"checkpoint"/ {exit} {print}'
check "killed after steps, before any checkpoint: --resume" train --resume "$T/b"
expect_eq "from step 0: the same losses" "$(losses "$T/b")" "$(losses "$T/r0")"
check "from step 0: the same final model" cmp "$T/b/final/model.safetensors" "$T/r0/final/model.safetensors"

# the same with a real crash: SIGKILL while no checkpoint is due
train "${TINY[@]}" --run "$T/k" --max-steps 100000 --save-every 100000 >/dev/null 2>&1 &
wait_for "a long run under way" has "$T/k" step 2
kill_trainer "$T/k"
expect_eq "killed mid-run: no checkpoint, no done event" "$(ls -A "$T/k/ckpt" | wc -l) $(count "$T/k" done)" "0 0"
train --resume "$T/k" >/dev/null 2>&1 &
wait_for "killed with no checkpoint: the resumed run starts again" has "$T/k" start 2
check "killed with no checkpoint: the resumed run goes on, and stops on request" ts-stop --wait --timeout 60 "$T/k"
kill_trainer "$T/k"
expect_eq "killed with no checkpoint: the resumed run stops with a checkpoint" "$(ls -A "$T/k/ckpt" | wc -l)" 1

# preloaded LIB CMD...: CMD with LIB preloaded (under ASan too, whose runtime
# would otherwise refuse to come after it)
preloaded() { LD_PRELOAD=$1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 "${@:2}"; }

# killed while it removed an old checkpoint (--keep), placed by a remove()
# that kills the trainer at the second file of a checkpoint it removes
cat >"$T/killrm.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
int remove(const char *path)
{
	static int n;
	if (strstr(path, "/ckpt/step-") && ++n == 2)
		raise(SIGKILL);
	return ((int (*)(const char *))dlsym(RTLD_NEXT, "remove"))(path);
}
EOF
${CC:-cc} -shared -fPIC -o "$T/killrm.so" "$T/killrm.c" -ldl
preloaded "$T/killrm.so" train "${TINY[@]}" --run "$T/p" --max-steps 6 --eval-every 3 --keep 1 >/dev/null 2>&1
expect_eq "killed while pruning: the run has its checkpoint at step 6, not yet final/" \
	"$(ls "$T/p/ckpt" | grep -c '^step-6$') $(ls -d "$T/p/final" 2>/dev/null | wc -l)" "1 0"
whole() { for f in config.json model.safetensors optimizer.safetensors state.json vocab.txt; do [ -f "$1/$f" ] || return 1; done; }
check "killed while pruning: no checkpoint left with files missing" sh -c \
	"$(declare -f whole); for k in '$T/p/ckpt'/step-*; do case \$k in *.old.*) ;; *) whole \$k || exit 1;; esac; done"
check "killed while pruning: --resume" train --resume "$T/p"
expect_eq "killed while pruning: after --resume, the newest checkpoint alone (--keep 1)" "$(ls -A "$T/p/ckpt")" "step-6"
check "killed while pruning: the same final model" cmp "$T/p/final/model.safetensors" "$T/r0/final/model.safetensors"

# a full disk in the middle of an event: the 5th append to events.msgpack writes half its
# bytes, the next finds no space, later ones do (a sweep's other job freed some)
cat >"$T/shortev.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
ssize_t write(int fd, const void *buf, size_t n)
{
	static int nth;
	char link[64], path[4096] = "";
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t len = readlink(link, path, sizeof path - 1);
	ssize_t (*real)(int, const void *, size_t) = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (len > 15 && !strcmp(path + len - 15, "/events.msgpack") && ++nth >= 5 && nth <= 6) {
		if (nth == 6)
			return errno = ENOSPC, -1;
		return real(fd, buf, n / 2);
	}
	return real(fd, buf, n);
}
EOF
${CC:-cc} -shared -fPIC -o "$T/shortev.so" "$T/shortev.c" -ldl
preloaded "$T/shortev.so" train "${TINY[@]}" --run "$T/short" --max-steps 6 --eval-every 3 >/dev/null 2>"$T/short.err"
expect_eq "an event cut short by a full disk fails the run, saying so" \
	"$(grep -c 'events.msgpack: No space left on device' "$T/short.err")" 1
check "cut short: the events before it and the failure read whole" ts-cat "$T/short/events.msgpack"
expect_eq "cut short: no warning of a torn record, the failure recorded last" \
	"$(cat "$T/err") $(ts-cat "$T/short/events.msgpack" | jq -r .event | tail -n 1)" " failed"
check "cut short: --resume" train --resume "$T/short"
check "cut short: the same final model" cmp "$T/short/final/model.safetensors" "$T/r0/final/model.safetensors"

# killed while it saved a non-finite step's batch for --replay, placed by a
# rename() that kills the trainer as batch.msgpack takes its place
cat >"$T/killbug.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
int rename(const char *from, const char *to)
{
	size_t n = strlen(to), k = strlen("/batch.msgpack");
	if (n > k && !strcmp(to + n - k, "/batch.msgpack"))
		raise(SIGKILL);
	return ((int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename"))(from, to);
}
EOF
${CC:-cc} -shared -fPIC -o "$T/killbug.so" "$T/killbug.c" -ldl
preloaded "$T/killbug.so" train "${TINY[@]}" --run "$T/nan" --max-steps 3 --optimizer sgd --lr 1e12 --clip 0 --warmup 0 >/dev/null 2>&1
check "killed while saving a bad batch: the trainer died there" test -d "$T/nan/bug"
check "killed while saving a bad batch: no bug record without its batch" sh -c \
	"for b in '$T/nan/bug'/step-*; do case \$b in *.tmp.*) ;; *) [ -f \$b/batch.msgpack ] || exit 1;; esac; done"
check "killed while saving a bad batch: --resume" train --resume "$T/nan"
expect_eq "killed while saving a bad batch: resume removes the half-made record" "$(ls -A "$T/nan/bug" | grep -c "\.tmp\.")" 0
check "killed while saving a bad batch: the records made again replay" sh -c \
	"for b in '$T/nan/bug'/step-*; do timeout 300 ts-train --replay \$b >/dev/null || exit 1; done"

# killed after the last checkpoint, before final/ and the done event
cp -r "$T/r0" "$T/c" && rm -rf "$T/c/final"
keep_events "$T/c" '!/"event":"done"/'
# and what a kill in the middle of writing final/ and a checkpoint would leave
mkdir "$T/c/final.tmp.99999" "$T/c/ckpt/step-9.tmp.99999" && touch "$T/c/ckpt/step-9.tmp.99999/model.safetensors"
touch "$T/c/plots/loss.svg.tmp.99999"   # and one writing a plot
check "killed before final/: --resume finishes the run" train --resume "$T/c"
expect_eq "killed while writing: resume removes the temp files and dirs" "$(ls -A "$T/c" "$T/c/ckpt" "$T/c/plots" | grep -c "\.tmp\.")" 0
check "killed before final/: final/ is the last checkpoint's model" cmp "$T/c/final/model.safetensors" "$T/r0/final/model.safetensors"
expect_eq "killed before final/: the log ends with resume, done" "$(events "$T/c" | awk '{print $(NF-1), $NF}')" "resume done"
expect_eq "killed before final/: one done event" "$(count "$T/c" done)" 1
# a checkpoint damaged past reading (its state.json gone) and a final/ without its config.json
cp -r "$T/r0" "$T/dmg" && rm "$T/dmg/ckpt/step-6/state.json" "$T/dmg/final/config.json"
keep_events "$T/dmg" '!/"event":"done"/'
check "a damaged last checkpoint and final/: --resume passes it over and finishes" train --resume "$T/dmg"
expect_eq "damaged: it is passed over, then made afresh at its step" \
	"$(grep -c 'passed over .*step-6' "$T/dmg/log/rank-0.log") $(test -f "$T/dmg/ckpt/step-6/state.json" && echo whole)" "1 whole"
check "damaged: final/ is made afresh, the model of the run never damaged" \
	cmp "$T/dmg/final/model.safetensors" "$T/r0/final/model.safetensors"
check "no valid split: a run to crash" train "${TINY[@]}" --data "$T/novalid" --run "$T/n0" --max-steps 4
cp -r "$T/n0" "$T/n" && rm -rf "$T/n/final" "$T/n/best"
keep_events "$T/n" '!/"event":"done"/'
check "no valid split, killed before final/ and best/: --resume" train --resume "$T/n"
check "no valid split: best/ is written too" cmp "$T/n/best/model.safetensors" "$T/n0/best/model.safetensors"
cp "$T/r0/events.msgpack" "$T/r0.events"
check "a finished run: --resume exits 0" train --resume "$T/r0"
expect_eq "a finished run: --resume says it is finished" "$(cat "$T/err")" "ts-train: $T/r0: the run already finished at step 6"
check "a finished run: its event log is untouched" cmp "$T/r0/events.msgpack" "$T/r0.events"

# killed mid-append to the event log, after the checkpoint at step 3
cp -r "$T/r0" "$T/e" && rm -rf "$T/e/final" "$T/e/ckpt/step-6"
keep_events "$T/e" '{print} /"event":"checkpoint"/ {c = 1} c && /"event":"step"/ && ++n == 2 {exit}'
torn=$(($(ts-cat "$T/e/events.msgpack" | wc -l) + 1))   # the number of the record cut short
ts-cat "$T/e/events.msgpack" | grep '"step"' | head -n 1 | ts-cat --from-json | head -c 30 >>"$T/e/events.msgpack"
check "a torn event record: ts-cat exits 0" ts-cat "$T/e/events.msgpack"
expect_eq "a torn event record: ts-cat warns in one line" "$(cat "$T/err")" \
	"ts-cat: $T/e/events.msgpack: record $torn is cut short (a torn write); ignoring it"
check "a torn event record: --resume" train --resume "$T/e"
expect_eq "a torn event record: resume says it drops it" "$(grep -c "record $torn is cut short" "$T/err")" 1
check "a torn event record: resume cuts it off, so ts-cat reads the log clean" ts-cat "$T/e/events.msgpack"
expect_eq "a torn event record: no warning left" "$(cat "$T/err")" ""
expect_eq "a torn event record: the same losses" "$(losses "$T/e")" "$(losses "$T/r0")"
check "a torn event record: the same final model" cmp "$T/e/final/model.safetensors" "$T/r0/final/model.safetensors"

# a run taken further or cut short on --resume: its new end and cadence, its config and
# resume event record them, and its lr follows a schedule planned to the new end
lrs() { ts-cat "$1/events.msgpack" | jq -r 'select(.event == "step") | "\(.step) \(.lr)"' | sort -n -k1,1 -u; }
rm -rf "$T/x12" && cp -r "$T/r0" "$T/x12"
check "a finished run taken further: --resume --max-steps 12" train --resume "$T/x12" --max-steps 12 --eval-every 4
check "a run of 12 steps from the start, to compare" train "${TINY[@]}" --run "$T/f12" --max-steps 12 --eval-every 3
expect_eq "taken further: it trains to step 12, evaluating every 4 and at the epoch's end from there" \
	"$(ts-cat "$T/x12/events.msgpack" | jq -r 'select((.event == "eval" or .event == "done") and .step > 6) | "\(.event) \(.step)"' | tr '\n' ' ')" \
	"eval 8 eval $(ts-cat "$T/x12/events.msgpack" | jq -r 'select(.event == "start") | .steps_per_epoch') eval 12 done 12 "
expect_same "taken further: steps 7 to 12 at the lr of a run planned to 12 steps from the start" \
	"$(lrs "$T/x12" | tail -n 6)" "$(lrs "$T/f12" | tail -n 6)"
check "taken further: its lr at step 7 is not 0" awk '$1 == 7 { exit !($2 > 0) }' <(lrs "$T/x12")
expect_same "taken further: the steps before it as they were" "$(lrs "$T/x12" | head -n 6)" "$(lrs "$T/r0")"
expect_eq "taken further: the config records the new end and cadence" \
	"$(grep -E '^(max-steps|eval-every) =' "$T/x12/config" | tr '\n' ' ')" "max-steps = 12 eval-every = 4 "
expect_eq "taken further: the resume event records the changes" \
	"$(ts-cat "$T/x12/events.msgpack" | jq -cS 'select(.event == "resume") | .changes')" \
	'{"eval-every":[3,4],"max-steps":[6,12]}'
check "taken further: final/ is the new end's" test "$T/x12/final/model.safetensors" -nt "$T/x12/ckpt/step-6"
# what a leg taking it further leaves, killed before its first new checkpoint: the new end in
# its config, the last checkpoint that of the finished run
rm -rf "$T/xk" && cp -r "$T/r0" "$T/xk" && sed -i 's/^max-steps = 6$/max-steps = 12/; s/^eval-every = 3$/eval-every = 4/' "$T/xk/config"
check "taken further, killed before its first new checkpoint: --resume" train --resume "$T/xk"
expect_eq "killed while taken further: it goes on to step 12" \
	"$(ts-cat "$T/xk/events.msgpack" | jq -r 'select(.event == "done") | .step' | tr '\n' ' ')" "6 12 "
check "killed while taken further: the model of the leg never killed" cmp "$T/xk/final/model.safetensors" "$T/x12/final/model.safetensors"
rm -rf "$T/xe" && cp -r "$T/r0" "$T/xe"
check "a run of --max-steps taken further by --epochs: --resume --epochs 2" train --resume "$T/xe" --epochs 2
expect_eq "by --epochs: the config has no --max-steps, 2 epochs" \
	"$(grep -E '^(epochs|max-steps) =' "$T/xe/config" | tr '\n' ' ')" "epochs = 2 max-steps = 0 "
expect_eq "by --epochs: it ends at the second epoch's end" \
	"$(ts-cat "$T/xe/events.msgpack" | jq -r 'select(.event == "done") | .step' | tail -n 1)" \
	"$(ts-cat "$T/x12/events.msgpack" | jq -r 'select(.event == "start") | .steps_per_epoch * 2')"
cp "$T/r0/events.msgpack" "$T/r0.events"
check "a resume that changes nothing (--max-steps as it was)" train --resume "$T/r0" --max-steps 6
expect_eq "changing nothing: the run is finished, its events untouched" \
	"$(cat "$T/err") $(cmp "$T/r0/events.msgpack" "$T/r0.events" && echo same)" \
	"ts-train: $T/r0: the run already finished at step 6 same"
rm -rf "$T/cut" && cp -r "$T/r0" "$T/cut" && rm -rf "$T/cut/final" "$T/cut/ckpt/step-6"
keep_events "$T/cut" '{print} /"event":"checkpoint"/ {exit}'
check "a run killed at step 3 of 6, cut short: --resume --max-steps 4" train --resume "$T/cut" --max-steps 4
expect_eq "cut short: it ends at step 4, with the losses of the run never cut to there" \
	"$(losses "$T/cut" | tail -n 1) $(ts-cat "$T/cut/events.msgpack" | jq -r 'select(.event == "done") | .step')" \
	"$(losses "$T/r0" | sed -n 4p) 4"
cp "$T/cut/events.msgpack" "$T/cut.events" && cp "$T/cut/log/rank-0.log" "$T/cut.log"
expect_fail "cut short: an end before the step the run is at is refused" 1 \
	"^ts-train: $T/cut: --max-steps 2 ends the run before step 4, where it is$" train --resume "$T/cut" --max-steps 2
expect_eq "refused: the config as it was" "$(grep '^max-steps =' "$T/cut/config")" "max-steps = 4"
check "refused: the finished run's events as they were (no failure recorded)" cmp "$T/cut/events.msgpack" "$T/cut.events"
check "refused: its log as it was" cmp "$T/cut/log/rank-0.log" "$T/cut.log"
# an end in epochs before the epoch the run is in: the run taken to 12 steps is at step 2
# of its second epoch, killed after its last checkpoint
rm -rf "$T/ep" && cp -r "$T/x12" "$T/ep" && rm -rf "$T/ep/final" && keep_events "$T/ep" '!/"event":"done"/'
cp "$T/ep/config" "$T/ep.config" && cp "$T/ep/events.msgpack" "$T/ep.events"
expect_fail "in its second epoch: --epochs 1 is refused" 1 \
	"^ts-train: $T/ep: --epochs 1 ends the run before step 12, where it is$" train --resume "$T/ep" --epochs 1
expect_eq "refused: no final/, the config and events as they were" \
	"$(ls -d "$T/ep/final" 2>/dev/null)$(cmp "$T/ep/config" "$T/ep.config" && cmp "$T/ep/events.msgpack" "$T/ep.events" && echo same)" same

# RUN/config edited by hand: an option the run trained with is refused, naming it, with
# the run left as it was; where its files are now and its threads may change
edited() {   # edited NAME SED: a copy of cut with SED applied to its config
	rm -rf "$T/e" && cp -r "$T/cut" "$T/e" && sed -i "$2" "$T/e/config"
	cp "$T/e/events.msgpack" "$T/e.events"
}
edited "a shape" 's/^layers = 1$/layers = 2/'
expect_fail "an edited shape: refused, naming the line and the checkpoint" 1 \
	"^ts-train: $T/e/config: layers = 2, but $T/e/ckpt/step-4 was made with layers = 1: a resumed run keeps its options" \
	train --resume "$T/e" --max-steps 6
check "an edited shape: no failure recorded" cmp "$T/e/events.msgpack" "$T/e.events"
edited "a rate" 's/^lr = .*/lr = 0.5/'
expect_fail "an edited lr: refused" 1 "config: lr = 0.5, but .* was made with lr = 0.0001" train --resume "$T/e"
edited "a dropped line" '/^seed = /d'
expect_fail "a dropped option: its default refused" 1 "config: seed = 0, but .* was made with seed = 5" \
	train --resume "$T/e"
mv "$T/data" "$T/data-moved"
edited "the data moved, the config not edited" ""
expect_fail "the data moved, the config not edited: refused, naming the config's line" 1 \
	"^ts-train: $T/e/config: data = $T/data: No such file or directory; where it has moved, set data there$" \
	train --resume "$T/e" --max-steps 6
edited "the data moved" "s|^data = .*|data = $T/data-moved|; s/^threads = 2$/threads = 1/"
check "the data moved and fewer threads: resumed" train --resume "$T/e" --max-steps 6
mv "$T/data-moved" "$T/data"

# damaged checkpoints: a byte flipped in the newest one's weights (a failing disk, a bad
# copy), its state.json left empty (a crash on a file system that does not order its
# writes), its digests never written (cut short); the newest whole one is resumed from
damaged() {   # damaged NAME HOW WHY: the newest checkpoint of a copy of r0 damaged by HOW
	rm -rf "$T/d" && cp -r "$T/r0" "$T/d" && rm -rf "$T/d/final"
	keep_events "$T/d" '!/"event":"done"/'
	(cd "$T/d/ckpt/step-6" && eval "$2")
	check "$1: --resume passes over it" train --resume "$T/d"
	expect_eq "$1: stderr says which and why" "$(grep 'passed over' "$T/err")" \
		"ts-train: $T/d/ckpt/step-6: passed over: $3"
	expect_eq "$1: the resume event names it and why, and goes on from step-3" \
		"$(ts-cat "$T/d/events.msgpack" | jq -r 'select(.event == "resume") | .from, (.passed_over[] | .checkpoint, .why)')" \
		"$(printf '%s\n' "$T/d/ckpt/step-3" "$T/d/ckpt/step-6" "$3")"
	check "$1: the log says it" grep -qF "passed over $T/d/ckpt/step-6, damaged: $3" "$T/d/log/rank-0.log"
	expect_same "$1: the same losses as the run never damaged" "$(losses "$T/d")" "$(losses "$T/r0")"
	check "$1: the same final model" cmp "$T/d/final/model.safetensors" "$T/r0/final/model.safetensors"
}
damaged "a byte flipped in the weights" "printf '\\377' | dd of=model.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null" \
	"model.safetensors differs from what was written (its digest does not match)"
damaged "a byte flipped in the weights past their first MiB (checked as they load)" \
	"printf '\\377' | dd of=model.safetensors bs=1 seek=\$((\$(stat -c %s model.safetensors) - 100)) conv=notrunc 2>/dev/null" \
	"model.safetensors differs from what was written (its digest does not match)"
damaged "a byte flipped in the optimizer state past its first MiB" \
	"printf '\\377' | dd of=optimizer.safetensors bs=1 seek=\$((\$(stat -c %s optimizer.safetensors) - 100)) conv=notrunc 2>/dev/null" \
	"optimizer.safetensors differs from what was written (its digest does not match)"
damaged "a byte flipped in the optimizer state's header" \
	"printf '\\377' | dd of=optimizer.safetensors bs=1 seek=40 conv=notrunc 2>/dev/null" \
	"optimizer.safetensors differs from what was written (its digest does not match)"
damaged "an empty state.json" ": >state.json" "state.json has 0 bytes where $(stat -c %s "$T/r0/ckpt/step-6/state.json") were written"
damaged "no digests" "rm digests.json" "no digests.json: it was cut short before it was complete"
damaged "an unreadable digests.json" "echo '{' >digests.json" "digests.json: line 2: string or '}' expected near end of file"
rm -rf "$T/x" && cp -r "$T/d" "$T/x" && rm -rf "$T/x/final" && keep_events "$T/x" '!/"event":"done"/'
: >"$T/x/ckpt/step-6/state.json" && rm "$T/x/ckpt/step-3/optimizer.safetensors"
expect_fail "no whole checkpoint left: the error names each and why" 1 \
	"$T/x: no intact checkpoint to resume from: $T/x/ckpt/step-6 \(state.json has 0 bytes where [0-9]+ were written\), $T/x/ckpt/step-3 \(optimizer.safetensors: No such file or directory\)$" \
	train --resume "$T/x"
# a run dir named in Latin-1: the events and the refusal name its checkpoints with U+FFFD for the byte
L=$T/l$'\xe9' && rm -rf "$L" && cp -r "$T/d" "$L" && rm -rf "$L/final" && keep_events "$L" '!/"event":"done"/'
: >"$L/ckpt/step-6/state.json"
check "a run dir named in Latin-1 with a damaged checkpoint: --resume passes over it" train --resume "$L"
expect_eq "a run dir named in Latin-1: the resume event keeps its step, checkpoints and device" \
	"$(ts-cat "$L/events.msgpack" | jq -rs 'map(select(.event == "resume")) | last | .step, .from, .total_steps, .device, .passed_over[0].checkpoint')" \
	"$(printf '%s\n' 3 "$T/l�/ckpt/step-3" 6 cpu "$T/l�/ckpt/step-6")"
rm -rf "$L/final" && keep_events "$L" '!/"event":"done"/' && : >"$L/ckpt/step-6/state.json" && rm "$L/ckpt/step-3/state.json"
expect_fail "a run dir named in Latin-1 with no whole checkpoint: the error names each and why" 1 \
	"no intact checkpoint to resume from: .*/ckpt/step-6 \(state.json has 0 bytes.*/ckpt/step-3 \(state.json: No such file" \
	train --resume "$L"
cp -r "$T/r0/best" "$T/bad-best" && printf x | dd of="$T/bad-best/model.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_fail "a damaged model dir: ts-eval refuses it in one line" 1 \
	"^ts-eval: $T/bad-best: damaged: model.safetensors differs from what was written" ts-eval -m "$T/bad-best" --data "$T/data"
expect_fail "a damaged model dir: --init refuses it in one line" 1 \
	"^ts-train: $T/bad-best: damaged: model.safetensors differs from what was written" \
	train --data "$T/data" --init "$T/bad-best" --run "$T/from-bad" --max-steps 1
check "a damaged model dir: no run made from it" test ! -e "$T/from-bad"
rm "$T/bad-best/digests.json"
check "a model dir without digests (as transformers saves one) loads" ts-eval -m "$T/bad-best" --data "$T/data"

# a tampered training state: refused in one line naming the file and the field
tamper() {   # tamper NAME JQ PATTERN
	rm -rf "$T/t" && cp -r "$T/r0" "$T/t" && rm -rf "$T/t/final"
	jq "$2" "$T/r0/ckpt/step-6/state.json" >"$T/t/ckpt/step-6/state.json" && redigest "$T/t/ckpt/step-6"
	expect_fail "a tampered state.json: $1" 1 "ckpt/step-6/state.json: $3" train --resume "$T/t"
}
tamper "a record beyond the epoch" '.record = 999999' "'record' is 999999, outside \[0, 80\]"
tamper "a negative step" '.step = -1' "'step' is -1, outside"
tamper "a negative epoch" '.epoch = -2' "'epoch' is -2, outside"
tamper "a step as a string" '.step = "6"' "'step' is not a whole number"
tamper "a fractional record" '.record = 1.5' "'record' is not a whole number"
tamper "a best step after the step" '.best_step = 7' "'best_step' is 7, outside \[-1, 6\]"
tamper "more skipped steps than steps" '.skipped = 7' "'skipped' is 7, outside"
tamper "negative samples" '.samples = -5' "'samples' is -5, outside"
tamper "best as a string" '.best = "x"' "'best' is not a number"
tamper "negative elapsed time" '.elapsed_s = -1' "'elapsed_s' is -1, below 0"
tamper "finished as a number" '.finished = 1' "'finished' is not true or false"
tamper "a field missing" 'del(.optim_steps)' "no 'optim_steps'"
tamper "a schedule position past the schedule's end" '.sched_pos = 1e9' "'sched_pos' is 1e\\+09, past the schedule's 6 steps"
tamper "a step past the run's end" '.step = 250' "'step' is 250, past the run's end at 6"
tamper "a schedule anchor after the step" '.sched_step = 7' "'sched_step' is 7, outside \\[0, 6\\]"
tamper "a loss scale not a power of two" '.loss_scale = 1000' "'loss_scale' is 1000, not 0 or a power of two from 1 to 2\\^24"
tamper "a loss scale past 2^24" '.loss_scale = 33554432' "'loss_scale' is 3.35544e\\+07, not 0 or a power"
tamper "a clean count past the scale's window" '.scale_clean = 2000' "'scale_clean' is 2000, outside \\[0, 1999\\]"
tamper "more overflows than steps" '.overflows = 7' "'overflows' is 7, outside"
tamper "an unknown field" '.extra = 1' "unknown field 'extra'"
tamper "not an object" '[1]' "not a training state"
# a checkpoint of an older version, without the schedule's anchor or the loss scale
rm -rf "$T/o" && cp -r "$T/r0" "$T/o" && rm -rf "$T/o/final" "$T/o/best" "$T/o/ckpt/step-6"
keep_events "$T/o" '{print} /"event":"checkpoint"/ {exit}'
jq 'del(.sched_processes, .sched_step, .sched_pos, .loss_scale, .scale_clean, .overflows)' \
	"$T/r0/ckpt/step-3/state.json" >"$T/o/ckpt/step-3/state.json" && redigest "$T/o/ckpt/step-3"
check "a checkpoint without the schedule's and loss scale's fields (an older version's) resumes" train --resume "$T/o"
expect_eq "an older version's checkpoint: the same losses" "$(losses "$T/o")" "$(losses "$T/r0")"
finish
