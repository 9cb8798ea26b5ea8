# Two servers, as two network namespaces of this machine joined by a virtual
# Ethernet link: each has its own interface, address and routes, and one's
# lo does not reach the other. A run launched by the environment across them
# trains as on one machine, each process finds the interface that reaches
# the other, and a wrong --net-if is reported within --comm-timeout.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
A=ts${$}a B=ts${$}b
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
if ! namespaces; then
	skip_namespaces "train_servers.sh, two servers as network namespaces"
	finish
fi
servers() {
	local server
	ip netns add "$A" && ip netns add "$B" && ip link add "${A}e" type veth peer name "${B}e" &&
		ip link set "${A}e" netns "$A" && ip link set "${B}e" netns "$B" &&
		ip -n "$A" addr add 10.77.0.1/24 dev "${A}e" && ip -n "$B" addr add 10.77.0.2/24 dev "${B}e" &&
		for server in "$A" "$B"; do
			ip -n "$server" link set lo up && ip -n "$server" link set "${server}e" up || return 1
		done
}
check "two servers: network namespaces joined by a veth link (10.77.0.1, 10.77.0.2)" servers

head -n 101 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --id id --label label --max-len 32 "$T/small.csv" >"$T/tok.msgpack"
ts-shard -o "$T/data" --seed 3 "$T/tok.msgpack"
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --seed 5 -j 1 --device cpu
	--batch 8 --max-steps 8 --eval-every 4)
port=$(free_port)
# on NS ADDR RANK ARGS...: process RANK of 2 on server NS, process 0 listening at ADDR
on() {
	local ns=$1 addr=$2 rank=$3; shift 3
	ip netns exec "$ns" env WORLD_SIZE=2 RANK="$rank" MASTER_ADDR="$addr" MASTER_PORT="$port" \
		timeout 120 ts-train "$@"
}

# the same run on this machine's lo, for the reference
on "$A" 127.0.0.1 1 "${TINY[@]}" --run "$T/local" >/dev/null 2>&1 &
check "one server: 2 processes over lo" on "$A" 127.0.0.1 0 "${TINY[@]}" --run "$T/local"
wait $!
port=$(free_port)
on "$B" 10.77.0.1 1 "${TINY[@]}" --run "$T/two" >"$T/two1.out" 2>&1 &
check "two servers: process 0 on one, process 1 on the other" on "$A" 10.77.0.1 0 "${TINY[@]}" --run "$T/two"
wait $!
expect_eq "two servers: process 1 exits 0" "$?" 0
expect_eq "two servers: 8 steps" "$(losses "$T/two" | wc -l)" 8
expect_eq "two servers: the losses of one server" "$(losses "$T/two")" "$(losses "$T/local")"
check "two servers: the final model of one server" cmp "$T/two/final/model.safetensors" "$T/local/final/model.safetensors"
expect_eq "two servers: each process found the interface that reaches the other" \
	"$(grep -ho "process [01] of 2 talking over .*" "$T"/two/log/rank-*.log | sort | tr '\n' ';')" \
	"process 0 of 2 talking over ${A}e;process 1 of 2 talking over ${B}e;"

port=$(free_port)
on "$B" 10.77.0.1 1 "${TINY[@]}" --run "$T/named" --net-if "${B}e" >/dev/null 2>&1 &
check "--net-if naming the interface that reaches the other server" \
	on "$A" 10.77.0.1 0 "${TINY[@]}" --run "$T/named" --net-if "${A}e"
wait $!
expect_eq "--net-if: the same losses" "$(losses "$T/named")" "$(losses "$T/two")"

# lo exists on the second server but cannot reach the first: both end, saying why
port=$(free_port)
start=$SECONDS
on "$B" 10.77.0.1 1 "${TINY[@]}" --run "$T/wrong" --net-if lo --comm-timeout 3 >"$T/wrong1.out" 2>&1 &
on "$A" 10.77.0.1 0 "${TINY[@]}" --run "$T/wrong" --comm-timeout 3 >"$T/wrong0.out" 2>&1
rc0=$?
wait $!
rc1=$?
expect_eq "a wrong --net-if: both processes exit non-zero" "$((rc0 != 0)) $((rc1 != 0))" "1 1"
check "a wrong --net-if: ended within 30 s, not left to hang" test $((SECONDS - start)) -lt 30
check "a wrong --net-if: process 1 says it cannot reach process 0" \
	grep -q "process 1: cannot reach process 0 at 10.77.0.1:$port in 3 s" "$T/wrong1.out"
check "a wrong --net-if: process 0 says who did not come" grep -q "process 0: only 1 of 2 processes came in 3 s" \
	"$T/wrong0.out"
finish
