# make demo's own script, examples/demo, end to end: tokenize, shard, train,
# report. It runs on a copy of the tree whose examples/spam.conf trains 6
# steps, not the demo's 3 epochs (minutes); the rest is the demo as it ships.
. "$(dirname "$0")/../lib.sh"
mkdir -p "$T/tree/examples"
cp "$TOP/examples/demo" "$T/tree/examples/"
ln -s "$TOP/examples/vocab.txt" "$TOP/examples/spamassassin.csv" "$T/tree/examples/"
ln -s "$BIN" "$T/tree/bin"
sed 's/^epochs = .*/max-steps = 6/; s/^eval-every = .*/eval-every = 3/' "$TOP/examples/spam.conf" \
	>"$T/tree/examples/spam.conf"
check "the demo's config differs only in its length" \
	sh -c "diff '$TOP/examples/spam.conf' '$T/tree/examples/spam.conf' | grep -c '^[<>]' | grep -qx 4"
check "examples/demo runs end to end" env DEMO_DIR="$T/demo" timeout 600 "$T/tree/examples/demo"
cp "$T/out" "$T/demo.out"
expect_eq "it shards the e-mails 80/10/10" \
	"$(jq -c '[.splits[] | .count]' "$T/demo/data/manifest.json")" "[4836,604,606]"
expect_eq "it trains the steps asked and keeps the best model" \
	"$(ts-cat "$T/demo/run/events.msgpack" | jq -r 'select(.event=="done") | .step') $(ls "$T/demo/run/best" | grep -c safetensors)" \
	"6 1"
expect_eq "it reports the test split: its 606 e-mails, and a confusion matrix of spam and ham" \
	"$(awk '$1 == "accuracy" { print $NF } /^confusion matrix/ { getline; print $1, $2 }' "$T/demo.out" | paste -sd' ')" \
	"606 spam ham"
finish
