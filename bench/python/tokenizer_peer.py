#!/usr/bin/env python3
"""The reference tokenizer's throughput on one thread, for bench/bench_tokenizer.cpp's comparison.

Encodes (and decodes) the same text file with the same tokenizer.json through the `tokenizers`
package (Rust, via Python), best of --repeats passes after one warm-up pass, and prints tokens/s.
usage: tokenizer_peer.py TOKENIZER_JSON TEXT_FILE [--repeats N]
"""
import argparse
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402


def best(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer")
    ap.add_argument("text")
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    tok = tokenizers.Tokenizer.from_file(a.tokenizer)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    ids = tok.encode(text, add_special_tokens=False).ids
    enc = best(lambda: tok.encode(text, add_special_tokens=False), a.repeats)
    dec = best(lambda: tok.decode(ids), a.repeats)
    mb = len(text.encode("utf-8")) / 1e6
    print(f"tokenizers {tokenizers.__version__} (one thread): {len(ids)} tokens, {mb:.3f} MB")
    print(f"reference encode: {enc * 1e3:9.2f} ms  {len(ids) / enc:12.0f} tokens/s  {mb / enc:8.2f} MB/s")
    print(f"reference decode: {dec * 1e3:9.2f} ms  {len(ids) / dec:12.0f} tokens/s  {mb / dec:8.2f} MB/s")


if __name__ == "__main__":
    main()
