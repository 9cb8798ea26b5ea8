# ts-sweep on tiny CPU jobs: a grid with a group at -P 2, values that reach
# ts-train verbatim, a failing job, --print | xargs doing the same work,
# random draws, a stop in the middle, the leaderboard and the usage errors.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
MODEL=(--data "$T/data" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --eval-every 3 --seed 5)
TRAIN=(ts-train "${MODEL[@]}" --vocab "$V" --max-steps 6)
sweep() { timeout 300 ts-sweep "$@"; }
# states DIR: each job's last state, "job state" a line
states() { ts-cat "$1/jobs.msgpack" | jq -r 'select(.event=="job" and .state != "queued" and .state != "running") | "\(.job) \(.state)"' | sort -n; }
config_of() { grep -E "^$2 = " "$1/config" | sed "s/^$2 = //"; }
# share N: each job's -j where N processes share this machine's cores, as ts-sweep counts them
share() { local c; c=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc); echo $((c / $1 > 1 ? c / $1 : 1)); }
# argvs DIR: the command line of each job as it started, a line each
argvs() { ts-cat "$1/jobs.msgpack" | jq -r 'select(.event=="job" and .state=="running") | .argv | join(" ")'; }

check "a grid of 2 x a group of 3 at -P 2" sweep -P 2 -p lr=1e-4,1e-3 -p warmup,dropout=0:0,0.1:0.1,0.2:0 \
	--dir "$T/g" -- "${TRAIN[@]}"
cp "$T/out" "$T/g.out"
expect_eq "6 jobs, all done" "$(states "$T/g" | tr '\n' ';')" "1 done;2 done;3 done;4 done;5 done;6 done;"
expect_eq "each job's run has its options: job 5 is lr 1e-3, warmup 0.1, dropout 0.1" \
	"$(config_of "$T/g/job-005" lr) $(config_of "$T/g/job-005" warmup) $(config_of "$T/g/job-005" dropout)" \
	"0.001 0.1 0.1"
expect_eq "the 2 jobs at a time share the cores: -j $(share 2) each" "$(config_of "$T/g/job-001" threads)" "$(share 2)"
expect_eq "jobs on the cores run on the CPU: each gets --device cpu, never the GPU ts-train would take" \
	"$(argvs "$T/g" | grep -c -- " -j $(share 2) --device cpu$")" 6
expect_eq "the leaderboard printed at the end ranks 6 jobs" "$(grep -cE '^[1-6] +[1-6] +done' "$T/g.out")" 6
expect_eq "the leaderboard counts them" "$(tail -1 "$T/g.out")" "6 jobs: 6 done"
sweep --show "$T/g" --format json >"$T/board.json"
expect_eq "--show as JSON: 6 jobs ranked by accuracy, best first" \
	"$(jq -r 'length, ([.[].value] == ([.[].value] | sort | reverse)), .[0].metric' "$T/board.json" | tr '\n' ' ')" \
	"6 true accuracy "
expect_eq "--show --metric loss: lowest first" \
	"$(sweep --show "$T/g" --format json --metric loss | jq -r '[.[].value] == ([.[].value] | sort)')" true
check "--show --plot: every job's valid metric in one SVG" sweep --show "$T/g" --plot "$T/g.svg"
expect_eq "--show --plot: a line a job, in an SVG Python's XML parser reads" "$("${TS_PYTHON:-$TOP/build/venv/bin/python}" -c '
import sys, xml.etree.ElementTree as ET
print(len(ET.parse(sys.argv[1]).getroot().findall("{http://www.w3.org/2000/svg}polyline")))' "$T/g.svg")" 6
check "--show --plot of mlm jobs by macro-f1, which their evaluations lack: a plot without lines" sh -c \
	"timeout 300 ts-sweep -p lr=1e-4 --dir '$T/mlm' -- ts-train ${MODEL[*]} --vocab '$V' --task mlm --max-steps 2 --eval-every 1 >/dev/null &&
	 ts-sweep --show '$T/mlm' --plot '$T/mlm.svg' --metric macro-f1 >/dev/null && grep -q 'no data yet' '$T/mlm.svg'"
cp "$T/g/jobs.msgpack" "$T/jobs.kept"
expect_fail "--plot onto the job log: refused" 1 "cannot write $T/g/jobs.msgpack: it is in the sweep dir" \
	sweep --show "$T/g" --plot "$T/g/jobs.msgpack"
check "...the job log left whole" cmp "$T/g/jobs.msgpack" "$T/jobs.kept"
expect_fail "--plot with an empty path" 2 "^ts-sweep: --plot: the path is empty" sweep --show "$T/g" --plot ""
expect_fail "--eta without --prune asha: nothing to prune" 2 "--eta goes with --prune asha" ts-sweep --eta 2 -p lr=1 --dir "$T/u0" -- "${TRAIN[@]}"
expect_fail "--seed without --random: nothing to draw" 2 "--seed goes with --random" ts-sweep --seed 2 -p lr=1 --dir "$T/u0" -- "${TRAIN[@]}"
expect_fail "--plot without --show" 2 "--plot goes with --show" ts-sweep --plot "$T/x.svg" -p lr=1 --dir "$T/u0" -- "${TRAIN[@]}"
expect_eq "--show as TSV: a header and 6 rows" "$(sweep --show "$T/g" --format tsv | head -1 | cut -f1-4) $(sweep --show "$T/g" --format tsv | wc -l)" \
	"$(printf 'rank\tjob\tstate\taccuracy') 7"

# values with spaces, quotes, $ and ; reach ts-train as they are
odd="$T/a vocab's \$HOME; \"x\".txt"
cp "$V" "$odd"
check "values with spaces, quotes, \$ and ;" sweep -p "vocab=$odd,$V" --dir "$T/odd" -- ts-train "${MODEL[@]}" --max-steps 1
expect_eq "...arrive verbatim" "$(config_of "$T/odd/job-001" vocab)" "$odd"

# --tasks: whole command lines, each crossed with the grid
{
	echo "# two models on the same data"
	echo "ts-train ${MODEL[*]} --max-steps 2 --vocab '$T/a vocab'\\''s \$HOME; \"x\".txt'"
	echo
	echo "ts-train ${MODEL[*]/--layers/--heads} --max-steps 2 --vocab \"$V\" --layers 2"
} >"$T/tasks.txt"
check "--tasks: 2 command lines x 2 rates" sweep -P 2 --tasks "$T/tasks.txt" -p lr=1e-4,1e-3 --dir "$T/t"
expect_eq "--tasks: 4 jobs, all done" "$(states "$T/t" | tr '\n' ';')" "1 done;2 done;3 done;4 done;"
expect_eq "--tasks: each job has its line's options and the grid's" \
	"$(for j in 1 2 3 4; do printf '%s,%s,%s ' "$(config_of "$T/t/job-00$j" layers)" "$(config_of "$T/t/job-00$j" lr)" \
		"$(basename "$(config_of "$T/t/job-00$j" vocab)")"; done)" \
	"1,0.0001,a vocab's \$HOME; \"x\".txt 1,0.001,a vocab's \$HOME; \"x\".txt 2,0.0001,vocab.txt 2,0.001,vocab.txt "
printf 'ts-train --data x\n\necho hi\n' >"$T/bad-tasks.txt"
expect_fail "--tasks: a line that is not ts-train, named" 2 "--tasks .*bad-tasks.txt: line 3: ts-sweep runs ts-train, not echo" \
	ts-sweep --tasks "$T/bad-tasks.txt" --dir "$T/u7"
long=$T/$(printf 'd%.0s' {1..80})
mkdir "$long" && printf 'ts-train --data x\n\necho hi\n' >"$long/bad-tasks.txt"
expect_fail "--tasks in a dir of a long name: the whole path named" 2 \
	"^ts-sweep: --tasks $long/bad-tasks.txt: line 3: ts-sweep runs ts-train, not echo" ts-sweep --tasks "$long/bad-tasks.txt" --dir "$T/u11"
printf "ts-train --data 'x\n" >"$T/bad-tasks.txt"
expect_fail "--tasks: an unclosed quote, named" 2 "line 1: the quote ' is not closed" \
	ts-sweep --tasks "$T/bad-tasks.txt" --dir "$T/u8"

# a job ts-train refuses once it reads the data (records longer than --max-pos)
# is recorded and the others run
sweep -p max-pos=32,8,32 --dir "$T/f" -- "${TRAIN[@]}" >"$T/f.out" 2>&1
expect_eq "a failing job: the sweep exits 1" "$?" 1
expect_eq "a failing job: the others are done" "$(states "$T/f" | tr '\n' ';')" "1 done;2 failed;3 done;"
expect_eq "a failing job: its exit status and its last lines are recorded" \
	"$(ts-cat "$T/f/jobs.msgpack" | jq -r 'select(.job==2 and .state=="failed") | "\(.exit) \(.tail | test("--max-pos 8"))"')" "2 true"
expect_eq "a failing job: a line on standard error names it, its exit status and its output" \
	"$(grep -cxF "ts-sweep: job 2 failed: exit status 2; its output is in $T/f/job-002.out" "$T/f.out")" 1

# --print | xargs does the same work
sweep --print -P 2 -p lr=1e-4,1e-3 --dir "$T/x" -- "${TRAIN[@]}" >"$T/jobs.txt"
expect_eq "--print: a command line a job, for the cores: -j and --device cpu" \
	"$(grep -c -- " -j $(share 2) --device cpu$" "$T/jobs.txt")" 2
check "--print | xargs runs them" sh -c "xargs -P 2 -I{} sh -c '{} >/dev/null 2>&1' <'$T/jobs.txt'"
check "--print makes no sweep dir of its own" test ! -e "$T/x/jobs.msgpack"
sweep -P 2 -p lr=1e-4,1e-3 --dir "$T/y" -- "${TRAIN[@]}" >/dev/null
for j in 001 002; do
	check "--print | xargs: job $j trains as under ts-sweep" cmp "$T/x/job-$j/final/model.safetensors" \
		"$T/y/job-$j/final/model.safetensors"
done

# random draws: log-uniform within the range, the same for the same seed
sweep --print --random 5 -p lr=1e-5:1e-3:log -p batch=4:16 --dir "$T/r" -- "${TRAIN[@]}" >"$T/r1.txt"
sweep --print --random 5 -p lr=1e-5:1e-3:log -p batch=4:16 --dir "$T/r" -- "${TRAIN[@]}" >"$T/r2.txt"
sweep --print --random 5 --seed 1 -p lr=1e-5:1e-3:log -p batch=4:16 --dir "$T/r" -- "${TRAIN[@]}" >"$T/r3.txt"
expect_eq "--random 5: 5 jobs" "$(wc -l <"$T/r1.txt")" 5
check "--random: every lr within [1e-5, 1e-3] and every batch a whole number in [4, 16]" awk '{
	for (i = 1; i < NF; i++) { if ($i == "--lr") lr = $(i + 1) + 0; if ($i == "--batch") b = $(i + 2) }
	for (i = 1; i < NF; i++) if ($i == "--batch") b = $(i + 1)
	if (lr < 1e-5 || lr > 1e-3 || b !~ /^[0-9]+$/ || b < 4 || b > 16) bad++ } END { exit bad > 0 }' "$T/r1.txt"
check "--random: the same seed draws the same jobs" cmp "$T/r1.txt" "$T/r2.txt"
check "--random: another seed draws others" sh -c "! cmp -s '$T/r1.txt' '$T/r3.txt'"

# a stop in the middle: the running jobs checkpoint and stop, no other starts
LONG=(ts-train "${MODEL[@]}" --vocab "$V" --max-steps 400 --eval-every 100 --dropout 0.1)
sweep -P 2 -p lr=1e-4,2e-4,3e-4 --dir "$T/s" -- "${LONG[@]}" --device=cpu >"$T/s.out" 2>&1 &
sweeper=$!
steps_in() { [ "$(ts-cat "$1/events.msgpack" 2>/dev/null | jq -r 'select(.event=="step")' | grep -c step)" -ge 3 ]; }
wait_for "a stop in the middle: jobs 1 and 2 under way" sh -c "$(declare -f steps_in); steps_in '$T/s/job-001' && steps_in '$T/s/job-002'"
check "ts-stop SWEEPDIR" ts-stop "$T/s"
wait "$sweeper"
expect_eq "a stop in the middle: ts-sweep exits 0" "$?" 0
expect_eq "a stop in the middle: jobs 1 and 2 stopped, job 3 never started" \
	"$(states "$T/s" | tr '\n' ';') $(test -e "$T/s/job-003" && echo started || echo none)" "1 stopped;2 stopped; none"
check "a stop in the middle: each stopped job checkpointed" sh -c "ts-cat '$T/s/job-001/events.msgpack' | grep -q '\"stop\"'"
check "a stop in the middle: the sweep records the stop" sh -c "ts-cat '$T/s/jobs.msgpack' | jq -r .event | tail -1 | grep -qx stop"

cp -r "$T/s" "$T/s-copy"
# --resume: the stopped jobs go on from their checkpoints, the others start, the done ones rest
check "--resume the stopped sweep" sweep --resume "$T/s"
expect_eq "--resume: all 3 done" \
	"$(sweep --show "$T/s" --format json | jq -r 'sort_by(.job) | map("\(.job) \(.state)") | join(";")')" \
	"1 done;2 done;3 done"
expect_eq "--resume: job 1 ran two legs, each of some seconds" \
	"$(ts-cat "$T/s/jobs.msgpack" | jq -s '[.[] | select(.job == 1 and .seconds > 0)] | length')" 2
expect_eq "--resume: a resumed job's seconds are those of both legs" \
	"$(sweep --show "$T/s" --format json | jq -r '.[] | select(.job == 1) | .seconds * 1000 | round')" \
	"$(ts-cat "$T/s/jobs.msgpack" | jq -s 'map(select(.job == 1 and .seconds)) | map(.seconds) | add * 1000 | round')"
expect_eq "--resume: jobs 1 and 2 went on with ts-train --resume" \
	"$(ts-cat "$T/s/jobs.msgpack" | jq -r 'select(.state=="running" and .argv[1]=="--resume") | .job' | tr '\n' ' ')" "1 2 "
expect_eq "--resume: a job's own --device goes on with it, the sweep adds none" \
	"$(argvs "$T/s" | grep -c -- "--resume $T/s/job-00[12] --device cpu$")" 2
check "--resume: a stopped job ends with the model of a run never stopped" sh -c \
	"${LONG[*]@Q} -j $(share 2) --device cpu --run '$T/whole' >/dev/null 2>&1 && cmp '$T/whole/final/model.safetensors' '$T/s/job-001/final/model.safetensors'"
sweep --resume "$T/f" >/dev/null 2>&1
expect_eq "--resume: a failed job runs again, a done one does not" \
	"$(ts-cat "$T/f/jobs.msgpack" | jq -r 'select(.state=="running") | .job' | sort -n | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')" \
	"1x1 2x2 3x1 "
# a stopped sweep moved elsewhere: the jobs not begun run in their dirs' new place
mv "$T/s-copy" "$T/moved"
# and job 3 holds a stop file alone, as a stop leaves a job at a server that never made its run: that leg's
mkdir "$T/moved/job-003" && touch "$T/moved/job-003/stop"
check "a stopped sweep moved: --resume" sweep --resume "$T/moved"
expect_eq "a stopped sweep moved: job 3, never begun, ran to its end in its dir there (the stop left there not heard), none made where the sweep was" \
	"$(sweep --show "$T/moved" --format json | jq -r '.[] | select(.job == 3) | .state') $(ls "$T/moved/job-003/final" 2>/dev/null | grep -c safetensors) $(test -e "$T/s-copy" && echo remade || echo none)" \
	"done 1 none"
# a sweep whose working dir is gone: --resume refuses in one line, where each job failed as it started
mkdir "$T/wd" && (cd "$T/wd" && sweep -p max-pos=32,8 --dir "$T/fw" -- "${TRAIN[@]}" >/dev/null 2>&1); rmdir "$T/wd"
expect_fail "--resume of a sweep whose working dir is gone: refused, naming it" 1 \
	"^ts-sweep: $T/fw: the working dir its jobs start in, $T/wd: No such file or directory$" sweep --resume "$T/fw"
expect_fail "--resume of a sweep that runs" 1 "is in use by another ts-sweep" sh -c \
	"flock '$T/g/lock' sleep 2 & sleep 0.5; ts-sweep --resume '$T/g'"

# a sweep killed outright (SIGKILL): its job checkpoints and stops, not to run on unwatched
timeout 300 ts-sweep -p lr=1e-4 --dir "$T/k" -- ts-train "${MODEL[@]}" --vocab "$V" --max-steps 100000 >/dev/null 2>&1 &
sweeper=$!
wait_for "a sweep killed outright: its job under way" sh -c "$(declare -f steps_in); steps_in '$T/k/job-001'"
kill -9 "$(cut -d' ' -f1 "$T/k/lock")"
wait "$sweeper" 2>/dev/null
wait_for "a sweep killed outright: its job ends" flock -n "$T/k/job-001/lock" true
kill_trainer "$T/k/job-001"
stopped=$(ts-cat "$T/k/job-001/events.msgpack" | jq -r 'select(.event=="stop") | .step')
check "a sweep killed outright: its job stopped with a checkpoint" test -d "$T/k/job-001/ckpt/step-$stopped"
expect_eq "a sweep killed outright: --show has its job stopped, not running, and no time left" \
	"$(sweep --show "$T/k" --format json | jq -r '.[0].state') $(sweep --show "$T/k" | tail -n 1)" "stopped 1 jobs: 1 stopped"
# resumed while the job's lock is still held, as by its trainer still checkpointing: the job waits for it
flock "$T/k/job-001/lock" sleep 2 &
sleep 0.3
timeout 300 ts-sweep --resume "$T/k" >/dev/null 2>&1 &
sweeper=$!
wait_for "a sweep killed outright: --resume goes on with the job" sh -c "ts-cat '$T/k/job-001/events.msgpack' | grep -q '\"resume\"'"
check "a sweep killed outright: the resumed sweep stops on request" ts-stop --wait --timeout 60 "$T/k"
wait "$sweeper"
expect_eq "a sweep killed outright: the job went on from its checkpoint" \
	"$(ts-cat "$T/k/job-001/events.msgpack" | jq -r 'select(.event=="resume") | .step')" "$stopped"

# a sweep killed with two jobs running, resumed one at a time: the one that waits is queued
timeout 300 ts-sweep -P 2 -p lr=1e-4,2e-4,3e-4 --dir "$T/k2" -- ts-train "${MODEL[@]}" --vocab "$V" --max-steps 100000 >/dev/null 2>&1 &
sweeper=$!
wait_for "killed with two running: both under way" sh -c "$(declare -f steps_in); steps_in '$T/k2/job-001' && steps_in '$T/k2/job-002'"
kill -9 "$(cut -d' ' -f1 "$T/k2/lock")"
wait "$sweeper" 2>/dev/null
for j in 1 2; do wait_for "killed with two running: job $j ends" flock -n "$T/k2/job-00$j/lock" true; done
timeout 300 ts-sweep --resume "$T/k2" -P 1 >/dev/null 2>&1 &
sweeper=$!
wait_for "resumed one at a time: job 1 goes on" sh -c "ts-cat '$T/k2/job-001/events.msgpack' | grep -q '\"resume\"'"
expect_eq "resumed one at a time: one running, the others queued" "$(sweep --show "$T/k2" | tail -n 1 | cut -d';' -f1)" \
	"3 jobs: 1 running, 2 queued"
check "resumed one at a time: it stops on request" ts-stop --wait --timeout 60 "$T/k2"
wait "$sweeper"

# a job stopped after its best evaluation ranks by that one, not its last (a trainer that
# writes such a run's events)
mkdir "$T/fake" && printf '%s\n' '{"event":"eval","split":"valid","step":10,"accuracy":0.9,"loss":0.3}' \
	'{"event":"best","step":10,"metric":"accuracy","value":0.9}' \
	'{"event":"eval","split":"valid","step":20,"accuracy":0.5,"loss":0.8}' '{"event":"stop","step":20}' |
	ts-cat --from-json >"$T/fake/events.msgpack"
cat >"$T/fake/ts-train" <<EOF
#!/bin/sh
case " \$* " in *" --count-params "*) echo 1000; exit;; esac
while [ "\$1" != --run ]; do shift; done
mkdir -p "\$2" && cp "$T/fake/events.msgpack" "\$2/"
EOF
chmod +x "$T/fake/ts-train"
PATH=$T/fake:$PATH check "a job stopped after its best: the sweep" sweep -p lr=1e-4 --dir "$T/b" -- ts-train --data "$T/data"
expect_eq "a job stopped after its best: ranked by its best evaluation and its step" \
	"$(sweep --show "$T/b" --format json | jq -c '.[0] | [.state, .best.accuracy, .best.step]')" '["stopped",0.9,10]'

# a sweep killed while it asks ts-train about job 2 (a ts-train that hangs
# counting its parameters) has made nothing yet
mkdir "$T/hook" && cat >"$T/hook/ts-train" <<EOF
#!/bin/sh
case " \$* " in *" --lr 3e-4 "*" --count-params "*) echo \$\$ >"$T/counting"; exec sleep 60;; esac
exec "$BIN/ts-train" "\$@"
EOF
chmod +x "$T/hook/ts-train"
PATH=$T/hook:$PATH ts-sweep --max-params 100000000 -p lr=1e-4,3e-4 --dir "$T/q" -- "${TRAIN[@]}" >/dev/null 2>&1 &   # bounded by the hook's sleep
sweeper=$!
wait_for "killed while asking about the jobs: the sweep counts job 2's parameters" test -s "$T/counting"
kill -9 "$sweeper" "$(cat "$T/counting")"
wait "$sweeper" 2>/dev/null
expect_eq "...it made no sweep dir" "$(test -e "$T/q" && echo made || echo none)" none
# killed while it records its jobs: its dir holds the lock and the records' temp file
mkdir "$T/q" && : >"$T/q/lock" && printf 'part' >"$T/q/jobs.msgpack.tmp"
expect_fail "killed while recording its jobs: --resume finds no sweep, not one of job 1 alone" 1 "not a sweep dir" \
	ts-sweep --resume "$T/q"
check "killed while recording its jobs: the same command runs the sweep in its dir" \
	sweep --max-params 100000000 -p lr=1e-4,3e-4 --dir "$T/q" -- "${TRAIN[@]}"
expect_eq "killed while recording its jobs: both jobs done" "$(states "$T/q" | tr '\n' ';')" "1 done;2 done;"

# --prune asha on real data: the rates from good to useless, so that the later jobs
# reach the first rung (the evaluation at step 10) behind the earlier ones
head -n 1001 "$TOP/examples/spamassassin.csv" >"$T/spam.csv"
ts-tokenize -v "$V" --label label --max-len 64 "$T/spam.csv" | ts-shard -o "$T/spam" --seed 3 >/dev/null
check "--prune asha: 9 rates, 90 steps each" sweep -P 2 --prune asha --eta 3 --metric loss \
	-p lr=3e-3,1e-2,1e-3,3e-4,1e-4,3e-5,1e-5,1e-6,1e-7 --dir "$T/a" -- ts-train --data "$T/spam" --vocab "$V" \
	--layers 1 --hidden 64 --heads 2 --max-pos 64 --batch 16 --max-steps 90 --eval-every 10 --seed 1
pruned() { ts-cat "$T/a/jobs.msgpack" | jq -r "select(.state==\"pruning\") | $1"; }
check "--prune asha: at least 3 of the 9 jobs pruned" test "$(pruned .job | wc -l)" -ge 3
expect_eq "--prune asha: each pruned at a rung where another job did better" \
	"$(pruned '.value > .rung_best' | sort -u)" true
expect_eq "--prune asha: the pruned jobs stopped early, with a checkpoint" \
	"$(for j in $(pruned .job); do ts-cat "$T/a/job-00$j/events.msgpack" | jq -r 'select(.event=="stop") | .step < 90'; done | sort -u)" true
expect_eq "--prune asha: the best job ran to the end" \
	"$(sweep --show "$T/a" --format json | jq -r '.[0] | "\(.state) \(.params.lr)"')" "done 3e-3"
check "--prune asha: --resume runs no pruned job again" sweep --resume "$T/a"
expect_eq "--show and --resume rank by the sweep's --metric, loss, which pruned it" \
	"$(sweep --show "$T/a" --format json | jq -r '.[0].metric') $(head -n 1 "$T/out" | grep -c loss)" "loss 1"
expect_eq "--prune asha: ...nothing was left to run" "$(ts-cat "$T/a/jobs.msgpack" | jq -r 'select(.event=="resume") | .jobs')" 0

# --max-params: ts-train --count-params sizes each job's model before any starts
expect_eq "ts-train --count-params: the parameters its run counts" \
	"$(ts-train "${MODEL[@]}" --vocab "$V" --count-params)" \
	"$(ts-cat "$T/g/job-001/events.msgpack" | jq -r 'select(.event=="start") | .params')"
small=$(ts-train "${MODEL[@]}" --vocab "$V" --count-params)
check "--max-params: hidden 32 and 64 under a bound between them" sweep -P 2 -p hidden=32,64 --max-params "$small" \
	--dir "$T/m" -- "${TRAIN[@]}"
cp "$T/err" "$T/m.err"
expect_eq "--max-params: the bigger job is skipped, never started" \
	"$(sweep --show "$T/m" --format json | jq -r 'sort_by(.job) | map("\(.job) \(.state)") | join(";")') $(test -e "$T/m/job-002" && echo started)" \
	"1 done;2 skipped "
check "--max-params: a warning names it" grep -q "job 2 skipped: its model has [0-9]* parameters, over --max-params $small" "$T/m.err"

# --per-job 2: each job a distributed run of 2 processes, launched by the environment
check "--per-job 2: jobs of 2 processes" sweep -P 1 --per-job 2 -p lr=1e-4,1e-3 --dir "$T/d" -- "${TRAIN[@]}"
expect_eq "--per-job 2: each job ran on 2 processes, all done" \
	"$(for j in 1 2; do ts-cat "$T/d/job-00$j/events.msgpack" | jq -r 'select(.event=="start") | .processes'; ls "$T/d/job-00$j/log" | tr '\n' ' '; done | tr '\n' ' ')$(states "$T/d" | tr '\n' ';')" \
	"2 rank-0.log rank-1.log 2 rank-0.log rank-1.log 1 done;2 done;"
expect_eq "--per-job 2: its 2 processes share the cores (-j $(share 2)) on the CPU, never 2 on one GPU" \
	"$(config_of "$T/d/job-001" threads) $(argvs "$T/d" | grep -c -- " -j $(share 2) --device cpu$")" "$(share 2) 2"
sweep -P 1 --per-job 2 -p lr=1e-4 --dir "$T/ds" -- "${LONG[@]}" >/dev/null 2>&1 &
sweeper=$!
wait_for "--per-job 2: a long job under way" steps_in "$T/ds/job-001"
check "--per-job 2: ts-stop" ts-stop "$T/ds"
wait "$sweeper"
expect_eq "--per-job 2: both processes stopped with one checkpoint" \
	"$(states "$T/ds") $(ts-cat "$T/ds/job-001/events.msgpack" | jq -r 'select(.event=="stop") | .event')" "1 stopped stop"
# resumed with -P: each job still a run of 2 processes
resumed_on() { ts-cat "$T/ds/job-001/events.msgpack" | jq -r 'select(.event=="resume") | .processes' | grep -q .; }
sweep --resume "$T/ds" -P 1 >/dev/null 2>&1 &
sweeper=$!
wait_for "--per-job 2: the sweep resumed with -P 1" resumed_on
timeout 60 ts-stop --wait "$T/ds" >/dev/null
wait "$sweeper"
expect_eq "--per-job 2: -P on a resume keeps each job's 2 processes" \
	"$(ts-cat "$T/ds/job-001/events.msgpack" | jq -r 'select(.event=="resume") | .processes')" 2
expect_fail "--gpus not a multiple of --per-job" 2 "--gpus 0-2 names 3 GPUs, not a multiple of --per-job 2" \
	ts-sweep --gpus 0-2 --per-job 2 -p lr=1 --dir "$T/u9" -- "${TRAIN[@]}"
if ! nvidia-smi >/dev/null 2>&1; then
	sweep --gpus 0,1 -p lr=1 --dir "$T/nogpu" -- "${TRAIN[@]}" >/dev/null 2>"$T/nogpu.err"
	expect_eq "--gpus where the driver cannot be read: each group left out, then the sweep ends" \
		"$? $(grep -c "GPUs [01] left out: the NVIDIA driver cannot be read here" "$T/nogpu.err") $(tail -1 "$T/nogpu.err" | grep -c "no server or GPU is left")" \
		"1 2 1"
else
	skip "GPU: --gpus where the driver cannot be read (this machine has a GPU)"
fi

# usage errors, before anything is written
expect_fail "a range needs --random" 2 "a range is drawn from: give --random N" \
	ts-sweep -p lr=1e-5:1e-3 --dir "$T/u1" -- "${TRAIN[@]}"
expect_fail "a bad spec" 2 "-p lr: not KEY=VALUES" ts-sweep -p lr --dir "$T/u2" -- "${TRAIN[@]}"
expect_fail "an option name with dashes" 2 "'--lr' is not a ts-train option name" \
	ts-sweep -p --lr=1 --dir "$T/u3" -- "${TRAIN[@]}"
expect_fail "a group with a missing value" 2 "'1e-4' has 1 value for 2 options" \
	ts-sweep -p lr,warmup=1e-4 --dir "$T/u4" -- "${TRAIN[@]}"
expect_fail "a range end past a double's range: said so, not called no number" 2 \
	"^ts-sweep: -p lr=1e-400:1: '1e-400' is out of a double's range \\(0, or 2.2e-308 to 1.8e\\+308 in size\\)" \
	ts-sweep --random 2 -p lr=1e-400:1 --dir "$T/u13" -- "${TRAIN[@]}"
expect_fail "a servers host that begins with -: no host name, not left for ssh to read as an option" 2 \
	"^ts-sweep: --servers .*: line 2: '-oProxyCommand=x' is not a host name" \
	ts-sweep --servers <(printf 'node1 2\n-oProxyCommand=x\n') -p lr=1 --dir "$T/u14" -- "${TRAIN[@]}"
expect_fail "a servers line with a # after its words: no comment, refused as ts-sweep(1) says" 2 \
	"^ts-sweep: --servers .*: line 2: not HOST \\[SLOTS\\]" \
	ts-sweep --servers <(printf '  # the big one:\nnode1 4 # big\n') -p lr=1 --dir "$T/u15" -- "${TRAIN[@]}"
expect_fail "a value ts-train refuses: named with its job, before the sweep dir is made" 2 \
	"^ts-sweep: job 2: ts-train: --batch takes a whole number, not 'x'; see 'ts-sweep --help'\$" \
	ts-sweep -p batch=8,x --dir "$T/u7" -- "${TRAIN[@]}"
expect_fail "a misspelt option: ts-train's suggestion" 2 "job 1: ts-train: unknown option '--lrr' \\(did you mean '--lr'\\?\\); see" \
	ts-sweep -p lrr=1e-4 --dir "$T/u7" -- "${TRAIN[@]}"
expect_eq "...no sweep dir is left" "$(test -e "$T/u7" && echo left || echo none)" none
expect_fail "a --run of the command's own" 2 "gives each job its own run dir: drop --run" \
	ts-sweep -p lr=1 --dir "$T/u5" -- "${TRAIN[@]}" --run "$T/r"
expect_fail "not ts-train" 2 "ts-sweep runs ts-train" ts-sweep -p lr=1 --dir "$T/u6" -- echo hi
expect_fail "--print with --gpus, which its command lines would not run on" 2 \
	"--print takes no other options but --param, --tasks, --random, --seed, --jobs and --dir \\(not --gpus\\)" \
	ts-sweep --print --gpus 0 -p lr=1 --dir "$T/u12" -- "${TRAIN[@]}"
expect_fail "a ts-train that is not there: refused before the sweep dir is made, not each job failed" 2 \
	"^ts-sweep: job 1: cannot run $T/nowhere/ts-train: No such file or directory; see 'ts-sweep --help'\$" \
	ts-sweep -p lr=1,2 --dir "$T/u10" -- "$T/nowhere/ts-train" "${MODEL[@]}"
expect_fail "an existing sweep dir" 1 "exists: a sweep makes its dir" ts-sweep -p lr=1 --dir "$T/g" -- "${TRAIN[@]}"
check "nothing written for the usage errors" sh -c "! ls -d '$T'/u* 2>/dev/null"
expect_fail "--show of a dir that is not a sweep" 1 "not a sweep dir" ts-sweep --show "$T/data"
expect_fail "--show -- DIR: -- ends the options, it is no sweep dir" 2 "^ts-sweep: --show needs a value \\(-- ends the options\\)" \
	ts-sweep --show -- "$T/g"
expect_fail "--dir -- before the command: no sweep dir named --" 2 "^ts-sweep: --dir needs a value \\(-- ends the options\\)" \
	ts-sweep -p lr=1 --dir -- "${TRAIN[@]}"
expect_fail "--show with -P, which it does not take" 2 "--show takes no other options but --format, --metric and --plot \\(not --jobs\\)" \
	ts-sweep --show "$T/g" -P 3
# the sweep's own places, not the GPUs given: a --gpus ignored would run the jobs on the cores
expect_fail "--resume with --gpus, which it does not take" 2 "--resume takes no other options but --jobs, --format, --metric and --ssh \\(not --gpus\\)" \
	ts-sweep --resume "$T/g" --gpus 0
finish
