# ts-cat: JSON lines to records and back, limits, bad input.
. "$(dirname "$0")/../lib.sh"

cat >"$T/in.jsonl" <<'J'
{"kind":"tokens","version":1,"labels":["ham","spam"]}
{"id":0,"ids":[101,7592,102],"label":1}
{"id":"b","ids":[101,102],"label":0.25,"fold":2}

{"id":2,"ids":[101,2,3,102],"types":[0,0,1,1],"label":[1,0]}
J
check "from-json writes records" ts-cat --from-json -o "$T/s.msgpack" "$T/in.jsonl"
expect_eq "round trip keeps every record" "$(ts-cat "$T/s.msgpack")" "$(grep -v '^$' "$T/in.jsonl")"
expect_eq "-n counts records, not the header" "$(ts-cat -n 1 "$T/s.msgpack" | wc -l)" 2
expect_eq "--no-header" "$(ts-cat --no-header -n 1 "$T/s.msgpack")" '{"id":0,"ids":[101,7592,102],"label":1}'
expect_eq "reads standard input" "$(ts-cat --no-header - <"$T/s.msgpack" | wc -l)" 3
expect_eq "floats keep their shortest form" "$(echo '{"x":0.1,"y":3.0,"z":-1e-7}' | ts-cat --from-json | ts-cat)" '{"x":0.1,"y":3.0,"z":-1e-07}'
expect_eq "unicode passes through" "$(echo '{"t":"héllo \u00e9 \"q\""}' | ts-cat --from-json | ts-cat)" '{"t":"héllo é \"q\""}'

head -c -3 "$T/s.msgpack" >"$T/trunc.msgpack"
expect_fail "truncated stream names the record" 1 "trunc.msgpack: record 4: truncated stream" ts-cat "$T/trunc.msgpack"
printf '\x93\x01\x02\x03' >"$T/arr.msgpack"
expect_fail "a record that is not a map" 1 "record 1: not a map" ts-cat "$T/arr.msgpack"
printf '\xc1' >"$T/bad.msgpack"
expect_fail "malformed msgpack" 1 "record 1: malformed msgpack" ts-cat "$T/bad.msgpack"
printf '{"a":1}\n{"a":\n' >"$T/bad.jsonl"
expect_fail "bad JSON names the line" 1 "bad.jsonl: line 2: not JSON" ts-cat --from-json "$T/bad.jsonl"
echo '[1,2]' >"$T/arr.jsonl"
expect_fail "JSON that is not an object" 1 "line 1: not a JSON object" ts-cat --from-json "$T/arr.jsonl"
expect_fail "missing file" 1 "cannot open $T/nope: No such file" ts-cat "$T/nope"
expect_fail "unknown option suggests the nearest" 2 "unknown option '--recrods'; did you mean '--records'" ts-cat --recrods 2
expect_fail "bad number" 2 "takes a whole number" ts-cat -n x
ts-cat --from-json -o "$T/out.msgpack" "$T/bad.jsonl" 2>/dev/null
expect_eq "no half-written output on error" "$(ls "$T" | grep -c out.msgpack)" 0
printf 'records = 1\nno-header = true\n' >"$T/cfg"
expect_eq "config file sets options" "$(ts-cat -c "$T/cfg" "$T/s.msgpack" | wc -l)" 1
expect_eq "command line wins over the config file" "$(ts-cat -c "$T/cfg" -n 2 "$T/s.msgpack" | wc -l)" 2
printf 'recods = 1\n' >"$T/badcfg"
expect_fail "unknown config key names file and line" 2 "badcfg: line 1: unknown key 'recods'; did you mean 'records'" ts-cat -c "$T/badcfg" "$T/s.msgpack"
expect_eq "--version" "$(ts-cat --version | cut -d' ' -f1)" ts-cat
finish
