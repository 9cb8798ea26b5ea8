"""PyTorch peer for tests/bench/train_cpu: the same BERT maths as Hugging Face's
BertForSequenceClassification / BertForMaskedLM (written out here, since the
Debian torch has no matching transformers), trained with plain SGD on random
full-length batches. Prints "key value" lines like bert_step.

Like Hugging Face it runs the last layer on every row; with --head-rows-only it
takes TopSpin's shortcut instead (lib/model/bert_graph.c): there the last layer computes
keys and values for every row but queries, attention output and feed-forward
only for the rows the head reads, so that both sides do the same work.

usage: torch_bert.py [--layers N] [--hidden C] [--heads H] [--ffn F] [--vocab V]
                     [--seq T] [--batch B] [--labels L] [--task cls|mlm]
                     [--steps S] [--warmup W] [--threads N] [--head-rows-only]
"""
import argparse
import math
import os
import time

import torch
from torch import nn
import torch.nn.functional as F


class Embeddings(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.word_embeddings = nn.Embedding(a.vocab, a.hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(512, a.hidden)
        self.token_type_embeddings = nn.Embedding(2, a.hidden)
        self.LayerNorm = nn.LayerNorm(a.hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        types = torch.zeros_like(ids)
        x = self.word_embeddings(ids) + self.token_type_embeddings(types)
        x = x + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        C = a.hidden
        self.heads = a.heads
        self.sdpa = a.sdpa
        self.query = nn.Linear(C, C)
        self.key = nn.Linear(C, C)
        self.value = nn.Linear(C, C)
        self.attn_dropout = nn.Dropout(0.1)
        self.attn_out = nn.Linear(C, C)
        self.attn_ln = nn.LayerNorm(C, eps=1e-12)
        self.ffn_in = nn.Linear(C, a.ffn)
        self.ffn_out = nn.Linear(a.ffn, C)
        self.ffn_ln = nn.LayerNorm(C, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def split(self, x):
        B, T, C = x.shape
        return x.view(B, T, self.heads, C // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, mask, rows=None):
        """rows: [B, R] positions to compute the layer's output at; None: all."""
        B, T, C = x.shape
        xq = x if rows is None else x.gather(1, rows[..., None].expand(-1, -1, C))
        q, k, v = self.split(self.query(xq)), self.split(self.key(x)), self.split(self.value(x))
        if self.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype),
                                                 dropout_p=0.1 if self.training else 0.0)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.heads) + mask
            probs = self.attn_dropout(scores.softmax(-1))
            ctx = probs @ v
        ctx = ctx.permute(0, 2, 1, 3).reshape(B, xq.shape[1], C)
        x = self.attn_ln(xq + self.dropout(self.attn_out(ctx)))
        h = F.gelu(self.ffn_in(x))
        return self.ffn_ln(x + self.dropout(self.ffn_out(h)))


class Bert(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.task = a.task
        self.head_rows_only = a.head_rows_only
        self.embeddings = Embeddings(a)
        self.layers = nn.ModuleList(Layer(a) for _ in range(a.layers))
        C = a.hidden
        if a.task == "cls":
            self.pooler = nn.Linear(C, C)
            self.dropout = nn.Dropout(0.1)
            self.classifier = nn.Linear(C, a.labels)
        else:
            self.transform = nn.Linear(C, C)
            self.transform_ln = nn.LayerNorm(C, eps=1e-12)
            self.decoder_bias = nn.Parameter(torch.zeros(a.vocab))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)
            if isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def forward(self, ids, attention_mask, labels):
        mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = self.embeddings(ids)
        for layer in self.layers[:-1]:
            x = layer(x, mask)
        picked = labels != -100
        if not self.head_rows_only:
            x = self.layers[-1](x, mask)
        elif self.task == "cls":
            x = self.layers[-1](x, mask, torch.zeros(x.shape[0], 1, dtype=torch.long))
        else:
            # each sequence's picked positions first, in order, padded to the longest list
            counts = picked.sum(1)
            rows = torch.sort((~picked).int(), dim=1, stable=True).indices[:, :int(counts.max())]
            x = self.layers[-1](x, mask, rows)
            picked = torch.arange(rows.shape[1])[None, :] < counts[:, None]
        if self.task == "cls":
            pooled = torch.tanh(self.pooler(x[:, 0]))
            return F.cross_entropy(self.classifier(self.dropout(pooled)), labels)
        # like the C side, only labelled positions go through the head
        h = self.transform_ln(F.gelu(self.transform(x[picked])))
        logits = h @ self.embeddings.word_embeddings.weight.t() + self.decoder_bias
        return F.cross_entropy(logits, labels[labels != -100])


def batch(a, gen):
    ids = torch.randint(1, a.vocab, (a.batch, a.seq), generator=gen)
    mask = torch.ones_like(ids)
    if a.task == "cls":
        labels = torch.randint(0, a.labels, (a.batch,), generator=gen)
    else:
        chosen = torch.rand(a.batch, a.seq, generator=gen) < 0.15
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return ids, mask, labels


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 4), ("ffn", 1024),
                          ("vocab", 30522), ("seq", 128), ("batch", 32), ("labels", 2),
                          ("steps", 10), ("warmup", 2),
                          ("threads", int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--task", default="cls", choices=["cls", "mlm"])
    p.add_argument("--head-rows-only", action="store_true")
    p.add_argument("--sdpa", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Bert(a)
    model.train()
    step_model = torch.compile(model) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(7)
    elapsed = 0.0
    for step in range(a.warmup + a.steps):
        ids, mask, labels = batch(a, gen)
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = step_model(ids, mask, labels)
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
