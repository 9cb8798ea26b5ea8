"""The transformers Trainer peer of tests/bench/finetune: fine-tunes a Hugging
Face BERT model dir for sequence classification on the records ts-cat prints
from a shard (JSON lines with "ids" and "label"; the ids already carry [CLS]
and [SEP]), with dynamic padding (DataCollatorWithPadding), then predicts
the test records. Prints "key value" lines: train_s (Trainer.train()),
job_s (from the start of this script to the trained model saved),
test_accuracy.

usage: hf_finetune.py MODEL_DIR TRAIN.jsonl TEST.jsonl OUT_DIR --epochs N --lr LR
                      --batch B --warmup-steps W --threads T [--bf16] [--seed S]
                      [--device cpu|cuda]
"""
import time

START = time.perf_counter()

import argparse
import json

import torch
from transformers import (AutoModelForSequenceClassification, AutoTokenizer,
                          DataCollatorWithPadding, Trainer, TrainingArguments)


def records(path):
    with open(path) as f:
        return [{"input_ids": r["ids"], "labels": r["label"]} for r in map(json.loads, f)]


def main():
    p = argparse.ArgumentParser()
    for name in ("model", "train", "test", "out"):
        p.add_argument(name)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--warmup-steps", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    train, test = records(a.train), records(a.test)
    labels = sorted({r["labels"] for r in train + test})
    model = AutoModelForSequenceClassification.from_pretrained(a.model, num_labels=len(labels))
    # the collator pads with the tokenizer's pad id; the records are ids already
    tok = AutoTokenizer.from_pretrained(a.model)
    args = TrainingArguments(
        output_dir=a.out, per_device_train_batch_size=a.batch, per_device_eval_batch_size=64,
        num_train_epochs=a.epochs, learning_rate=a.lr, weight_decay=0.01,
        warmup_steps=a.warmup_steps, lr_scheduler_type="linear", max_grad_norm=1.0,
        bf16=a.bf16, use_cpu=a.device == "cpu", save_strategy="no", report_to="none",
        logging_strategy="no", disable_tqdm=True, seed=a.seed)
    trainer = Trainer(model=model, args=args, train_dataset=train,
                      data_collator=DataCollatorWithPadding(tok))
    t = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - t
    trainer.save_model(a.out)
    job_s = time.perf_counter() - START
    pred = trainer.predict(test)
    right = (pred.predictions.argmax(-1) == pred.label_ids).mean()
    print(f"threads {torch.get_num_threads()}")
    print(f"train_s {train_s:.1f}")
    print(f"job_s {job_s:.1f}")
    print(f"test_accuracy {right:.4f}")


if __name__ == "__main__":
    main()
