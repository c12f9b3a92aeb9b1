#!/usr/bin/env python3
"""Count a token frequency table from English text files (pure Python 3).

Tokenisation, deliberately simple so anyone can redo it:
  1. each file is read as bytes and decoded as UTF-8 (invalid bytes become U+FFFD);
  2. the text is lower-cased (str.lower);
  3. every maximal run of ASCII letters and digits [a-z0-9]+ is one token, and
     every other non-whitespace character is a token by itself (punctuation,
     symbols, non-ASCII letters).
Vocabulary: distinct tokens sorted by decreasing count, equal counts by the
token's code points; token id = position in that order. The first VOCAB tokens
are kept (occurrences of the others are dropped, as ids >= V are dropped when
the authors count their frequencies); if fewer distinct tokens exist, the table
is padded with zero counts. So token ids are frequency ranks.

Default sources: /usr/share/common-licenses/* and /usr/share/doc/*/copyright
(Debian licence texts and package copyright files), symlinks resolved, in
sorted path order; a file whose bytes equal an earlier file's is skipped (many
packages of one source ship the same copyright file). --sources-output writes a manifest in
`sha256sum` format, which --files-from reads back: the same files give the same
table byte for byte.

Outputs: the table (dense text: comment lines, then one count per line, line k
of the counts = token id k) and optionally the vocabulary (token k on line k+1).
"""

import argparse
import collections
import glob
import hashlib
import os
import re
import sys

TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


def default_sources():
    paths = glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/copyright")
    real = {os.path.realpath(p) for p in paths}
    return sorted(p for p in real if os.path.isfile(p))


def read_manifest(path):
    files = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            digest, name = line.split("  ", 1)
            files.append((name, digest))
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=32000, help="vocabulary size V (default 32000)")
    ap.add_argument("--output", required=True, help="frequency table to write (text, one count per line)")
    ap.add_argument("--vocab-output", help="also write the tokens, one per line, in id order")
    ap.add_argument("--sources-output", help="also write the sha256 manifest of the files counted")
    ap.add_argument("--files-from", help="count exactly the files of this sha256 manifest (checksums verified)")
    args = ap.parse_args()
    if args.vocab < 1:
        sys.exit("make_text_frequency_table: --vocab must be at least 1")

    if args.files_from:
        wanted = read_manifest(args.files_from)
    else:
        wanted = [(p, None) for p in default_sources()]
    if not wanted:
        sys.exit("make_text_frequency_table: no source files found")

    counts = collections.Counter()
    manifest = []
    seen = set()
    total_bytes = 0
    for path, expected in wanted:
        with open(path, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if expected is not None and digest != expected:
            sys.exit(f"make_text_frequency_table: {path} differs from the manifest (sha256 {digest})")
        if digest in seen:
            continue
        seen.add(digest)
        manifest.append((digest, path))
        total_bytes += len(data)
        counts.update(TOKEN.findall(data.decode("utf-8", errors="replace").lower()))

    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = ranked[: args.vocab]
    table = [c for _, c in kept] + [0] * (args.vocab - len(kept))
    kept_mass = sum(c for _, c in kept)
    all_mass = sum(counts.values())

    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write("# Token frequency table counted by scripts/make_text_frequency_table.py\n")
        f.write(f"# {len(manifest)} files, {total_bytes} bytes, {all_mass} tokens, {len(counts)} distinct\n")
        f.write(f"# vocabulary {args.vocab}: {len(kept)} counted tokens ({kept_mass} occurrences), "
                f"{args.vocab - len(kept)} zero-count ids\n")
        f.write("# line k of the counts below is the count of token id k (ids are frequency ranks)\n")
        for c in table:
            f.write(f"{c}\n")
    if args.vocab_output:
        with open(args.vocab_output, "w", encoding="utf-8", newline="\n") as f:
            for tok, _ in kept:
                f.write(tok + "\n")
    if args.sources_output:
        with open(args.sources_output, "w", encoding="utf-8", newline="\n") as f:
            for digest, path in manifest:
                f.write(f"{digest}  {path}\n")
    print(f"{args.output}: {len(manifest)} files, {all_mass} tokens, {len(counts)} distinct, "
          f"{len(kept)} kept of V={args.vocab}")


if __name__ == "__main__":
    main()
