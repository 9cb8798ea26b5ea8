# Awkward input and output for ts-tokenize and ts-shard, each case one that
# once went wrong quietly or with an error beside the point.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
export OMP_NUM_THREADS=1
tok() { timeout 60 ts-tokenize -v "$V" "$@"; }
shard() { timeout 60 ts-shard --split train=1 "$@"; }
msgpack() { timeout 60 ts-cat --from-json "$@"; }
echo hello | tok -o "$T/hello.msgpack"

# -o /dev/stdout into a pipe is written in place; a replaced file keeps its permissions
to_pipe() ( set -o pipefail; echo hi | tok -o /dev/stdout | timeout 60 ts-cat --no-header )
check "-o /dev/stdout into a pipe" to_pipe
expect_eq "gives the records" "$(cat "$T/out")" '{"id":0,"ids":[101,7632,102]}'
echo old >"$T/private.msgpack" && chmod 600 "$T/private.msgpack"
echo hi | tok -o "$T/private.msgpack"
expect_eq "ts-tokenize -o keeps a file's permissions" "$(stat -c %a "$T/private.msgpack")" 600
chmod 640 "$T/private.msgpack" && ln -s private.msgpack "$T/private.link"
timeout 60 ts-cat -o "$T/private.link" "$T/hello.msgpack"
expect_eq "ts-cat -o keeps them through a link" "$(stat -c %a "$T/private.msgpack")" 640
finish
