#!/usr/bin/env bash
# Start a GPU turn: set this bare machine up from .device/ (made by `make device-pack`) and
# start the device checklist in the background until DEADLINE seconds from now; returns at
# once. Usage, from the checkout's root: bash .device/start.sh DEADLINE
set -euo pipefail
DEADLINE=${1:?usage: bash .device/start.sh DEADLINE_SECONDS}
cd "$(dirname "$0")/.."
source .device/env.sh
if [ ! -f "$RQA_DEVICE_HOME/ready" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$RQA_DEVICE_HOME/site-packages" .device/wheels/*.whl
    python3 experiments/device_pack.py restore --pack .device \
        --site "$RQA_DEVICE_HOME/site-packages" --data-dir "$RQA_DATA_DIR"
    # the Makefile's $(BIN)/python: this image's python3 (no virtual environment to make
    # here: every make call below passes STAMP= to skip that step)
    mkdir -p .venv/bin
    printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > .venv/bin/python
    chmod +x .venv/bin/python
    touch "$RQA_DEVICE_HOME/ready"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
make -s device-check DEADLINE="$DEADLINE" DETACH=1 STAMP=
