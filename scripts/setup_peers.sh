#!/usr/bin/env bash
# The benchmark's peers, installed from PyPI into a virtual environment of
# their own (build/peers-venv): the current PyTorch 2 (CPU kernels from oneDNN
# and MKL) and OpenVINO, which converts the PyTorch models. The test suite
# never needs them; scripts/bench.sh calls this. Safe to re-run.
#   CPX_PEERS_VENV   where the environment lives (default build/peers-venv)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CPX_PEERS_VENV:-build/peers-venv}
# Versions the published figures were taken with; a newer release is a new peer.
packages=(torch==2.15.0 openvino==2026.4.1 numpy)

if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-venv
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if "$venv/bin/python" -c "import torch, openvino, numpy" 2>/dev/null; then
    echo "setup_peers: $venv has torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')," \
         "openvino $("$venv/bin/python" -c 'import openvino; print(openvino.__version__)')"
    exit 0
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "${packages[@]}"
echo "setup_peers: installed ${packages[*]} into $venv"
