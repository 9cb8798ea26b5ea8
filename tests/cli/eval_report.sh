# ts-eval --report as a reader sees it: long and Unicode class names, classes
# never predicted or never true, laid out and scored as scikit-learn does.
. "$(dirname "$0")/../lib.sh"
HF=$FIX/hf
PY=${TS_PYTHON:-python3}
export OMP_NUM_THREADS=1
eval1() { timeout 60 ts-eval -j1 --device cpu "$@"; }

# three classes: a name of 1500 bytes, a Unicode one, one with a comma, a quote and a newline
cp -r "$HF/tiny-cls" "$T/m"
"$PY" -c 'import json, sys
p = sys.argv[1] + "/config.json"; c = json.load(open(p))
n = ["x" * 1500 + "END", "négatif 中文", "a,b \"q\"\nz"]
c["id2label"] = {str(i): v for i, v in enumerate(n)}; c["label2id"] = {v: i for i, v in enumerate(n)}
json.dump(c, open(p, "w"))' "$T/m"
printf '%s\n' '{"id":"a","ids":[2,5,6,3],"label":0}' '{"id":"b","ids":[2,7,8,9,3],"label":1}' \
	'{"id":"c","ids":[2,10,3],"label":1}' | ts-cat --from-json -o "$T/r.mp"

eval1 -m "$T/m" --report "$T/r.mp" >"$T/report.txt"
eval1 -m "$T/m" --predict -o "$T/pred.mp" "$T/r.mp" >"$T/metrics.json"
ts-cat "$T/pred.mp" >"$T/pred.jsonl"

# the reference: scikit-learn's classification_report, computed here from the predictions
"$PY" - "$T/m/config.json" "$T/pred.jsonl" >"$T/want.txt" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
names = [c["id2label"][str(i)] for i in range(len(c["id2label"]))]
shown = [n.replace("\n", "\\n") for n in names]
recs = [json.loads(l) for l in open(sys.argv[2])]
k = len(names)
m = [[0] * k for _ in range(k)]
for r in recs:
    m[r["label"]][r["pred"]] += 1
sup = [sum(m[t]) for t in range(k)]
pred = [sum(m[t][p] for t in range(k)) for p in range(k)]
div = lambda a, b: a / b if b else 0.0
prf = [(div(m[i][i], pred[i]), div(m[i][i], sup[i]), div(2 * m[i][i], sup[i] + pred[i])) for i in range(k)]
n = sum(sup)
w = max(max(len(s) for s in shown), len("weighted avg"))
out = "{:>{w}s}  {:>9} {:>9} {:>9} {:>9}\n\n".format("", "precision", "recall", "f1-score", "support", w=w)
for s, (p, r, f), y in zip(shown, prf, sup):
    out += "{:>{w}s}  {:>9.4f} {:>9.4f} {:>9.4f} {:>9}\n".format(s, p, r, f, y, w=w)
out += "\n{:>{w}s}  {:>9} {:>9} {:>9.4f} {:>9}\n".format("accuracy", "", "", sum(m[i][i] for i in range(k)) / n, n, w=w)
mac = [sum(x[j] for x in prf) / k for j in range(3)]
wei = [sum(x[j] * y for x, y in zip(prf, sup)) / n for j in range(3)]
out += "{:>{w}s}  {:>9.4f} {:>9.4f} {:>9.4f} {:>9}\n".format("macro avg", *mac, n, w=w)
out += "{:>{w}s}  {:>9.4f} {:>9.4f} {:>9.4f} {:>9}".format("weighted avg", *wei, n, w=w)
print(out)
PYEOF
expect_eq "the report's table is scikit-learn's, long and Unicode names whole and aligned" \
	"$(head -n 9 "$T/report.txt")" "$(cat "$T/want.txt")"
expect_eq "the confusion matrix names the long class whole, in its row and its column" \
	"$(grep -c 'x\{1500\}END' "$T/report.txt")" 3
# a model's LABEL_0, LABEL_1, ... name nothing: the data's names are the classes'
cp -r "$HF/tiny-cls" "$T/numbered"
"$PY" -c 'import json, sys
p = sys.argv[1] + "/config.json"; c = json.load(open(p))
c["id2label"] = {str(i): "LABEL_%d" % i for i in range(3)}; c["label2id"] = {v: int(k) for k, v in c["id2label"].items()}
json.dump(c, open(p, "w"))' "$T/numbered"
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","neu","pos"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":0}' '{"id":"b","ids":[2,7,8,9,3],"label":1}' '{"id":"c","ids":[2,10,3],"label":2}' |
	ts-cat --from-json -o "$T/named.mp"
expect_eq "a model of LABEL_k classes: the JSON names the data's classes" \
	"$(eval1 -m "$T/numbered" "$T/named.mp" | jq -c '[.labels, (.classes | keys)]')" '[["neg","neu","pos"],["neg","neu","pos"]]'
expect_eq "and so do the report, its confusion matrix and the CSV's header" \
	"$(eval1 -m "$T/numbered" --report "$T/named.mp" | grep -c 'neg\|LABEL') $(eval1 -m "$T/numbered" --predict --csv "$T/named.mp" | head -n 1)" \
	"3 id,label,pred,prob_neg,prob_neu,prob_pos"
# CSV names the true classes: a class the model does not know is an error there,
# where some records have no label too, not a label column left blank
printf '%s\n' '{"kind":"tokens","version":1,"labels":["neg","zzz"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":0}' '{"id":"b","ids":[2,7,8,9,3],"label":1}' '{"id":"c","ids":[2,10,3]}' |
	ts-cat --from-json -o "$T/unknown.mp"
expect_fail "CSV of partly labelled records: a class the model does not know is an error" 1 "zzz" \
	eval1 -m "$HF/tiny-cls" --predict --csv -o "$T/unknown.csv" "$T/unknown.mp"
check "...and no CSV is left" test ! -e "$T/unknown.csv"
printf '%s\n' '{"kind":"tokens","version":1,"labels":["pos","neg"],"max_len":32,"lower":true}' \
	'{"id":"a","ids":[2,5,6,3],"label":1}' '{"id":"b","ids":[2,7,8,9,3]}' | ts-cat --from-json -o "$T/partly.mp"
expect_eq "CSV of partly labelled records names each label, blank where there is none" \
	"$(eval1 -m "$HF/tiny-cls" --predict --csv "$T/partly.mp" | cut -d, -f1,2 | paste -sd' ')" 'id,label "a",neg "b",'
finish
