#!/usr/bin/env python3
"""Writes tokenizer.json files into DIR that use, between them, every
component ts-tokenize reads and each of its settings, made with Hugging Face
tokenizers itself: RoBERTa's file with other normalizers, pre-tokenizers,
post-processors and added tokens, and small BPE models trained on the
e-mails with a continuing_subword_prefix, an end_of_word_suffix, unknowns
fused or not and byte fallback, and Unigram models of XLM-R's pieces with
and without byte fallback. Prints the files' names.

  hf_variants.py ROBERTA_TOKENIZER_JSON XLMR_TOKENIZER_JSON MAILS_CSV DIR
"""
import csv
import json
import os
import sys

from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Regex

roberta, xlmr, mails, out = sys.argv[1:5]
N, P = normalizers, pre_tokenizers


def save(name, tok):
    path = os.path.join(out, name + ".json")
    tok.save(path)
    print(path)


def on_roberta(name, normalizer=None, pre=None, post=None, added=()):
    tok = Tokenizer.from_file(roberta)
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre is not None:
        tok.pre_tokenizer = pre
    if post is not None:
        tok.post_processor = post
    for t in added:
        tok.add_tokens([t])
    j = json.loads(tok.to_str())
    j["model"]["unk_token"] = "<unk>"   # what a non-byte-level pre-tokenizer leaves unknown gets an id
    path = os.path.join(out, name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    print(path)


on_roberta("norm-nfd-lower-strip", N.Sequence([N.NFD(), N.Lowercase(), N.StripAccents()]),
           P.ByteLevel(add_prefix_space=True))
on_roberta("norm-nfkc-strip-replace-prepend",
           N.Sequence([N.NFKC(), N.Strip(left=True, right=False), N.Replace("  ", " "),
                       N.Replace(Regex(r"\d+"), "#"), N.Prepend("~")]),
           P.ByteLevel(add_prefix_space=False, use_regex=False))
on_roberta("norm-nfkd", N.NFKD(), P.Sequence([P.WhitespaceSplit(), P.ByteLevel(add_prefix_space=False)]))
on_roberta("norm-nfc-strip-right", N.Sequence([N.NFC(), N.Strip(left=False, right=True)]), P.Whitespace())
for b in ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"):
    for inv in (False, True):
        on_roberta(f"split-{b}-{'inverted' if inv else 'plain'}", None,
                   P.Split(Regex(r"[aeiou]+|\s"), behavior=b, invert=inv))
on_roberta("split-string", None, P.Split(" ", behavior="merged_with_next"))
on_roberta("digits-each", None, P.Sequence([P.Digits(individual_digits=True), P.WhitespaceSplit()]))
on_roberta("digits-runs", None, P.Sequence([P.WhitespaceSplit(), P.Digits(individual_digits=False)]))
on_roberta("punctuation-next", None, P.Sequence([P.WhitespaceSplit(), P.Punctuation(behavior="merged_with_next")]))
on_roberta("bert-pre", N.Lowercase(), P.BertPreTokenizer())
for scheme in ("always", "first", "never"):
    for split in (True, False):
        on_roberta(f"metaspace-{scheme}-{'split' if split else 'whole'}", None,
                   P.Metaspace(replacement="_", prepend_scheme=scheme, split=split),
                   added=[AddedToken("[X]", special=True)])
on_roberta("template-bert-types", None, None,
           processors.TemplateProcessing(single="<s> $A </s>", pair="<s>:0 $A:0 </s>:0 <pad>:1 $B:1 </s>:1",
                                         special_tokens=[("<s>", 0), ("</s>", 2), ("<pad>", 1)]))
on_roberta("bert-processing", None, None, processors.BertProcessing(("</s>", 2), ("<s>", 0)))
on_roberta("added-flags", N.Lowercase(), None, None,
           [AddedToken("Fill", single_word=True), AddedToken("<sep>", rstrip=True, lstrip=True),
            AddedToken("MIXED", normalized=False), AddedToken("mixed", normalized=True),
            AddedToken("the", single_word=True, normalized=True), AddedToken("@")])

with open(mails, encoding="utf-8", newline="") as f:
    texts = [r["text"] for r in csv.DictReader(f)][:1500]
for prefix, suffix, fuse, fallback in (("##", None, True, False), (None, "</w>", False, False),
                                       ("##", "</w>", False, True)):
    affixes = {k: v for k, v in (("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix)) if v}
    model = models.BPE(unk_token="[UNK]", fuse_unk=fuse, byte_fallback=fallback, **affixes)
    tok = Tokenizer(model)
    tok.normalizer = N.NFKC()
    tok.pre_tokenizer = P.Whitespace()
    bytes_ = [f"<0x{b:02X}>" for b in range(256)] if fallback else []
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["[UNK]", "[CLS]", "[SEP]"] + bytes_,
                                  limit_alphabet=60, show_progress=False, **affixes)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    save(f"bpe-{prefix and 'prefix'}-{suffix and 'suffix'}-{'fused' if fuse else 'unfused'}"
         f"{'-bytes' if fallback else ''}", tok)

for lower, strip, chinese, clean in ((True, None, True, True), (False, None, True, True), (True, False, False, True),
                                     (False, True, True, False)):
    tok = Tokenizer(models.WordPiece.from_file(os.path.join(os.path.dirname(mails), "vocab.txt"), unk_token="[UNK]"))
    tok.normalizer = N.BertNormalizer(clean_text=clean, handle_chinese_chars=chinese, strip_accents=strip, lowercase=lower)
    tok.pre_tokenizer = P.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", 102), ("[CLS]", 101))
    for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        tok.add_special_tokens([s])
    save(f"wordpiece-{'lower' if lower else 'cased'}-strip{strip}-cjk{chinese}-clean{clean}", tok)
tok = Tokenizer(models.WordPiece.from_file(os.path.join(os.path.dirname(mails), "vocab.txt"), unk_token="[UNK]",
                                           max_input_chars_per_word=12))
tok.pre_tokenizer = P.Whitespace()
save("wordpiece-short-words", tok)

pieces = json.loads(open(xlmr, encoding="utf-8").read())["model"]["vocab"][:30000]
for fallback in (False, True):
    vocab = [tuple(p) for p in pieces] + ([(f"<0x{b:02X}>", -30.0) for b in range(256)] if fallback else [])
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=fallback))
    tok.normalizer = N.Sequence([N.NFKC(), N.Lowercase()])
    tok.pre_tokenizer = P.Metaspace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    save(f"unigram-{'bytes' if fallback else 'unknowns'}", tok)
