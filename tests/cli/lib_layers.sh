# lib/ in layers (lib/README.md): tests/layers.py passes on the tree, and
# fails on a copy with an include that points up (in a .c, .h, .cu or .cpp
# file), a header named without its folder, a file outside the layer folders,
# an include cycle, or a file over 900 lines.
. "$(dirname "$0")/../lib.sh"
PY=${TS_PYTHON:-python3}
layers() { timeout 60 "$PY" "$TOP/tests/layers.py" "$1"; }
check "the tree keeps its layers and has no include cycle" layers "$TOP"
# copy: a copy of lib/ and kernels/ to plant a fault in
copy() { rm -rf "$T/t" && mkdir "$T/t" && cp -r "$TOP/lib" "$TOP/kernels" "$T/t/"; }
copy && sed -i '1i #include "sweep/asha.h"' "$T/t/lib/format/plot.c"
expect_fail "an include that points up fails" 1 "lib/format/plot.c: includes sweep/asha.h, a layer above format/" layers "$T/t"
copy && sed -i '1i #include "strbuf.h"' "$T/t/lib/data/vocab.c"
expect_fail "a lib header without its folder fails" 1 "lib/data/vocab.c: #include \"strbuf.h\": a lib header goes by its folder" \
	layers "$T/t"
copy && cp "$T/t/lib/util/rng.c" "$T/t/lib/stray.c"
expect_fail "a file outside the layer folders fails" 1 "lib/stray.c: not in a layer folder" layers "$T/t"
copy && sed -i '1i #include "util/strbuf.h"' "$T/t/lib/util/err.h"
expect_fail "an include cycle within a layer fails" 1 "include cycle: lib/util/err -> lib/util/strbuf -> lib/util/err" layers "$T/t"
copy && sed -i '1i #include "backend/cpu_ops.h"' "$T/t/kernels/cuda_api.h" && sed -i '1i #include "model/bert.h"' "$T/t/kernels/cuda_layernorm.cu"
expect_fail "kernels/ above backend/ fails" 1 "kernels/cuda_layernorm.cu: includes model/bert.h, a layer above kernels/" layers "$T/t"
copy && seq 900 | sed 's|^|// |' >>"$T/t/lib/util/rng.c"
expect_fail "a file over 900 lines fails" 1 "lib/util/rng.c: [0-9]+ lines, over 900: split it by job" layers "$T/t"
copy && sed -i '1i #include "run/train.h"' "$T/t/kernels/cuda_sdpa.cpp"
expect_fail "a C++ file is read too" 1 "kernels/cuda_sdpa.cpp: includes run/train.h, a layer above kernels/" layers "$T/t"
finish
