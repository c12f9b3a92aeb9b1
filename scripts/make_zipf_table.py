#!/usr/bin/env python3
"""Write a synthetic Zipf token frequency table (pure Python 3, no numpy).

count(rank r) = floor(TOP * r**(-ALPHA) + 0.5) for ranks r = 1..V, so the most
frequent token has TOP occurrences and counts fall as a power law (Zipf 1949).
Rank r is token id r-1, unless --shuffle permutes ranks to ids with Python's
random.Random(SEED) (a real tokenizer's ids are not frequency ranks).

Formats (--format):
  text    one count per line (line k = token id k), after '#' comment lines
  sparse  `id<TAB>count` lines, zero counts omitted (read it with the vocabulary size)
  npy     1-D little-endian .npy of --dtype int64 (default), float32 or float64
The same arguments always give the same file.
"""

import argparse
import random
import struct
import sys


def zipf_counts(vocab, alpha, top):
    return [int(top * (r ** -alpha) + 0.5) for r in range(1, vocab + 1)]


def npy_bytes(values, dtype):
    code, fmt = {"int64": ("<i8", "<q"), "float32": ("<f4", "<f"), "float64": ("<f8", "<d")}[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (code, len(values))
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    out = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii")
    if dtype == "float32" and any(v > 2 ** 24 for v in values):
        print("make_zipf_table: note: counts above 2^24 are rounded to float32", file=sys.stderr)
    return out + struct.pack("<%d%s" % (len(values), fmt[1]), *values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, required=True, help="vocabulary size V")
    ap.add_argument("--alpha", type=float, default=1.0, help="Zipf exponent (default 1.0)")
    ap.add_argument("--top", type=int, default=10_000_000, help="count of the most frequent token (default 1e7)")
    ap.add_argument("--shuffle", action="store_true", help="assign ranks to ids in a seeded random order")
    ap.add_argument("--seed", type=int, default=0, help="seed of --shuffle (default 0)")
    ap.add_argument("--format", choices=["text", "sparse", "npy"], default="text")
    ap.add_argument("--dtype", choices=["int64", "float32", "float64"], default="int64", help="element type of npy")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    if args.vocab < 1 or args.top < 0 or args.alpha < 0:
        sys.exit("make_zipf_table: need --vocab >= 1, --top >= 0 and --alpha >= 0")

    by_rank = zipf_counts(args.vocab, args.alpha, args.top)
    ids = list(range(args.vocab))
    if args.shuffle:
        random.Random(args.seed).shuffle(ids)
    counts = [0] * args.vocab
    for rank, token in enumerate(ids):
        counts[token] = by_rank[rank]

    if args.format == "npy":
        values = counts if args.dtype == "int64" else [float(c) for c in counts]
        with open(args.output, "wb") as f:
            f.write(npy_bytes(values, args.dtype))
        return
    with open(args.output, "w", encoding="ascii", newline="\n") as f:
        f.write(f"# Zipf table: V={args.vocab} alpha={args.alpha} top={args.top} "
                f"shuffle={'seed %d' % args.seed if args.shuffle else 'no'}\n")
        if args.format == "text":
            f.writelines(f"{c}\n" for c in counts)
        else:
            f.writelines(f"{t}\t{c}\n" for t, c in enumerate(counts) if c)


if __name__ == "__main__":
    main()
