# Shell test vocabulary for tests/cli/*.sh: each check prints one PASS, FAIL
# or SKIP line that tests/run counts. Source it; $BIN holds the commands.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${TS_BIN:-$TOP/bin}
FIX=$TOP/tests/fixtures
export PATH=$BIN:$PATH
T=$(mktemp -d "${TMPDIR:-/tmp}/ts-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
# tmux_session: S names a tmux session of this script's own, ended at exit
tmux_session() { S="ts-$(basename "$0" .sh)-$$"; trap 'tmux kill-session -t "$S" 2>/dev/null; rm -rf "$T"' EXIT; }

pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
skip() { echo "SKIP $*"; }    # only where a GPU is needed: tests/run fails any other skip
# namespaces: whether this machine lets a test make network and mount namespaces (root
# with CAP_SYS_ADMIN, and / a mount point: not a chroot); else why not, in NS_WHY
namespaces() {
	local err
	if ! err=$(unshare -m -n true 2>&1); then NS_WHY=${err:-unshare -m -n failed}
	elif ! mountpoint -q /; then NS_WHY="/ is not a mount point: a chroot"
	else return 0; fi
	return 1
}
# skip_namespaces WHAT: WHAT skipped where namespaces cannot be made (namespaces says
# why); a failure instead with TS_REQUIRE_NAMESPACES=1, as on CI
skip_namespaces() {
	local why="needs network and mount namespaces, so root with CAP_SYS_ADMIN and / a mount point, not a chroot ($NS_WHY)"
	if [ "${TS_REQUIRE_NAMESPACES:-}" = 1 ]; then fail "$1: $why"; else echo "SKIP namespaces: $1: $why"; fi
}

# check NAME CMD...: passes when CMD exits 0
check() { local n=$1; shift; if "$@" >"$T/out" 2>"$T/err"; then pass "$n"; else fail "$n"; sed 's/^/    /' "$T/err" | head -5; fi; }
# expect_same NAME GOT WANT: expect_eq for two outputs that must not be empty (two
# commands that both failed would agree on nothing)
expect_same() {
	if [ -z "$3" ]; then fail "$1"; printf '    nothing to compare: both sides are empty\n'
	else expect_eq "$@"; fi
}
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1"; printf '    got:  %s\n    want: %s\n' "$2" "$3" | head -10; fi; }
# expect_fail NAME CODE PATTERN CMD...: CMD exits CODE with one stderr line matching PATTERN
# (a usage error, code 2, may add lines); a failure says which of the three did not hold
expect_fail() {
	local n=$1 code=$2 pat=$3; shift 3
	"$@" >"$T/out" 2>"$T/err"; local rc=$?
	local lines; lines=$(wc -l <"$T/err")
	if [ "$rc" = "$code" ] && grep -qE -- "$pat" "$T/err" && { [ "$code" = 2 ] || [ "$lines" = 1 ]; }; then pass "$n"
	else
		fail "$n"
		if [ "$rc" != "$code" ]; then echo "    exit $rc, not $code; stderr:"
		elif ! grep -qE -- "$pat" "$T/err"; then echo "    exit $rc, but stderr does not match /$pat/:"
		else echo "    exit $rc and a match, but stderr has $lines lines, not one:"; fi
		sed 's/^/    /' "$T/err" | head -5
	fi
}
# wait_for NAME CMD...: waits (20 s at most) until CMD succeeds; fails NAME if it never does
wait_for() { local n=$1; shift; for _ in $(seq 400); do "$@" 2>/dev/null && { pass "$n"; return; }; sleep 0.05; done; fail "$n"; }
# train ARGS...: ts-train under a time limit, so a hung run fails its test instead of hanging it
train() { timeout 300 ts-train "$@"; }
# stop_after N CMD...: CMD, a ts-train, stopped on request after its Nth step, as a
# stop request made then would stop it: an access() preloaded in it finds RUN/stop
# from its (N+1)th look on, the one before step N+1 (a request made before the run
# began stops it before its first step)
stop_after() {
	if [ ! -f "$T/stop_after.so" ]; then
		cat >"$T/stop_after.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
int access(const char *path, int mode)
{
	static int looks;
	size_t n = strlen(path);
	if (n > 5 && !strcmp(path + n - 5, "/stop") && ++looks > atoi(getenv("TS_STOP_AFTER")))
		return 0;
	return ((int (*)(const char *, int))dlsym(RTLD_NEXT, "access"))(path, mode);
}
EOF
		${CC:-cc} -shared -fPIC -o "$T/stop_after.so" "$T/stop_after.c" -ldl || return 1
	fi
	TS_STOP_AFTER=$1 LD_PRELOAD=$T/stop_after.so ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		"${@:2}"
}
# kill_trainer RUNDIR: a crash: SIGKILL to the ts-train holding the run's lock, if one does
kill_trainer() { flock -n "$1/lock" true || kill -9 "$(cut -d' ' -f1 "$1/lock")"; wait; }
# losses RUNDIR: "step loss" a line, the last step event of each step winning
# (a resumed run logs again the steps after its checkpoint)
# (a run with none gives a line naming it, so that two failed runs never compare equal)
losses() {
	ts-cat "$1/events.msgpack" 2>/dev/null | jq -r 'select(.event=="step") | "\(.step) \(.loss)"' |
		awk -v run="$1" '{ l[$1] = $2 } END { for (s in l) print s, l[s]; if (!NR) print "no steps in " run }' |
		sort -n
}
# redigest DIR: DIR/digests.json made again for the files it names as they are now (a
# checkpoint edited on purpose, to reach the checks behind the digests)
redigest() {
	local f j; j=$(cat "$1/digests.json")
	for f in $(jq -r '.files | keys[]' <<<"$j"); do
		j=$(jq --arg f "$f" --argjson b "$(stat -c %s "$1/$f")" --arg h "$(xxhsum -H2 "$1/$f" 2>/dev/null | cut -d' ' -f1)" \
			'.files[$f] = {bytes: $b, xxh3_128: $h}' <<<"$j")
	done
	echo "$j" >"$1/digests.json"
}
# keep_events DIR AWK: DIR's event log cut down to the records (as JSON lines) the awk program prints
keep_events() { ts-cat "$1/events.msgpack" | awk "$2" | ts-cat --from-json -o "$T/ev" && mv "$T/ev" "$1/events.msgpack"; }
# listens PORT: something listens at TCP port PORT here (read from /proc: no ss on some machines)
listens() { awk -v p=":$(printf %04X "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6; }
# free_port: a TCP port below the kernel's ephemeral range (32768 up), where no
# outgoing connection takes it, that nothing listens on now
free_port() { local p; for _ in $(seq 100); do p=$((20000 + RANDOM % 12000)); listens "$p" || break; done; echo "$p"; }
# RAND: awk functions of a seeded generator that draws the same numbers under every awk
# (awk's own rand() after srand(N) differs between mawk versions): seed(N), then rnd()
# in [0, 1); use as awk "$RAND"' BEGIN { seed(9); ... rnd() ... }'
RAND='function seed(n,  i) { _s = n % 2147483646 + 1; for (i = 0; i < 8; i++) rnd() }
	function rnd() { _s = (_s * 48271) % 2147483647; return (_s - 1) / 2147483646 }'
finish() { exit $failed; }
