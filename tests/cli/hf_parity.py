#!/usr/bin/env python3
"""Compares ts-tokenize's records (as `ts-cat --no-header` prints them) with
what Hugging Face tokenizers makes of the same texts, id for id.

  hf_parity.py TOKENIZER_JSON OURS.jsonl --lines FILE | --csv FILE [--pair COL]
               [--max-len N [--fold --stride S]]

--lines: one text a line (a CR before the newline dropped, as ts-tokenize
does); --csv: the "text" column, and with --pair that column as the second
text. --max-len 0 is no limit; with --fold a text too long for one record
goes on in the next, S tokens of overlap, as HF's overflowing tokens do.
Prints how many records agree; exits 1 on any difference, with the first
three, or when there is nothing to compare.
"""
import argparse
import csv
import json
import sys

from tokenizers import Tokenizer


def texts(args):
    if args.lines:
        with open(args.lines, encoding="utf-8", newline="") as f:
            data = f.read()
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [(line[:-1] if line.endswith("\r") else line, None) for line in lines]
    csv.field_size_limit(1 << 30)
    with open(args.csv, encoding="utf-8", newline="") as f:
        return [(row["text"], row[args.pair] if args.pair else None) for row in csv.DictReader(f)]


def expected(tok, items, args):
    if args.max_len:
        tok.enable_truncation(max_length=args.max_len, stride=args.stride if args.fold else 0)
    encs = tok.encode_batch([a if b is None else (a, b) for a, b in items])
    out = []
    for i, e in enumerate(encs):
        pieces = [e] + (list(e.overflowing) if args.fold else [])
        for k, p in enumerate(pieces):
            rec = {"id": i, "ids": p.ids}
            if any(p.type_ids):
                rec["types"] = p.type_ids
            if args.fold:
                rec["fold"] = k
            out.append(rec)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer")
    ap.add_argument("ours")
    ap.add_argument("--lines")
    ap.add_argument("--csv")
    ap.add_argument("--pair")
    ap.add_argument("--max-len", type=int, default=0)
    ap.add_argument("--fold", action="store_true")
    ap.add_argument("--stride", type=int, default=0)
    args = ap.parse_args()
    items = texts(args)
    want = expected(Tokenizer.from_file(args.tokenizer), items, args)
    with open(args.ours, encoding="utf-8") as f:
        got = [json.loads(line) for line in f if line.strip()]
    same = sum(g == w for g, w in zip(got, want))
    print(f"{same} of {len(want)} records agree ({len(got)} made)")
    shown = 0
    for g, w in zip(got, want):
        if g != w and shown < 3:
            shown += 1
            text = items[w["id"]][0]
            print(f"  record {w['id']} ({json.dumps(text[:80])}):\n    got  {g}\n    want {w}")
    sys.exit(0 if want and same == len(want) == len(got) else 1)


main()
