"""Checks lib/'s layers (lib/README.md): each file of lib/FOLDER includes lib
headers by their folder, only from its own layer or those below it; kernels/
counts as backend/; no include closes a cycle; and no file there is over
900 lines but lib/model/bert_graph.c. Prints a line per fault on
standard error and exits 1 on any. Usage: layers.py TOP"""
import os
import re
import sys

MAX_LINES = 900
top = sys.argv[1]
readme = open(os.path.join(top, "lib/README.md")).read()
order = re.search(r"^Layers, bottom to top: (.+)$", readme, re.M).group(1).split()
rank = {f: i for i, f in enumerate(order)}
rank["kernels"] = rank["backend"]
faults = []
units = {}   # "lib/util/err" -> the units it includes
for base in ("lib", "kernels"):
    for d, _, names in os.walk(os.path.join(top, base)):
        for n in sorted(names):
            if not n.endswith((".c", ".h", ".cu", ".cpp")):
                continue
            path = os.path.relpath(os.path.join(d, n), top)
            lines = open(os.path.join(top, path)).read().count("\n")
            if lines > MAX_LINES and path != "lib/model/bert_graph.c":
                faults.append("%s: %d lines, over %d: split it by job" % (path, lines, MAX_LINES))
            parts = path.split("/")
            if base == "lib" and (len(parts) != 3 or parts[1] not in rank):
                faults.append("%s: not in a layer folder of lib/README.md (%s)" % (path, " ".join(order)))
                continue
            layer = parts[1] if base == "lib" else "kernels"
            unit = path.rsplit(".", 1)[0]
            deps = units.setdefault(unit, set())
            for line, inc in re.findall(r'^(\s*#\s*include\s+"([^"]+)")', open(os.path.join(top, path)).read(), re.M):
                if "/" in inc:
                    folder = inc.split("/")[0]
                    if folder not in rank or not os.path.exists(os.path.join(top, "lib", inc)):
                        faults.append("%s: %s: no such lib header" % (path, line.strip()))
                        continue
                    if rank[folder] > rank[layer]:
                        faults.append("%s: includes %s, a layer above %s/" % (path, inc, layer))
                    deps.add("lib/" + inc.rsplit(".", 1)[0])
                elif os.path.exists(os.path.join(top, d, inc)):
                    deps.add(os.path.relpath(os.path.join(d, inc), top).rsplit(".", 1)[0])
                elif os.path.exists(os.path.join(top, "kernels", inc)):   # the CUDA backend's API
                    if rank["kernels"] > rank[layer]:
                        faults.append("%s: includes %s, a layer above %s/" % (path, inc, layer))
                    deps.add("kernels/" + inc.rsplit(".", 1)[0])
                else:
                    faults.append("%s: %s: a lib header goes by its folder (\"util/err.h\")" % (path, line.strip()))
# cycles: a depth-first walk that meets a unit still on its path
state = {}
def walk(u, path):
    state[u] = 1
    for v in sorted(units.get(u, ())):
        if v == u:
            continue
        if state.get(v) == 1:
            faults.append("include cycle: " + " -> ".join(path[path.index(v):] + [v]))
        elif v not in state:
            walk(v, path + [v])
    state[u] = 2
for u in sorted(units):
    if u not in state:
        walk(u, [u])
for f in faults:
    print(f, file=sys.stderr)
sys.exit(1 if faults else 0)
