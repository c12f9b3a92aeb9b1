#!/usr/bin/env python3
"""Live comparison of cpx-tokenize with the reference implementation (the `tokenizers` package).

For every tokenizer given, encodes each text with both and requires identical ids, and decodes
the ids with both and requires identical text. Texts: the test suite's adversarial cases
(tests/data/tokenizer/cases.json), the demo model's validation split and, where the `bible`
program (Debian bible-kjv) exists, the whole corpus the demo tokenizer was trained on.
Registered by CMake only where a Python with `tokenizers` is found (the recorded fixtures of
test_tokenizer cover the same cases everywhere else).

usage: check_tokenizer.py CPX_TOKENIZE REPO_ROOT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import tokenizers


def main(argv):
    exe, root = argv
    data = os.path.join(root, "tests", "data", "tokenizer")
    kjv = os.path.join(root, "data", "kjv")
    with open(os.path.join(data, "cases.json")) as f:
        texts = [(f"case {i}", bytes.fromhex(c["hex"])) for i, c in enumerate(json.load(f)["cases"])]
    with open(os.path.join(kjv, "validation.txt"), "rb") as f:
        texts.append(("validation split", f.read()))
    try:  # the corpus functions of the training script (which needs torch and numpy to import)
        sys.path.insert(0, os.path.join(root, "scripts"))
        import train_kjv  # noqa: E402
    except ImportError as e:
        train_kjv = None
        print(f"training split not compared: scripts/train_kjv.py does not import here ({e})")
    if train_kjv is not None and shutil.which("bible"):
        train, _ = train_kjv.split_corpus(train_kjv.read_bible())
        texts.append(("training split", train.encode()))
    elif train_kjv is not None:
        print("training split not compared: the `bible` program (Debian bible-kjv) is not installed")
    files = [os.path.join(data, "gpt2_style.json"), os.path.join(data, "llama3_style.json"),
             os.path.join(kjv, "deep", "tokenizer.json")]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            ref = tokenizers.Tokenizer.from_file(path)
            for name, raw in texts:
                src = os.path.join(tmp, "text")
                with open(src, "wb") as f:
                    f.write(raw)
                ours = subprocess.run([exe, path, src, "--special", "1"], check=True, capture_output=True).stdout
                ours = [int(t) for t in ours.decode().strip().split(",") if t]
                want = ref.encode(raw.decode("utf-8", errors="replace")).ids
                ids = os.path.join(tmp, "ids")
                with open(ids, "w") as f:
                    f.write(",".join(map(str, want)))
                text = subprocess.run([exe, path, ids, "--decode", "1"], check=True, capture_output=True).stdout
                ok = ours == want and text == ref.decode(want).encode()
                failures += not ok
                if not ok or len(raw) > 10000:
                    print(f"{os.path.basename(path)}: {name}: {len(want)} tokens {'equal' if ok else 'DIFFER'}")
    print(f"tokenizers {tokenizers.__version__}: {len(files)} tokenizers x {len(texts)} texts, {failures} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
