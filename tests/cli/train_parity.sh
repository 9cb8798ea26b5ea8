# Whole ts-train runs against a training loop of Hugging Face transformers and
# PyTorch from the same model dir: a step's batch is the whole train split, so
# the order of the records does not matter and both must follow the same
# trajectory (losses, gradient norms, learning rates, final weights) for cls,
# reg, multi-label and tokcls; AdamW (and its no-decay rule), Adam and SGD;
# transformers' warmup schedules; clipping and none; --llrd, --freeze-layers,
# --freeze-embeddings and --label-smoothing. And --accum over micro-batches
# of equal and unequal size must train as the one batch they make (the man
# page's true gradient), to within fp32 rounding.
. "$(dirname "$0")/../lib.sh"
V=$FIX/hf/tiny-cls/vocab.txt
export OMP_NUM_THREADS=1
PY=${TS_PYTHON:-python3}
if ! "$PY" -c 'import torch, transformers, safetensors' 2>/dev/null; then
	fail "train parity: $PY has no torch, transformers and safetensors (set TS_PYTHON; make test makes build/venv)"
	finish
fi

# records of 2 to 10 words of the vocab, some of two pieces (ba + ##be), with
# a class, a number, a list of classes and a tag per word; the first N
records() {
	awk -v n="$1" 'NR > 5 && !/^##/ { w[nw++] = $0 } /^##/ { p[np++] = $0 }
	END { srand(11); split("neg neu pos", c, " ")
		for (i = 0; i < n; i++) { m = 2 + int(rand() * 9); t = ""; tk = ""; tg = ""; tp = ""; delete seen
			for (k = 0; k < m; k++) { x = int(rand() * nw); word = w[x]
				if (rand() < 0.3) word = word substr(p[int(rand() * np)], 3)
				t = t (k ? " " : "") word; tk = tk (k ? "," : "") "\"" word "\""
				tg = tg (k ? "," : "") "\"" c[x % 3 + 1] "\""
				if (k < 3 && !seen[x % 3]++) tp = tp (tp == "" ? "" : ",") "\"" c[x % 3 + 1] "\"" }
			printf "{\"text\": \"%s\", \"label\": \"%s\", \"score\": %.3f, \"topics\": [%s], \"tokens\": [%s], \"tags\": [%s]}\n",
				t, c[m % 3 + 1], m / 10, tp, tk, tg } }' "$V"
}
records 36 >"$T/36.jsonl"
records 35 >"$T/35.jsonl"
for d in cls:36:label reg:36:score multi:36:topics cls35:35:label; do
	IFS=: read -r name n label <<<"$d"
	ts-tokenize -v "$V" --label "$label" "$T/$n.jsonl" | ts-shard -o "$T/$name" --split train=1 >/dev/null
done
ts-tokenize -v "$V" --text tokens --label tags "$T/36.jsonl" | ts-shard -o "$T/tokcls" --split train=1 >/dev/null
expect_eq "the data: 36 records (35 in cls35), a train split alone" \
	"$(for d in cls reg multi tokcls cls35; do jq -r '"\(.splits.train.count) \(.splits | keys)"' "$T/$d/manifest.json"; done | tr '\n' ' ')" \
	'36 ["train"] 36 ["train"] 36 ["train"] 36 ["train"] 35 ["train"] '

# A model dir for each data dir, from one seed: its classes those of the
# data; weights far from the 0.02 init (as tests/fixtures/gen-hf.py draws
# them), so attention, GELU and LayerNorm work in their nonlinear range.
check "transformers makes the tiny model dirs" "$PY" - "$T" "$V" <<'EOF'
import json, os, shutil, sys
import torch
from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification
top, vocab = sys.argv[1], sys.argv[2]
for name, problem in [("cls", None), ("reg", "regression"), ("multi", "multi_label_classification"),
                      ("tokcls", None), ("cls35", None)]:
    names = ["score"] if problem == "regression" else json.load(open(os.path.join(top, name, "manifest.json")))["labels"]
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=len(names),
                        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
                        problem_type=problem)
    torch.manual_seed(7)
    model = (BertForTokenClassification if name == "tokcls" else BertForSequenceClassification)(config)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            noise = torch.randn(p.shape)
            p.copy_(1 + 0.1 * noise if pname.endswith("LayerNorm.weight") else
                    0.1 * noise if pname.endswith("bias") else 0.2 * noise)
    model.save_pretrained(os.path.join(top, "model-" + name))
    shutil.copy(vocab, os.path.join(top, "model-" + name, "vocab.txt"))
EOF

# case NAME DATA ARGS...: a ts-train run from DATA's model dir, kept in
# $T/cases for the reference to run the same options
OPTS=(--dropout 0 --lr 2e-3 --weight-decay 0.1 --warmup 3 --decay linear --clip 1 --max-steps 15 --seed 3 -j 1)
ADAM=(--betas 0.85,0.99 --eps 1e-6)   # not for sgd, which refuses them
case_() {
	local name=$1 data=$2; shift 2
	local args=(--init "$T/model-$data" --data "$T/$data" "${OPTS[@]}" "$@")
	case " $* " in *" --optimizer sgd "*) ;; *) args+=("${ADAM[@]}") ;; esac
	check "ts-train $name" train --run "$T/run-$name" "${args[@]}"
	echo "$name ${args[*]}" >>"$T/cases"
}
case_ cls cls --batch 36
case_ cls-accum cls --batch 18 --accum 2
case_ cls-cosine cls --batch 36 --decay cosine --warmup 0.1
case_ cls-cosine-end cls --batch 36 --decay cosine --end-lr-ratio 0.2
case_ cls-poly cls --batch 36 --decay poly --end-lr-ratio 0.1
case_ cls-constant cls --batch 36 --decay constant
case_ cls35 cls35 --batch 35
case_ cls35-accum cls35 --batch 18 --accum 2
case_ cls35-accum3 cls35 --batch 12 --accum 3
case_ reg reg --batch 36 --task reg
case_ multi multi --batch 36 --multi-label
case_ multi-accum multi --batch 20 --accum 2 --multi-label
case_ tokcls tokcls --batch 36 --task tokcls
case_ tokcls-accum tokcls --batch 18 --accum 2 --task tokcls
case_ adam cls --batch 36 --optimizer adam --clip 0
case_ sgd cls --batch 36 --optimizer sgd --momentum 0.9 --lr 0.05
case_ llrd cls --batch 36 --llrd 0.6
case_ freeze cls --batch 36 --freeze-layers 1
case_ freeze-all tokcls --batch 36 --task tokcls --freeze-layers 2 --freeze-embeddings
case_ smooth cls --batch 36 --label-smoothing 0.2
case_ smooth-tokcls tokcls --batch 36 --task tokcls --label-smoothing 0.2

"$PY" - "$T" <<'EOF' || failed=1
import argparse, json, math, os, subprocess, sys
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import BertForSequenceClassification, BertForTokenClassification, logging
from transformers.optimization import (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup,
                                       get_cosine_with_min_lr_schedule_with_warmup, get_linear_schedule_with_warmup,
                                       get_polynomial_decay_schedule_with_warmup)
logging.set_verbosity_error()
torch.set_num_threads(1)
top = sys.argv[1]
ok = True

def report(good, what):
    global ok
    ok &= good
    print("%s %s" % ("PASS" if good else "FAIL", what))

def cat(path):
    out = subprocess.run(["ts-cat", path], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]

def options(argv):
    p = argparse.ArgumentParser()
    for o in ["--init", "--data", "--decay"]:
        p.add_argument(o, required=True)
    for o in ["--lr", "--weight-decay", "--warmup", "--clip", "--dropout"]:
        p.add_argument(o, type=float, required=True)
    p.add_argument("--betas", default="0.9,0.999")
    p.add_argument("--eps", type=float, default=1e-8)
    for o in ["--batch", "--max-steps", "--seed", "-j"]:
        p.add_argument(o, type=int, required=True)
    p.add_argument("--task", default="cls")
    p.add_argument("--multi-label", action="store_true")
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--momentum", type=float)
    p.add_argument("--end-lr-ratio", type=float, default=0.0)
    p.add_argument("--llrd", type=float, default=1.0)
    p.add_argument("--freeze-layers", type=int, default=0)
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    return p.parse_args(argv)

def whole_split(data, task, multi, nlabels):
    """The train split as one padded batch, with its labels as transformers takes them."""
    recs = [r for r in cat(os.path.join(data, "train.shard")) if "ids" in r]
    B, T = len(recs), max(len(r["ids"]) for r in recs)
    ids, mask = torch.zeros(B, T, dtype=torch.long), torch.zeros(B, T, dtype=torch.long)
    labels = torch.full((B, T), -100) if task == "tokcls" else torch.zeros(B, nlabels, dtype=torch.double)
    for i, r in enumerate(recs):
        n = len(r["ids"])
        ids[i, :n], mask[i, :n] = torch.tensor(r["ids"]), 1
        if task == "tokcls":
            labels[i, :n] = torch.tensor(r["label"])
        elif multi:
            labels[i, r["label"]] = 1
    if task in ("cls", "reg") and not multi:
        labels = torch.tensor([r["label"] for r in recs], dtype=torch.double if task == "reg" else torch.long)
    return B, ids, mask, labels

def lr_scale(name, layers, o):
    """ts-train's --llrd: the head at the scheduled rate, encoder layer l at
    F^(L - l), the embeddings at F^(L + 1)."""
    if name.startswith("bert.embeddings."):
        return o.llrd ** (layers + 1)
    if name.startswith("bert.encoder.layer."):
        return o.llrd ** (layers - int(name.split(".")[3]))
    return 1.0

def reference(o):
    """Losses, gradient norms and learning rates of o.max_steps steps of the
    whole split, and the model they end with."""
    cls = BertForTokenClassification if o.task == "tokcls" else BertForSequenceClassification
    model = cls.from_pretrained(o.init, hidden_dropout_prob=o.dropout, attention_probs_dropout_prob=o.dropout)
    model.double().train()
    n, ids, mask, labels = whole_split(o.data, o.task, o.multi_label, model.config.num_labels)
    assert (n + o.batch - 1) // o.batch <= o.accum, "a step must see the whole split"
    layers = model.config.num_hidden_layers
    for name, p in model.named_parameters():
        if (name.startswith("bert.encoder.layer.") and int(name.split(".")[3]) < o.freeze_layers or
                name.startswith("bert.embeddings.") and o.freeze_embeddings):
            p.requires_grad_(False)
    # one group a tensor: its own rate (--llrd), decayed but for biases and LayerNorm
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p], "lr": o.lr * lr_scale(name, layers, o),
               "weight_decay": 0.0 if "bias" in name or "LayerNorm" in name else o.weight_decay}
              for name, p in trained]
    betas = tuple(float(b) for b in o.betas.split(","))
    if o.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=o.lr, momentum=o.momentum)
    else:
        opt = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[o.optimizer](groups, lr=o.lr, betas=betas, eps=o.eps)
    warmup = math.ceil(o.max_steps * o.warmup) if o.warmup < 1 else int(o.warmup)
    end = o.end_lr_ratio
    assert o.decay != "linear" or not end, "transformers' linear schedule decays to 0"
    sched = {"linear": lambda: get_linear_schedule_with_warmup(opt, warmup, o.max_steps),
             "cosine": lambda: get_cosine_with_min_lr_schedule_with_warmup(opt, warmup, o.max_steps, min_lr_rate=end)
             if end else get_cosine_schedule_with_warmup(opt, warmup, o.max_steps),
             "poly": lambda: get_polynomial_decay_schedule_with_warmup(opt, warmup, o.max_steps, lr_end=end * o.lr),
             "constant": lambda: get_constant_schedule_with_warmup(opt, warmup)}[o.decay]()
    head = next(i for i, (name, _) in enumerate(trained) if name.startswith("classifier."))
    steps = []
    for _ in range(o.max_steps):
        opt.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        loss = out.loss
        if o.label_smoothing > 0:   # transformers' heads have none: PyTorch's, as ts-train's man page says
            loss = F.cross_entropy(out.logits.flatten(0, -2), labels.flatten(), label_smoothing=o.label_smoothing)
        loss.backward()
        params = [p for _, p in trained]
        norm = torch.nn.utils.clip_grad_norm_(params, o.clip) if o.clip > 0 else \
            torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
        steps.append((loss.item(), norm.item(), opt.param_groups[head]["lr"]))
        opt.step()
        sched.step()
    return steps, model

def trajectory(run):
    return [(e["loss"], e["grad_norm"], e["lr"]) for e in cat(os.path.join(run, "events.msgpack"))
            if e["event"] == "step"]

def rel(a, b):
    return abs(a - b) / abs(b) if b else abs(a)

def weight_errs(ours, want):
    """The largest difference of the tensors but the attention's key biases,
    and of those. A key bias adds the same q.b to all the scores of a query,
    which the softmax takes away: its gradient is 0 but for rounding, which
    Adam's m / (sqrt(v) + eps) makes a step of up to lr * rounding / eps (the
    float64 reference's rounding is 1e9 times smaller than fp32's, so it
    stays put while ours moves by up to 4e-5 here)."""
    err = [0.0, 0.0]
    for k in want:
        err[k.endswith("attention.self.key.bias")] = max(err[k.endswith("attention.self.key.bias")],
                                                          (ours[k] - want[k]).abs().max().item())
    return err

# Tolerances: the reference runs in float64, so the differences are our
# fp32 rounding as the steps carry it on: up to 1.3e-6 (losses, relative),
# 5e-6 (gradient norms, relative), 1.3e-6 (weights) and 4e-5 (key biases)
# here, of which 5 to 10 times is allowed. A wrong rule shows as 1e-3 or more.
def same_run(what, ours, want, w_ours, w_want):
    good = len(ours) == len(want) > 0
    loss_err, norm_err, lr_err = [max(rel(a[i], b[i]) for a, b in zip(ours, want)) if good else math.inf
                                  for i in range(3)]
    report(good and loss_err < 1e-5, "%s: the losses, step by step (max rel err %.2g)" % (what, loss_err))
    report(good and norm_err < 5e-5, "%s: the gradient norms (max rel err %.2g)" % (what, norm_err))
    report(good and lr_err < 1e-9, "%s: the learning rates (max rel err %.2g)" % (what, lr_err))
    same = set(w_ours) == set(w_want)
    w_err, key_err = weight_errs(w_ours, w_want) if same else (math.inf, math.inf)
    report(same and w_err < 1e-5 and key_err < 2e-4,
           "%s: the final weights, every tensor (max abs err %.2g, key biases %.2g%s)"
           % (what, w_err, key_err, "" if same else "; tensors differ: %s" % sorted(set(w_ours) ^ set(w_want))))

runs = {}
for line in open(os.path.join(top, "cases")):
    name, *argv = line.split()
    o = options(argv)
    run = os.path.join(top, "run-" + name)
    runs[name] = (trajectory(run), load_file(os.path.join(run, "final", "model.safetensors")))
    want, model = reference(o)
    same_run("%s as transformers + torch" % name, runs[name][0], want, runs[name][1],
             {k: v.detach().float() for k, v in model.named_parameters()})

# micro-batches of one step, of equal or unequal size: the step of the one
# batch they make, to within fp32 rounding
for name, base in [("cls-accum", "cls"), ("cls35-accum", "cls35"), ("cls35-accum3", "cls35"),
                   ("multi-accum", "multi"), ("tokcls-accum", "tokcls")]:
    same_run("%s as %s" % (name, base), runs[name][0], runs[base][0], runs[name][1], runs[base][1])
sys.exit(0 if ok else 1)
EOF
finish
