#!/usr/bin/env bash
# Re-creates the demo models in data/kjv (docs/DEMO_MODEL.md): installs the corpus (Debian
# bible-kjv), Debian's PyTorch and the `tokenizers` package (PyPI, into build/train-venv, which
# also sees the system's torch), then runs scripts/train_kjv.py. Arguments go to the script
# (e.g. --models deep, --steps 200, --out /tmp/kjv).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
need=()
for p in bible-kjv python3-venv g++; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if [ ! -x build/train-venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages build/train-venv
fi
build/train-venv/bin/python -c "import tokenizers" 2>/dev/null || build/train-venv/bin/pip install -q "tokenizers==0.23.3"
exec build/train-venv/bin/python -u scripts/train_kjv.py "$@"
