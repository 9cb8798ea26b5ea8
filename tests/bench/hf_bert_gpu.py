"""Hugging Face peer for tests/bench/train_gpu: transformers' own
BertForSequenceClassification or BertForMaskedLM, built from a BertConfig (no
download), trained with AdamW on the token records of a ts-train data dir.

The records come as JSON lines (ts-cat of a shard: `ids`, `label`), in their
order, --batch at a time, each batch padded to its longest record with an
attention mask, as DataCollatorWithPadding pads; for mlm a share --mask-prob of
each record's tokens (never [CLS], [SEP] or [PAD]) is to be predicted, 80% of
them replaced by [MASK], 10% by a random token, as ts-train masks. Batches are
built before the clock starts; each timed step copies its batch to the device.

The first --steps batches are timed; the --warmup batches after them run first.
Compiled, every padded length among the timed batches is also run once before
timing, so that torch.compile has made every graph it needs beforehand (the
recompiles it still made while timed are printed).

Prints "key value" lines like torch_bert.py. Exits 1 with one line on stderr
when torch or transformers is missing or the device is not there.

usage: hf_bert_gpu.py --records FILE --vocab-file FILE [--task cls|mlm]
                      [--layers N] [--hidden C] [--heads H] [--ffn F] [--max-pos P]
                      [--labels L] [--batch B] [--steps S] [--warmup W]
                      [--device cuda|cuda:N|cpu] [--autocast bf16|none] [--compile]
                      [--attention sdpa|eager] [--threads N] [--mask-prob P]
"""
import argparse
import contextlib
import json
import sys
import time


def die(msg):
    print(f"hf_bert_gpu.py: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    import torch
    import transformers
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, BertConfig
except ImportError as e:
    die(f"{sys.executable} lacks a peer: {e}")


def special_ids(vocab_file):
    with open(vocab_file, encoding="utf-8") as f:
        words = [line.rstrip("\n") for line in f]
    where = {w: i for i, w in enumerate(words)}
    missing = [w for w in ("[PAD]", "[CLS]", "[SEP]", "[MASK]") if w not in where]
    if missing:
        die(f"{vocab_file}: no {missing[0]} token")
    return len(words), {w: where[w] for w in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")}


def read_records(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if "ids" in rec:   # a stream header has none
                records.append(rec)
    if not records:
        die(f"{path}: no token records")
    return records


def make_batch(recs, a, vocab_size, tok, gen):
    """Pads recs to their longest record; returns tensors and the real token count."""
    B, T = len(recs), max(len(r["ids"]) for r in recs)
    ids = torch.full((B, T), tok["[PAD]"], dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.long)
    for i, r in enumerate(recs):
        ids[i, :len(r["ids"])] = torch.tensor(r["ids"], dtype=torch.long)
        mask[i, :len(r["ids"])] = 1
    if a.task == "cls":
        labels = torch.tensor([int(r.get("label", 0)) for r in recs], dtype=torch.long)
    else:
        special = torch.tensor([tok["[PAD]"], tok["[CLS]"], tok["[SEP]"]])
        chosen = (torch.rand((B, T), generator=gen) < a.mask_prob) & ~torch.isin(ids, special)
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        how = torch.rand((B, T), generator=gen)
        ids = torch.where(chosen & (how < 0.8), torch.full_like(ids, tok["[MASK]"]), ids)
        swap = chosen & (how >= 0.8) & (how < 0.9)
        ids = torch.where(swap, torch.randint(0, vocab_size, (B, T), generator=gen), ids)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}, int(mask.sum())


def batches(records, a, vocab_size, tok):
    """The first steps + warmup batches of the records in order, wrapping round."""
    gen = torch.Generator().manual_seed(7)
    out = []
    for k in range(a.steps + a.warmup):
        recs = [records[(k * a.batch + i) % len(records)] for i in range(a.batch)]
        out.append(make_batch(recs, a, vocab_size, tok, gen))
    return out


def build_model(a, vocab_size, tok):
    config = BertConfig(vocab_size=vocab_size, hidden_size=a.hidden, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, intermediate_size=a.ffn,
                        max_position_embeddings=a.max_pos, num_labels=a.labels,
                        pad_token_id=tok["[PAD]"])
    auto = AutoModelForSequenceClassification if a.task == "cls" else AutoModelForMaskedLM
    note = ""
    try:
        model = auto.from_config(config, attn_implementation=a.attention)
    except (ImportError, ValueError) as e:
        if a.attention == "eager":
            raise
        note = f"{a.attention} refused ({str(e).splitlines()[0]}); eager instead"
        print(f"hf_bert_gpu.py: note: {note}", file=sys.stderr)
        model = auto.from_config(config, attn_implementation="eager")
    used = getattr(model.config, "_attn_implementation", None) or "eager"
    return model, used, note


def adamw(params, device):
    """AdamW with lr 1e-4 and weight decay 0.01 as ts-train, fused where this torch has it."""
    try:
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True), "fused"
    except (TypeError, RuntimeError, ValueError) as e:
        print(f"hf_bert_gpu.py: note: no fused AdamW on {device} ({str(e).splitlines()[0]})", file=sys.stderr)
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01), "unfused"


def graphs_compiled():
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except (ImportError, AttributeError, KeyError):
        return -1


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 12), ("hidden", 768), ("heads", 12), ("ffn", 3072), ("max-pos", 512),
                          ("labels", 2), ("batch", 32), ("steps", 50), ("warmup", 5), ("threads", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--records", required=True)
    p.add_argument("--vocab-file", required=True)
    p.add_argument("--task", default="cls", choices=["cls", "mlm"])
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--device", default="cuda")
    p.add_argument("--autocast", default="bf16", choices=["bf16", "none"])
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()

    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        die(f"--device {a.device}: torch {torch.__version__} sees no GPU")
    if a.compile and not hasattr(torch, "compile"):
        die(f"--compile: torch {torch.__version__} has no torch.compile")
    if cuda and device.index is not None:
        torch.cuda.set_device(device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    vocab_size, tok = special_ids(a.vocab_file)
    work = batches(read_records(a.records), a, vocab_size, tok)
    if cuda:
        work = [({k: v.pin_memory() for k, v in b.items()}, n) for b, n in work]
    timed, warm = work[:a.steps], work[a.steps:]

    model, attention, note = build_model(a, vocab_size, tok)
    model.to(device=device, dtype=torch.float32).train()
    params = sum(q.numel() for q in model.parameters())
    opt, fused = adamw(model.parameters(), device)
    run = torch.compile(model) if a.compile else model
    cast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if a.autocast == "bf16"
            else contextlib.nullcontext())
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)

    def step(b):
        b = {k: v.to(device, non_blocking=True) for k, v in b.items()}
        with cast:
            loss = run(**b).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # ts-train's default --clip 1
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    seen = set()
    for b, _ in warm:
        step(b)
        seen.add(b["input_ids"].shape[1])
    if a.compile:
        for b, _ in timed:
            if b["input_ids"].shape[1] not in seen:
                step(b)
                seen.add(b["input_ids"].shape[1])
    sync()
    graphs = graphs_compiled()
    t0 = time.perf_counter()
    for b, _ in timed:
        loss = step(b)
    sync()
    elapsed = time.perf_counter() - t0
    recompiles = graphs_compiled() - graphs if a.compile and graphs >= 0 else -1

    real = sum(n for _, n in timed)
    padded = sum(b["input_ids"].numel() for b, _ in timed)
    # T of each batch weighed by its real tokens: FLOPs = real tokens x (6N + 12 L d mean_T)
    mean_t = sum(n * b["input_ids"].shape[1] for b, n in timed) / real
    print(f"device {torch.cuda.get_device_name(device) if cuda else 'cpu'}")
    print(f"torch {torch.__version__}")
    print(f"transformers {transformers.__version__}")
    print(f"attention {attention}")
    if note:
        print(f"attention_note {note}")
    print(f"optimizer {fused}")
    print(f"autocast {a.autocast}")
    print(f"compiled {int(a.compile)}")
    print(f"params {params}")
    print(f"steps {a.steps}")
    print(f"samples_per_s {a.steps * a.batch / elapsed:.2f}")
    print(f"tokens_per_s {real / elapsed:.1f}")
    print(f"padded_tokens_per_s {padded / elapsed:.1f}")
    print(f"mean_T {mean_t:.2f}")
    print(f"step_ms {1e3 * elapsed / a.steps:.2f}")
    print(f"peak_mem_mib {torch.cuda.max_memory_allocated(device) / 2**20:.0f}" if cuda else "peak_mem_mib n/a")
    print(f"recompiles_timed {recompiles if recompiles >= 0 else 'n/a'}")
    print(f"last_loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
