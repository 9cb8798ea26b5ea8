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
expect_eq "bytes and extension values print as arrays of their bytes" \
	"$(printf '\x82\xa1a\xc4\x03\x00\x01\xff\xa1b\xd4\x05\x07' | ts-cat)" '{"a":[0,1,255],"b":[7]}'
expect_eq "unicode passes through" "$(echo '{"t":"héllo \u00e9 \"q\""}' | ts-cat --from-json | ts-cat)" '{"t":"héllo é \"q\""}'
printf '\x81\xa1t\xa3a\x00b' >"$T/nul.msgpack"
expect_eq "a NUL in a string goes to JSON and back" "$(ts-cat "$T/nul.msgpack" | ts-cat --from-json | od -An -tx1)" "$(od -An -tx1 <"$T/nul.msgpack")"

head -c -3 "$T/s.msgpack" >"$T/trunc.msgpack"
check "a torn last record (a writer killed mid-append) ends the stream" ts-cat "$T/trunc.msgpack"
expect_eq "a torn last record: the whole ones print" "$(cat "$T/out")" "$(grep -v '^$' "$T/in.jsonl" | head -n 3)"
expect_eq "a torn last record: one line names it" "$(cat "$T/err")" "ts-cat: $T/trunc.msgpack: record 4 is cut short (a torn write); ignoring it"
printf '\x93\x01\x02\x03' >"$T/arr.msgpack"
expect_fail "a record that is not a map" 1 "record 1: not a map" ts-cat "$T/arr.msgpack"
printf '\xc1' >"$T/bad.msgpack"
expect_fail "malformed msgpack" 1 "record 1: malformed msgpack" ts-cat "$T/bad.msgpack"
printf '{"a":1}\n{"a":\n' >"$T/bad.jsonl"
expect_fail "bad JSON names the line" 1 "bad.jsonl: line 2: not JSON" ts-cat --from-json "$T/bad.jsonl"
expect_eq "the largest and smallest int64 make the round trip" "$(echo '{"a":9223372036854775807,"b":-9223372036854775808}' | ts-cat --from-json | ts-cat)" '{"a":9223372036854775807,"b":-9223372036854775808}'
expect_eq "subnormal doubles print as short as they read back" \
	"$(echo '{"a":5e-324,"b":1e-310,"c":2.2250738585072014e-308,"d":0.1}' | ts-cat --from-json | ts-cat)" \
	'{"a":5e-324,"b":1e-310,"c":2.2250738585072014e-308,"d":0.1}'
expect_fail "an integer beyond int64 is refused, not rounded" 1 "line 1: not JSON: too big integer" \
	sh -c 'echo "{\"id\":9223372036854775808}" | ts-cat --from-json'
echo '[1,2]' >"$T/arr.jsonl"
expect_fail "JSON that is not an object" 1 "line 1: not a JSON object" ts-cat --from-json "$T/arr.jsonl"
expect_fail "--no-header with --from-json: refused, the records need their header" 2 \
	"--no-header leaves headers out of the JSON printed; the records --from-json writes need theirs" \
	ts-cat --from-json --no-header "$T/arr.jsonl"
expect_fail "missing file" 1 "cannot open $T/nope: No such file" ts-cat "$T/nope"
deep=$T$(printf '/%0200d' $(seq 19))   # near PATH_MAX: 19 dirs of 200 bytes
mkdir -p "$deep" && expect_fail "a missing file deep in dirs: the error names it whole and says why" 1 \
	"cannot open $deep/nope: No such file or directory$" ts-cat "$deep/nope"
expect_fail "unknown option suggests the nearest" 2 "unknown option '--recrods' \\(did you mean '--records'\\?\\); see 'ts-cat --help'$" ts-cat --recrods 2
expect_fail "bad number" 2 "takes a whole number" ts-cat -n x
ts-cat --from-json -o "$T/out.msgpack" "$T/bad.jsonl" 2>/dev/null
expect_eq "no half-written output on error" "$(ls -A "$T" | grep -c out.msgpack)" 0
printf 'records = 1\nno-header = true\n' >"$T/cfg"
expect_eq "config file sets options" "$(ts-cat -c "$T/cfg" "$T/s.msgpack" | wc -l)" 1
expect_eq "command line wins over the config file" "$(ts-cat -c "$T/cfg" -n 2 "$T/s.msgpack" | wc -l)" 2
{ echo 'no-header = true'; printf 'records = %05000d\n' 1; } >"$T/longcfg"
expect_eq "a config line longer than 4 KiB" "$(ts-cat -c "$T/longcfg" "$T/s.msgpack" | wc -l)" 1
printf 'recods = 1\n' >"$T/badcfg"
expect_fail "unknown config key names file and line" 2 "badcfg: line 1: unknown key 'recods' \\(did you mean 'records'\\?\\)" ts-cat -c "$T/badcfg" "$T/s.msgpack"
expect_eq "--version" "$(ts-cat --version | cut -d' ' -f1)" ts-cat

# a record of 16 Mi token ids prints in bounded memory
{ printf '\x81\xa3ids\xdd\x01\x00\x00\x00'; head -c 16777216 /dev/zero; } >"$T/big.msgpack"
if [ -x /usr/bin/time ]; then
	cat "$T/big.msgpack" | /usr/bin/time -f %M -o "$T/rss" ts-cat >"$T/big.json"
	expect_eq "a 16 MB record prints whole" "$(wc -c <"$T/big.json") $(head -c 19 "$T/big.json")" "$((8 + 2 * 16777216 - 1 + 3)) {\"ids\":[0,0,0,0,0,0"
	rss=$(cat "$T/rss")
	[ "$rss" -lt 65536 ] && pass "a 16 MB stream prints in under 64 MB ($rss KB)" || fail "a 16 MB stream prints in under 64 MB ($rss KB)"
else
	skip "peak memory: no /usr/bin/time (Debian package time)"
fi

# a run's config, a checkpoint's state.json, a safetensors header
printf '# a run\ndata = /d\nlayers = 4\nlr = 1e-4\nbetas = 0.9,0.999\nbucket = false\n\nend-lr-ratio = -0.5\nname = 12abc\n' >"$T/config"
expect_eq "a config prints as one typed JSON object" "$(ts-cat "$T/config")" \
	'{"data":"/d","layers":4,"lr":1e-4,"betas":"0.9,0.999","bucket":false,"end-lr-ratio":-0.5,"name":"12abc"}'
printf 'layers = 4\nnonsense\n' >"$T/badconfig"
expect_fail "a config line without '=' names the line" 1 "badconfig: line 2: not 'key = value'" ts-cat "$T/badconfig"
printf '{\n "step": 4,\n "finished": true\n}\n' >"$T/state.json"
expect_eq "a checkpoint's state.json prints as one line" "$(ts-cat "$T/state.json")" '{"step":4,"finished":true}'
printf '{"best": 0.69999999999999996, "lr": 1e-7, "xs": [0.1, 2, -0.0], "k": "a\\u00e9"}\n' >"$T/floats.json"
expect_eq "a JSON file's numbers print in their shortest form, as the records' do" "$(ts-cat "$T/floats.json")" \
	'{"best":0.7,"lr":1e-07,"xs":[0.1,2,-0.0],"k":"aé"}'
st() { local h=$1; printf "$(printf '\\x%02x' "${#h}")\0\0\0\0\0\0\0%s" "$h"; head -c "$2" /dev/zero; }
st '{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}}' 36 >"$T/model.safetensors"
expect_eq "a safetensors file prints its header, not the data" "$(ts-cat "$T/model.safetensors")" \
	'{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}}'
st '{"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}' 8 >"$T/bad.safetensors"
expect_fail "a corrupt safetensors header says why" 1 "bad.safetensors: corrupt safetensors header: .*F33" ts-cat "$T/bad.safetensors"
# {{"a":1}:2}: JSON would need the key as a string, escaped again at every level
# of nesting, so that a few KB of nested keys printed as gigabytes
printf '\x81\x81\xa1a\x01\x02' >"$T/mapkey.msgpack"
expect_fail "a map key that is a map is refused, not printed" 1 "mapkey.msgpack: record 1: a map key is a map or a list" \
	ts-cat "$T/mapkey.msgpack"
# a bad record after many good ones: each record before it comes out, whole,
# on standard output (its buffers went out cut at their size, or not at all)
awk 'BEGIN { for (i = 0; i < 6000; i++) printf "{\"id\":%d,\"ids\":[101,%d,102],\"label\":%d}\n", i, 1000 + i, i % 2 }' >"$T/many.jsonl"
ts-cat --from-json -o "$T/many.msgpack" "$T/many.jsonl"
{ cat "$T/many.msgpack"; printf '\005'; } >"$T/badtail.msgpack"
ts-cat --no-header "$T/badtail.msgpack" >"$T/badtail.out" 2>/dev/null
expect_eq "a bad record last: the 6000 before it out, whole" \
	"$? $(jq -c . "$T/badtail.out" 2>&1 | wc -l) $(tail -c 1 "$T/badtail.out" | od -An -c | tr -d ' ')" "1 6000 \n"
{ cat "$T/many.jsonl"; echo '{bad'; } | ts-cat --from-json >"$T/badline.msgpack" 2>/dev/null
expect_eq "--from-json, a bad line last: the 6000 records before it out, whole" \
	"$? $(ts-cat --no-header "$T/badline.msgpack" | wc -l)" "1 6000"
finish
