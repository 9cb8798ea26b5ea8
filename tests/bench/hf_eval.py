"""The transformers peer of tests/bench/eval_cpu: predicts the classes of
the records ts-cat prints from a shard (JSON lines with "id" and "ids"; the
ids carry [CLS] and [SEP] already) with a Hugging Face BERT model dir, in
batches of the given size padded to their longest record (as a
DataCollatorWithPadding pads them), in fp32 or under torch's bf16 autocast,
in inference mode. Writes "id pred" lines to PREDS; prints "key value"
lines: loop_s (the batches alone), job_s (from this script's first line,
imports included, to the last prediction written).

usage: hf_eval.py MODEL_DIR RECORDS.jsonl PREDS --batch B --threads T [--bf16]
"""
import time

START = time.perf_counter()

import argparse
import json

import torch
from transformers import AutoModelForSequenceClassification


def main():
    p = argparse.ArgumentParser()
    for name in ("model", "records", "preds"):
        p.add_argument(name)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    with open(a.records) as f:
        recs = [json.loads(line) for line in f]
    model = AutoModelForSequenceClassification.from_pretrained(a.model).eval()
    pad = model.config.pad_token_id or 0
    preds = []
    t = time.perf_counter()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        for i in range(0, len(recs), a.batch):
            part = recs[i:i + a.batch]
            n = max(len(r["ids"]) for r in part)
            ids = torch.tensor([r["ids"] + [pad] * (n - len(r["ids"])) for r in part])
            mask = torch.tensor([[1] * len(r["ids"]) + [0] * (n - len(r["ids"])) for r in part])
            logits = model(input_ids=ids, attention_mask=mask).logits
            preds += zip((r["id"] for r in part), logits.float().argmax(-1).tolist())
    loop_s = time.perf_counter() - t
    with open(a.preds, "w") as f:
        f.writelines(f"{i} {c}\n" for i, c in preds)
    print(f"loop_s {loop_s:.3f}")
    print(f"job_s {time.perf_counter() - START:.3f}")


if __name__ == "__main__":
    main()
