"""GPU time by kernel from Nsight Compute's CSV (ncu --csv --metrics
gpu__time_duration.sum --print-units base): one line a kernel name, most time
first: share of the whole, total ms, launches, mean us. Lines before the CSV's
header (ncu's own messages, the program's output) are passed over.
usage: python3 tests/gpu/kernel_times.py NCU.csv [TOP]"""
import csv
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    return csv.DictReader(lines)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.splitlines()[-1])
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 25
    ns, launches = defaultdict(float), defaultdict(int)
    for r in rows(sys.argv[1]):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"]
        ns[name] += float(r["Metric Value"].replace(",", ""))
        launches[name] += 1
    total = sum(ns.values())
    if not total:
        sys.exit(f"{sys.argv[1]}: no kernel times")
    print(f"{sum(launches.values())} launches, {total / 1e6:.2f} ms of GPU time")
    print(f"{'share':>6} {'ms':>9} {'launches':>8} {'mean us':>9}  kernel")
    for name in sorted(ns, key=ns.get, reverse=True)[:top]:
        print(f"{100 * ns[name] / total:5.1f}% {ns[name] / 1e6:9.3f} {launches[name]:8d} "
              f"{ns[name] / launches[name] / 1e3:9.1f}  {name[:100]}")


main()
