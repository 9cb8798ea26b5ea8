# make bundle and tests/gpu/run on this machine: the tarball is small, holds
# no path of this machine, unpacks anywhere, and its check runs every step it
# can here and reports each GPU step skipped (tests/gpu/README.md).
. "$(dirname "$0")/../lib.sh"
if ! command -v nvcc >/dev/null; then
	skip "make bundle: no nvcc here, and the bundle is a GPU build"
	finish
fi
unset MAKEFLAGS MAKELEVEL   # make test's own, whose jobserver this make would not reach
version=$(ts-train --version | awk '{ print $NF }')
tarball=$TOP/build/topspin-$version-gpu.tar.xz
check "README.md shows the bundle of this version" grep -qF "topspin-$version-gpu.tar.xz" "$TOP/README.md"
check "make bundle" timeout 900 make -C "$TOP" --no-print-directory bundle
check "the bundle is under 16 MiB" test "$(stat -c %s "$tarball")" -lt $((16 << 20))
mkdir "$T/a" && tar -C "$T/a" -xJf "$tarball" && mv "$T/a/topspin-$version-gpu" "$T/moved"
B=$T/moved
check "no path of the build machine inside" bash -c "! grep -rlF '$TOP' '$B'"
check "its commands name no library path (RPATH or RUNPATH)" bash -c \
	"! for f in '$B'/bin/* '$B'/build/tests/*; do readelf -d \"\$f\"; done | grep -E 'RPATH|RUNPATH'"
check "its jq runs with the libraries beside it" env LD_LIBRARY_PATH="$B/tools/lib" "$B/tools/jq" -n 1

expect_fail "tests/gpu/run without a report dir: usage" 2 "usage: tests/gpu/run REPORTDIR" "$B/tests/gpu/run"
touch "$T/file"
expect_fail "tests/gpu/run with a file for its report dir" 1 "tests/gpu/run: $T/file/r: cannot write a report there" \
	"$B/tests/gpu/run" "$T/file/r"
expect_fail "TS_GPU_BUDGET must be seconds" 2 "TS_GPU_BUDGET=soon: a whole number of seconds from 1" \
	env TS_GPU_BUDGET=soon "$B/tests/gpu/run" "$T/r0"

expect_fail "TS_GPU_STEPS names the steps" 2 "TS_GPU_STEPS: tests: not one of ops precision train_gpu.sh bench memcheck suites ncu" \
	env TS_GPU_STEPS="ops tests" "$B/tests/gpu/run" "$T/r0"
TS_GPU_STEPS="ops ncu" timeout 120 "$B/tests/gpu/run" "$T/some" >/dev/null 2>&1
check "TS_GPU_STEPS: the steps not named are not run" grep -qx "train_gpu.sh: not run, not in TS_GPU_STEPS" "$T/some/summary.txt"
check "TS_GPU_STEPS: the steps named are" grep -q "^test_cuda_ops linear: " "$T/some/summary.txt"
TS_GPU_BUDGET=1 timeout 120 "$B/tests/gpu/run" "$T/spent" >/dev/null 2>&1
check "a spent TS_GPU_BUDGET: the steps left are reported not run" grep -qx "ops: not run, TS_GPU_BUDGET=1 s spent" \
	"$T/spent/summary.txt"
(cd / && timeout 300 "$B/tests/gpu/run" "$T/rep" >"$T/run.out" 2>&1); rc=$?
S=$T/rep/summary.txt
expect_eq "tests/gpu/run, unpacked elsewhere, run from elsewhere: exit 0" "$rc" 0
check "the summary names the commit built" grep -qE "^TopSpin GPU check, .*, [0-9a-f]{7}" "$S"
check "every command of the bundle starts" grep -qx "env: every command starts" "$S"
for t in test_cuda_ops test_cuda_precision test_cuda_comm; do
	n=$("$B/build/tests/$t" --list | wc -l)
	expect_eq "$t: each of its $n groups runs on its own and reports itself skipped" \
		"$(grep -cE "^$t [a-z0-9_]+: 0 passed, 0 failed, [1-9][0-9]* skipped" "$S")" "$n"
done
check "train_gpu.sh runs its checks that need no GPU" grep -qE "^train_gpu.sh: [1-9][0-9]* passed, 0 failed, [1-9][0-9]* skipped" "$S"
for s in bench memcheck suites ncu; do
	check "$s: reported skipped, no GPU" grep -qx "$s: skipped, no GPU" "$S"
done
check "a total line closes it" grep -qE "^total: [0-9]+ passed, 0 failed, [0-9]+ skipped" "$S"
check "seven logs at most beside the summary" test "$(find "$T/rep" -type f ! -name summary.txt | wc -l)" -le 7
check "it prints the summary, and nothing else" cmp "$T/run.out" "$S"

# a group that dies without a FAIL line (a CUDA call's fatal error): the groups after
# it still run, and the summary shows its last lines
mv "$B/build/tests/test_cuda_comm" "$T/comm"
printf '%s\n' '#!/bin/sh' 'case "$1" in --list) printf "first\nsecond\n";; first) echo PASS one;' \
	'echo "test_cuda_comm: cuda_comm.cu:12: ncclCommInitRank: unhandled system error" >&2; exit 1;;' \
	'second) echo PASS two;; esac' >"$B/build/tests/test_cuda_comm"
chmod +x "$B/build/tests/test_cuda_comm"
TS_GPU_STEPS=ops timeout 120 "$B/tests/gpu/run" "$T/died" >/dev/null 2>&1
expect_eq "a group that dies: exit 1, FAILED in the summary with its last line, the next group run" \
	"$?|$(grep -A1 '^test_cuda_comm first: FAILED, exit 1 without a FAIL line' "$T/died/summary.txt" | tail -n 1)|$(grep -c '^test_cuda_comm second: 1 passed' "$T/died/summary.txt")" \
	"1|    test_cuda_comm: cuda_comm.cu:12: ncclCommInitRank: unhandled system error|1"
finish
