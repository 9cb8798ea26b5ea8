# The SVG plots in RUN/plots: well-formed (Python's XML parser), one point
# a step for the training loss and the learning rate, one an evaluation for
# the metric on valid and test, and after a stop and a resume all of them.
. "$(dirname "$0")/../lib.sh"
V=$TOP/examples/vocab.txt
py=${TS_PYTHON:-$TOP/build/venv/bin/python}
head -n 201 "$TOP/examples/spamassassin.csv" >"$T/small.csv"
ts-tokenize -v "$V" --label label --max-len 32 "$T/small.csv" | ts-shard -o "$T/data" --seed 3 >/dev/null
TINY=(--data "$T/data" --vocab "$V" --layers 1 --hidden 32 --heads 2 --ffn 64 --max-pos 32 --batch 8 --seed 5
	--max-steps 8 --eval-every 4 --eval-test)
# points SVG: the points of each series, "legend points" a line
points() {
	"$py" - "$1" <<'END'
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
lines = root.findall("s:polyline", ns)
names = [t.text for t in root.findall("s:text", ns) if t.get("fill")]
for name, line in zip(names, lines):
    print(name, len(line.get("points").split()))
END
}
check "a run with evaluations" train "${TINY[@]}" --run "$T/r"
expect_eq "three plots" "$(ls "$T/r/plots" | tr '\n' ' ')" "loss.svg lr.svg metric.svg "
expect_eq "loss.svg: every step's loss, raw and smoothed, and each valid loss" "$(points "$T/r/plots/loss.svg" | tr '\n' ';')" \
	"train loss 8;train loss, smoothed 8;valid loss 2;"
expect_eq "metric.svg: the accuracy at each evaluation, valid and test" "$(points "$T/r/plots/metric.svg" | tr '\n' ';')" \
	"valid 2;test 2;"
expect_eq "lr.svg: every step's learning rate" "$(points "$T/r/plots/lr.svg")" "learning rate 8"
stop_after 1 train "${TINY[@]}" --run "$T/s" >/dev/null 2>&1
check "a stopped run resumes" train --resume "$T/s"
expect_eq "after a resume the plots hold every step" "$(points "$T/s/plots/loss.svg" | head -1)" "train loss 8"
finish
