#!/usr/bin/env python3
"""Makes the tokenizer test fixtures with the reference implementation (the `tokenizers` package).

Writes, next to this script:
  gpt2_style.json    byte-level BPE, ByteLevel pre-tokenizer with GPT-2's split pattern, 600 tokens
  llama3_style.json  byte-level BPE with LLaMA-3's shape: Split(regex) + ByteLevel(use_regex=false),
                     ignore_merges, a BOS added by TemplateProcessing, merges written as pairs
  cases.json         adversarial inputs (as hex bytes) and, per tokenizer, the reference ids and the
                     reference decoding of those ids
  kjv_validation_ids.npy  the demo model's tokenizer (data/kjv/deep) on its validation text, int32
Both tokenizers are trained on Debian's /usr/share/common-licenses/GPL-3 (always present).
tests/unit/test_tokenizer.cpp compares cpx::text::Tokenizer with these; tests/python/check_tokenizer.py
repeats the comparison live (with the training corpus) where `tokenizers` is installed. Run: python3 make_tokenizer_fixtures.py
"""
import json
import os

import numpy as np

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CASES = [
    b"", b" ", b"   ", b"\n\n\n", b"\t \t", b"hello world", b"Hello  world  ", b"  leading", b"trailing   ",
    b"I'm you'll they've he'd IT'S We'RE", b"123 4567 89012 3.14159", b"line\r\nline\rline\n",
    "emoji \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d\U0001F467".encode(),
    "mixed: \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u4e2d\u6587 "
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940".encode(),
    "caf\u00e9 na\u00efve e\u0301 a\u200bb a\u00a0b \u2028 \u3000x".encode(),
    b"hello<|endoftext|>world", b"<|endoftext|><|endoftext|>", b"<|endoftext", b"a <|endoftext|> b",
    b"<|begin_of_text|>The GNU General Public License<|end_of_text|>",
    b"\xff\xfe abc \xc3(", b"\xe2\x82", b"x\xed\xa0\x80y", b"\xf4\x90\x80\x80", b"\xc0\xaf\x80",
    b"a" * 3000, b" " * 1000, b"9" * 500, b"!!!???...---", b"$%^&*()_+{}|:<>?~`",
    b"THE GNU GENERAL PUBLIC LICENSE is a free, copyleft license for software and other kinds of works.",
]


def train(pre, post, ignore_merges, pairs):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    if post is not None:
        tok.post_processor = post
    specials = ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
        tok.train_from_iterator([f.read()], trainer=trainer)
    data = json.loads(tok.to_str())
    if not pairs:  # the older "a b" spelling of merges, which files in the wild still use
        data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    return Tokenizer.from_str(json.dumps(data)), data


def main():
    gpt2, gpt2_json = train(pre_tokenizers.ByteLevel(add_prefix_space=False), None, False, pairs=False)
    bos = processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 1)])
    llama, llama_json = train(
        pre_tokenizers.Sequence([pre_tokenizers.Split(pattern=__import__("tokenizers").Regex(LLAMA3_PATTERN),
                                                      behavior="isolated", invert=False),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        bos, True, pairs=True)
    out = {"cases": []}
    for raw in CASES:
        text = raw.decode("utf-8", errors="replace")
        entry = {"hex": raw.hex()}
        for name, tok in (("gpt2_style", gpt2), ("llama3_style", llama)):
            ids = tok.encode(text).ids
            entry[name] = {"ids": ids, "decoded_hex": tok.decode(ids).encode("utf-8").hex()}
        out["cases"].append(entry)
    for name, data in (("gpt2_style", gpt2_json), ("llama3_style", llama_json)):
        with open(os.path.join(HERE, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    kjv = os.path.join(HERE, "..", "..", "..", "data", "kjv")
    kjv_tok = Tokenizer.from_file(os.path.join(kjv, "deep", "tokenizer.json"))
    with open(os.path.join(kjv, "validation.txt"), encoding="utf-8") as f:
        ids = kjv_tok.encode(f.read(), add_special_tokens=False).ids
    np.save(os.path.join(HERE, "kjv_validation_ids.npy"), np.asarray(ids, dtype="<i4"))


if __name__ == "__main__":
    main()
