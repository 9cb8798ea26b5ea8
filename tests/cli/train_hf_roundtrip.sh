#!/usr/bin/env bash
# Hugging Face round trip, where a Python with torch, transformers and
# safetensors is found ($TS_PYTHON, /usr/bin/python3 or python3):
# - the parity fixtures, made afresh by gen-hf.py, pass test_hf_parity;
# - the model dirs we write load in transformers unchanged, with no missing or
#   unexpected tensors, and give our logits.
. "$(dirname "$0")/../lib.sh"
parity=$TOP/${TS_BUILD:-build}/tests/test_hf_parity

for py in ${TS_PYTHON:-} /usr/bin/python3 python3; do
	if "$py" -c 'import torch, transformers, safetensors' 2>/dev/null; then found=$py; break; fi
done
if [ -z "${found:-}" ]; then
	skip "hf round trip: no python with torch, transformers and safetensors (see tests/fixtures/hf/README.md)"
	finish
fi
if [ ! -x "$parity" ]; then
	skip "hf round trip: $parity is not built (make test builds it)"
	finish
fi

check "gen-hf.py makes the fixtures afresh" "$found" "$TOP/tests/fixtures/gen-hf.py" "$T/fix"
# ModernBERT's need transformers 4.48 or later (see tests/fixtures/hf/README.md): the committed ones
cp -r "$FIX/hf/modernbert-"* "$T/fix/"
mkdir -p "$T/saved"
"$parity" "$T/fix" "$T/saved" 2>"$T/parity.err" | sed -E 's/^(PASS|FAIL|SKIP) /\1 fresh fixtures: /'
[ "${PIPESTATUS[0]}" = 0 ] || { fail "test_hf_parity on fresh fixtures"; sed 's/^/    /' "$T/parity.err" | head -5; }

"$found" - "$T/saved" "$T/fix" <<'EOF' || failed=1
import os, sys
import torch
from safetensors.torch import load_file
from transformers import (BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification,
                          RobertaForMaskedLM, RobertaForSequenceClassification, RobertaForTokenClassification,
                          XLMRobertaForSequenceClassification, DistilBertForMaskedLM,
                          DistilBertForSequenceClassification, DistilBertForTokenClassification,
                          ElectraForMaskedLM, ElectraForSequenceClassification, ElectraForTokenClassification,
                          logging)
logging.set_verbosity_error()
saved, fix = sys.argv[1], sys.argv[2]
ok = True
for name, model_class, expect, labels in [
        ("tiny-cls", BertForSequenceClassification, "tiny-cls", ["neg", "neu", "pos"]),
        ("tiny-mlm", BertForMaskedLM, "tiny-mlm", None),
        ("tiny-reg", BertForSequenceClassification, "tiny-reg", ["score"]),
        ("tiny-multi", BertForSequenceClassification, "tiny-multi", ["neg", "neu", "pos"]),
        ("tiny-tokcls", BertForTokenClassification, "tiny-tokcls", ["neg", "neu", "pos"]),
        ("roberta-cls", RobertaForSequenceClassification, "roberta-cls", ["neg", "neu", "pos"]),
        ("roberta-mlm", RobertaForMaskedLM, "roberta-mlm", None),
        ("roberta-tokcls", RobertaForTokenClassification, "roberta-tokcls", ["neg", "neu", "pos"]),
        ("xlmr-cls", XLMRobertaForSequenceClassification, "xlmr-cls", ["neg", "neu", "pos"]),
        ("distilbert-cls", DistilBertForSequenceClassification, "distilbert-cls", ["neg", "neu", "pos"]),
        ("distilbert-mlm", DistilBertForMaskedLM, "distilbert-mlm", None),
        ("distilbert-tokcls", DistilBertForTokenClassification, "distilbert-tokcls", ["neg", "neu", "pos"]),
        ("electra-cls", ElectraForSequenceClassification, "electra-cls", ["neg", "neu", "pos"]),
        ("electra-mlm", ElectraForMaskedLM, "electra-mlm", None),
        ("electra-tokcls", ElectraForTokenClassification, "electra-tokcls", ["neg", "neu", "pos"]),
        ("minilm-cls", BertForSequenceClassification, "minilm", ["LABEL_0", "LABEL_1"])]:
    path = os.path.join(saved, name)
    if not os.path.isdir(path):
        print("SKIP transformers loads our %s: not saved (no all-MiniLM-L6-v2 here)" % name)
        continue
    model, info = model_class.from_pretrained(path, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    e = load_file(os.path.join(fix, expect + ".expect.safetensors"))
    ours = load_file(path + ".logits.safetensors")["logits"]
    args = dict(input_ids=e["ids"].long(), attention_mask=e["mask"].long())
    if model.config.model_type != "distilbert":
        args["token_type_ids"] = e["types"].long()
    with torch.no_grad():
        out = model.eval()(**args).logits
    if out.dim() == 3:
        out = out[e["labels"] != -100]
    err = (out - ours).abs().max().item()
    got_labels = [model.config.id2label[i] for i in range(len(model.config.id2label))]
    good = (not problems and out.shape == ours.shape and err <= 1e-4
            and (labels is None or got_labels == labels)
            and model.config.problem_type == {"tiny-reg": "regression", "tiny-multi": "multi_label_classification",
                                              "tiny-mlm": None, "tiny-tokcls": None, "roberta-mlm": None,
                                              "roberta-tokcls": None, "distilbert-mlm": None,
                                              "distilbert-tokcls": None, "electra-mlm": None,
                                              "electra-tokcls": None}.get(name, "single_label_classification"))
    ok &= good
    print("%s transformers loads our %s with nothing missing or unexpected%s and gives our logits "
          "(max error %.2g), labels %s" % ("PASS" if good else "FAIL", name,
          "" if not problems else " (%s)" % problems, err, got_labels))
sys.exit(0 if ok else 1)
EOF
finish
