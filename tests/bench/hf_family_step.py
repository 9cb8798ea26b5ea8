"""transformers peer for tests/bench/families_cpu: a family's own
...ForSequenceClassification (transformers' class, sdpa attention, its
default), in the shape bert_step --arch gives it, trained with plain SGD on
random full-length batches. Prints "key value" lines like bert_step.

Like Hugging Face it runs the last layer on every row, where TopSpin's runs its
queries, attention output and feed-forward only at the [CLS] rows.

usage: hf_family_step.py --arch FAMILY [--layers N] [--hidden C] [--heads H] [--ffn F]
                         [--vocab V] [--seq T] [--batch B] [--steps S] [--warmup W]
                         [--threads N] [--bf16] [--no-dropout]
(--no-dropout: every dropout of the config 0, whatever the family's are)
"""
import argparse
import os
import time

import torch
import transformers

# model_type: (config class, model class, how the sizes are named)
FAMILIES = {
    "bert": ("BertConfig", "BertForSequenceClassification", "bert"),
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification", "bert"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification", "bert"),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification", "distilbert"),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification", "electra"),
    "modernbert": ("ModernBertConfig", "ModernBertForSequenceClassification", "bert"),
}


def config(a):
    config_class, _, names = FAMILIES[a.arch]
    if names == "distilbert":
        shape = dict(dim=a.hidden, n_layers=a.layers, n_heads=a.heads, hidden_dim=a.ffn)
    else:
        shape = dict(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                     intermediate_size=a.ffn)
    if names == "electra":
        shape["embedding_size"] = a.hidden
    if a.arch in ("roberta", "xlm-roberta"):
        shape["max_position_embeddings"] = 514
    if a.arch == "modernbert":
        shape.update(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
    c = getattr(transformers, config_class)(vocab_size=a.vocab, num_labels=2, **shape)
    if a.no_dropout:
        for key, value in vars(c).items():
            if "dropout" in key and isinstance(value, float):
                setattr(c, key, 0.0)
    return c


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", required=True, choices=sorted(FAMILIES))
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 4), ("ffn", 1024),
                          ("vocab", 30522), ("seq", 128), ("batch", 32), ("steps", 10), ("warmup", 2),
                          ("threads", int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--no-dropout", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    transformers.logging.set_verbosity_error()
    model = getattr(transformers, FAMILIES[a.arch][1])(config(a))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(7)
    elapsed = 0.0
    for step in range(a.warmup + a.steps):
        ids = torch.randint(3, a.vocab, (a.batch, a.seq), generator=gen)
        labels = torch.randint(0, 2, (a.batch,), generator=gen)
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= a.warmup:
            elapsed += time.perf_counter() - t
    print(f"threads {torch.get_num_threads()}")
    print(f"samples_per_s {a.steps * a.batch / elapsed:.2f}")
    print(f"step_ms {1e3 * elapsed / a.steps:.1f}")
    print(f"last_loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
