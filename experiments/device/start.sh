#!/usr/bin/env bash
# Start a GPU turn, in the checkout's root, with .device/ (made by `make device-pack`) carried:
# set this bare machine up (wheels, MiniLM cast back to fp32, data; once per machine) and start
# the device checklist in the background until DEADLINE seconds from now; returns at once. The
# carry sets earlier turns left (.device/carry/ID/) are restored by the items that wait for
# them ({carried:ID}), each checked part by part.
# Usage: bash .device/start.sh DEADLINE
set -euo pipefail
DEADLINE=${1:?usage: bash .device/start.sh DEADLINE_SECONDS}
source experiments/device/env.sh
if [ ! -f "$RQA_DEVICE_HOME/ready" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$RQA_DEVICE_HOME/site-packages" .device/wheels/*.whl
    python3 experiments/device_pack.py restore --pack .device \
        --site "$RQA_DEVICE_HOME/site-packages" --data-dir "$RQA_DATA_DIR"
    # the Makefile's $(BIN)/python for `make reproduce-table2`: this image's python3 (no
    # virtual environment to make here: device_check passes make STAMP= to skip that step)
    mkdir -p .venv/bin
    printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > .venv/bin/python
    chmod +x .venv/bin/python
    touch "$RQA_DEVICE_HOME/ready"
fi
mkdir -p runs/device-check/checklist
cp -n results/gpu/checklist/*.json runs/device-check/checklist/ 2>/dev/null || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
command -v make >/dev/null || echo "no make on this machine: the item table2-jobs4 will fail" >&2
# what `make device-check DETACH=1` runs (without make: this machine may lack it)
python3 experiments/device_check.py --deadline "$DEADLINE" --detach $DEVICE_CHECK_ARGS
