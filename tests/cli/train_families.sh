#!/usr/bin/env bash
# The families beside BERT, as a user fine-tunes them: e-mails tokenized with the
# family's real tokenizer (tokenizer.json, or DistilBERT's and ELECTRA's vocab.txt), sharded, `ts-train --init` on a small model of that
# family made by transformers (with the tokenizer in its dir, as the hub ships it),
# `ts-eval --predict`, and the model dir TopSpin saved loaded back in transformers
# as that family's class, with no missing or unexpected tensor and TopSpin's
# probabilities. Then every training method on each family, distillation across
# two families of one vocab, freezing a pre-norm family, and ModernBERT on records
# of 8,192 tokens. Needs a python with torch and transformers ($TS_PYTHON).
. "$(dirname "$0")/../lib.sh"
py=${TS_PYTHON:-python3}
if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
	fail "families: $py has no torch and transformers (make test makes build/venv)"
	finish
fi
# every fifth e-mail begins with the text "<pad>": RoBERTa's tokenizer makes it the pad id,
# whose position transformers takes from the ids alone
"$py" - "$TOP/examples/spamassassin.csv" >"$T/mail.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], encoding="utf-8")))[:301]
for i, r in enumerate(rows[1:]):
    r[1] = "<pad> " + r[1] if i % 5 == 0 else r[1]
csv.writer(sys.stdout, lineterminator="\n").writerows(rows)
EOF

# family NAME TOKENIZER CONFIG_CLASS MODEL_CLASS TASK [ARCH]: one fine-tune and its
# check, TOKENIZER a tokenizer.json or a vocab.txt; CONFIG_CLASS "scratch": ts-train
# --arch ARCH makes the model from scratch
family() {
	local name=$1 tok=$2 config=$3 model=$4 task=$5 d=$T/$1 how=-t
	case $tok in *.txt) how=-v ;; esac
	mkdir -p "$d"
	[ "$config" = scratch ] || "$py" - "$d/init" "$tok" "$config" "$model" <<'EOF' || { fail "$name: transformers makes the model"; return; }
import json, sys, torch, transformers
out, tok, config, model = sys.argv[1:]
if tok.endswith(".txt"):
    vocab = open(tok, encoding="utf-8").read().splitlines()
else:
    vocab = json.load(open(tok, encoding="utf-8"))["model"]["vocab"]
torch.manual_seed(0)
if config == "DistilBertConfig":
    shape = dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, pad_token_id=0)
elif config == "ElectraConfig":   # electra-small's shape, scaled down: embeddings half the layers' width
    shape = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, pad_token_id=0)
else:
    shape = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)
c = getattr(transformers, config)(vocab_size=len(vocab), max_position_embeddings=130, num_labels=2,
                                   architectures=[model], **shape)
getattr(transformers, model)(c).save_pretrained(out, safe_serialization=True)
EOF
	ts-tokenize "$how" "$tok" --id id --label label --max-len 128 "$T/mail.csv" |
		ts-shard -o "$d/data" --seed 1 --split train=250,valid=50 >/dev/null
	local args=(--data "$d/data" --run "$d/run" --epochs 1 --batch 16 --lr 1e-3 --seed 1 -j 2)
	[ "$task" = mlm ] && args+=(--task mlm)
	if [ "$config" = scratch ]; then
		check "$name: ts-train --arch $6 from scratch" train "${args[@]}" --arch "$6" --layers 2 --hidden 32 \
			--heads 4 --max-pos 130
	else
		cp "$tok" "$d/init/$(basename "$tok")"
		check "$name: ts-train --init a $model made by transformers" train "${args[@]}" --init "$d/init"
	fi
	[ -d "$d/run/final" ] || return
	if [ "$task" != mlm ]; then
		check "$name: ts-eval --predict" ts-eval -m "$d/run/final" --data "$d/data" --split valid --predict \
			-o "$d/pred.msgpack"
		ts-cat "$d/pred.msgpack" >"$d/pred.jsonl"
		ts-cat --no-header "$d/data/valid.shard" >"$d/valid.jsonl"
	fi
	"$py" - "$d/run/final" "$model" "$task" "$d/valid.jsonl" "$d/pred.jsonl" >"$T/out" 2>&1 <<'EOF'
import json, sys, torch, transformers
path, model, task, records, preds = sys.argv[1:]
transformers.logging.set_verbosity_error()
m, info = getattr(transformers, model).from_pretrained(path, output_loading_info=True)
problems = {k: v for k, v in info.items() if v}
if problems:
    sys.exit("loading %s: %s" % (path, problems))
if task == "mlm":
    print("loads")
    sys.exit(0)
ours = {p["id"]: p for p in map(json.loads, open(preds))}
worst, wrong, padded = 0.0, 0, 0
pad = m.config.pad_token_id
with torch.no_grad():
    for r in map(json.loads, open(records)):
        ids = torch.tensor([r["ids"]])
        out = m.eval()(input_ids=ids).logits[0]
        worst = max(worst, (out.softmax(-1) - torch.tensor(ours[r["id"]]["probs"])).abs().max().item())
        if model.startswith(("Roberta", "XLMRoberta")) and pad in r["ids"]:
            # positions counted over the pad ids too, as TopSpin once did: ours must be far nearer
            # transformers' own than that
            counted = torch.arange(pad + 1, pad + 1 + ids.shape[1]).unsqueeze(0)
            other = m(input_ids=ids, position_ids=counted).logits[0]
            mine = torch.tensor(ours[r["id"]]["logits"])
            padded += 1
            wrong += 10 * (mine - out).abs().max().item() >= (mine - other).abs().max().item()
print("max difference %.2g over %d records; %d of %d with a pad id in the text placed otherwise"
      % (worst, len(ours), wrong, padded))
sys.exit(0 if ours and worst <= 1e-4 and not wrong and (padded or not model.startswith(("Roberta", "XLMRoberta"))) else 1)
EOF
	local rc=$? got
	got=$(tail -1 "$T/out")
	if [ $rc = 0 ]; then pass "$name: transformers loads the model TopSpin saved as $model ($got)"
	else fail "$name: transformers loads the model TopSpin saved as $model"; sed 's/^/    /' "$T/out" | tail -5; fi
}

roberta=$TOP/examples/roberta-base/tokenizer.json
family roberta "$roberta" RobertaConfig RobertaForSequenceClassification cls
family roberta-mlm "$roberta" RobertaConfig RobertaForMaskedLM mlm
# a masked LM whose decoder is not tied to the word embeddings: refused for mlm, not
# silently replaced by them; its encoder fine-tunes as a classifier all the same
"$py" - "$T/untied" <<'EOF' && cp "$roberta" "$T/untied/"
import sys, torch, transformers
c = transformers.RobertaConfig(vocab_size=50265, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, type_vocab_size=1, max_position_embeddings=130,
                               tie_word_embeddings=False, architectures=["RobertaForMaskedLM"])
transformers.RobertaForMaskedLM(c).save_pretrained(sys.argv[1], safe_serialization=True)
EOF
expect_fail "an untied decoder: ts-eval of the masked LM refuses it" 1 \
	"untied/config.json: tie_word_embeddings is false: a masked LM decoder of its own is not supported" \
	ts-eval -m "$T/untied" --data "$T/roberta/data" --split valid
expect_fail "an untied decoder: ts-train --init for mlm refuses it, leaving no run" 1 "tie_word_embeddings is false" \
	train --data "$T/roberta/data" --run "$T/untied-mlm" --init "$T/untied" --task mlm --max-steps 1
expect_eq "...no run dir" "$(test -e "$T/untied-mlm" && echo made || echo none)" none
check "an untied decoder: its encoder fine-tunes as a classifier" \
	train --data "$T/roberta/data" --run "$T/untied-cls" --init "$T/untied" --max-steps 2 -j 2
mkdir -p "$T/xlmr-tokenizer" && xz -dc "$FIX/tokenizers/xlm-roberta/tokenizer.json.xz" >"$T/xlmr-tokenizer/tokenizer.json"
family xlm-roberta "$T/xlmr-tokenizer/tokenizer.json" XLMRobertaConfig XLMRobertaForSequenceClassification cls
family roberta-scratch "$roberta" scratch RobertaForSequenceClassification cls roberta
# DistilBERT's tokenizer is bert-base-uncased's WordPiece vocab
family distilbert "$TOP/examples/vocab.txt" DistilBertConfig DistilBertForSequenceClassification cls
family distilbert-mlm "$TOP/examples/vocab.txt" DistilBertConfig DistilBertForMaskedLM mlm
family distilbert-scratch "$TOP/examples/vocab.txt" scratch DistilBertForSequenceClassification cls distilbert
# so is ELECTRA's
family electra "$TOP/examples/vocab.txt" ElectraConfig ElectraForSequenceClassification cls
family electra-mlm "$TOP/examples/vocab.txt" ElectraConfig ElectraForMaskedLM mlm
family electra-scratch "$TOP/examples/vocab.txt" scratch ElectraForSequenceClassification cls electra
# ModernBERT from scratch with its real tokenizer (transformers 4.44 here has no
# ModernBERT: tests/unit/test_hf_parity checks its model dirs against 4.48's names)
mb=$T/modernbert
ts-tokenize -t "$FIX/tokenizers/modernbert/tokenizer.json" --id id --label label --max-len 160 "$T/mail.csv" |
	ts-shard -o "$mb/data" --seed 1 --split train=250,valid=50 >/dev/null
check "modernbert: ts-train --arch modernbert from scratch, records of up to 160 tokens" \
	train --data "$mb/data" --run "$mb/run" --arch modernbert --layers 3 --hidden 32 --heads 4 --ffn 48 \
	--epochs 1 --batch 16 --lr 1e-3 --seed 1 -j 2
expect_eq "modernbert: its config.json" \
	"$(jq -c '[.model_type, .architectures[0], .pad_token_id, .local_attention, .global_attn_every_n_layers, .classifier_pooling]' "$mb/run/final/config.json")" \
	'["modernbert","ModernBertForSequenceClassification",50283,128,3,"cls"]'
check "modernbert: ts-eval --predict" ts-eval -m "$mb/run/final" --data "$mb/data" --split valid --predict -o "$mb/pred.msgpack"
check "modernbert: --resume from its checkpoint goes on to a second epoch" \
	train --resume "$mb/run" --epochs 2
# ModernBERT's long context: records of 8,192 tokens (forty e-mails each), rotary
# positions to 8,191, local bands and a global layer over the whole record
"$py" - "$T/mail.csv" >"$T/long.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], encoding="utf-8")))[1:]
w = csv.writer(sys.stdout)
w.writerow(["id", "text", "label"])
for k in range(6):
    part = rows[40 * k:40 * (k + 1)]
    w.writerow(["long%d" % k, " ".join(r[1] for r in part), part[0][2]])
EOF
ts-tokenize -t "$FIX/tokenizers/modernbert/tokenizer.json" --id id --label label --max-len 8192 "$T/long.csv" |
	ts-shard -o "$mb/long" --seed 1 --split train=4,valid=2 >/dev/null
expect_eq "modernbert: six records of 8,192 tokens" "$(ts-cat --no-header "$mb/long/train.shard" "$mb/long/valid.shard" | jq '.ids | length' | sort -u)" 8192
check "modernbert: ts-train --max-pos 8192 on them" train --data "$mb/long" --run "$mb/long-run" --arch modernbert \
	--max-pos 8192 --layers 3 --hidden 32 --heads 2 --ffn 48 --batch 2 --epochs 1 --dropout 0.1 --seed 1 -j 2
expect_eq "modernbert: its config.json's max_position_embeddings" \
	"$(jq .max_position_embeddings "$mb/long-run/final/config.json")" 8192
check "modernbert: ts-eval on them" ts-eval -m "$mb/long-run/final" --data "$mb/long" --split valid
check "modernbert-mlm: ts-train --init its model for masked LM" \
	train --data "$mb/data" --run "$mb/mlm" --init "$mb/run/final" --task mlm --epochs 1 --batch 16 --seed 1 -j 2
# --- the training methods on each family: its model above trained on 4 steps more,
# plain and with each method ---
# shares_off LOG L: the tensors of the log's table whose --llrd 0.5 share is not
# 0.5^(L - l) for those of encoder layer l by the family's name, 0.5^(L + 1) for the
# embeddings, 1 else; "none in a layer" where no name has a layer
shares_off() {
	awk -v L="$2" '$1 == "parameter" { on = 1; next } $1 == "total" { on = 0 } on {
		want = 1
		if (match($1, /\.layers?\.[0-9]+\./)) { l = substr($1, RSTART, RLENGTH); gsub(/[^0-9]/, "", l); want = 0.5 ^ (L - l); layers++ }
		else if ($1 ~ /embeddings/) want = 0.5 ^ (L + 1)
		if (($NF - want) ^ 2 > 1e-12) print $1, $NF, "want", want
	} END { if (!layers) print "none in a layer" }' "$1"
}
methods() {   # NAME DATA MODEL LAYERS [OPTION...]
	local name=$1 d=$T/methods-$1 L=$4
	local args=(--data "$2" --init "$3" --max-steps 4 --batch 16 --seed 1 -j 2 "${@:5}")
	check "$name: 4 steps more" train "${args[@]}" --run "$d/plain" || return
	check "$name: --llrd 0.5" train "${args[@]}" --run "$d/llrd" --llrd 0.5
	expect_eq "$name: --llrd's shares by the family's layers, as its files name them" \
		"$(shares_off "$d/llrd/log/rank-0.log" "$L")" ""
	check "$name: --ema 0.9" train "${args[@]}" --run "$d/ema" --ema 0.9
	expect_same "$name: --ema trains as without it" "$(losses "$d/ema")" "$(losses "$d/plain")"
	check "$name: --ema's final model is the average" sh -c "! cmp -s '$d/ema/final/model.safetensors' '$d/plain/final/model.safetensors'"
	check "$name: --rdrop 1" train "${args[@]}" --run "$d/rdrop" --rdrop 1
	expect_eq "$name: R-Drop changes each step's loss" \
		"$(losses "$d/rdrop" | cut -d' ' -f2 | grep -cvxF -f <(losses "$d/plain" | cut -d' ' -f2))" 4
	check "$name: --vat 1" train "${args[@]}" --run "$d/vat" --vat 1
	expect_eq "$name: VAT adds its divergence to each step's loss" \
		"$(paste -d' ' <(losses "$d/vat") <(losses "$d/plain") | awk '$2 > $4' | wc -l)" 4
}
methods roberta "$T/roberta/data" "$T/roberta/run/final" 2
methods distilbert "$T/distilbert/data" "$T/distilbert/run/final" 2
methods electra "$T/electra/data" "$T/electra/run/final" 2
expect_fail "modernbert: --rdrop on its model without dropout (its default): refused" 2 \
	"^ts-train: --rdrop compares two passes that dropout makes differ, and the model's dropout is 0: give --dropout P" \
	train --data "$mb/data" --init "$mb/run/final" --run "$T/rdrop-bad" --rdrop 1
check "a run refused for it leaves no run dir" test ! -e "$T/rdrop-bad"
methods modernbert "$mb/data" "$mb/run/final" 3 --dropout 0.1
# distillation across families of one vocab: an ELECTRA teacher, a DistilBERT student
check "distilbert: --teacher an ELECTRA model of the same vocab" train --data "$T/distilbert/data" \
	--init "$T/distilbert/run/final" --run "$T/kd" --max-steps 4 --batch 16 --seed 1 -j 2 \
	--teacher "$T/electra/run/final" --kd-alpha 0.9
expect_eq "distilbert: the teacher changes each step's loss" \
	"$(losses "$T/kd" | cut -d' ' -f2 | grep -cvxF -f <(losses "$T/methods-distilbert/plain" | cut -d' ' -f2))" 4
expect_fail "distilbert: a RoBERTa teacher, of another vocab: refused" 1 "--teacher .*: its vocab is not the data's" \
	train --data "$T/distilbert/data" --init "$T/distilbert/run/final" --run "$T/kd-bad" --max-steps 4 \
	--teacher "$T/roberta/run/final"
# a teacher of the vocab with fewer positions than the records have: refused before a
# run dir is made, not at the first step
tiny_teacher() {   # tiny_teacher DIR CLASS VOCAB_SIZE POSITIONS: a random BERT of the example vocab
	"$py" - "$@" <<'EOF' && cp "$TOP/examples/vocab.txt" "$1/"
import sys, torch, transformers
c = transformers.BertConfig(vocab_size=int(sys.argv[3]), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=int(sys.argv[4]), pad_token_id=0)
getattr(transformers, sys.argv[2])(c).save_pretrained(sys.argv[1], safe_serialization=True)
EOF
}
tiny_teacher "$T/short" BertForSequenceClassification 30522 64
expect_fail "distilbert: a teacher of 64 positions for records of 128 tokens: refused" 1 \
	"--teacher .*short: .* holds records of up to 128 tokens but the teacher takes 64" \
	train --data "$T/distilbert/data" --init "$T/distilbert/run/final" --run "$T/kd-short" --max-steps 4 \
	--teacher "$T/short"
check "...no run dir" test ! -e "$T/kd-short"
# a masked LM teacher whose vocab_size is padded beyond the vocab's tokens predicts other
# words than the student: refused before a run dir is made
tiny_teacher "$T/wide" BertForMaskedLM 30528 130
expect_fail "distilbert-mlm: a masked LM teacher of vocab_size 30528: refused" 1 \
	"--teacher .*wide: a masked LM of vocab_size 30528, where the run's model has 30522" \
	train --data "$T/distilbert-mlm/data" --init "$T/distilbert-mlm/run/final" --task mlm --run "$T/kd-wide" \
	--max-steps 4 --teacher "$T/wide"
check "...no run dir" test ! -e "$T/kd-wide"
# freezing a pre-norm family: ModernBERT's layer 1 begins with its attn_norm, which
# TopSpin keeps at the end of layer 0: it trains with layer 1
check "modernbert: --freeze-embeddings --freeze-layers 1" train --data "$mb/data" --init "$mb/run/final" \
	--run "$mb/frozen" --max-steps 4 --batch 16 --seed 1 -j 2 --freeze-embeddings --freeze-layers 1
check "modernbert: the embeddings and layer 0 are the start's, bit for bit; layer 1 (its attn_norm too) learnt" \
	"$py" - "$mb/run/final/model.safetensors" "$mb/frozen/final/model.safetensors" <<'EOF'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert "model.layers.1.attn_norm.weight" in a
for name in a:
    frozen = name.startswith("model.embeddings.") or name.startswith("model.layers.0.")
    assert (a[name] == b[name]).all() == frozen, name
EOF
# ELECTRA's word embeddings are narrower than its layers: freezing them for mlm
# leaves the layers and the head to learn
check "electra-mlm: --freeze-embeddings" train --data "$T/electra-mlm/data" --init "$T/electra-mlm/run/final" \
	--task mlm --run "$T/electra-frozen" --max-steps 2 --batch 16 --seed 1 -j 2 --freeze-embeddings
check "electra-mlm: the embeddings and their projection are the start's, bit for bit; every other tensor learnt" \
	"$py" - "$T/electra-mlm/run/final/model.safetensors" "$T/electra-frozen/final/model.safetensors" <<'EOF'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
for name in a:
    frozen = name.startswith("electra.embeddings")
    assert (a[name] == b[name]).all() == frozen, name
EOF
check "roberta-scratch: --resume from its checkpoint goes on to a second epoch" \
	train --resume "$T/roberta-scratch/run" --epochs 2
expect_eq "roberta-scratch: its final model is still RoBERTa's" \
	"$(jq -r '.architectures[0]' "$T/roberta-scratch/run/final/config.json")" RobertaForSequenceClassification
finish
