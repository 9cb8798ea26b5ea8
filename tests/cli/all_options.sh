# Options and config values: every number has a range and a value outside it
# is refused, on the command line, in a -c file and in a run's config read by
# --resume; paths may not be empty; a model or batch too big for the memory is
# refused before it is made; --help fits in 80 columns; errors are one line.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=2
head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 -j 2 --device cpu)
# A run that might hang gets 20 seconds, and a KILL 5 seconds later if it ignores the TERM.
train() { timeout -k 5 20 ts-train "$@"; }

# refused NAME PATTERN CMD...: CMD exits 2 with exactly one stderr line matching PATTERN
refused() {
	local n=$1 pat=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"; local rc=$?
	if [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qE -- "$pat" "$T/err"; then pass "$n"
	else fail "$n"; echo "    exit $rc (want 2); stderr:"; sed 's/^/    /' "$T/err" | head -5; fi
}

# --- the bugs that ranges fix ---
refused "--max-ngram 2000000000 is refused, not a hang" "--max-ngram: 2000000000 is out of range \(1 to 32\)" \
	train "${TINY[@]}" --run "$T/n1" --task mlm --max-ngram 2000000000 --max-steps 1
check "--max-ngram 32, the top of its range, trains a step" \
	train "${TINY[@]}" --run "$T/n2" --task mlm --max-ngram 32 --max-steps 1
refused "--epochs 4611686018427387904 is refused, not 'done at step 0'" "--epochs: 4611686018427387904 is out of range" \
	train "${TINY[@]}" --run "$T/e1" --epochs 4611686018427387904
refused "--keep 4294967296 is refused, not wrapped to 0" "--keep: 4294967296 is out of range \(1 to 1000000\)" \
	train "${TINY[@]}" --run "$T/k1" --keep 4294967296 --max-steps 1
refused "a number beyond any long is out of range" "--keep: 99999999999999999999 is out of range" \
	train "${TINY[@]}" --run "$T/k2" --keep 99999999999999999999
for o in batch hidden layers ffn max-pos heads accum threads patience max-ngram; do
	refused "--$o 4294967297 is refused, not cast to int" "--$o: 4294967297 is out of range" \
		train "${TINY[@]}" --run "$T/i-$o" "--$o" 4294967297
done
for o in eval-every save-every max-steps; do
	refused "--$o above 10^12 steps is refused" "--$o: 1000000000001 is out of range \(0 to 1000000000000\)" \
		train "${TINY[@]}" --run "$T/s-$o" "--$o" 1000000000001
done
for o in seed eval-every save-every patience max-steps threads; do
	refused "--$o -1 is refused" "--$o: -1 is out of range \(0 to " train "${TINY[@]}" --run "$T/neg-$o" "--$o" -1
done
refused "--lr nan is refused" "--lr takes a number, not 'nan'" train "${TINY[@]}" --run "$T/l1" --lr nan
refused "--lr inf is refused" "--lr: inf is out of range" train "${TINY[@]}" --run "$T/l2" --lr inf
refused "--lr 0 is refused" "--lr: 0 is out of range \(above 0 to " train "${TINY[@]}" --run "$T/l3" --lr 0
refused "--betas nan,0.999 is refused" "--betas takes two numbers in \[0, 1\)" train "${TINY[@]}" --run "$T/b1" --betas nan,0.999
refused "--betas 0.9,nan is refused" "--betas takes two numbers" train "${TINY[@]}" --run "$T/b2" --betas 0.9,nan
refused "--betas 1,0.999 is refused" "--betas takes two numbers" train "${TINY[@]}" --run "$T/b3" --betas 1,0.999
refused "--betas 0.9, (the second missing) is refused, not taken as 0" "--betas takes two numbers" \
	train "${TINY[@]}" --run "$T/b4" --betas 0.9,
refused "--betas ,0.9 (the first missing) is refused" "--betas takes two numbers" train "${TINY[@]}" --run "$T/b5" --betas ,0.9
refused "--dropout 1 is refused" "--dropout: 1 is out of range \(0 to below 1\)" train "${TINY[@]}" --run "$T/d1" --dropout 1
refused "--dropout -0.1 is refused" "--dropout: -0.1 is out of range" train "${TINY[@]}" --run "$T/d2" --dropout -0.1
refused "--mask-prob 0 is refused" "--mask-prob: 0 is out of range \(above 0 to below 1\)" train "${TINY[@]}" --run "$T/m1" --mask-prob 0
refused "--mask-prob 1 is refused" "--mask-prob: 1 is out of range" train "${TINY[@]}" --run "$T/m2" --mask-prob 1
refused "--warmup -1 is refused" "--warmup: -1 is out of range" train "${TINY[@]}" --run "$T/w1" --warmup -1
refused "--warmup 1.5 is refused, not taken as 1 step" "--warmup 1.5: from 1 on, a whole number of steps" \
	train "${TINY[@]}" --run "$T/w5" --warmup 1.5
refused "--end-lr-ratio 1.5 is refused" "--end-lr-ratio: 1.5 is out of range \(0 to 1\)" train "${TINY[@]}" --run "$T/w2" --end-lr-ratio 1.5
refused "--clip -1 is refused" "--clip: -1 is out of range" train "${TINY[@]}" --run "$T/w3" --clip -1
refused "--weight-decay -0.01 is refused" "--weight-decay: -0.01 is out of range" train "${TINY[@]}" --run "$T/w4" --weight-decay -0.01
refused "--momentum 1 is refused" "--momentum: 1 is out of range \(0 to below 1\)" train "${TINY[@]}" --run "$T/w5" --momentum 1
refused "--eps 0 is refused" "--eps: 0 is out of range \(above 0 to " train "${TINY[@]}" --run "$T/w6" --eps 0
train "${TINY[@]}" --run "$T/f0" --ffn 0 --max-steps 1 >/dev/null 2>&1
expect_eq "--ffn 0, the bottom of its range, means 4 x --hidden" "$(grep '^ffn = ' "$T/f0/config")" "ffn = 128"
refused "--hidden must be a multiple of --heads" "--hidden 32 is not a multiple of --heads 3" train "${TINY[@]}" --run "$T/h1" --heads 3

# --- the other commands ---
refused "ts-tokenize --max-len -1 is refused" "--max-len: -1 is out of range \(0 to " ts-tokenize -v "$V" --max-len -1 "$T/small.csv"
refused "ts-tokenize --max-len 4294967296 is refused" "--max-len: 4294967296 is out of range" ts-tokenize -v "$V" --max-len 4294967296 "$T/small.csv"
refused "ts-tokenize --stride -1 is refused" "--stride: -1 is out of range" ts-tokenize -v "$V" --fold --stride -1 "$T/small.csv"
refused "ts-tokenize -j 2000 is refused" "--threads: 2000 is out of range \(0 to 1024\)" ts-tokenize -v "$V" -j 2000 "$T/small.csv"
refused "ts-shard --mem 0 is refused" "--mem: 0 is out of range \(1 to " ts-shard -o "$T/s1" --mem 0 "$T/small.csv"
refused "ts-shard --mem 99999999999 is refused" "--mem: 99999999999 is out of range" ts-shard -o "$T/s2" --mem 99999999999 "$T/small.csv"
refused "ts-shard --seed -1 is refused" "--seed: -1 is out of range" ts-shard -o "$T/s3" --seed -1 "$T/small.csv"
refused "ts-eval --batch 0 is refused" "--batch: 0 is out of range \(1 to " ts-eval -m "$T/n2/final" --data "$T/data" --batch 0
refused "ts-eval --batch 4294967297 is refused" "--batch: 4294967297 is out of range" ts-eval -m "$T/n2/final" --data "$T/data" --batch 4294967297
refused "ts-eval --max-ngram 33 is refused" "--max-ngram: 33 is out of range \(1 to 32\)" ts-eval -m "$T/n2/final" --data "$T/data" --max-ngram 33
refused "ts-eval --mask-prob 1 is refused" "--mask-prob: 1 is out of range" ts-eval -m "$T/n2/final" --data "$T/data" --mask-prob 1
refused "ts-eval -j -1 is refused" "--threads: -1 is out of range" ts-eval -m "$T/n2/final" --data "$T/data" -j -1
refused "ts-stop --timeout -1 is refused" "--timeout: -1 is out of range" ts-stop --wait --timeout -1 "$T/n2"
refused "ts-cat -n -1 is refused" "--records: -1 is out of range" ts-cat -n -1 "$T/data/manifest.json"
expect_eq "ts-cat -n 0 prints no record" "$(ts-cat -n 0 "$T/data/train.shard" | wc -l)" 0

# --- config files: the same ranges, with the file and line ---
printf 'keep = 4294967296\n' >"$T/keep.conf"
refused "-c: keep = 4294967296 is refused with file and line" "keep.conf: line 1: --keep: 4294967296 is out of range" \
	train "${TINY[@]}" --run "$T/c1" -c "$T/keep.conf"
printf '# spans\ntask = mlm\nmax-ngram = 2000000000\n' >"$T/ngram.conf"
refused "-c: max-ngram = 2000000000 is refused" "ngram.conf: line 3: --max-ngram: 2000000000 is out of range" \
	train "${TINY[@]}" --run "$T/c2" -c "$T/ngram.conf"
deep=$T$(printf '/%0100d' $(seq 6)) && mkdir -p "$deep" && printf 'layers = 2\nlayer = 3\n' >"$deep/key.conf"
refused "-c FILE deep in dirs: the error names it whole, with its line" "^ts-train: $deep/key.conf: line 2: unknown key 'layer'" \
	train "${TINY[@]}" --run "$T/c5" -c "$deep/key.conf"
printf 'lr = nan\n' >"$T/lr.conf"
refused "-c: lr = nan is refused" "lr.conf: line 1: --lr takes a number, not 'nan'" train "${TINY[@]}" --run "$T/c3" -c "$T/lr.conf"
printf 'betas = nan,0.9\n' >"$T/betas.conf"
refused "-c: betas = nan,0.9 is refused" "--betas takes two numbers" train "${TINY[@]}" --run "$T/c4" -c "$T/betas.conf"
printf 'dropout = 1\n' >"$T/dropout.conf"
refused "-c: dropout = 1 is refused" "dropout.conf: line 1: --dropout: 1 is out of range" train "${TINY[@]}" --run "$T/c5" -c "$T/dropout.conf"
printf 'mem = 0\n' >"$T/mem.conf"
refused "ts-shard -c: mem = 0 is refused" "mem.conf: line 1: --mem: 0 is out of range" ts-shard -o "$T/s4" -c "$T/mem.conf" "$T/small.csv"
printf 'run =\n' >"$T/run.conf"
refused "-c: an empty run path is refused" "run.conf: line 1: --run: the path is empty" train --data "$T/data" -c "$T/run.conf"

# the command line wins, also where its option stands instead of one the file gives
printf 'max-steps = 2\nbatch = 8\nlayers = 1\nhidden = 32\nheads = 2\nffn = 64\nmax-pos = 32\n' >"$T/end.conf"
FROM=(--data "$T/data" --vocab "$V" -j 2 --device cpu -c "$T/end.conf")
train "${FROM[@]}" --run "$T/c6" --epochs 1 >/dev/null 2>&1
expect_eq "-c with max-steps = 2, --epochs 1: the run ends by epochs" "$(grep '^max-steps = ' "$T/c6/config")" "max-steps = 0"
check "-c with batch = 8, --batch-tokens 64: the run batches by tokens" \
	train "${FROM[@]}" --run "$T/c7" --batch-tokens 64 --max-steps 1
train --data "$T/data" --init "$T/n2/final" --task mlm -j 2 --device cpu -c "$T/end.conf" --run "$T/c8" >/dev/null 2>&1
expect_eq "-c with a model's shape, --init: the model is --init's" "$(grep -cE '^(layers|vocab) = ' "$T/c8/config")" 0
# an option that does not apply to the run: refused on the command line, taken from a file
refused "--momentum with adamw is refused" "--momentum is for --optimizer sgd, not adamw" \
	train "${TINY[@]}" --run "$T/na1" --momentum 0.5
refused "--eps with sgd is refused" "--betas and --eps are for --optimizer adamw, adam and lamb, not sgd" \
	train "${TINY[@]}" --run "$T/na2" --optimizer sgd --eps 1e-6
refused "--betas with sgd is refused" "--betas and --eps are for" train "${TINY[@]}" --run "$T/na3" --optimizer sgd --betas 0.9,0.99
refused "--end-lr-ratio with --decay constant is refused" "--end-lr-ratio is where a decay ends, and --decay constant has none" \
	train "${TINY[@]}" --run "$T/na4" --decay constant --end-lr-ratio 0.1
refused "--threshold 0.5 without --multi-label is refused" "--threshold goes with --multi-label" \
	train "${TINY[@]}" --run "$T/na7" --threshold 0.5
for o in "--mask-prob 0.2" --whole-word "--max-ngram 3"; do
	refused "$o with --task cls is refused" "--mask-prob, --whole-word and --max-ngram are for --task mlm, not cls" \
		train "${TINY[@]}" --run "$T/na5" $o
done
printf 'momentum = 0.5\nmask-prob = 0.2\n' >"$T/many.conf"
check "a file may hold them, for other runs" train "${TINY[@]}" --run "$T/na6" -c "$T/many.conf" --max-steps 1
printf 'vocab = %s\ncased = true\n' "$V" >"$T/tok.conf"
expect_eq "ts-tokenize -c with a vocab, -t: the tokenizer.json tokenizes" \
	"$(echo 'Hello world' | ts-tokenize -c "$T/tok.conf" -t "$TOP/examples/roberta-base" --show-tokens)" \
	'{"id":0,"tokens":["<s>","Hello","Ġworld","</s>"]}'

# a run's own config, read back by --resume
stop_after 1 train "${TINY[@]}" --run "$T/r1" --max-steps 4 >/dev/null 2>&1
sed -i 's/^keep = .*/keep = 4294967296/' "$T/r1/config"
refused "--resume: keep = 4294967296 in the run's config is refused" "config: line [0-9]+: --keep: 4294967296 is out of range" \
	train --resume "$T/r1"
[ -n "$(ls "$T/r1/ckpt")" ] && pass "the refused resume deletes no checkpoint" || fail "the refused resume deletes no checkpoint"

# a default that means "not set" (--dropout from --init) stays out of the config, so the run resumes
stop_after 1 train --data "$T/data" --init "$T/n2/final" --task mlm --run "$T/r2" --batch 8 -j 2 --max-steps 3 >/dev/null 2>&1
expect_eq "a run from --init without --dropout writes no dropout" "$(grep -c '^dropout' "$T/r2/config")" 0
check "that run resumes" train --resume "$T/r2" --device cpu

# --- empty paths: every option that names a file or dir, and operands ---
for exe in "$BIN"/ts-*; do
	cmd=$(basename "$exe")
	for o in $("$exe" --ts-options | awk -F'\t' 'NR > 1 && $4 ~ /^@(file|dir)$/ { print $2 }'); do
		refused "$cmd --$o '' is refused" "--$o: the path is empty" timeout 20 "$cmd" "--$o" ""
	done
	refused "$cmd -c '' is refused" "--config: the path is empty" timeout 20 "$cmd" -c ""
done
refused "ts-stop '' is refused" "an argument is an empty path" ts-stop ""
refused "ts-cat '' is refused" "an argument is an empty path" ts-cat ""
refused "ts-train --data= is refused" "--data: the path is empty" train --data= --run "$T/x"

# --- models and batches too big for the memory, refused before they are made ---
expect_fail "a model too big for the memory is refused with its size" 1 \
	"ts-train: model: needs [0-9.]+ [KMGTPEZY]?B for parameters, gradients and optimizer state; this machine has [0-9.]+ [KMGTPEZY]?B$" \
	train "${TINY[@]}" --run "$T/big1" --layers 1000 --hidden 65536 --heads 1
expect_fail "a batch too big for the memory is refused with its size" 1 \
	"ts-train: batch: needs [0-9.]+ [KMGTPEZY]?B for the model and the activations of 32768 records of 32 tokens; this machine has" \
	train "${TINY[@]}" --run "$T/big2" --hidden 4096 --heads 4096 --batch 32768

# --- help and errors ---
for exe in "$BIN"/ts-*; do
	expect_eq "$(basename "$exe") --help fits in 80 columns" "$("$exe" --help | awk 'length > 80')" ""
done
expect_fail "a bad-input error is one line, without the --help pointer" 1 "^ts-train: .*: not a run dir \(no config file\)$" \
	train --resume "$T/data"
refused "a usage error is one line that points to --help" "^ts-train: --keep: 0 is out of range \(1 to 1000000\); see 'ts-train --help'$" \
	train --keep 0
# '-' is standard input or output, never a dir of that name
expect_fail "ts-shard -o - is refused, not made a dir named -" 2 "--output: '-' stands for standard input or output, not a dir" \
	sh -c "cd '$T' && ts-shard -o - </dev/null"
check "so no dir named - is left" test ! -e "$T/-"
expect_fail "ts-train --run - too" 2 "--run: '-' stands for standard input or output" ts-train --run - --data "$T/nowhere"
expect_fail "ts-sweep --dir - too" 2 "--dir: '-' stands for standard input or output" ts-sweep --dir - -p lr=1 -- ts-train
finish
